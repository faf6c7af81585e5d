// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File identities from the kernel's handles: one file has one, by any of
 * its names or descriptors, across calls; two files have two; and the
 * identity of a file without a handle matches nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "fileid.h"

static void test_one_file_one_identity(void **state)
{
	char dir[] = "/tmp/clamfs-fileid-XXXXXX", a[64], b[64], ln[64];
	uint64_t ida, idb, idlink, idfd;
	int dfd, fd, err = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	snprintf(ln, sizeof(ln), "%s/l", dir);
	fd = open(a, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	fd = open(b, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(link(a, ln), 0);
	dfd = open(dir, O_PATH | O_DIRECTORY);
	assert_true(dfd >= 0);
	ida = fileid_at(dfd, "a", 0, &err);
	if (ida == 0 && err == -EOPNOTSUPP)
		skip(); /* a /tmp without handles */
	idb = fileid_at(dfd, "b", 0, NULL);
	idlink = fileid_at(dfd, "l", 0, NULL);
	fd = open(a, O_RDONLY);
	assert_true(fd >= 0);
	idfd = fileid_at(fd, "", AT_EMPTY_PATH, NULL);
	assert_int_not_equal(ida, 0);
	assert_int_not_equal(idb, 0);
	assert_int_not_equal(ida, idb);
	assert_int_equal(ida, idlink);
	assert_int_equal(ida, idfd);
	assert_int_equal(ida, fileid_at(dfd, "a", 0, NULL));
	/* gone: no handle, and the reason */
	err = 0;
	assert_int_equal(fileid_at(dfd, "missing", 0, &err), 0);
	assert_int_equal(err, -ENOENT);
	close(fd);
	close(dfd);
	unlink(a);
	unlink(b);
	unlink(ln);
	rmdir(dir);
}

static void test_unmatched_are_all_different(void **state)
{
	uint64_t first = fileid_unmatched(), prev = first;

	for (int i = 0; i < 1000; i++) {
		uint64_t id = fileid_unmatched();

		assert_int_not_equal(id, 0);
		assert_int_not_equal(id, prev);
		assert_int_not_equal(id, first);
		prev = id;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_file_one_identity),
		cmocka_unit_test(test_unmatched_are_all_different),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
