// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The inode table's share of the fd limit: a reserve of a quarter between
 * 128 and 8192 (half of a tiny limit), and a cap half-way into the reserve.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fdlimit.h"

static void test_budget_keeps_a_reserve(void **state)
{
	assert_int_equal(fdlimit_inode_budget(256), 128);	/* half */
	assert_int_equal(fdlimit_inode_budget(400), 272);	/* 128 kept */
	assert_int_equal(fdlimit_inode_budget(1024), 768);	/* a quarter */
	assert_int_equal(fdlimit_inode_budget(524288), 516096); /* 8192 */
	assert_true(fdlimit_inode_budget(RLIM_INFINITY) == SIZE_MAX);
	(void)state;
}

static void test_cap_takes_half_the_reserve(void **state)
{
	assert_int_equal(fdlimit_inode_cap(256), 192);
	assert_int_equal(fdlimit_inode_cap(400), 336);
	assert_int_equal(fdlimit_inode_cap(1024), 896);
	assert_int_equal(fdlimit_inode_cap(524288), 520192);
	assert_true(fdlimit_inode_cap(RLIM_INFINITY) == SIZE_MAX);
	for (rlim_t soft = 16; soft < 20000; soft += 7) {
		size_t budget = fdlimit_inode_budget(soft);
		size_t cap = fdlimit_inode_cap(soft);

		assert_true(budget <= cap);
		assert_true(cap < soft);
		/* a quarter of a tiny limit, else at least 64, stays free */
		assert_true(soft - cap >= (soft < 256 ? soft / 4 : 64));
	}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget_keeps_a_reserve),
		cmocka_unit_test(test_cap_takes_half_the_reserve),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
