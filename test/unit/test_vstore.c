// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The verdict store on a real LMDB file in a temporary directory: a kept
 * verdict needs the same stamp, database and an unexpired scan time; it
 * survives a close and reopen; a forget or a clear hides it at once;
 * another backend, a damaged or a full file start empty; a directory
 * others may write is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>
#include <time.h>

#include "vstore.h"

/*
 * A slow disk for the tests that need one (-Wl,--wrap=mdb_txn_commit):
 * while slow_commits is set every commit takes half a second more.
 */
static atomic_int slow_commits;
int __real_mdb_txn_commit(MDB_txn *txn);
int __wrap_mdb_txn_commit(MDB_txn *txn);

int __wrap_mdb_txn_commit(MDB_txn *txn)
{
	struct timespec half = {0, 500000000};

	if (atomic_load(&slow_commits))
		nanosleep(&half, NULL);
	return __real_mdb_txn_commit(txn);
}

#define NOW 1800000000000000000LL /* ns */
#define DB  "1.4.6/27000/Mon Jan  1 00:00:00 2024"
#define TTL 3600
#define SEC 1000000000LL

struct fixture {
	char dir[64];	/* the test's own directory */
	char store[80]; /* dir/store */
	int backend_fd; /* dir */
	int other_fd;	/* dir/other, another "backend" */
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char other[96], cmd[128];

	if (!fx)
		return -1;
	fx->backend_fd = fx->other_fd = -1;
	strcpy(fx->dir, "/tmp/test_vstore.XXXXXX");
	if (!mkdtemp(fx->dir))
		goto fail;
	snprintf(fx->store, sizeof(fx->store), "%s/store", fx->dir);
	snprintf(other, sizeof(other), "%s/other", fx->dir);
	fx->backend_fd = open(fx->dir, O_RDONLY | O_DIRECTORY);
	if (fx->backend_fd < 0 || mkdir(other, 0755) == -1)
		goto fail_dir;
	fx->other_fd = open(other, O_RDONLY | O_DIRECTORY);
	if (fx->other_fd < 0)
		goto fail_dir;
	*state = fx;
	return 0;
fail_dir:
	/* cmocka runs no teardown after a failed setup */
	if (fx->backend_fd >= 0)
		close(fx->backend_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_vstore: could not remove %s\n", fx->dir);
fail:
	free(fx);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	close(fx->backend_fd);
	close(fx->other_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		return -1;
	free(fx);
	return 0;
}

static struct vcache_file file(uint64_t ino)
{
	struct vcache_file f = {.dev = 0x801,
				.ino = ino,
				.ident = 0x5eed0000cafeULL,
				.size = 4096,
				.mtime_ns = 1700000000123456789LL,
				.ctime_ns = 1700000000123456790LL};

	return f;
}

static struct vstore *open_store(struct fixture *fx, int backend_fd)
{
	struct vstore *vs = NULL;

	assert_int_equal(vstore_open(fx->store, 1 << 20, backend_fd,
				     "/run/clamd.ctl", &vs),
			 0);
	assert_non_null(vs);
	return vs;
}

static bool hit(struct vstore *vs, const struct vcache_file *f)
{
	return vstore_lookup_clean(vs, f, DB, TTL, NOW);
}

static void test_kept_across_a_reopen(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1), g = file(2);
	struct vstore_counters c;
	struct vstore *vs = open_store(fx, fx->backend_fd);

	assert_false(hit(vs, &f));
	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	assert_false(hit(vs, &g));
	vstore_close(vs);

	vs = open_store(fx, fx->backend_fd);
	assert_true(hit(vs, &f));
	vstore_counters(vs, &c);
	assert_int_equal(c.entries, 1);
	assert_int_equal(c.hits, 1);
	vstore_close(vs);
}

static void test_close_commits_what_is_queued(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_close(vs);
	vs = open_store(fx, fx->backend_fd);
	assert_true(hit(vs, &f));
	vstore_close(vs);
}

static void test_every_part_of_the_stamp_counts(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1), g;
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	g = f, g.size++;
	assert_false(hit(vs, &g));
	g = f, g.mtime_ns++;
	assert_false(hit(vs, &g));
	g = f, g.ctime_ns++;
	assert_false(hit(vs, &g));
	g = f, g.dev++;
	assert_false(hit(vs, &g));
	g = f, g.ident++; /* another file's handle, same numbers */
	assert_false(hit(vs, &g));
	assert_true(hit(vs, &f));
	vstore_close(vs);
}

static void test_database_and_age_count(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	assert_false(vstore_lookup_clean(vs, &f, "1.4.6/27001/x", TTL, NOW));
	assert_false(vstore_lookup_clean(vs, &f, "", TTL, NOW));
	assert_false(vstore_lookup_clean(vs, &f, DB, 0, NOW));
	/* ten seconds old: a TTL of 10 s is over, 11 s is not */
	assert_false(vstore_lookup_clean(vs, &f, DB, 10, NOW));
	assert_true(vstore_lookup_clean(vs, &f, DB, 11, NOW));
	/* scanned "in the future" (the clock went back): not trusted */
	assert_false(vstore_lookup_clean(vs, &f, DB, TTL, NOW - 11 * SEC));
	/* an unknown database is never written */
	vstore_put_clean(vs, &f, "", NOW);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	vstore_close(vs);
}

static void test_forget_and_clear_hide_at_once(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1), g = file(2);
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_put_clean(vs, &g, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	/* queued, not committed: already a miss */
	vstore_forget(vs, f.dev, f.ino);
	assert_false(hit(vs, &f));
	assert_true(hit(vs, &g));
	assert_int_equal(vstore_flush(vs), 0);
	assert_false(hit(vs, &f));
	assert_int_equal(vstore_clear(vs), 0);
	assert_false(hit(vs, &g));
	/* a verdict put after the clear survives it */
	vstore_put_clean(vs, &f, DB, NOW - 5 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	assert_false(hit(vs, &g));
	vstore_close(vs);
	vs = open_store(fx, fx->backend_fd);
	assert_true(hit(vs, &f));
	assert_false(hit(vs, &g));
	vstore_close(vs);
}

static void test_another_backend_starts_empty(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_close(vs);
	vs = open_store(fx, fx->other_fd);
	assert_false(hit(vs, &f));
	vstore_close(vs);
	/* and not back for the first one either */
	vs = open_store(fx, fx->backend_fd);
	assert_false(hit(vs, &f));
	vstore_close(vs);
}

static void test_damaged_file_is_rebuilt(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore_counters c;
	char path[128], junk[8192];
	struct vstore *vs = open_store(fx, fx->backend_fd);
	int fd;

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_close(vs);
	snprintf(path, sizeof(path), "%s/verdicts.mdb", fx->store);
	memset(junk, 0x5a, sizeof(junk));
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
	vs = open_store(fx, fx->backend_fd);
	vstore_counters(vs, &c);
	assert_int_equal(c.rebuilds, 1);
	assert_false(hit(vs, &f));
	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	vstore_close(vs);
}

static void test_full_store_is_emptied(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore_counters c;
	struct vstore *vs = open_store(fx, fx->backend_fd);
	bool emptied = false;

	/* 1 MiB holds a few thousand; put batches until a commit empties */
	for (uint64_t ino = 1; ino < 100000 && !emptied; ino++) {
		f = file(ino);
		vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
		if (ino % 1000 == 0) {
			assert_int_equal(vstore_flush(vs), 0);
			vstore_counters(vs, &c);
			emptied = c.entries == 0;
		}
	}
	assert_true(emptied);
	/* still working afterwards */
	f = file(1);
	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	vstore_close(vs);
}

static void test_directory_others_may_write_is_refused(void **state)
{
	struct fixture *fx = *state;
	struct vstore *vs = NULL;

	assert_int_equal(mkdir(fx->store, 0700), 0);
	assert_int_equal(chmod(fx->store, 0770), 0);
	assert_int_equal(vstore_check_dir(fx->store), -EPERM);
	assert_int_equal(
		vstore_open(fx->store, 1 << 20, fx->backend_fd, "", &vs),
		-EPERM);
	assert_null(vs);
	assert_int_equal(chmod(fx->store, 0700), 0);
	assert_int_equal(vstore_check_dir(fx->store), 0);
	/* a directory above that others may write (not sticky) */
	assert_int_equal(chmod(fx->dir, 0777), 0);
	assert_int_equal(vstore_check_dir(fx->store), -EPERM);
	assert_int_equal(chmod(fx->dir, 01777), 0);
	assert_int_equal(vstore_check_dir(fx->store), 0);
	assert_int_equal(chmod(fx->dir, 0700), 0);
	assert_int_equal(
		vstore_open(fx->store, 1 << 20, fx->backend_fd, "", &vs), 0);
	vstore_close(vs);
}

static void test_another_clamd_starts_empty(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore *vs = open_store(fx, fx->backend_fd);

	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_close(vs);
	assert_int_equal(vstore_open(fx->store, 1 << 20, fx->backend_fd,
				     "tcp://10.0.0.9:3310", &vs),
			 0);
	assert_false(hit(vs, &f));
	vstore_close(vs);
}

static void test_one_clamfs_per_directory(void **state)
{
	struct fixture *fx = *state;
	struct vstore *vs = open_store(fx, fx->backend_fd), *second = NULL;

	assert_int_equal(vstore_open(fx->store, 1 << 20, fx->backend_fd,
				     "/run/clamd.ctl", &second),
			 -EBUSY);
	assert_null(second);
	vstore_close(vs);
}

static void test_a_cut_short_file_is_rebuilt(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f;
	struct vstore_counters c;
	char path[128];
	struct vstore *vs = open_store(fx, fx->backend_fd);

	for (uint64_t ino = 1; ino <= 2000; ino++) {
		f = file(ino);
		vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	}
	vstore_close(vs);
	snprintf(path, sizeof(path), "%s/verdicts.mdb", fx->store);
	assert_int_equal(truncate(path, 16384), 0);
	vs = open_store(fx, fx->backend_fd);
	vstore_counters(vs, &c);
	assert_int_equal(c.rebuilds, 1);
	assert_false(hit(vs, &f));
	vstore_close(vs);
}

static void test_forget_of_what_was_never_kept_writes_nothing(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file f = file(1);
	struct vstore_counters c;
	struct vstore *vs = open_store(fx, fx->backend_fd);

	/* far more than the queue holds: none queued, nothing emptied */
	for (uint64_t ino = 100; ino < 20000; ino++)
		vstore_forget(vs, f.dev, ino);
	vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
	vstore_forget(vs, f.dev, 2);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &f));
	/* a queued put is forgotten too */
	vstore_put_clean(vs, &f, DB, NOW - 5 * SEC);
	vstore_forget(vs, f.dev, f.ino);
	assert_false(hit(vs, &f));
	assert_int_equal(vstore_flush(vs), 0);
	assert_false(hit(vs, &f));
	/* forget, put, forget: the last one is not taken for the first */
	vstore_put_clean(vs, &f, DB, NOW - 5 * SEC);
	assert_int_equal(vstore_flush(vs), 0);
	vstore_forget(vs, f.dev, f.ino);
	vstore_put_clean(vs, &f, DB, NOW - 4 * SEC);
	vstore_forget(vs, f.dev, f.ino);
	assert_int_equal(vstore_flush(vs), 0);
	assert_false(hit(vs, &f));
	vstore_counters(vs, &c);
	assert_int_equal(c.entries, 0);
	vstore_close(vs);
}

/*
 * One user opening thousands of kept files for writing within a commit's
 * time (on a slow disk) forgets each of them, and only them: the queue is
 * committed when it is full, never the whole store emptied for everyone.
 */
static void test_a_flood_of_forgets_forgets_only_those(void **state)
{
	struct fixture *fx = *state;
	struct vcache_file other = file(1);
	struct vstore_counters c;
	struct vstore *vs = NULL;

	/* room for all of them: a full store starts again by design */
	assert_int_equal(vstore_open(fx->store, 16 << 20, fx->backend_fd,
				     "/run/clamd.ctl", &vs),
			 0);
	vstore_put_clean(vs, &other, DB, NOW - 10 * SEC);
	for (uint64_t ino = 100; ino < 100 + 10000; ino++) {
		struct vcache_file f = file(ino);

		vstore_put_clean(vs, &f, DB, NOW - 10 * SEC);
		if (ino % 1000 == 0)
			assert_int_equal(vstore_flush(vs), 0);
	}
	assert_int_equal(vstore_flush(vs), 0);
	atomic_store(&slow_commits, 1);
	for (uint64_t ino = 100; ino < 100 + 10000; ino++) {
		struct vcache_file f = file(ino);

		vstore_forget(vs, f.dev, f.ino);
		assert_false(hit(vs, &f));
	}
	assert_true(hit(vs, &other));
	atomic_store(&slow_commits, 0);
	assert_int_equal(vstore_flush(vs), 0);
	assert_true(hit(vs, &other));
	vstore_counters(vs, &c);
	assert_int_equal(c.entries, 1);
	vstore_close(vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
		T(test_kept_across_a_reopen),
		T(test_close_commits_what_is_queued),
		T(test_every_part_of_the_stamp_counts),
		T(test_database_and_age_count),
		T(test_forget_and_clear_hide_at_once),
		T(test_another_backend_starts_empty),
		T(test_damaged_file_is_rebuilt),
		T(test_full_store_is_emptied),
		T(test_directory_others_may_write_is_refused),
		T(test_another_clamd_starts_empty),
		T(test_one_clamfs_per_directory),
		T(test_a_cut_short_file_is_rebuilt),
		T(test_forget_of_what_was_never_kept_writes_nothing),
		T(test_a_flood_of_forgets_forgets_only_those),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
