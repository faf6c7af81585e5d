// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The writer probe on a real file: a descriptor open for writing and a
 * shared writable mapping that outlived its descriptor each count as a
 * writer; a private or read-only mapping does not; the probe's own lease
 * is gone when it returns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "writers.h"

struct file {
	char dir[32];
	char path[64];
	int rd; /* read-only, what the gate probes */
};

static int file_setup(void **state)
{
	struct file *f = calloc(1, sizeof(*f));
	int fd;

	assert_non_null(f);
	strcpy(f->dir, "/tmp/clamfs-writers-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/f", f->dir);
	fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
	close(fd);
	f->rd = open(f->path, O_RDONLY);
	assert_true(f->rd >= 0);
	*state = f;
	return 0;
}

static int file_teardown(void **state)
{
	struct file *f = *state;

	close(f->rd);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void test_no_writer(void **state)
{
	struct file *f = *state;

	assert_int_equal(writers_probe(f->rd), 0);
	/* the lease is dropped: a second probe and a writer both go through */
	assert_int_equal(writers_probe(f->rd), 0);
	assert_int_equal(fcntl(f->rd, F_GETLEASE), F_UNLCK);
}

static void test_open_writer(void **state)
{
	struct file *f = *state;
	int w = open(f->path, O_WRONLY | O_NONBLOCK);

	assert_true(w >= 0);
	assert_int_equal(writers_probe(f->rd), -EBUSY);
	close(w);
	assert_int_equal(writers_probe(f->rd), 0);
}

static void test_writable_fd_counts_itself(void **state)
{
	struct file *f = *state;
	int rw = open(f->path, O_RDWR);

	assert_true(rw >= 0);
	assert_int_equal(writers_probe(rw), -EBUSY);
	close(rw);
}

static void test_shared_mapping_outlives_fd(void **state)
{
	struct file *f = *state;
	int rw = open(f->path, O_RDWR);
	char *map;

	assert_true(rw >= 0);
	map = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	assert_true(map != MAP_FAILED);
	close(rw);
	map[0] = 'X';
	assert_int_equal(writers_probe(f->rd), -EBUSY);
	munmap(map, 16);
	assert_int_equal(writers_probe(f->rd), 0);
}

static void test_private_and_readonly_mappings_do_not_write(void **state)
{
	struct file *f = *state;
	int rw = open(f->path, O_RDWR);
	char *priv, *ro;

	assert_true(rw >= 0);
	priv = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_PRIVATE, rw, 0);
	assert_true(priv != MAP_FAILED);
	close(rw);
	/* a private mapping of a read-write fd still holds that file */
	assert_int_equal(writers_probe(f->rd), -EBUSY);
	munmap(priv, 16);
	ro = mmap(NULL, 16, PROT_READ, MAP_SHARED, f->rd, 0);
	assert_true(ro != MAP_FAILED);
	assert_int_equal(writers_probe(f->rd), 0);
	munmap(ro, 16);
}

static void test_not_a_file(void **state)
{
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	/* a lease needs a regular file: cannot be told, never 0 */
	assert_true(writers_probe(fds[0]) < 0);
	assert_int_not_equal(writers_probe(fds[0]), -EBUSY);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_writer, file_setup,
						file_teardown),
		cmocka_unit_test_setup_teardown(test_open_writer, file_setup,
						file_teardown),
		cmocka_unit_test_setup_teardown(test_writable_fd_counts_itself,
						file_setup, file_teardown),
		cmocka_unit_test_setup_teardown(test_shared_mapping_outlives_fd,
						file_setup, file_teardown),
		cmocka_unit_test_setup_teardown(
			test_private_and_readonly_mappings_do_not_write,
			file_setup, file_teardown),
		cmocka_unit_test(test_not_a_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
