// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's address parser: UNIX paths, tcp:// with IPv4,
 * bracketed IPv6 and host names, default port, and the malformed forms.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "clamdproto.h"

static void ok(const char *s, enum cdp_addr_kind kind, const char *host,
	       unsigned port)
{
	struct cdp_addr *a = NULL;

	assert_int_equal(cdp_addr_parse(s, &a), 0);
	assert_int_equal(cdp_addr_kind(a), kind);
	assert_string_equal(cdp_addr_host(a), host);
	assert_int_equal(cdp_addr_port(a), port);
	cdp_addr_free(a);
}

static void bad(const char *s, int err)
{
	struct cdp_addr *a = NULL;

	assert_int_equal(cdp_addr_parse(s, &a), err);
	assert_null(a);
}

static void test_unix(void **state)
{
	ok("/var/run/clamav/clamd.ctl", CDP_ADDR_UNIX,
	   "/var/run/clamav/clamd.ctl", 0);
	ok("unix:/tmp/c.sock", CDP_ADDR_UNIX, "/tmp/c.sock", 0);
	ok("rel.sock", CDP_ADDR_UNIX, "rel.sock", 0);
}

static void test_unix_length(void **state)
{
	char path[200];

	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[107] = '\0'; /* 107 bytes + NUL = sun_path */
	ok(path, CDP_ADDR_UNIX, path, 0);
	path[107] = 'a';
	path[108] = '\0';
	bad(path, -ENAMETOOLONG);
}

static void test_tcp(void **state)
{
	ok("tcp://127.0.0.1:3310", CDP_ADDR_TCP, "127.0.0.1", 3310);
	ok("tcp://localhost:1", CDP_ADDR_TCP, "localhost", 1);
	ok("tcp://clamd.example.org:65535", CDP_ADDR_TCP, "clamd.example.org",
	   65535);
	ok("tcp://[::1]:3311", CDP_ADDR_TCP, "::1", 3311);
	ok("tcp://[fe80::1%eth0]:99", CDP_ADDR_TCP, "fe80::1%eth0", 99);
	ok("tcp://10.0.0.1", CDP_ADDR_TCP, "10.0.0.1", 3310);
	ok("tcp://[::1]", CDP_ADDR_TCP, "::1", 3310);
}

static void test_tls(void **state)
{
	ok("tls://127.0.0.1:3310", CDP_ADDR_TLS, "127.0.0.1", 3310);
	ok("tls://clamd.test:443", CDP_ADDR_TLS, "clamd.test", 443);
	ok("tls://[::1]:3311", CDP_ADDR_TLS, "::1", 3311);
	ok("tls://clamd.example.org", CDP_ADDR_TLS, "clamd.example.org", 3310);
	bad("tls://", -EINVAL);
	bad("tls://:3310", -EINVAL);
	bad("tls://host:0", -EINVAL);
	bad("tls://host:65536", -EINVAL);
	bad("tls://::1:3310", -EINVAL);
	bad("tls://[::1]3310", -EINVAL);
	bad("tls://host/x:1", -EINVAL);
	bad("TLS://host:1", -EINVAL);
	bad("ssl://host:1", -EINVAL);
	bad("unix:tls://host:1", -EINVAL);
}

/* A tls:// address is never accepted without a CA to verify against. */
static void test_tls_config(void **state)
{
	struct cdp_config cfg;
	struct cdp_pool *pool = NULL;
	char err[256] = "";

	cdp_config_init(&cfg);
	cfg.addr = "tls://clamd.test:3310";
	assert_int_equal(cdp_config_check(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "clamd_tls_ca"));
	assert_int_equal(cdp_pool_new(&cfg, &pool), -EINVAL);
	assert_null(pool);
	cfg.tls_ca = "";
	assert_int_equal(cdp_config_check(&cfg, err, sizeof(err)), -EINVAL);
	cfg.tls_ca = "/nonexistent/ca.pem";
	assert_int_equal(cdp_config_check(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/nonexistent/ca.pem"));
	assert_int_equal(cdp_pool_new(&cfg, &pool), -EINVAL);
	assert_null(pool);
	/* TLS settings do not concern other addresses */
	cfg.addr = "tcp://127.0.0.1:3310";
	assert_int_equal(cdp_config_check(&cfg, err, sizeof(err)), 0);
	cfg.addr = "tls://bad:0";
	assert_int_equal(cdp_config_check(&cfg, err, sizeof(err)), -EINVAL);
}

static void test_malformed(void **state)
{
	bad("", -EINVAL);
	bad(NULL, -EINVAL);
	bad("unix:", -EINVAL);
	bad("tcp://", -EINVAL);
	bad("tcp://:3310", -EINVAL);
	bad("tcp://host:", -EINVAL);
	bad("tcp://host:0", -EINVAL);
	bad("tcp://host:65536", -EINVAL);
	bad("tcp://host:99999999999999999999", -EINVAL);
	bad("tcp://host:33a", -EINVAL);
	bad("tcp://host:-1", -EINVAL);
	bad("tcp://::1:3310", -EINVAL); /* IPv6 needs brackets */
	bad("tcp://[::1", -EINVAL);
	bad("tcp://[]:3310", -EINVAL);
	bad("tcp://[::1]3310", -EINVAL);
	bad("tcp://[::1]:", -EINVAL);
	bad("tcp://host/path:1", -EINVAL);
	bad("udp://host:1", -EINVAL);
	bad("http://host:1", -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix),
		cmocka_unit_test(test_unix_length),
		cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_tls_config),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
