// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's VERSION parser: the long form with database
 * version and date, the short form clamd prints with only custom
 * signatures, and malformed replies.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "clamdproto.h"

static struct cdp_version v;

static int parse(const char *s)
{
	memset(&v, 0x5a, sizeof(v));
	return cdp_version_parse(s, strlen(s), &v);
}

static void test_long(void **state)
{
	assert_int_equal(parse("ClamAV 1.4.6/27123/Mon Jan  1 09:00:00 2024"),
			 0);
	assert_string_equal(v.engine, "1.4.6");
	assert_int_equal(v.db_version, 27123);
	assert_string_equal(v.db_date, "Mon Jan  1 09:00:00 2024");
	assert_int_equal(v.db_time, 1704099600); /* 2024-01-01T09:00:00Z */
	assert_int_equal(
		parse("ClamAV 0.103.11/26000/Tue Dec 12 10:30:01 2023"), 0);
	assert_string_equal(v.engine, "0.103.11");
	assert_int_equal(v.db_version, 26000);
	/* A date we cannot read is kept as text, without a time. */
	assert_int_equal(parse("ClamAV 1.4.6/27123/sometime"), 0);
	assert_string_equal(v.db_date, "sometime");
	assert_int_equal(v.db_time, 0);
}

static void test_short(void **state)
{
	assert_int_equal(parse("ClamAV 1.4.6"), 0);
	assert_string_equal(v.engine, "1.4.6");
	assert_int_equal(v.db_version, 0);
	assert_string_equal(v.db_date, "");
	assert_int_equal(v.db_time, 0);
	assert_int_equal(parse("ClamAV 1.5.0-rc1"), 0);
	assert_string_equal(v.engine, "1.5.0-rc1");
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"ClamAV",
		"ClamAV ",
		"clamav 1.4.6",
		"ClamAV  1.4.6",
		"ClamAV 1.4.6 ",
		"ClamAV 1.4.6/",
		"ClamAV 1.4.6//date",
		"ClamAV 1.4.6/x/date",
		"ClamAV 1.4.6/123",
		"ClamAV 1.4.6/123/",
		"ClamAV 1.4.6/99999999999999999999999/d",
		"ClamAV 1.4.6/1/a\nb",
		"PONG",
		"UNKNOWN COMMAND",
		"ClamAV 1.2.3.4.5.6.7.8.9.10.11.12.13.14.15",
	};
	const char nul[] = "ClamAV 1.4.6\0/1/x";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i]), -EPROTO);
		assert_string_equal(v.engine, "");
	}
	assert_int_equal(cdp_version_parse(nul, sizeof(nul) - 1, &v), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
