// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Quarantine and delete on real directories: relative path kept, never
 * overwriting, never following symlinks, refusing a swapped file, and the
 * copy path across filesystems (/dev/shm against the build's /tmp).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "action.h"
#include "detect.h"
#include "log.h"
#include "qrecord.h"

struct dirs {
	char backend[64];
	char quarantine[64];
	int bfd, qfd;
};

static int make_dirs(struct dirs *d, const char *qbase)
{
	snprintf(d->backend, sizeof(d->backend), "/tmp/cfs-act-b-XXXXXX");
	snprintf(d->quarantine, sizeof(d->quarantine), "%s/cfs-act-q-XXXXXX",
		 qbase);
	if (!mkdtemp(d->backend) || !mkdtemp(d->quarantine))
		return -1;
	d->bfd = open(d->backend, O_PATH | O_DIRECTORY);
	d->qfd = open(d->quarantine, O_PATH | O_DIRECTORY);
	return d->bfd < 0 || d->qfd < 0 ? -1 : 0;
}

static void rm_rf(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void free_dirs(struct dirs *d)
{
	close(d->bfd);
	close(d->qfd);
	rm_rf(d->backend);
	rm_rf(d->quarantine);
}

static void write_file(int dirfd, const char *name, const char *text,
		       struct stat *st)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fstat(fd, st), 0);
	close(fd);
}

static void read_file(int dirfd, const char *name, char *buf, size_t len)
{
	int fd = openat(dirfd, name, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, len - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static void quarantine_keeps_path(const char *qbase)
{
	char dest[PATH_MAX], dest2[PATH_MAX], buf[64];
	struct stat st, st2, parent, sub, moved;
	struct timespec old[2] = {{1000000000, 5}, {1234567890, 123456789}};
	struct quarantine_note note = {
		.share = "/srv/share",
		.signature = "Sig\nnewline=forged",
		.opener_uid = 4242,
	};
	struct qrecord rec;
	struct dirs d;

	assert_int_equal(make_dirs(&d, qbase), 0);
	assert_int_equal(mkdirat(d.bfd, "up", 0755), 0);
	assert_int_equal(mkdirat(d.bfd, "up/sub", 0755), 0);
	write_file(d.bfd, "up/sub/bad.exe", "first", &st);
	/* owner, mode and times survive the move, even across filesystems */
	assert_int_equal(fchownat(d.bfd, "up/sub/bad.exe", 12345, 23456, 0), 0);
	assert_int_equal(fchmodat(d.bfd, "up/sub/bad.exe", 0751, 0), 0);
	assert_int_equal(utimensat(d.bfd, "up/sub/bad.exe", old, 0), 0);
	assert_int_equal(action_quarantine(d.bfd, "up/sub/bad.exe", st.st_dev,
					   st.st_ino, d.qfd, dest, sizeof(dest),
					   &parent, &note),
			 0);
	assert_int_equal(note.record_error, 0);
	assert_int_equal(fstatat(d.qfd, dest, &moved, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(moved.st_uid, 12345);
	assert_int_equal(moved.st_gid, 23456);
	assert_int_equal(moved.st_mode & 07777, 0751);
	assert_int_equal(moved.st_mtim.tv_sec, 1234567890);
	assert_int_equal(moved.st_mtim.tv_nsec, 123456789);
	{
		char rdir[PATH_MAX];
		int rfd;

		snprintf(rdir, sizeof(rdir), "%s", dest);
		*strrchr(rdir, '/') = '\0';
		rfd = openat(d.qfd, rdir, O_PATH | O_DIRECTORY);
		assert_true(rfd >= 0);
		assert_int_equal(
			qrecord_read_at(rfd, strrchr(dest, '/') + 1, &rec), 0);
		close(rfd);
	}
	assert_string_equal(rec.path, "up/sub/bad.exe");
	assert_string_equal(rec.share, "/srv/share");
	assert_string_equal(rec.signature, note.signature);
	assert_int_equal(rec.uid, 12345);
	assert_int_equal(rec.gid, 23456);
	assert_int_equal(rec.mode, 0751);
	assert_int_equal(rec.size, 5);
	assert_int_equal(rec.mtime.tv_sec, 1234567890);
	assert_int_equal(rec.mtime.tv_nsec, 123456789);
	assert_true(rec.has_opener);
	assert_int_equal(rec.opener_uid, 4242);
	qrecord_free(&rec);
	/* the directory the name left, for the kernel's dentry cache */
	assert_int_equal(fstatat(d.bfd, "up/sub", &sub, 0), 0);
	assert_int_equal(parent.st_ino, sub.st_ino);
	assert_int_equal(strncmp(dest, "up/sub/bad.exe.", 15), 0);
	assert_int_equal(faccessat(d.bfd, "up/sub/bad.exe", F_OK, 0), -1);
	read_file(d.qfd, dest, buf, sizeof(buf));
	assert_string_equal(buf, "first");

	/* same name again within the second: a new name, no overwrite */
	write_file(d.bfd, "up/sub/bad.exe", "second", &st2);
	assert_int_equal(action_quarantine(d.bfd, "up/sub/bad.exe", st2.st_dev,
					   st2.st_ino, d.qfd, dest2,
					   sizeof(dest2), NULL, NULL),
			 0);
	assert_string_not_equal(dest, dest2);
	read_file(d.qfd, dest, buf, sizeof(buf));
	assert_string_equal(buf, "first");
	read_file(d.qfd, dest2, buf, sizeof(buf));
	assert_string_equal(buf, "second");
	free_dirs(&d);
}

static void test_quarantine_same_fs(void **state)
{
	quarantine_keeps_path("/tmp");
}

static void test_quarantine_other_fs(void **state)
{
	struct stat a, b;

	/* only meaningful where /dev/shm is another filesystem */
	if (stat("/dev/shm", &a) != 0 || stat("/tmp", &b) != 0 ||
	    a.st_dev == b.st_dev)
		skip();
	quarantine_keeps_path("/dev/shm");
}

static void test_refuses_swapped_file_and_symlinks(void **state)
{
	char dest[PATH_MAX];
	struct stat st, other;
	struct dirs d;

	assert_int_equal(make_dirs(&d, "/tmp"), 0);
	write_file(d.bfd, "scanned", "x", &st);
	write_file(d.bfd, "other", "y", &other);
	/* the name now refers to another file than the one scanned */
	assert_int_equal(renameat(d.bfd, "other", d.bfd, "scanned"), 0);
	assert_int_equal(action_quarantine(d.bfd, "scanned", st.st_dev,
					   st.st_ino, d.qfd, dest, sizeof(dest),
					   NULL, NULL),
			 -ESTALE);
	assert_int_equal(
		action_delete(d.bfd, "scanned", st.st_dev, st.st_ino, NULL),
		-ESTALE);
	assert_int_equal(faccessat(d.bfd, "scanned", F_OK, 0), 0);

	/* a symlinked directory on the way is not followed */
	assert_int_equal(mkdirat(d.bfd, "real", 0755), 0);
	write_file(d.bfd, "real/f", "z", &st);
	assert_int_equal(symlinkat("real", d.bfd, "link"), 0);
	assert_int_equal(
		action_delete(d.bfd, "link/f", st.st_dev, st.st_ino, NULL),
		-ENOTDIR);
	assert_int_equal(
		action_delete(d.bfd, "../x", st.st_dev, st.st_ino, NULL),
		-EINVAL);
	assert_int_equal(faccessat(d.bfd, "real/f", F_OK, 0), 0);
	assert_int_equal(
		action_delete(d.bfd, "real/f", st.st_dev, st.st_ino, NULL), 0);
	assert_int_equal(faccessat(d.bfd, "real/f", F_OK, 0), -1);
	free_dirs(&d);
}

static void test_log_quoting(void **state)
{
	char buf[128];

	log_quote(buf, sizeof(buf), "a b");
	assert_string_equal(buf, "\"a b\"");
	log_quote(buf, sizeof(buf), "x\n\"y\\");
	assert_string_equal(buf, "\"x\\x0a\\\"y\\\\\"");
	log_quote(buf, 8, "abcdefghij");
	assert_int_equal(buf[0], '"');
	assert_int_equal(buf[strlen(buf) - 1], '"');
	assert_true(strlen(buf) < 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quarantine_same_fs),
		cmocka_unit_test(test_quarantine_other_fs),
		cmocka_unit_test(test_refuses_swapped_file_and_symlinks),
		cmocka_unit_test(test_log_quoting),
	};

	/* quarantining keeps owners: fchownat to another user needs root */
	if (geteuid() != 0) {
		fprintf(stderr, "test_action: needs root, skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
