// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Parking: the inode table closes the fds of files nobody pins when it is
 * short of fds, and reopens them by handle when they are pinned again.
 * Real files in a scratch directory of the build tree (a disk filesystem
 * with handles); opening by handle needs CAP_DAC_READ_SEARCH, so without
 * it the tests check that nothing is parked.
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

#include "inode.h"
#include "scratch_dir.h"

#define FILES 40

static char dir[PATH_MAX];
static int dir_fd;
static struct inode_table *table;
static struct inode *in[FILES];

static bool can_open_by_handle(void)
{
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	int mount_id, fd = -1, root;

	if (!fh)
		return false;
	root = open(dir, O_RDONLY | O_DIRECTORY);
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (root >= 0 &&
	    name_to_handle_at(root, "", fh, &mount_id, AT_EMPTY_PATH) == 0)
		fd = open_by_handle_at(root, fh, O_PATH);
	free(fh);
	if (root >= 0)
		close(root);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static void make_file(int i)
{
	char name[16];
	int fd;

	snprintf(name, sizeof(name), "f%02d", i);
	fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, name, 3), 3);
	close(fd);
}

/* The file looked up, as a lookup does: an O_PATH fd taken by the table. */
static struct inode *look_up(int i)
{
	struct inode *got;
	struct stat st;
	char name[16];
	int fd;

	snprintf(name, sizeof(name), "f%02d", i);
	fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(itab_insert_ref(table, fd, &st, &got), 0);
	return got;
}

static ino_t ino_of(int i)
{
	char name[16];
	struct stat st;

	snprintf(name, sizeof(name), "f%02d", i);
	assert_int_equal(fstatat(dir_fd, name, &st, 0), 0);
	return st.st_ino;
}

static int setup(void **state)
{
	struct stat st;
	int root;

	(void)state;
	dir_fd = scratch_dir_make(dir, "test_inode_park");
	if (dir_fd < 0)
		return -1;
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 || fstat(root, &st) != 0)
		return -1;
	table = itab_create(root, &st);
	if (!table)
		return -1;
	/* far below the floor of 1024: short of fds all the time */
	itab_set_max(table, 8, 16);
	for (int i = 0; i < FILES; i++)
		make_file(i);
	for (int i = 0; i < FILES; i++)
		in[i] = look_up(i);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < FILES; i++)
		if (in[i])
			itab_forget(table, in[i], 1);
	itab_destroy(table);
	return scratch_dir_remove(dir, dir_fd);
}

/*
 * Every file stays known while the table holds no more fds than its cap
 * (the table is always short here: each new file parks an older one); an
 * unpinned file's fd is not handed out; pinned, it is reopened on that
 * very file.
 */
static void test_more_files_known_than_fds(void **state)
{
	struct stat st;
	uint64_t reopens = itab_reopens(table);

	(void)state;
	if (!can_open_by_handle()) {
		assert_int_equal(itab_fds(table), FILES + 1);
		skip();
	}
	assert_int_equal(itab_count(table), FILES + 1);
	assert_true(itab_fds(table) <= 16); /* the cap */
	assert_false(itab_low(table));
	assert_int_equal(inode_fd(in[0]), -EBADF);
	assert_int_equal(inode_pin(table, in[0]), 0);
	assert_int_equal(fstat(inode_fd(in[0]), &st), 0);
	assert_int_equal(st.st_ino, ino_of(0));
	assert_int_equal(itab_reopens(table), reopens + 1);
	inode_unpin(in[0]);
	assert_int_equal(inode_fd(itab_root(table)) >= 0, true);
}

/* A pinned file keeps its fd, however many files are looked up after. */
static void test_a_pinned_file_is_not_parked(void **state)
{
	struct inode *again;
	uint64_t reopens;
	int fd;

	(void)state;
	if (!can_open_by_handle())
		skip();
	assert_int_equal(inode_pin(table, in[1]), 0);
	fd = inode_fd(in[1]);
	assert_true(fd >= 0);
	for (int i = 2; i < FILES; i++) {
		again = look_up(i);
		itab_forget(table, again, 1);
	}
	assert_int_equal(inode_fd(in[1]), fd);
	inode_unpin(in[1]);
	/*
	 * Nor an open file (inode_pin_open), parked when it was opened: it
	 * gets an fd from the open file, no handle needed, and keeps it.
	 */
	fd = openat(dir_fd, "f02", O_RDONLY);
	assert_true(fd >= 0);
	reopens = itab_reopens(table);
	inode_pin_open(table, in[2], fd);
	assert_int_equal(itab_reopens(table), reopens + 1);
	for (int i = 3; i < FILES; i++) {
		again = look_up(i);
		itab_forget(table, again, 1);
	}
	assert_int_equal(inode_pin(table, in[2]), 0);
	assert_int_equal(itab_reopens(table), reopens + 1);
	inode_unpin(in[2]);
	inode_unpin(in[2]);
	close(fd);
}

/*
 * A lookup by name of a parked file gives it the fd it opened: no reopen
 * by handle, the same inode.
 */
static void test_a_lookup_unparks(void **state)
{
	uint64_t reopens = itab_reopens(table);
	struct inode *again;

	(void)state;
	if (!can_open_by_handle())
		skip();
	assert_int_equal(inode_fd(in[5]), -EBADF);
	/* room enough: a table short of fds would park it again at once */
	itab_set_max(table, 100000, 100000);
	again = look_up(5);
	assert_ptr_equal(again, in[5]);
	assert_int_equal(inode_pin(table, in[5]), 0);
	assert_true(inode_fd(in[5]) >= 0);
	inode_unpin(in[5]);
	assert_int_equal(itab_reopens(table), reopens);
	itab_forget(table, again, 1);
}

/* Gone while parked: its handle opens nothing, and pinning says so. */
static void test_a_file_deleted_while_parked_is_stale(void **state)
{
	(void)state;
	if (!can_open_by_handle())
		skip();
	assert_int_equal(unlinkat(dir_fd, "f07", 0), 0);
	assert_int_equal(inode_pin(table, in[7]), -ESTALE);
	assert_int_equal(inode_fd(in[7]), -EBADF);
}

/*
 * Its number given to a new file while parked (simulated: the new file's
 * identity is reported as the parked one's): the handles differ, so the
 * lookup gets a new inode, the old one stays known by id and is stale.
 */
static void test_a_reused_number_is_a_new_inode(void **state)
{
	struct inode *fresh;
	struct stat st;
	int fd;

	(void)state;
	if (!can_open_by_handle())
		skip();
	make_file(FILES);
	fd = openat(dir_fd, "f40", O_PATH | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	st.st_ino = inode_ino(in[8]); /* what a reuse looks like */
	assert_int_equal(unlinkat(dir_fd, "f08", 0), 0);
	assert_int_equal(itab_insert_ref(table, fd, &st, &fresh), 0);
	assert_ptr_not_equal(fresh, in[8]);
	assert_ptr_equal(itab_by_id(table, inode_id(in[8])), in[8]);
	assert_ptr_equal(itab_find_ref(table, st.st_dev, st.st_ino), fresh);
	itab_forget(table, fresh, 1);
	assert_int_equal(inode_pin(table, in[8]), -ESTALE);
	assert_int_equal(itab_count(table), FILES + 2);
	itab_forget(table, fresh, 1);
	assert_int_equal(itab_count(table), FILES + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_more_files_known_than_fds,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_pinned_file_is_not_parked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_lookup_unparks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_a_file_deleted_while_parked_is_stale, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_a_reused_number_is_a_new_inode, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
