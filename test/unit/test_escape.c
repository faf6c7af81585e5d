// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The one escaping of untrusted text, and its two users' forms (log values
 * and record values): no control byte passes, a cut never splits a UTF-8
 * character or an escape, and the output respects its bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "escape.h"
#include "log.h"
#include "qrecord.h"

/* escape_put into a string; *cut as escape_put says */
static char *escaped(const char *s, size_t max, unsigned int flags, bool *cut)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(escape_put(f, s, max, flags, cut), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void expect(const char *s, size_t max, unsigned int flags,
		   const char *want, bool want_cut)
{
	bool cut = !want_cut;
	char *got = escaped(s, max, flags, &cut);

	assert_string_equal(got, want);
	assert_true(strlen(got) <= max);
	assert_int_equal(cut, want_cut);
	free(got);
}

static void test_escapes(void **state)
{
	(void)state;
	expect("plain name.txt", SIZE_MAX, 0, "plain name.txt", false);
	expect("a\\b", SIZE_MAX, 0, "a\\\\b", false);
	expect("line\nbreak\ttab\x1b[2J\x7f", SIZE_MAX, 0,
	       "line\\x0abreak\\x09tab\\x1b[2J\\x7f", false);
	expect("say \"hi\"", SIZE_MAX, 0, "say \"hi\"", false);
	expect("say \"hi\"", SIZE_MAX, ESCAPE_DQUOTE, "say \\\"hi\\\"", false);
	expect("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80", SIZE_MAX, 0,
	       "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80", false);
}

/* A lead byte followed by ASCII: the ASCII is escaped on its own. */
static void test_broken_sequence_hides_no_control(void **state)
{
	(void)state;
	expect("\xe2\n\x1b", SIZE_MAX, 0, "\xe2\\x0a\\x1b", false);
	expect("\xf0\x9f\n", SIZE_MAX, 0, "\xf0\x9f\\x0a", false);
	expect("\x80\x80x", SIZE_MAX, 0, "\x80\x80x", false);
	expect("end\xe2\x82", SIZE_MAX, 0, "end\xe2\x82", false);
}

static void test_cut_at_whole_characters(void **state)
{
	(void)state;
	expect("abcdef", 6, 0, "abcdef", false);
	expect("abcdef", 4, 0, "abcd", true);
	/* "ab" + a 3-byte euro: 4 bytes of room leave it out */
	expect("ab\xe2\x82\xac", 4, 0, "ab", true);
	expect("ab\xe2\x82\xac", 5, 0, "ab\xe2\x82\xac", false);
	/* an escape is never split */
	expect("ab\ncd", 4, 0, "ab", true);
	expect("ab\ncd", 6, 0, "ab\\x0a", true);
	expect("a\\b", 2, 0, "a", true);
	expect("a\"b", 2, ESCAPE_DQUOTE, "a", true);
	expect("", 0, 0, "", false);
	expect("x", 0, 0, "", true);
}

static void test_log_quote(void **state)
{
	char buf[16];

	(void)state;
	log_quote(buf, sizeof(buf), "a\"b\\c\n");
	assert_string_equal(buf, "\"a\\\"b\\\\c\\x0a\"");
	/* too long: cut inside the quotes, still closed */
	log_quote(buf, sizeof(buf), "0123456789abcdefghij");
	assert_string_equal(buf, "\"0123456789abc\"");
	log_quote(buf, 8, "\xe2\x82\xac\xe2\x82\xac");
	assert_string_equal(buf, "\"\xe2\x82\xac\"");
	log_quote(buf, 3, "abc");
	assert_string_equal(buf, "\"\"");
}

static void test_record_escape(void **state)
{
	const char *s = "evil\nsignature=Clean\\x41\t\xc3\xa9";
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	assert_int_equal(qrecord_escape(f, s), 0);
	fclose(f);
	assert_string_equal(buf,
			    "evil\\x0asignature=Clean\\\\x41\\x09\xc3\xa9");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_broken_sequence_hides_no_control),
		cmocka_unit_test(test_cut_at_whole_characters),
		cmocka_unit_test(test_log_quote),
		cmocka_unit_test(test_record_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
