// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The racy window per file: fine only for a stamp with sub-seconds on a
 * local filesystem type; coarse for whole-second stamps, other types and
 * what cannot be asked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "tsgrain.h"

#define COARSE (2 * 1000000000LL)

static void test_types(void **state)
{
	(void)state;
	assert_true(tsgrain_type_may_be_fine(EXT4_SUPER_MAGIC));
	assert_true(tsgrain_type_may_be_fine(TMPFS_MAGIC));
	assert_true(tsgrain_type_may_be_fine(BTRFS_SUPER_MAGIC));
	assert_true(tsgrain_type_may_be_fine(0x58465342)); /* xfs */
	assert_false(tsgrain_type_may_be_fine(NFS_SUPER_MAGIC));
	assert_false(tsgrain_type_may_be_fine(0xFF534D42)); /* cifs */
	assert_false(tsgrain_type_may_be_fine(0x65735546)); /* fuse */
	assert_false(tsgrain_type_may_be_fine(OVERLAYFS_SUPER_MAGIC));
	assert_false(tsgrain_type_may_be_fine(MSDOS_SUPER_MAGIC));
	assert_false(tsgrain_type_may_be_fine(PROC_SUPER_MAGIC));
}

static void test_mapped_stores(void **state)
{
	(void)state;
	assert_true(tsgrain_type_sees_mapped_stores(EXT4_SUPER_MAGIC));
	assert_true(tsgrain_type_sees_mapped_stores(0x58465342)); /* xfs */
	assert_true(tsgrain_type_sees_mapped_stores(BTRFS_SUPER_MAGIC));
	assert_false(tsgrain_type_sees_mapped_stores(TMPFS_MAGIC));
	assert_false(tsgrain_type_sees_mapped_stores(HUGETLBFS_MAGIC));
	assert_false(tsgrain_type_sees_mapped_stores(RAMFS_MAGIC));
	assert_false(tsgrain_type_sees_mapped_stores(OVERLAYFS_SUPER_MAGIC));
}

static void test_stamp(void **state)
{
	struct stat st;

	(void)state;
	memset(&st, 0, sizeof(st));
	st.st_ctim.tv_sec = 1000;
	assert_false(tsgrain_stamp_is_fine(&st));
	/* an mtime with sub-seconds says nothing of this inode's ctime */
	st.st_mtim.tv_nsec = 5;
	assert_false(tsgrain_stamp_is_fine(&st));
	st.st_ctim.tv_nsec = 123456789;
	assert_true(tsgrain_stamp_is_fine(&st));
}

/* A file of this test's own, with whatever stamps its filesystem keeps. */
static int fresh_file(const char *dir, char *path, struct stat *st)
{
	int fd;

	snprintf(path, 64, "%s/tsgrainXXXXXX", dir);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	assert_int_equal(fstat(fd, st), 0);
	return fd;
}

static void test_window_on_real_files(void **state)
{
	const char *dirs[] = {"/tmp", "/dev/shm"};
	char path[64];
	struct statfs sf;
	struct stat st;

	(void)state;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd;
		bool fine;

		if (access(dirs[i], W_OK) != 0)
			continue;
		tsgrain_reset();
		fd = fresh_file(dirs[i], path, &st);
		assert_int_equal(fstatfs(fd, &sf), 0);
		fine = tsgrain_type_may_be_fine(sf.f_type) &&
		       tsgrain_stamp_is_fine(&st);
		/* tmpfs keeps nanoseconds from this kernel's clock */
		if (sf.f_type == TMPFS_MAGIC)
			assert_true(fine);
		assert_int_equal(tsgrain_window_ns(fd, &st, COARSE),
				 fine ? TSGRAIN_FINE_WINDOW_NS : COARSE);
		/* the same file with a whole-second ctime: coarse */
		st.st_ctim.tv_nsec = 0;
		assert_int_equal(tsgrain_window_ns(fd, &st, COARSE), COARSE);
		/* a configured window at or below the fine one is kept */
		st.st_ctim.tv_nsec = 1;
		assert_int_equal(tsgrain_window_ns(fd, &st, 0), 0);
		unlink(path);
		close(fd);
	}
}

static void test_not_a_local_filesystem(void **state)
{
	struct stat st;
	int fd = open("/proc/self/status", O_RDONLY);

	(void)state;
	tsgrain_reset();
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	st.st_ctim.tv_nsec = 42; /* sub-seconds, but proc's */
	assert_int_equal(tsgrain_window_ns(fd, &st, COARSE), COARSE);
	close(fd);
}

static void test_unknown_device_stays_coarse(void **state)
{
	struct stat st;
	int fds[2];

	(void)state;
	tsgrain_reset();
	assert_int_equal(pipe(fds), 0);
	memset(&st, 0, sizeof(st));
	st.st_dev = 12345;
	st.st_ctim.tv_nsec = 7;
	/* a pipe's filesystem is pipefs: not a local disk filesystem */
	assert_int_equal(tsgrain_window_ns(fds[0], &st, COARSE), COARSE);
	close(fds[0]);
	close(fds[1]);
}

/*
 * A device number another filesystem has taken since (a removed btrfs
 * subvolume's, handed to a tmpfs mounted later): what was learnt of the
 * old one must not answer for the new one.
 */
static void test_device_number_taken_by_another_filesystem(void **state)
{
	char disk_path[64], shm_path[64];
	struct statfs sf;
	struct stat st;
	int disk, shm;

	(void)state;
	if (access("/dev/shm", W_OK) != 0)
		skip();
	tsgrain_reset();
	disk = fresh_file("/tmp", disk_path, &st);
	assert_int_equal(fstatfs(disk, &sf), 0);
	if (!tsgrain_type_sees_mapped_stores(sf.f_type))
		skip(); /* /tmp is itself a tmpfs here */
	shm = fresh_file("/dev/shm", shm_path, &st);
	assert_int_equal(fstatfs(shm, &sf), 0);
	assert_int_equal(sf.f_type, TMPFS_MAGIC);
	assert_true(tsgrain_sees_mapped_stores(disk, 777));
	/* the same number, now a tmpfs's */
	assert_false(tsgrain_sees_mapped_stores(shm, 777));
	/* a device held for the mount's life keeps its number: learnt once */
	tsgrain_hold_device(888);
	assert_true(tsgrain_sees_mapped_stores(disk, 888));
	assert_true(tsgrain_sees_mapped_stores(shm, 888));
	unlink(disk_path);
	unlink(shm_path);
	close(disk);
	close(shm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_mapped_stores),
		cmocka_unit_test(test_stamp),
		cmocka_unit_test(test_window_on_real_files),
		cmocka_unit_test(test_not_a_local_filesystem),
		cmocka_unit_test(test_unknown_device_stays_coarse),
		cmocka_unit_test(
			test_device_number_taken_by_another_filesystem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
