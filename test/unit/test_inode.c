// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Inode table: identity lookups, lookup counting, fd ownership, growth,
 * concurrent inserts of one identity, and the content stamp.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "inode.h"

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

static struct inode_table *table_new(void)
{
	struct stat st;
	int fd = open("/", O_PATH | O_DIRECTORY);
	struct inode_table *t;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	t = itab_create(fd, &st);
	assert_non_null(t);
	return t;
}

static struct stat fake_st(dev_t dev, ino_t ino)
{
	struct stat st = {.st_dev = dev, .st_ino = ino, .st_mode = S_IFREG};

	return st;
}

static void test_root_is_held_and_never_forgotten(void **state)
{
	struct inode_table *t = table_new();
	struct inode *root = itab_root(t);
	int fd = inode_fd(root);

	assert_int_equal(itab_count(t), 1);
	assert_ptr_equal(itab_find_ref(t, inode_dev(root), inode_ino(root)),
			 root);
	itab_forget(t, root, 1000);
	assert_int_equal(itab_count(t), 1);
	assert_true(fd_is_open(fd));
	itab_destroy(t);
	assert_false(fd_is_open(fd));
}

static void test_lookup_counts(void **state)
{
	struct inode_table *t = table_new();
	struct stat st = fake_st(7, 42);
	struct inode *in, *again;
	int fd = dup(0);

	assert_null(itab_find_ref(t, 7, 42));
	assert_int_equal(itab_insert_ref(t, fd, &st, &in), 0);
	assert_int_equal(inode_fd(in), fd);
	assert_int_equal(inode_type(in), S_IFREG);
	assert_int_equal(itab_count(t), 2);
	/* the same identity on another device is another inode */
	assert_null(itab_find_ref(t, 8, 42));
	again = itab_find_ref(t, 7, 42); /* nlookup 2 */
	assert_ptr_equal(again, in);
	itab_forget(t, in, 1);
	assert_true(fd_is_open(fd));
	assert_ptr_equal(itab_find_ref(t, 7, 42), in); /* 2 */
	itab_forget(t, in, 2);
	assert_false(fd_is_open(fd));
	assert_int_equal(itab_count(t), 1);
	assert_null(itab_find_ref(t, 7, 42));
	itab_destroy(t);
}

static void test_insert_of_known_identity_closes_new_fd(void **state)
{
	struct inode_table *t = table_new();
	struct stat st = fake_st(1, 5);
	struct inode *a, *b;
	int fd1 = dup(0), fd2 = dup(0);

	assert_int_equal(itab_insert_ref(t, fd1, &st, &a), 0);
	assert_int_equal(itab_insert_ref(t, fd2, &st, &b), 0);
	assert_ptr_equal(a, b);
	assert_false(fd_is_open(fd2));
	assert_int_equal(inode_fd(a), fd1);
	itab_forget(t, a, 1);
	assert_true(fd_is_open(fd1)); /* second reference still held */
	itab_forget(t, a, 1);
	assert_false(fd_is_open(fd1));
	itab_destroy(t);
}

static void test_grows_and_keeps_every_entry(void **state)
{
	enum { N = 5000 };
	struct inode_table *t = table_new();
	struct inode **ins = calloc(N, sizeof(*ins));

	assert_non_null(ins);
	for (int i = 0; i < N; i++) {
		struct stat st = fake_st(3, (ino_t)i * 4096 + 1);

		assert_int_equal(itab_insert_ref(t, dup(0), &st, &ins[i]), 0);
	}
	assert_int_equal(itab_count(t), N + 1);
	for (int i = 0; i < N; i++) {
		assert_ptr_equal(itab_find_ref(t, 3, (ino_t)i * 4096 + 1),
				 ins[i]);
		itab_forget(t, ins[i], 2);
	}
	assert_int_equal(itab_count(t), 1);
	free(ins);
	itab_destroy(t);
}

/*
 * Past the cap the table refuses new identities with EMFILE (closing the
 * fd it was given), still hands out known ones, and takes new ones again
 * once the kernel forgets some.
 */
static void test_cap_refuses_with_emfile_and_recovers(void **state)
{
	struct inode_table *t = table_new();
	struct stat st1 = fake_st(4, 1), st2 = fake_st(4, 2);
	struct inode *a, *again, *b = NULL;
	int fd1 = dup(0), fd2 = dup(0), fd3, fd4;

	itab_set_max(t, 2, 2); /* the root and one more */
	assert_int_equal(itab_room(t), 1);
	assert_int_equal(itab_insert_ref(t, fd1, &st1, &a), 0);
	assert_int_equal(itab_room(t), 0);
	assert_int_equal(itab_insert_ref(t, fd2, &st2, &b), -EMFILE);
	assert_false(fd_is_open(fd2));
	assert_null(b);
	assert_int_equal(itab_count(t), 2);
	/* a known identity needs no new fd: still served */
	fd3 = dup(0);
	assert_int_equal(itab_insert_ref(t, fd3, &st1, &again), 0);
	assert_ptr_equal(again, a);
	assert_false(fd_is_open(fd3));
	itab_forget(t, a, 2);
	assert_int_equal(itab_room(t), 1);
	fd4 = dup(0);
	assert_int_equal(itab_insert_ref(t, fd4, &st2, &b), 0);
	assert_int_equal(inode_fd(b), fd4);
	itab_forget(t, b, 1);
	itab_destroy(t);
}

/*
 * Lowness is measured against the target, refusal against the cap: past
 * the target the table is low (the evictor runs, having names to evict)
 * and still takes new identities until the cap. A target above the cap
 * is the cap. (These fake identities are not on the root's filesystem:
 * they cannot be parked, see test_inode_park.c.)
 */
static void test_target_evicts_cap_refuses(void **state)
{
	struct inode_table *t = table_new();
	struct inode *in[3], *none = NULL;
	int fd;

	itab_set_max(t, 1024, 8192); /* nothing to evict: not low */
	assert_false(itab_low(t));
	itab_set_max(t, 2, 4);
	for (int i = 0; i < 3; i++) {
		struct stat st = fake_st(7, (ino_t)i + 1);
		char name[8];

		assert_int_equal(itab_insert_ref(t, dup(0), &st, &in[i]), 0);
		snprintf(name, sizeof(name), "f%d", i);
		itab_note_name(t, in[i], itab_root(t), name);
	}
	assert_int_equal(itab_count(t), 4);
	assert_int_equal(itab_fds(t), 4);
	assert_int_equal(itab_room(t), 0);
	fd = dup(0);
	{
		struct stat st = fake_st(7, 9);

		assert_int_equal(itab_insert_ref(t, fd, &st, &none), -EMFILE);
	}
	assert_false(fd_is_open(fd));
	assert_null(none);
	itab_forget(t, in[0], 1);
	assert_int_equal(itab_room(t), 1);
	assert_true(itab_wait_room(t, 10));
	itab_set_max(t, 1027, 8192); /* 3 held: 1024 to the target */
	assert_false(itab_low(t));
	itab_set_max(t, 1026, 8192); /* 1023 to the target: low */
	assert_true(itab_low(t));
	assert_int_equal(itab_room(t), 8189);
	itab_set_max(t, 1500, 8192); /* 1497 to the target */
	assert_false(itab_low(t));
	itab_set_max(t, 1500, 1026); /* the target is 1026: 1023 left */
	assert_true(itab_low(t));
	assert_int_equal(itab_room(t), 1023);
	itab_forget(t, in[1], 1);
	itab_forget(t, in[2], 1);
	itab_destroy(t);
	(void)state;
}

/*
 * Victims come least recently named first, each once, with the parent
 * they were named in; directories are never offered; a forgotten inode
 * leaves the list; the table is low with less than 1024 fds left (or an
 * eighth of its target, see test_sec_fds.py for a table that big) and a
 * name to evict.
 */
static void test_victims_in_lru_order(void **state)
{
	struct inode_table *t = table_new();
	struct inode *root = itab_root(t), *in[4], *dir;
	struct stat st_dir = fake_st(6, 100);
	struct itab_victim v[8];
	char name[16];

	st_dir.st_mode = S_IFDIR;
	itab_set_max(t, 4096, 4096);
	for (int i = 0; i < 4; i++) {
		struct stat st = fake_st(6, (ino_t)i + 1);

		assert_int_equal(itab_insert_ref(t, dup(0), &st, &in[i]), 0);
		snprintf(name, sizeof(name), "f%d", i);
		itab_note_name(t, in[i], root, name);
	}
	assert_int_equal(itab_insert_ref(t, dup(0), &st_dir, &dir), 0);
	itab_note_name(t, dir, root, "d");
	assert_false(itab_low(t));		    /* 6 of 4096: room 4090 */
	itab_note_name(t, in[0], root, "f0-again"); /* now most recent */
	itab_note_name(t, in[1], root, "f1");	    /* revalidated: too */
	itab_forget(t, in[2], 1);
	assert_int_equal(itab_pick_victims(t, v, 8), 3);
	assert_string_equal(v[0].name, "f3");
	assert_string_equal(v[1].name, "f0-again");
	assert_string_equal(v[2].name, "f1");
	assert_int_equal(v[0].parent_dev, inode_dev(root));
	assert_int_equal(v[0].parent_ino, inode_ino(root));
	for (int i = 0; i < 3; i++)
		free(v[i].name);
	assert_int_equal(itab_pick_victims(t, v, 8), 0);
	itab_set_max(t, 1028, 1028); /* room 1023, but no name to evict */
	assert_false(itab_low(t));
	itab_note_name(t, in[3], root, "f3"); /* looked up again */
	itab_set_max(t, 1029, 1029);	      /* 5 held: room 1024, not below */
	assert_int_equal(itab_room(t), 1024);
	assert_false(itab_low(t));
	itab_set_max(t, 1028, 1028); /* room 1023 */
	assert_true(itab_low(t));
	itab_set_max(t, 5, 5); /* full: no room, and none within 10 ms */
	assert_false(itab_wait_room(t, 10));
	itab_forget(t, in[0], 1); /* room again */
	assert_true(itab_wait_room(t, 10));
	itab_forget(t, in[1], 1);
	itab_forget(t, in[3], 1);
	itab_forget(t, dir, 1);
	itab_destroy(t);
}

struct race_arg {
	struct inode_table *t;
	struct inode *got[200];
};

static void *race_insert(void *p)
{
	struct race_arg *a = p;

	for (int i = 0; i < 200; i++) {
		struct stat st = fake_st(9, (ino_t)i);

		if (itab_insert_ref(a->t, dup(0), &st, &a->got[i]) != 0)
			a->got[i] = NULL;
	}
	return NULL;
}

static void test_concurrent_inserts_agree(void **state)
{
	struct inode_table *t = table_new();
	struct race_arg a[4];
	pthread_t th[4];

	for (int k = 0; k < 4; k++) {
		a[k].t = t;
		pthread_create(&th[k], NULL, race_insert, &a[k]);
	}
	for (int k = 0; k < 4; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(itab_count(t), 201);
	for (int i = 0; i < 200; i++) {
		assert_non_null(a[0].got[i]);
		for (int k = 1; k < 4; k++)
			assert_ptr_equal(a[k].got[i], a[0].got[i]);
		itab_forget(t, a[0].got[i], 3);
		assert_ptr_equal(itab_find_ref(t, 9, (ino_t)i), a[0].got[i]);
		itab_forget(t, a[0].got[i], 2);
	}
	assert_int_equal(itab_count(t), 1);
	itab_destroy(t);
}

static void test_stamp(void **state)
{
	struct inode_table *t = table_new();
	struct stat st = fake_st(2, 2);
	struct inode *in;

	assert_int_equal(itab_insert_ref(t, dup(0), &st, &in), 0);
	st.st_size = 10;
	st.st_mtim = (struct timespec){100, 5};
	st.st_ctim = (struct timespec){100, 6};
	assert_false(inode_stamp_unchanged(in, &st, true)); /* first open */
	assert_true(inode_stamp_unchanged(in, &st, true));
	st.st_ctim.tv_nsec++; /* touch -r restores mtime, not ctime */
	assert_false(inode_stamp_unchanged(in, &st, true));
	assert_true(inode_stamp_unchanged(in, &st, true));
	st.st_mtim.tv_nsec++;
	assert_false(inode_stamp_unchanged(in, &st, true));
	st.st_size++;
	assert_false(inode_stamp_unchanged(in, &st, true));
	assert_true(inode_stamp_unchanged(in, &st, true));
	/* a racily clean stamp is recorded untrusted: it never matches */
	assert_true(inode_stamp_unchanged(in, &st, false));
	assert_false(inode_stamp_unchanged(in, &st, false));
	assert_false(inode_stamp_unchanged(in, &st, true));
	assert_true(inode_stamp_unchanged(in, &st, true));
	itab_destroy(t);
}

/* A directory moved out of the backend is no longer below its root. */
static void test_dir_beneath_root(void **state)
{
	char base[] = "/tmp/clamfs-beneath-XXXXXX", path[256];
	struct inode_table *t;
	struct stat st;
	int root, deep, out;

	(void)state;
	assert_non_null(mkdtemp(base));
	snprintf(path, sizeof(path), "%s/share", base);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/share/a", base);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/share/a/b", base);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/share", base);
	root = open(path, O_PATH | O_DIRECTORY);
	assert_true(root >= 0);
	assert_int_equal(fstat(root, &st), 0);
	t = itab_create(root, &st);
	assert_non_null(t);
	snprintf(path, sizeof(path), "%s/share/a/b", base);
	deep = open(path, O_PATH | O_DIRECTORY);
	assert_true(deep >= 0);
	assert_true(itab_dir_beneath_root(t, deep));
	assert_true(itab_dir_beneath_root(t, inode_fd(itab_root(t))));
	out = open(base, O_PATH | O_DIRECTORY);
	assert_true(out >= 0);
	assert_false(itab_dir_beneath_root(t, out));
	/* the same open directory, moved out behind the table's back */
	snprintf(path, sizeof(path), "%s/share/a", base);
	{
		char moved[256];

		snprintf(moved, sizeof(moved), "%s/moved", base);
		assert_int_equal(rename(path, moved), 0);
		assert_false(itab_dir_beneath_root(t, deep));
		snprintf(path, sizeof(path), "%s/moved/b", base);
		assert_int_equal(rmdir(path), 0);
		assert_int_equal(rmdir(moved), 0);
	}
	close(deep);
	close(out);
	itab_destroy(t);
	snprintf(path, sizeof(path), "%s/share", base);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(base), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_is_held_and_never_forgotten),
		cmocka_unit_test(test_lookup_counts),
		cmocka_unit_test(test_insert_of_known_identity_closes_new_fd),
		cmocka_unit_test(test_grows_and_keeps_every_entry),
		cmocka_unit_test(test_cap_refuses_with_emfile_and_recovers),
		cmocka_unit_test(test_target_evicts_cap_refuses),
		cmocka_unit_test(test_victims_in_lru_order),
		cmocka_unit_test(test_concurrent_inserts_agree),
		cmocka_unit_test(test_stamp),
		cmocka_unit_test(test_dir_beneath_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
