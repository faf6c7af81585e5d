// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Node ids: handle ids and counted ids never meet, the ghosts of forgotten
 * ids (bounded, keyed both ways, a reused inode number is not the old
 * file), and the inode table's id map: lookups by id, a forgotten file
 * coming back with its id by name and by handle, forged ids refused.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "nodeid.h"

static struct nodeid_handle handle_of(uint32_t ino, uint32_t gen)
{
	struct nodeid_handle h;

	nodeid_to_handle((uint64_t)gen << 32 | ino, &h);
	return h;
}

static void test_handle_ids(void **state)
{
	struct nodeid_handle h = handle_of(12, 0xabcdef01), back;
	uint64_t id;

	assert_true(nodeid_from_handle(&h, &id));
	assert_int_equal(id, 0xabcdef0100000000ULL | 12);
	nodeid_to_handle(id, &back);
	assert_true(nodeid_handle_equal(&h, &back));
	/* no inode 0: those ids are the counter's */
	h = handle_of(0, 5);
	assert_false(nodeid_from_handle(&h, &id));
	/* never the root's id */
	h = handle_of(1, 0);
	assert_false(nodeid_from_handle(&h, &id));
	/* another kind or length is not an id */
	h = handle_of(12, 1);
	h.type = 2;
	assert_false(nodeid_from_handle(&h, &id));
	h = handle_of(12, 1);
	h.len = 12;
	assert_false(nodeid_from_handle(&h, &id));
}

static void test_counted_ids(void **state)
{
	/* with handle ids: low 32 bits zero, so never a handle's */
	assert_int_equal(nodeid_counted(1, true), 1ULL << 32);
	assert_int_equal(nodeid_counted(UINT32_MAX, true),
			 (uint64_t)UINT32_MAX << 32);
	assert_int_equal(nodeid_counted((uint64_t)UINT32_MAX + 1, true), 0);
	/* without: 2, 3, ... (1 is the root) */
	assert_int_equal(nodeid_counted(1, false), 2);
	assert_int_equal(nodeid_counted(2, false), 3);
	assert_int_equal(nodeid_counted(0, false), 0);
}

static void test_ghosts_both_ways(void **state)
{
	struct ghosts *g = ghosts_create(8);
	struct nodeid_handle h = handle_of(40, 7), other = handle_of(40, 8),
			     got;
	uint64_t id;
	dev_t dev;
	ino_t ino;

	assert_non_null(g);
	ghosts_put(g, 100, 3, 40, &h);
	assert_int_equal(ghosts_count(g), 1);
	assert_true(ghosts_find(g, 100, &dev, &ino, &got));
	assert_int_equal(dev, 3);
	assert_int_equal(ino, 40);
	assert_true(nodeid_handle_equal(&got, &h));
	assert_false(ghosts_find(g, 101, &dev, &ino, &got));
	/* the same file by name: same id, and the ghost is gone */
	assert_true(ghosts_take(g, 3, 40, &h, &id));
	assert_int_equal(id, 100);
	assert_int_equal(ghosts_count(g), 0);
	assert_false(ghosts_find(g, 100, &dev, &ino, &got));
	/* a reused inode number (another generation) is another file */
	ghosts_put(g, 100, 3, 40, &h);
	assert_false(ghosts_take(g, 3, 40, &other, &id));
	assert_int_equal(ghosts_count(g), 0);
	/* no handle, no ghost */
	got.len = 0;
	ghosts_put(g, 5, 3, 41, &got);
	assert_int_equal(ghosts_count(g), 0);
	ghosts_destroy(g);
}

static void test_ghosts_bounded_oldest_first(void **state)
{
	struct ghosts *g = ghosts_create(4);
	struct nodeid_handle h, got;
	dev_t dev;
	ino_t ino;
	uint64_t id;

	for (uint32_t i = 1; i <= 6; i++) {
		h = handle_of(100 + i, i);
		ghosts_put(g, i, 1, 100 + i, &h);
	}
	assert_int_equal(ghosts_count(g), 4);
	assert_false(ghosts_find(g, 1, &dev, &ino, &got));
	assert_false(ghosts_find(g, 2, &dev, &ino, &got));
	for (uint64_t i = 3; i <= 6; i++)
		assert_true(ghosts_find(g, i, &dev, &ino, &got));
	h = handle_of(101, 1);
	assert_false(ghosts_take(g, 1, 101, &h, &id));
	/* one record per id and per identity: the newest wins */
	h = handle_of(103, 3);
	ghosts_put(g, 9, 1, 103, &h);
	assert_false(ghosts_find(g, 3, &dev, &ino, &got));
	assert_true(ghosts_take(g, 1, 103, &h, &id));
	assert_int_equal(id, 9);
	ghosts_destroy(g);
}

/* A table rooted in a fresh directory (never a whole filesystem). */
struct fixture {
	char dir[64];
	struct inode_table *t;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct stat st;
	int fd;

	assert_non_null(f);
	strcpy(f->dir, "/tmp/nodeid-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	f->t = itab_create(fd, &st);
	assert_non_null(f->t);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[128];

	itab_destroy(f->t);
	snprintf(path, sizeof(path), "%s/f", f->dir);
	unlink(path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct inode *insert_file(struct fixture *f)
{
	struct inode *in;
	struct stat st;
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/f", f->dir);
	fd = open(path, O_PATH | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
	assert_int_equal(itab_insert_ref(f->t, fd, &st, &in), 0);
	return in;
}

static void test_table_ids(void **state)
{
	struct fixture *f = *state;
	struct inode *in, *again;
	char path[128];
	uint64_t id;
	int fd;

	snprintf(path, sizeof(path), "%s/f", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_false(itab_handle_ids(f->t));
	assert_ptr_equal(itab_by_id(f->t, 1), itab_root(f->t));
	assert_int_equal(inode_id(itab_root(f->t)), 1);
	assert_int_equal(inode_generation(itab_root(f->t)), 0);

	/* an id nobody was told leaves no ghost */
	in = insert_file(f);
	id = inode_id(in);
	itab_forget(f->t, in, 1);
	assert_int_equal(itab_ghosts(f->t), 0);
	in = insert_file(f);
	assert_true(inode_id(in) != id);
	itab_forget(f->t, in, 1);

	in = insert_file(f);
	id = inode_hand_out(in);
	assert_true(id > 1);
	assert_ptr_equal(itab_by_id(f->t, id), in);
	assert_null(itab_by_id(f->t, id + 1));
	assert_null(itab_by_id(f->t, 0));
	itab_forget(f->t, in, 1);
	assert_null(itab_by_id(f->t, id));
	/* forgotten, the file comes back by name with its id */
	in = insert_file(f);
	assert_int_equal(inode_id(in), id);
	/* and keeps it once forgotten again, told or not */
	itab_forget(f->t, in, 1);
	assert_int_equal(itab_ghosts(f->t), 1);
	/* and by its id, reopened by handle when the daemon may do that */
	if (geteuid() == 0 && itab_ghosts(f->t) == 1) {
		assert_int_equal(itab_resolve_id(f->t, id, &again), 0);
		assert_int_equal(inode_id(again), id);
		assert_ptr_equal(itab_by_id(f->t, id), again);
		assert_int_equal(itab_resolve_id(f->t, id, &in), 0);
		assert_ptr_equal(in, again);
		itab_forget(f->t, again, 2);
	}
	/* ids it never issued name nothing */
	assert_int_equal(itab_resolve_id(f->t, id + 1, &in), -ESTALE);
	assert_int_equal(itab_resolve_id(f->t, 0, &in), -ESTALE);
	assert_int_equal(itab_resolve_id(f->t, 0xdeadbeef00000000ULL, &in),
			 -ESTALE);
	/* a deleted file's id is stale, even by a new file of its number */
	unlink(path);
	assert_int_equal(itab_resolve_id(f->t, id, &in), -ESTALE);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	in = insert_file(f);
	assert_true(inode_id(in) != id);
	itab_forget(f->t, in, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_ids),
		cmocka_unit_test(test_counted_ids),
		cmocka_unit_test(test_ghosts_both_ways),
		cmocka_unit_test(test_ghosts_bounded_oldest_first),
		cmocka_unit_test_setup_teardown(test_table_ids, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
