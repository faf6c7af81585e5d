// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The clamd address rules the daemon and --check share: absolute socket
 * paths (also as unix:/path) and tcp://HOST:PORT pass, relative paths do
 * not (the daemon runs from "/"), and fdpass needs a UNIX socket.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "optable.h"
#include "poolcfg.h"

static int check(const char *clamd, const char *scan_mode, enum scan_mode *mode,
		 char *err, size_t errlen)
{
	struct clamfs_opts o;
	char arg[256];
	int ret;

	assert_int_equal(optable_defaults(&o), 0);
	snprintf(arg, sizeof(arg), "clamd=%s", clamd);
	assert_int_equal(
		optable_set(&o, optable_find("clamd"), clamd, arg, err, errlen),
		0);
	if (scan_mode) {
		snprintf(arg, sizeof(arg), "scan_mode=%s", scan_mode);
		assert_int_equal(optable_set(&o, optable_find("scan_mode"),
					     scan_mode, arg, err, errlen),
				 0);
	}
	ret = poolcfg_check(&o, mode, err, errlen);
	opts_free(&o);
	return ret;
}

static void test_accepted_addresses(void **state)
{
	enum scan_mode mode;
	char err[256];

	assert_int_equal(check("/run/clamd.ctl", NULL, &mode, err, sizeof(err)),
			 0);
	assert_int_equal(mode, SCAN_MODE_FDPASS);
	/* the form clamdproto.h documents */
	assert_int_equal(
		check("unix:/run/clamd.ctl", NULL, &mode, err, sizeof(err)), 0);
	assert_int_equal(mode, SCAN_MODE_FDPASS);
	assert_int_equal(
		check("tcp://127.0.0.1:3310", NULL, &mode, err, sizeof(err)),
		0);
	assert_int_equal(mode, SCAN_MODE_STREAM);
	assert_int_equal(
		check("unix:/run/clamd.ctl", "path", &mode, err, sizeof(err)),
		0);
	assert_int_equal(mode, SCAN_MODE_PATH);
	(void)state;
}

static void test_refused_addresses(void **state)
{
	enum scan_mode mode;
	char err[256];

	assert_int_equal(check("rel.sock", NULL, &mode, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "clamd=rel.sock: want an absolute socket "
				 "path or tcp://HOST:PORT");
	assert_int_equal(check("unix:rel.sock", NULL, &mode, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(
		check("http://clamd:3310", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(check("tcp://127.0.0.1:3310", "fdpass", &mode, err,
			       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "fdpass needs clamd on a UNIX socket"));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted_addresses),
		cmocka_unit_test(test_refused_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
