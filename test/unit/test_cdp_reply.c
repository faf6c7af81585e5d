// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's reply parser: every verdict form clamd 1.4.6
 * sends, names that try to fool it, and malformed replies that must become
 * protocol errors rather than verdicts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "clamdproto.h"

static struct cdp_result res;

static int parse(const char *s, const char *name)
{
	memset(&res, 0x5a, sizeof(res));
	return cdp_reply_parse(s, strlen(s), name, &res);
}

static void expect(const char *s, const char *name, enum cdp_verdict v,
		   enum cdp_errcat cat, const char *text)
{
	int rc = parse(s, name);

	assert_int_equal(rc, cat == CDP_ERR_PROTOCOL ? -EPROTO : 0);
	assert_int_equal(res.verdict, v);
	assert_int_equal(res.cat, cat);
	if (text)
		assert_string_equal(res.text, text);
}

static void expect_proto(const char *s, const char *name)
{
	expect(s, name, CDP_ERROR, CDP_ERR_PROTOCOL, NULL);
}

static void test_clean(void **state)
{
	expect("fd[12]: OK", "fd[]", CDP_CLEAN, CDP_ERR_NONE, "");
	expect("stream: OK", "stream", CDP_CLEAN, CDP_ERR_NONE, "");
	expect("/srv/a b: OK", "/srv/a b", CDP_CLEAN, CDP_ERR_NONE, "");
	expect("/srv/a b: OK", NULL, CDP_CLEAN, CDP_ERR_NONE, "");
}

static void test_infected(void **state)
{
	expect("fd[12]: Eicar-Test.UNOFFICIAL FOUND", "fd[]", CDP_INFECTED,
	       CDP_ERR_NONE, "Eicar-Test.UNOFFICIAL");
	expect("stream: Win.Test.EICAR_HDB-1 FOUND", "stream", CDP_INFECTED,
	       CDP_ERR_NONE, "Win.Test.EICAR_HDB-1");
	expect("/x/y: Sig FOUND", NULL, CDP_INFECTED, CDP_ERR_NONE, "Sig");
}

/* The path is echoed first; only the end of the line decides. */
static void test_hostile_names(void **state)
{
	expect("/t/x: Eicar FOUND: OK", "/t/x: Eicar FOUND", CDP_CLEAN,
	       CDP_ERR_NONE, "");
	expect("/t/x: Eicar FOUND: OK", NULL, CDP_CLEAN, CDP_ERR_NONE, "");
	expect("/t/y: OK: Real.Sig FOUND", NULL, CDP_INFECTED, CDP_ERR_NONE,
	       "Real.Sig");
	expect("/t/new\nline: OK", "/t/new\nline", CDP_CLEAN, CDP_ERR_NONE, "");
	expect("/t/new\nx: OK\nline: Sig FOUND", NULL, CDP_INFECTED,
	       CDP_ERR_NONE, "Sig");
	expect("/t/z: Permission denied. ERROR: OK", NULL, CDP_CLEAN,
	       CDP_ERR_NONE, "");
	/* A file named like clamd's own messages is still a path. */
	expect("UNKNOWN COMMAND: OK", NULL, CDP_CLEAN, CDP_ERR_NONE, "");
}

static void test_errors(void **state)
{
	expect("fd[12]: Not a regular file ERROR", "fd[]", CDP_ERROR,
	       CDP_ERR_CLAMD, "Not a regular file");
	expect("fd[12]: Can't allocate memory ERROR", NULL, CDP_ERROR,
	       CDP_ERR_CLAMD, "Can't allocate memory");
	expect("/p: File path check failure: Permission denied. ERROR", "/p",
	       CDP_ERROR, CDP_ERR_CLAMD,
	       "File path check failure: Permission denied.");
	/* Without a known name, a path stays in the message. */
	expect("/p: lstat() failed: No such file. ERROR", NULL, CDP_ERROR,
	       CDP_ERR_CLAMD, "/p: lstat() failed: No such file.");
	expect("INSTREAM size limit exceeded. ERROR", "stream", CDP_ERROR,
	       CDP_ERR_SIZE_LIMIT, "INSTREAM size limit exceeded");
	expect("UNKNOWN COMMAND", NULL, CDP_ERROR, CDP_ERR_CLAMD,
	       "UNKNOWN COMMAND");
	expect("COMMAND UNAVAILABLE", "fd[]", CDP_ERROR, CDP_ERR_CLAMD,
	       "COMMAND UNAVAILABLE");
	expect("COMMAND READ TIMED OUT", "stream", CDP_ERROR, CDP_ERR_CLAMD,
	       "COMMAND READ TIMED OUT");
	expect("Command invalid inside IDSESSION. ERROR", NULL, CDP_ERROR,
	       CDP_ERR_CLAMD, "Command invalid inside IDSESSION.");
	expect(" ERROR", NULL, CDP_ERROR, CDP_ERR_CLAMD, "ERROR");
}

static void test_malformed(void **state)
{
	expect_proto("", NULL);
	expect_proto("garbage", NULL);
	expect_proto("OK", NULL);
	expect_proto(": OK", NULL);
	expect_proto("fd[1]: OKAY", "fd[]");
	expect_proto("fd[1]: OK ", "fd[]");
	expect_proto("fd[1]: ok", "fd[]");
	expect_proto("fd[1]: FOUND", "fd[]");
	expect_proto("fd[1]:  FOUND", "fd[]");
	expect_proto("Sig FOUND", NULL);
	expect_proto("fd[1]: Sig FOUND trailing", "fd[]");
	expect_proto("fd[1]: Sig FOUNDX", "fd[]");
	expect_proto("PONG", NULL);
	expect_proto("ERROR", NULL);
	expect_proto("UNKNOWN COMMAND ", NULL);
	/* Verdicts about an object we did not ask about. */
	expect_proto("stream: OK", "fd[]");
	expect_proto("fd[1]: OK", "stream");
	expect_proto("fd[]: OK", "fd[]");
	expect_proto("fd[1x]: OK", "fd[]");
	expect_proto("fd[1]x: OK", "fd[]");
	expect_proto("xfd[1]: OK", "fd[]");
	expect_proto("streams: OK", "stream");
	expect_proto("stream: Sig FOUND", "fd[]");
	expect_proto("/a: OK", "/b");
}

static void test_nul_and_length(void **state)
{
	static char big[CDP_TEXT_MAX + 8];
	const char nul[] = "fd[1]: OK\0: Sig FOUND";

	assert_int_equal(cdp_reply_parse(nul, sizeof(nul) - 1, NULL, &res),
			 -EPROTO);
	assert_int_equal(res.verdict, CDP_ERROR);

	memset(big, 'A', sizeof(big));
	memcpy(big, "fd[1]: ", 7);
	memcpy(big + CDP_TEXT_MAX - 1 - 6, " FOUND", 6);
	/* CDP_TEXT_MAX - 1 bytes: accepted, signature kept whole. */
	assert_int_equal(cdp_reply_parse(big, CDP_TEXT_MAX - 1, "fd[]", &res),
			 0);
	assert_int_equal(res.verdict, CDP_INFECTED);
	assert_int_equal(strlen(res.text), CDP_TEXT_MAX - 1 - 7 - 6);
	/* One more byte: refused, not truncated into a verdict. */
	memcpy(big + CDP_TEXT_MAX - 6, " FOUND", 6);
	assert_int_equal(cdp_reply_parse(big, CDP_TEXT_MAX, "fd[]", &res),
			 -EPROTO);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	/* Length is honoured: the parser never reads past it. */
	assert_int_equal(cdp_reply_parse("fd[1]: OKAY", 9, "fd[]", &res), 0);
	assert_int_equal(res.verdict, CDP_CLEAN);
}

static void test_split_id(void **state)
{
	unsigned id;
	size_t rest;
	const char *s = "17: fd[3]: OK";

	assert_int_equal(cdp_reply_split_id(s, strlen(s), &id, &rest), 0);
	assert_int_equal(id, 17);
	assert_string_equal(s + rest, "fd[3]: OK");
	s = "4294967295: PONG";
	assert_int_equal(cdp_reply_split_id(s, strlen(s), &id, &rest), 0);
	assert_int_equal(id, 4294967295u);
	static const char *const bad[] = {
		"4294967296: PONG",
		"0: PONG",
		"01: PONG",
		"1:PONG",
		"1 : x",
		"-1: x",
		"+1: x",
		": x",
		"1",
		"1:",
		"x1: y",
		"",
		"99999999999999999999: x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
			cdp_reply_split_id(bad[i], strlen(bad[i]), &id, &rest),
			-EPROTO);
	/* "1: " with nothing after is a prefix; the empty rest is then a
	 * protocol error for the reply parser. */
	assert_int_equal(cdp_reply_split_id("1: ", 3, &id, &rest), 0);
	assert_int_equal(rest, 3);
}

static void test_names(void **state)
{
	assert_string_equal(cdp_errcat_name(CDP_ERR_CONNECT), "connect");
	assert_string_equal(cdp_errcat_name(CDP_ERR_TIMEOUT), "timeout");
	assert_string_equal(cdp_errcat_name(CDP_ERR_PROTOCOL), "protocol");
	assert_string_equal(cdp_errcat_name(CDP_ERR_SIZE_LIMIT), "size-limit");
	assert_string_equal(cdp_errcat_name(CDP_ERR_CLAMD), "clamd");
	assert_string_equal(cdp_errcat_name(CDP_ERR_CANCELLED), "cancelled");
	assert_string_equal(cdp_errcat_name(CDP_ERR_LOCAL), "local");
	assert_string_equal(cdp_errcat_name(CDP_ERR_NONE), "none");
	assert_string_equal(cdp_verdict_name(CDP_INFECTED), "infected");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_infected),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul_and_length),
		cmocka_unit_test(test_split_id),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
