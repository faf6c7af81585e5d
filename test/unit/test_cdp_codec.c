// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The command codec (command.c) and one connection's I/O (conn.c) against
 * a fake clamd on the other end of a socketpair: what goes on the wire for
 * each command, and what each reply, short reply, early hang-up or dead
 * session comes out as. The fake runs a script on a thread; the test
 * joins it and then checks what it saw.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

#define NUL_STR(s) (s), sizeof(s) /* a literal with its NUL */

struct fake {
	int fd;				/* the fake's end */
	void (*script)(struct fake *f); /* what it does */
	const void *arg;		/* the script's parameter */
	bool ok;			/* the script saw what it expected */
	int passed_fd;			/* FILDES: what came, -1 if none */
	char *stream;			/* INSTREAM: the bytes received */
	size_t stream_len;
	struct cdp_cancel *cancel; /* triggered by the script, if set */
	pthread_t thread;
};

/* Reads exactly len bytes; false on EOF or error. */
static bool read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

static bool expect_bytes(struct fake *f, const char *want, size_t len)
{
	char buf[256];

	/* no cmocka assertion here: this runs on the fake's thread */
	return len <= sizeof(buf) && read_full(f->fd, buf, len) &&
	       memcmp(buf, want, len) == 0;
}

static void answer(struct fake *f, const char *reply, size_t len)
{
	if (send(f->fd, reply, len, MSG_NOSIGNAL) != (ssize_t)len)
		f->ok = false;
}

/* The byte FILDES sends with its descriptor; the descriptor kept. */
static bool receive_fd(struct fake *f)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl,
			     .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;

	if (recvmsg(f->fd, &msg, 0) != 1)
		return false;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return false;
	memcpy(&f->passed_fd, CMSG_DATA(c), sizeof(int));
	return true;
}

/* INSTREAM chunks up to the empty one, or up to max bytes. */
static bool receive_stream(struct fake *f, size_t max)
{
	for (;;) {
		uint32_t be;
		size_t n;

		if (!read_full(f->fd, &be, 4))
			return false;
		n = ntohl(be);
		if (n == 0)
			return true;
		f->stream = realloc(f->stream, f->stream_len + n);
		if (!f->stream ||
		    !read_full(f->fd, f->stream + f->stream_len, n))
			return false;
		f->stream_len += n;
		if (f->stream_len >= max)
			return true;
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	f->ok = true;
	f->script(f);
	close(f->fd);
	return NULL;
}

/* A connection to a fake running script; *f is the fake's state. */
static struct cdp_conn *connect_fake(struct fake *f,
				     void (*script)(struct fake *f),
				     const void *arg, struct cdp_cancel *cancel)
{
	struct cdp_conn *conn = NULL;
	char why[256];
	int sv[2];

	memset(f, 0, sizeof(*f));
	f->passed_fd = -1;
	f->script = script;
	f->arg = arg;
	f->cancel = cancel;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	f->fd = sv[1];
	assert_int_equal(cdp_conn_adopt(sv[0], true, NULL, NULL,
					cdp_deadline(5000), NULL, &conn, why,
					sizeof(why)),
			 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	return conn;
}

static void join_fake(struct fake *f)
{
	pthread_join(f->thread, NULL);
	if (f->passed_fd >= 0)
		close(f->passed_fd);
	free(f->stream);
}

static const struct cdp_cmd_env env = {
	.io_timeout_ms = 5000,
	.chunk_size = 8,
	.shown = "fake",
};

/*
 * Runs cmd on a fresh connection to a fake, which must see what its
 * script expects; returns cdp_cmd_run's.
 */
static int run_fake(struct fake *f, void (*script)(struct fake *f),
		    const void *arg, const struct cdp_cmd *cmd, bool session,
		    bool reused, struct cdp_result *res)
{
	struct cdp_conn *conn = connect_fake(f, script, arg, NULL);
	int ret;

	conn->session = session;
	memset(res, 0, sizeof(*res));
	ret = cdp_cmd_run(&env, conn, reused, cmd, cdp_deadline(5000), NULL,
			  res);
	cdp_conn_close(conn);
	join_fake(f);
	/* every script here ends as it should: it saw what it expected */
	assert_true(f->ok);
	return ret;
}

/* --- scripts --- */

static void ping_answers(struct fake *f)
{
	const char *reply = f->arg;

	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
	answer(f, reply, strlen(reply) + 1);
}

static void fildes_answers(struct fake *f)
{
	const char *reply = f->arg;

	if (!expect_bytes(f, NUL_STR("zFILDES")) || !receive_fd(f))
		f->ok = false;
	answer(f, reply, strlen(reply) + 1);
}

static void instream_answers(struct fake *f)
{
	const char *reply = f->arg;

	if (!expect_bytes(f, NUL_STR("zINSTREAM")) ||
	    !receive_stream(f, SIZE_MAX))
		f->ok = false;
	answer(f, reply, strlen(reply) + 1);
}

/* Stops reading after the first chunk, says why, hangs up. */
static void instream_limit(struct fake *f)
{
	const char *reply = f->arg;

	if (!expect_bytes(f, NUL_STR("zINSTREAM")) || !receive_stream(f, 1))
		f->ok = false;
	answer(f, reply, strlen(reply) + 1);
	shutdown(f->fd, SHUT_RDWR);
}

static void version_answers(struct fake *f)
{
	const char *reply = f->arg;

	if (!expect_bytes(f, NUL_STR("zVERSION")))
		f->ok = false;
	answer(f, reply, strlen(reply) + 1);
}

/* Replies without the terminating NUL, then hangs up. */
static void ping_cut_short(struct fake *f)
{
	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
	answer(f, "PON", 3);
}

/*
 * Hangs up on the command without a byte of reply, the rest of it unread:
 * the kernel then resets the connection (a unix socket closed with data
 * in it), as clamd's idle timeout closing a session we just wrote to.
 */
static void hang_up(struct fake *f)
{
	char c;

	if (read(f->fd, &c, 1) != 1)
		f->ok = false;
}

/* clamd's idle timeout met our command: its words, unterminated, EOF. */
static void session_timed_out(struct fake *f)
{
	static const char words[] = "COMMAND READ TIMED OUT\n";

	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
	answer(f, words, sizeof(words) - 1);
}

/* Reads the whole command, then hangs up: EOF, no reset. */
static void hang_up_after_reading(struct fake *f)
{
	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
}

static void scan_lines(struct fake *f)
{
	static const char reply[] = "/x/a: OK\0/x/b: Sig.One FOUND\0"
				    "/x/c: lstat() failed. ERROR\0";

	if (!expect_bytes(f, NUL_STR("zSCAN /x")))
		f->ok = false;
	answer(f, reply, sizeof(reply) - 1);
}

static void stats_too_long(struct fake *f)
{
	size_t len = CDP_STATS_MAX + 100;
	char *big = malloc(len);

	if (!expect_bytes(f, NUL_STR("zSTATS")) || !big) {
		f->ok = false;
		free(big);
		return;
	}
	memset(big, 'x', len);
	answer(f, big, len);
	free(big);
}

/* Receives the command, then cancels the caller and stays silent. */
static void cancel_when_asked(struct fake *f)
{
	char c;

	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
	cdp_cancel_trigger(f->cancel);
	/* until the canceled caller hangs up */
	while (read(f->fd, &c, 1) > 0)
		;
}

/* Answers "PONG" one byte per write: the reader reassembles it. */
static void ping_byte_by_byte(struct fake *f)
{
	static const char reply[] = "PONG";

	if (!expect_bytes(f, NUL_STR("zPING")))
		f->ok = false;
	for (size_t i = 0; i < sizeof(reply); i++) {
		answer(f, reply + i, 1);
		sched_yield();
	}
}

/* Takes a large buffer in small reads, then echoes its length. */
static void slow_reader(struct fake *f)
{
	size_t want = *(const size_t *)f->arg, got = 0;
	char buf[1000];

	while (got < want) {
		ssize_t n = read(f->fd, buf, sizeof(buf));

		if (n <= 0) {
			f->ok = false;
			return;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != (char)((got + (size_t)i) % 251))
				f->ok = false;
		got += (size_t)n;
	}
	answer(f, NUL_STR("done"));
}

/* Writes once to an idle session, then waits for zEND. */
static void idle_then_goodbye(struct fake *f)
{
	answer(f, NUL_STR("unasked"));
	if (!expect_bytes(f, NUL_STR("zEND")))
		f->ok = false;
}

/* --- cases --- */

static void test_ping(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_PING};
	struct cdp_result res;
	struct fake f;

	assert_int_equal(
		run_fake(&f, ping_answers, "PONG", &cmd, false, false, &res),
		0);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_CLEAN);
	assert_string_equal(res.text, "PONG");

	assert_int_equal(
		run_fake(&f, ping_answers, "PANG", &cmd, false, false, &res),
		0);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	(void)state;
}

static void test_fildes_passes_the_descriptor(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_FILDES};
	struct cdp_result res;
	struct stat want, got;
	struct fake f;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &want), 0);
	cmd.fd = fd;
	assert_int_equal(run_fake(&f, fildes_answers, "fd[9]: Sig.Test FOUND",
				  &cmd, false, false, &res),
			 0);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_INFECTED);
	assert_string_equal(res.text, "Sig.Test");

	assert_int_equal(run_fake(&f, fildes_answers, "fd[9]: OK", &cmd, false,
				  false, &res),
			 0);
	assert_int_equal(res.verdict, CDP_CLEAN);
	/* the same file came across, not a name */
	{
		struct cdp_conn *conn =
			connect_fake(&f, fildes_answers, "fd[9]: OK", NULL);

		assert_int_equal(cdp_cmd_run(&env, conn, false, &cmd,
					     cdp_deadline(5000), NULL, &res),
				 0);
		cdp_conn_close(conn);
		pthread_join(f.thread, NULL);
		assert_true(f.passed_fd >= 0);
		assert_int_equal(fstat(f.passed_fd, &got), 0);
		assert_true(got.st_ino == want.st_ino &&
			    got.st_dev == want.st_dev);
		close(f.passed_fd);
	}
	close(fd);
	(void)state;
}

static void test_instream_chunks_and_terminator(void **state)
{
	static const char data[] = "twenty-nine bytes of content";
	struct cdp_cmd cmd = {.kind = CDP_CMD_INSTREAM_BUF,
			      .buf = data,
			      .len = sizeof(data) - 1};
	struct cdp_result res;
	struct fake f;
	struct cdp_conn *conn =
		connect_fake(&f, instream_answers, "stream: OK", NULL);

	assert_int_equal(cdp_cmd_run(&env, conn, false, &cmd,
				     cdp_deadline(5000), NULL, &res),
			 0);
	cdp_conn_close(conn);
	pthread_join(f.thread, NULL);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_CLEAN);
	assert_int_equal(f.stream_len, sizeof(data) - 1);
	assert_memory_equal(f.stream, data, sizeof(data) - 1);
	free(f.stream);
	(void)state;
}

/* clamd's size limit: it stops reading, says so, hangs up mid-stream. */
static void test_instream_size_limit(void **state)
{
	size_t len = 4 << 20;
	char *data = calloc(1, len);
	struct cdp_cmd cmd = {.kind = CDP_CMD_INSTREAM_BUF, .len = len};
	struct cdp_result res;
	struct fake f;

	assert_non_null(data);
	cmd.buf = data;
	run_fake(&f, instream_limit, "INSTREAM size limit exceeded. ERROR",
		 &cmd, false, false, &res);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_SIZE_LIMIT);

	/* an OK for a stream clamd did not take in full is not trusted */
	run_fake(&f, instream_limit, "stream: OK", &cmd, false, false, &res);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	free(data);
	(void)state;
}

static void test_session_numbers(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_PING};
	struct cdp_result res;
	struct fake f;

	assert_int_equal(
		run_fake(&f, ping_answers, "1: PONG", &cmd, true, false, &res),
		0);
	assert_int_equal(res.verdict, CDP_CLEAN);
	assert_int_equal(
		run_fake(&f, ping_answers, "2: PONG", &cmd, true, false, &res),
		0);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	assert_int_equal(res.err, EPROTO);
	assert_non_null(strstr(res.text, "expected 1"));
	(void)state;
}

/* A reused session clamd had closed: -ESTALE, so the caller retries. */
static void test_dead_reused_session(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_PING};
	struct cdp_result res;
	struct fake f;

	assert_int_equal(run_fake(&f, hang_up, NULL, &cmd, true, true, &res),
			 -ESTALE);
	assert_int_equal(res.cat, CDP_ERR_CONNECT);
	assert_int_equal(run_fake(&f, hang_up_after_reading, NULL, &cmd, true,
				  true, &res),
			 -ESTALE);
	assert_true(f.ok);
	assert_int_equal(res.cat, CDP_ERR_CONNECT);
	assert_int_equal(
		run_fake(&f, session_timed_out, NULL, &cmd, true, true, &res),
		-ESTALE);
	assert_int_equal(res.cat, CDP_ERR_CONNECT);
	/* the same on a fresh connection is clamd's error, no retry */
	assert_int_equal(run_fake(&f, hang_up, NULL, &cmd, true, false, &res),
			 0);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.err, ECONNRESET);
	assert_int_not_equal(res.cat, CDP_ERR_NONE);
	(void)state;
}

static void test_short_and_long_replies(void **state)
{
	struct cdp_cmd ping = {.kind = CDP_CMD_PING};
	char *stats = NULL;
	struct cdp_cmd st = {.kind = CDP_CMD_STATS, .stats = &stats};
	struct cdp_result res;
	struct fake f;

	run_fake(&f, ping_cut_short, NULL, &ping, false, false, &res);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	run_fake(&f, stats_too_long, NULL, &st, false, false, &res);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_null(stats);
	(void)state;
}

static void test_version(void **state)
{
	struct cdp_version ver;
	struct cdp_cmd cmd = {.kind = CDP_CMD_VERSION, .ver = &ver};
	struct cdp_result res;
	struct fake f;

	run_fake(&f, version_answers,
		 "ClamAV 1.0.7/27483/Fri Dec  4 08:21:31 2026", &cmd, false,
		 false, &res);
	assert_int_equal(res.verdict, CDP_CLEAN);
	assert_int_equal(ver.db_version, 27483);
	assert_string_equal(ver.engine, "1.0.7");
	run_fake(&f, version_answers, "not a version", &cmd, false, false,
		 &res);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_PROTOCOL);
	(void)state;
}

/* SCAN's several lines: the worst wins; clamd's own names are cut. */
static void test_scan_worst_line_wins(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_SCAN, .path = "/x"};
	struct cdp_result res;
	struct fake f;

	run_fake(&f, scan_lines, NULL, &cmd, false, false, &res);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_INFECTED);
	assert_string_equal(res.text, "Sig.One");
	(void)state;
}

/* The cancel ends the wait for a reply that never comes. */
static void test_cancel_ends_the_wait(void **state)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_PING};
	struct cdp_result res;
	struct cdp_conn *conn;
	struct fake f;
	struct cdp_cancel *cancel = cdp_cancel_new();

	assert_non_null(cancel);
	conn = connect_fake(&f, cancel_when_asked, NULL, cancel);
	assert_int_equal(cdp_cmd_run(&env, conn, false, &cmd,
				     cdp_deadline(60000), cancel, &res),
			 0);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_CANCELLED);
	cdp_conn_close(conn);
	join_fake(&f);
	assert_true(f.ok);
	cdp_cancel_free(cancel);
	(void)state;
}

/* conn.c: replies in pieces, sends the peer takes in pieces. */
static void test_conn_partial_io(void **state)
{
	struct cdp_cmd ping = {.kind = CDP_CMD_PING};
	size_t len = 3 << 20;
	char *big = malloc(len);
	struct cdp_result res;
	struct cdp_conn *conn;
	const char *line;
	size_t n;
	struct fake f;

	assert_non_null(big);
	run_fake(&f, ping_byte_by_byte, NULL, &ping, false, false, &res);
	assert_true(f.ok);
	assert_int_equal(res.verdict, CDP_CLEAN);

	for (size_t i = 0; i < len; i++)
		big[i] = (char)(i % 251);
	conn = connect_fake(&f, slow_reader, &len, NULL);
	assert_int_equal(
		cdp_conn_send(conn, big, len, cdp_deadline(20000), NULL, false),
		0);
	assert_int_equal(cdp_conn_read(conn, CDP_TEXT_MAX, cdp_deadline(20000),
				       NULL, &line, &n),
			 0);
	assert_int_equal(n, 4);
	assert_memory_equal(line, "done", 4);
	cdp_conn_close(conn);
	join_fake(&f);
	assert_true(f.ok);
	free(big);
	(void)state;
}

/* An idle session that clamd wrote to has input; goodbye sends zEND. */
static void test_conn_idle_input_and_goodbye(void **state)
{
	struct cdp_conn *conn;
	struct fake f;

	conn = connect_fake(&f, idle_then_goodbye, NULL, NULL);
	/* the fake writes first; wait for it with a bounded poll */
	assert_int_equal(
		cdp_wait(conn->fd, POLLIN, cdp_deadline(10000), NULL) > 0, 1);
	assert_true(cdp_conn_has_input(conn));
	cdp_conn_goodbye(conn);
	shutdown(conn->fd, SHUT_WR); /* a missing zEND fails, not hangs */
	join_fake(&f);
	assert_true(f.ok);
	cdp_conn_close(conn);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ping),
		cmocka_unit_test(test_fildes_passes_the_descriptor),
		cmocka_unit_test(test_instream_chunks_and_terminator),
		cmocka_unit_test(test_instream_size_limit),
		cmocka_unit_test(test_session_numbers),
		cmocka_unit_test(test_dead_reused_session),
		cmocka_unit_test(test_short_and_long_replies),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_scan_worst_line_wins),
		cmocka_unit_test(test_cancel_ends_the_wait),
		cmocka_unit_test(test_conn_partial_io),
		cmocka_unit_test(test_conn_idle_input_and_goodbye),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
