// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's STATS parser: the thread figures of clamd
 * 1.4.6's reply (recorded from a clamd with MaxThreads 4), fields in
 * another order or padded, and hostile or malformed replies.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "clamdproto.h"

static struct cdp_threads t;

static int parse(const char *s)
{
	memset(&t, 0x5a, sizeof(t));
	return cdp_stats_parse_threads(s, strlen(s), &t);
}

static const char real[] =
	"POOLS: 1\n\nSTATE: VALID PRIMARY\n"
	"THREADS: live 1  idle 0 max 4 idle-timeout 30\n"
	"QUEUE: 0 items\n\tSTATS 0.000005 \n\n"
	"MEMSTATS: heap N/A mmap N/A used N/A free N/A releasable N/A pools 1 "
	"pools_used 5.883M pools_total 5.964M\nEND";

static void test_clamd_146(void **state)
{
	(void)state;
	assert_int_equal(parse(real), 0);
	assert_int_equal(t.live, 1);
	assert_int_equal(t.idle, 0);
	assert_int_equal(t.max, 4);
}

static void test_other_layouts(void **state)
{
	(void)state;
	/* order, padding, tabs, CR LF, unknown fields, no other lines */
	assert_int_equal(parse("THREADS: max 12 live 3\tidle 2 new 9\r\n"), 0);
	assert_int_equal(t.max, 12);
	assert_int_equal(t.live, 3);
	assert_int_equal(t.idle, 2);
	assert_int_equal(parse("THREADS:max 7"), 0);
	assert_int_equal(t.max, 7);
	assert_int_equal(t.live, 0);
	/* only the first pool's line counts */
	assert_int_equal(parse("POOLS: 2\nTHREADS: live 0 idle 0 max 2\n"
			       "THREADS: live 0 idle 0 max 99\nEND"),
			 0);
	assert_int_equal(t.max, 2);
	/* a key at the end of the line without a value is skipped */
	assert_int_equal(parse("THREADS: live 1 max 5 idle-timeout"), 0);
	assert_int_equal(t.max, 5);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"END",
		"UNKNOWN COMMAND",
		"POOLS: 1\nQUEUE: 0 items\nEND",
		"THREADS: live 1 idle 0\nEND",	      /* no max */
		"THREADS: live 1 idle 0 max 0\n",     /* 0 threads */
		"THREADS: live 1 idle 0 max -4\n",    /* sign */
		"THREADS: live 1 idle 0 max 4x\n",    /* trailing junk */
		"THREADS: live 1 idle 0 max 0x10\n",  /* not decimal */
		"THREADS: live 1 idle 0 max 1000001", /* above clamd's */
		"THREADS: live 99999999999999999999 max 4",
		"THREADS: live one idle 0 max 4",
		" THREADS: live 1 idle 0 max 4", /* not at a line start */
		"threads: live 1 idle 0 max 4",
		"XTHREADS: max 4",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i]), -EPROTO);
		assert_int_equal(t.max, 0);
		assert_int_equal(t.live, 0);
	}
}

static void test_embedded_nul_and_length(void **state)
{
	static const char nul[] = "THREADS: live 1 idle 0\0 max 4\n";
	static char big[CDP_STATS_MAX + 2];

	(void)state;
	assert_int_equal(cdp_stats_parse_threads(nul, sizeof(nul) - 1, &t),
			 -EPROTO);
	/* the length bounds the read: max 4 cut to max 4 of a longer one */
	assert_int_equal(cdp_stats_parse_threads("THREADS: max 42", 14, &t), 0);
	assert_int_equal(t.max, 4);
	memset(big, ' ', sizeof(big));
	memcpy(big, "THREADS: max 4", 14);
	assert_int_equal(cdp_stats_parse_threads(big, sizeof(big), &t),
			 -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clamd_146),
		cmocka_unit_test(test_other_layouts),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_embedded_nul_and_length),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
