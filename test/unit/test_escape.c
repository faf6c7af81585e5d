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
#include <wchar.h>
#include <locale.h>

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
	int closed;

	assert_non_null(f);
	assert_int_equal(escape_put(f, s, max, flags, cut), 0);
	/* apart: cppcheck takes the macro's f for used after fclose */
	closed = fclose(f);
	assert_int_equal(closed, 0);
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

/* Bytes of no well-formed character are escaped one by one. */
static void test_broken_sequence_hides_no_control(void **state)
{
	(void)state;
	expect("\xe2\n\x1b", SIZE_MAX, 0, "\\xe2\\x0a\\x1b", false);
	expect("\xf0\x9f\n", SIZE_MAX, 0, "\\xf0\\x9f\\x0a", false);
	expect("\x80\x80x", SIZE_MAX, 0, "\\x80\\x80x", false);
	expect("end\xe2\x82", SIZE_MAX, 0, "end\\xe2\\x82", false);
	/* overlong, surrogate, past U+10FFFF, Latin-1: byte by byte */
	expect("\xc0\x9b\xed\xa0\x80\xf4\x90\x80\x80\xe9", SIZE_MAX, 0,
	       "\\xc0\\x9b\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xe9", false);
}

/* C1 controls: 0x9b is CSI to an 8-bit terminal, c2 9b to some others */
static void test_c1_controls(void **state)
{
	(void)state;
	expect("\x9b[2J", SIZE_MAX, 0, "\\x9b[2J", false);
	expect("\xc2\x9b[2J", SIZE_MAX, 0, "\\xc2\\x9b[2J", false);
	expect("\xc2\x85", SIZE_MAX, 0, "\\xc2\\x85", false);
	/* c2 a0 (no-break space) and e2 82 ac (euro) are characters */
	expect("\xc2\xa0\xe2\x82\xac", SIZE_MAX, 0, "\xc2\xa0\xe2\x82\xac",
	       false);
}

/*
 * Every pair and many triples of bytes: what comes out is printable ASCII
 * or well-formed UTF-8 of no control character, judged by the C library's
 * own decoder.
 */
static void check_output(const char *in)
{
	char *out = escaped(in, SIZE_MAX, 0, NULL);
	const char *p = out, *end = out + strlen(out);
	mbstate_t st;

	while (p < end) {
		wchar_t wc;
		size_t n;

		memset(&st, 0, sizeof(st));
		n = mbrtowc(&wc, p, (size_t)(end - p), &st);
		assert_true(n != (size_t)-1 && n != (size_t)-2 && n > 0);
		assert_false(wc < 0x20 || (wc >= 0x7f && wc < 0xa0));
		p += n;
	}
	free(out);
}

static void test_no_control_passes(void **state)
{
	(void)state;
	assert_non_null(setlocale(LC_CTYPE, "C.UTF-8"));
	for (int a = 1; a < 256; a++) {
		for (int b = 0; b < 256; b++) {
			char in[4] = {(char)a, (char)b, '\0', '\0'};

			check_output(in);
			if (a >= 0xe0 && b >= 0x80) {
				for (int c = 1; c < 256; c += 7) {
					in[2] = (char)c;
					check_output(in);
				}
			}
		}
	}
	setlocale(LC_CTYPE, "C");
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
		cmocka_unit_test(test_c1_controls),
		cmocka_unit_test(test_no_control_passes),
		cmocka_unit_test(test_cut_at_whole_characters),
		cmocka_unit_test(test_log_quote),
		cmocka_unit_test(test_record_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
