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
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "let_time_pass.h"

#include "clamdproto.h"
#include "internal.h"

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

/*
 * A clamd whose listen backlog is full (MaxConnectionQueueLength): a UNIX
 * socket has no connect in progress, connect() says EAGAIN and the socket
 * stays unconnected. It must be tried again until the deadline, never be
 * taken for a connection (the first send would fail, and a fleet would
 * eject a clamd that is only busy).
 */
struct full_listener {
	char dir[64];
	char path[128];
	int lfd;
	int queued[64];
	int nqueued;
	struct cdp_addr *addr;
};

static void full_listener_open(struct full_listener *fl)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char spec[160];

	strcpy(fl->dir, "/tmp/cdpaddrXXXXXX");
	assert_non_null(mkdtemp(fl->dir));
	snprintf(fl->path, sizeof(fl->path), "%s/s", fl->dir);
	strcpy(sun.sun_path, fl->path);
	fl->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fl->lfd >= 0);
	assert_int_equal(bind(fl->lfd, (struct sockaddr *)&sun, sizeof(sun)),
			 0);
	assert_int_equal(listen(fl->lfd, 0), 0);
	/* fill the backlog: connect until the kernel says EAGAIN */
	for (fl->nqueued = 0; fl->nqueued < 64; fl->nqueued++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
			assert_int_equal(errno, EAGAIN);
			close(fd);
			break;
		}
		fl->queued[fl->nqueued] = fd;
	}
	assert_true(fl->nqueued < 64);
	snprintf(spec, sizeof(spec), "unix:%s", fl->path);
	assert_int_equal(cdp_addr_parse(spec, &fl->addr), 0);
}

static void full_listener_close(struct full_listener *fl)
{
	for (int i = 0; i < fl->nqueued; i++)
		close(fl->queued[i]);
	close(fl->lfd);
	cdp_addr_free(fl->addr);
	unlink(fl->path);
	rmdir(fl->dir);
}

static void test_unix_backlog_full_waits_for_deadline(void **state)
{
	struct full_listener fl;
	int64_t start;
	int fd;

	(void)state;
	full_listener_open(&fl);
	start = cdp_now_ms();
	fd = cdp_addr_connect(fl.addr, cdp_deadline(300), NULL);
	assert_int_equal(fd, -ETIMEDOUT);
	assert_true(cdp_now_ms() - start >= 290);
	full_listener_close(&fl);
}

/* The connect under test, and the thread that makes room for it. */
struct later {
	struct full_listener *fl;
	atomic_bool connecting; /* the connect is under way ... */
	atomic_bool returned;	/* ... and has come back */
	bool early;		/* it came back before there was room */
	bool never;		/* the connect never began (5 s) */
};

static void *accept_later(void *arg)
{
	struct later *l = arg;
	int64_t end = cdp_now_ms() + 5000;
	const struct timespec slice = {.tv_nsec = 1000 * 1000};
	int fd;

	while (!atomic_load(&l->connecting)) {
		if (cdp_now_ms() > end) {
			l->never = true;
			break;
		}
		nanosleep(&slice, NULL);
	}
	/* nothing is to happen: with no room, the connect tries again */
	let_time_pass(100, "the connect must not come back while the backlog "
			   "is full");
	l->early = atomic_load(&l->returned);
	fd = accept(l->fl->lfd, NULL, NULL);
	return (void *)(intptr_t)fd;
}

static void test_unix_backlog_full_connects_once_room(void **state)
{
	struct full_listener fl;
	struct later l = {.fl = &fl};
	pthread_t t;
	void *accepted;
	int fd;

	(void)state;
	full_listener_open(&fl);
	assert_int_equal(pthread_create(&t, NULL, accept_later, &l), 0);
	atomic_store(&l.connecting, true);
	fd = cdp_addr_connect(fl.addr, cdp_deadline(5000), NULL);
	atomic_store(&l.returned, true);
	pthread_join(t, &accepted);
	assert_false(l.never);
	assert_false(l.early);
	assert_true(fd >= 0);
	/* really connected: the peer is there */
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	close((int)(intptr_t)accepted);
	full_listener_close(&fl);
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
		cmocka_unit_test(test_unix_backlog_full_waits_for_deadline),
		cmocka_unit_test(test_unix_backlog_full_connects_once_room),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
