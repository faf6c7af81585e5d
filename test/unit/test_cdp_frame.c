// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's reply framer: replies split across reads at
 * every byte, several replies in one read, the size bound, and the
 * unterminated rest at EOF.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static void feed(struct cdp_rbuf *rb, const char *p, size_t n)
{
	size_t space;
	char *dst = cdp_rbuf_space(rb, &space);

	assert_true(n <= space);
	memcpy(dst, p, n);
	cdp_rbuf_added(rb, n);
}

/* Every split point of a two-reply stream yields the same two replies. */
static void test_split_everywhere(void **state)
{
	static const char stream[] = "1: fd[3]: OK\0002: stream: X FOUND";
	size_t total = sizeof(stream); /* includes the final NUL */

	for (size_t cut = 0; cut <= total; cut++) {
		struct cdp_rbuf rb;
		const char *line;
		size_t len;
		int got = 0;

		assert_int_equal(cdp_rbuf_init(&rb, 64), 0);
		feed(&rb, stream, cut);
		while (cdp_rbuf_take(&rb, 64, &line, &len) == 1)
			got++;
		feed(&rb, stream + cut, total - cut);
		while (cdp_rbuf_take(&rb, 64, &line, &len) == 1) {
			got++;
			if (got == 1)
				assert_string_equal(line, "1: fd[3]: OK");
		}
		assert_int_equal(got, 2);
		assert_string_equal(line, "2: stream: X FOUND");
		assert_int_equal(len, strlen("2: stream: X FOUND"));
		assert_int_equal(cdp_rbuf_pending(&rb), 0);
		cdp_rbuf_free(&rb);
	}
}

static void test_byte_by_byte(void **state)
{
	static const char msg[] = "stream: Eicar-Test.UNOFFICIAL FOUND";
	struct cdp_rbuf rb;
	const char *line;
	size_t len, i;

	assert_int_equal(cdp_rbuf_init(&rb, 64), 0);
	for (i = 0; i < sizeof(msg) - 1; i++) {
		feed(&rb, msg + i, 1);
		assert_int_equal(cdp_rbuf_take(&rb, 64, &line, &len), 0);
	}
	feed(&rb, "", 1);
	assert_int_equal(cdp_rbuf_take(&rb, 64, &line, &len), 1);
	assert_string_equal(line, msg);
	cdp_rbuf_free(&rb);
}

static void test_bound(void **state)
{
	char junk[100];
	struct cdp_rbuf rb;
	const char *line;
	size_t len;

	memset(junk, 'A', sizeof(junk));
	assert_int_equal(cdp_rbuf_init(&rb, 256), 0);
	feed(&rb, junk, 15);
	assert_int_equal(cdp_rbuf_take(&rb, 16, &line, &len), 0);
	feed(&rb, junk, 1);
	/* 16 bytes, no terminator, limit 16: refused. */
	assert_int_equal(cdp_rbuf_take(&rb, 16, &line, &len), -EMSGSIZE);
	cdp_rbuf_clear(&rb);
	/* 15 bytes + NUL fits a limit of 16. */
	feed(&rb, junk, 15);
	feed(&rb, "", 1);
	assert_int_equal(cdp_rbuf_take(&rb, 16, &line, &len), 1);
	assert_int_equal(len, 15);
	cdp_rbuf_clear(&rb);
	/* A terminator beyond the limit does not count. */
	feed(&rb, junk, 20);
	feed(&rb, "", 1);
	assert_int_equal(cdp_rbuf_take(&rb, 16, &line, &len), -EMSGSIZE);
	cdp_rbuf_free(&rb);
}

static void test_rest_at_eof(void **state)
{
	struct cdp_rbuf rb;
	const char *line, *rest;
	size_t len;

	assert_int_equal(cdp_rbuf_init(&rb, 32), 0);
	assert_null(cdp_rbuf_rest(&rb, &len));
	feed(&rb, "COMMAND READ TIMED OUT\n", 23);
	assert_int_equal(cdp_rbuf_take(&rb, 32, &line, &len), 0);
	rest = cdp_rbuf_rest(&rb, &len);
	assert_non_null(rest);
	assert_string_equal(rest, "COMMAND READ TIMED OUT");
	assert_int_equal(len, 22);
	assert_null(cdp_rbuf_rest(&rb, &len));
	/* A completely full buffer can still be terminated. */
	cdp_rbuf_clear(&rb);
	{
		char full[32];

		memset(full, 'B', sizeof(full));
		feed(&rb, full, sizeof(full));
		rest = cdp_rbuf_rest(&rb, &len);
		assert_int_equal(len, 32);
		assert_int_equal(rest[32], '\0');
	}
	cdp_rbuf_free(&rb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_everywhere),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_rest_at_eof),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
