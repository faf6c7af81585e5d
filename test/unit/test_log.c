// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Log rate limiting: a burst passes, the rest is counted and reported with
 * the first line of the next window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "log.h"

static void test_burst_then_count(void **state)
{
	struct log_limit l = {0};
	unsigned long held;

	for (int i = 0; i < LOG_BURST; i++) {
		assert_true(log_limit_pass_at(&l, 100, &held));
		assert_int_equal(held, 0);
	}
	for (int i = 0; i < 25; i++)
		assert_false(
			log_limit_pass_at(&l, 100 + LOG_WINDOW - 1, &held));
	/* a new window: the first line says how many were held back */
	assert_true(log_limit_pass_at(&l, 100 + LOG_WINDOW, &held));
	assert_int_equal(held, 25);
	assert_true(log_limit_pass_at(&l, 100 + LOG_WINDOW, &held));
	assert_int_equal(held, 0);
}

static void test_quiet_kind_always_passes(void **state)
{
	struct log_limit l = {0};
	unsigned long held;

	for (long t = 0; t < 1000; t += LOG_WINDOW) {
		assert_true(log_limit_pass_at(&l, t, &held));
		assert_int_equal(held, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_count),
		cmocka_unit_test(test_quiet_kind_always_passes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
