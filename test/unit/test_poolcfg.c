// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The clamd address rules the daemon and --check share: absolute socket
 * paths (also as unix:/path) and tcp://HOST:PORT pass, relative paths do
 * not (the daemon runs from "/"), fdpass needs a UNIX socket, tls:// needs
 * a CA, and plain TCP to another host is told apart for a warning.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
				 "path, tcp://HOST:PORT or tls://HOST:PORT");
	assert_int_equal(check("unix:rel.sock", NULL, &mode, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(
		check("http://clamd:3310", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(check("tcp://127.0.0.1:3310", "fdpass", &mode, err,
			       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "fdpass needs clamd on a UNIX socket"));
	/* tls:// with no CA would verify nothing: refused */
	assert_int_equal(
		check("tls://127.0.0.1:3310", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "needs clamd_tls_ca"));
	assert_int_equal(check("tls://127.0.0.1:3310", "fdpass", &mode, err,
			       sizeof(err)),
			 -EINVAL);
	(void)state;
}

static struct clamfs_opts *with_clamd(struct clamfs_opts *o, const char *clamd)
{
	char arg[256], err[256];

	assert_int_equal(optable_defaults(o), 0);
	snprintf(arg, sizeof(arg), "clamd=%s", clamd);
	assert_int_equal(optable_set(o, optable_find("clamd"), clamd, arg, err,
				     sizeof(err)),
			 0);
	return o;
}

/* Which addresses earn the plain-TCP warning: TCP to another host only. */
static void test_plaintext_remote(void **state)
{
	static const struct {
		const char *clamd;
		bool remote;
	} cases[] = {
		{"/run/clamd.ctl", false},
		{"tcp://127.0.0.1:3310", false},
		{"tcp://127.3.4.5:3310", false},
		{"tcp://[::1]:3310", false},
		{"tcp://localhost:3310", false},
		{"tcp://10.1.2.3:3310", true},
		{"tcp://192.0.2.7:3310", true},
		{"tcp://[2001:db8::1]:3310", true},
		{"tls://10.1.2.3:3310", false},
	};
	struct clamfs_opts o;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		with_clamd(&o, cases[i].clamd);
		if (poolcfg_plaintext_remote(&o) != cases[i].remote)
			fail_msg("%s: remote should be %d", cases[i].clamd,
				 cases[i].remote);
		opts_free(&o);
	}
	(void)state;
}

/* Several clamd= lines from one source make a fleet. */
static int check_lines(const char *const *lines, size_t n, enum scan_mode *mode,
		       char *err, size_t errlen)
{
	struct clamfs_opts o;
	char arg[256];
	int ret;

	assert_int_equal(optable_defaults(&o), 0);
	for (size_t i = 0; i < n; i++) {
		snprintf(arg, sizeof(arg), "clamd=%s", lines[i]);
		assert_int_equal(optable_set(&o, optable_find("clamd"),
					     lines[i], arg, err, errlen),
				 0);
	}
	ret = poolcfg_check(&o, mode, err, errlen);
	opts_free(&o);
	return ret;
}

static void test_fleet_lines(void **state)
{
	static const char *const mixed[] = {
		"/run/clamd.ctl weight=2",
		"tcp://10.0.0.2:3310 weight=3 conns=4",
		"tcp://[::1]:3310\tconns=1",
	};
	static const char *const unix_only[] = {"/run/a.ctl", "/run/b.ctl"};
	static const char *const twice[] = {"/run/a.ctl", "/run/a.ctl"};
	enum scan_mode mode;
	char err[256];

	(void)state;
	assert_int_equal(check_lines(mixed, 3, &mode, err, sizeof(err)), 0);
	/* a mixed fleet streams; its UNIX backend still gets fdpass */
	assert_int_equal(mode, SCAN_MODE_STREAM);
	assert_int_equal(check_lines(unix_only, 2, &mode, err, sizeof(err)), 0);
	assert_int_equal(mode, SCAN_MODE_FDPASS);
	assert_int_equal(check_lines(twice, 2, &mode, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "clamd=/run/a.ctl given twice");
	assert_int_equal(
		check("/run/a.ctl weight=0", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_string_equal(err, "clamd=/run/a.ctl weight=0: bad 'weight=0': "
				 "want 1 to 1000");
	assert_int_equal(
		check("/run/a.ctl conns=257", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(
		check("/run/a.ctl conns=2x", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(
		check("/run/a.ctl speed=9", NULL, &mode, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "unknown 'speed=9'"));
	/* fdpass given: every backend must be a UNIX socket */
	assert_int_equal(
		check("tcp://h:1 weight=2", "fdpass", &mode, err, sizeof(err)),
		-EINVAL);
}

/* opts with a clamd= line for each of addrs and clamd_tls_ca=ca */
static void tls_opts(struct clamfs_opts *o, const char *const *addrs, size_t n,
		     const char *ca)
{
	char arg[512], err[256];

	assert_int_equal(optable_defaults(o), 0);
	for (size_t i = 0; i < n; i++) {
		snprintf(arg, sizeof(arg), "clamd=%s", addrs[i]);
		assert_int_equal(optable_set(o, optable_find("clamd"), addrs[i],
					     arg, err, sizeof(err)),
				 0);
	}
	snprintf(arg, sizeof(arg), "clamd_tls_ca=%s", ca);
	assert_int_equal(optable_set(o, optable_find("clamd_tls_ca"), ca, arg,
				     err, sizeof(err)),
			 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int closed;

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	/* apart: cppcheck takes the macro's f for used after fclose */
	closed = fclose(f);
	assert_int_equal(closed, 0);
}

static void test_tls_stamp(void **state)
{
	static const char *const plain[] = {"tcp://127.0.0.1:3310"};
	static const char *const fleet[] = {"/run/a.ctl",
					    "tls://127.0.0.1:3311"};
	char dir[] = "/tmp/cfstampXXXXXX", ca[64], tmp[64], changes[256] = "";
	struct poolcfg_tls_stamp before, after, none;
	struct clamfs_opts o;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(tmp, sizeof(tmp), "%s/ca.new", dir);
	write_file(ca, "first CA\n");
	/* no tls:// backend: nothing of the files matters */
	tls_opts(&o, plain, 1, ca);
	poolcfg_tls_stamp(&o, &none);
	assert_int_equal(none.file[0], 0);
	opts_free(&o);

	tls_opts(&o, fleet, 2, ca);
	poolcfg_tls_stamp(&o, &before);
	assert_int_not_equal(before.file[0], 0);
	assert_int_equal(before.file[1], 0); /* no client certificate */
	poolcfg_tls_stamp(&o, &after);
	assert_false(poolcfg_tls_describe(&before, &after, changes,
					  sizeof(changes)));
	assert_string_equal(changes, "");
	/* replaced by rename under the same name, with the same size */
	write_file(tmp, "other CA\n");
	assert_int_equal(rename(tmp, ca), 0);
	poolcfg_tls_stamp(&o, &after);
	assert_true(poolcfg_tls_describe(&before, &after, changes,
					 sizeof(changes)));
	assert_string_equal(changes, "clamd_tls_ca file replaced");
	/* gone: differs again, and a reload then fails on loading it */
	before = after;
	assert_int_equal(unlink(ca), 0);
	poolcfg_tls_stamp(&o, &after);
	assert_int_not_equal(before.file[0], after.file[0]);
	opts_free(&o);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted_addresses),
		cmocka_unit_test(test_refused_addresses),
		cmocka_unit_test(test_fleet_lines),
		cmocka_unit_test(test_plaintext_remote),
		cmocka_unit_test(test_tls_stamp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
