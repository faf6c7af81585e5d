// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The connection pool: a bounded number of connections to one clamd, kept as
 * IDSESSION sessions for reuse (or one per command with no_session).  Holds
 * its lock only to pick or return a connection, never across I/O, so many
 * threads scan in parallel and a cancelled caller never waits on another.
 *
 * Every command is one attempt: the pool never retries.  A reused session
 * that clamd had closed (restart, its idle timeout) fails the command with
 * CDP_ERR_CONNECT, and the other idle sessions are dropped with it, so that
 * whoever retries (clamfs: the scan queue, which owns the deadline) gets a
 * fresh connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define CDP_DEFAULT_ADDR "/var/run/clamav/clamd.ctl"

struct cdp_pool {
	struct cdp_addr *addr;
	struct cdp_tls *tls; /* tls:// addresses only */
	struct cdp_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	TAILQ_HEAD(cdp_conn_list, cdp_conn) idle; /* most recently used first */
	unsigned open; /* idle + busy + being connected */
	struct cdp_pool_counters ctr;
	char shown[300]; /* the address as users write it */
};

void cdp_config_init(struct cdp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->addr = CDP_DEFAULT_ADDR;
	cfg->max_conns = 8;
	cfg->connect_timeout_ms = 5000;
	cfg->io_timeout_ms = 10000;
	cfg->scan_timeout_ms = 120000;
	cfg->chunk_size = 256 * 1024;
	/* below clamd's IdleTimeout (30 s): it must not close one in use */
	cfg->idle_max_ms = 20000;
}

int cdp_config_check(const struct cdp_config *cfg, char *err, size_t errlen)
{
	struct cdp_addr *addr;
	struct cdp_tls *tls = NULL;
	int rc;

	rc = cdp_addr_parse(cfg->addr ? cfg->addr : CDP_DEFAULT_ADDR, &addr);
	if (rc) {
		snprintf(err, errlen, "%s",
			 rc == -EINVAL ? "not a socket path, tcp://HOST:PORT "
					 "or tls://HOST:PORT"
				       : strerror(-rc));
		return rc;
	}
	if (cdp_addr_kind(addr) == CDP_ADDR_TLS)
		rc = cdp_tls_new(cfg, &tls, err, errlen);
	cdp_tls_free(tls);
	cdp_addr_free(addr);
	return rc;
}

int cdp_pool_new(const struct cdp_config *cfg, struct cdp_pool **poolp)
{
	struct cdp_config def;
	struct cdp_pool *pool;
	pthread_condattr_t ca;
	int rc;

	cdp_config_init(&def);
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->cfg = *cfg;
	if (!pool->cfg.addr)
		pool->cfg.addr = def.addr;
	if (!pool->cfg.max_conns)
		pool->cfg.max_conns = def.max_conns;
	if (pool->cfg.connect_timeout_ms <= 0)
		pool->cfg.connect_timeout_ms = def.connect_timeout_ms;
	if (pool->cfg.io_timeout_ms <= 0)
		pool->cfg.io_timeout_ms = def.io_timeout_ms;
	if (pool->cfg.scan_timeout_ms <= 0)
		pool->cfg.scan_timeout_ms = def.scan_timeout_ms;
	if (!pool->cfg.chunk_size)
		pool->cfg.chunk_size = def.chunk_size;
	if (pool->cfg.chunk_size < 4096)
		pool->cfg.chunk_size = 4096;
	if (pool->cfg.chunk_size > 8 << 20)
		pool->cfg.chunk_size = 8 << 20;
	if (pool->cfg.idle_max_ms <= 0)
		pool->cfg.idle_max_ms = def.idle_max_ms;

	rc = cdp_addr_parse(pool->cfg.addr, &pool->addr);
	if (rc)
		goto out_free;
	if (cdp_addr_kind(pool->addr) == CDP_ADDR_TLS) {
		char err[256];

		rc = cdp_tls_new(&pool->cfg, &pool->tls, err, sizeof(err));
		if (rc) {
			cdp_addr_free(pool->addr);
			goto out_free;
		}
	}
	/* the caller's strings are not kept */
	pool->cfg.tls_ca = pool->cfg.tls_name = NULL;
	pool->cfg.tls_cert = pool->cfg.tls_key = NULL;
	pool->cfg.addr = cdp_addr_host(pool->addr); /* not the caller's */
	if (cdp_addr_kind(pool->addr) != CDP_ADDR_UNIX)
		snprintf(pool->shown, sizeof(pool->shown),
			 strchr(pool->cfg.addr, ':') ? "%s://[%s]:%u"
						     : "%s://%s:%u",
			 cdp_addr_kind(pool->addr) == CDP_ADDR_TLS ? "tls"
								   : "tcp",
			 pool->cfg.addr, cdp_addr_port(pool->addr));
	else
		snprintf(pool->shown, sizeof(pool->shown), "%s",
			 pool->cfg.addr);
	TAILQ_INIT(&pool->idle);
	pthread_mutex_init(&pool->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool->freed, &ca);
	pthread_condattr_destroy(&ca);
	*poolp = pool;
	return 0;
out_free:
	free(pool);
	return rc;
}

void cdp_pool_free(struct cdp_pool *pool)
{
	struct cdp_conn *conn;

	if (!pool)
		return;
	while ((conn = TAILQ_FIRST(&pool->idle))) {
		TAILQ_REMOVE(&pool->idle, conn, entry);
		/* Polite goodbye; clamd copes with a bare close too. */
		cdp_conn_goodbye(conn);
		cdp_conn_close(conn);
	}
	pthread_cond_destroy(&pool->freed);
	pthread_mutex_destroy(&pool->lock);
	cdp_tls_free(pool->tls);
	cdp_addr_free(pool->addr);
	free(pool);
}

const struct cdp_addr *cdp_pool_addr(const struct cdp_pool *pool)
{
	return pool->addr;
}

void cdp_pool_counters(struct cdp_pool *pool, struct cdp_pool_counters *c)
{
	struct cdp_conn *conn;

	pthread_mutex_lock(&pool->lock);
	*c = pool->ctr;
	c->open = pool->open;
	c->idle = 0;
	TAILQ_FOREACH (conn, &pool->idle, entry)
		c->idle++;
	pthread_mutex_unlock(&pool->lock);
}

/* An idle session clamd has written to (COMMAND READ TIMED OUT) or closed. */
static bool conn_stale(const struct cdp_pool *pool, struct cdp_conn *conn,
		       int64_t now)
{
	if (now - conn->idle_since > pool->cfg.idle_max_ms)
		return true;
	return cdp_conn_has_input(conn);
}

static void wait_slot(struct cdp_pool *pool, int64_t until)
{
	struct timespec ts;
	int64_t now = cdp_now_ms();

	/* Wake now and then to look at the caller's cancellation flag: the
	 * trigger side may not take this lock. */
	if (until > now + CDP_CANCEL_SLICE_MS)
		until = now + CDP_CANCEL_SLICE_MS;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (until - now) / 1000;
	ts.tv_nsec += ((until - now) % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&pool->freed, &pool->lock, &ts);
}

/*
 * Get a connection: an idle session, or a new one once the
 * cap allows.  @plain asks for a connection outside any session (SCAN reads
 * to EOF).  Fills @res and returns a negative errno on failure.
 */
static int acquire(struct cdp_pool *pool, bool plain, int64_t deadline,
		   struct cdp_cancel *cancel, struct cdp_conn **connp,
		   bool *reusedp, struct cdp_result *res)
{
	bool session = !plain && !pool->cfg.no_session, waited = false;
	struct cdp_conn *conn, *victim;
	int64_t cdeadline;
	char why[256];
	int rc;

	*reusedp = false;
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		int64_t now = cdp_now_ms();

		while (session && !cdp_cancel_fresh(cancel) &&
		       (conn = TAILQ_FIRST(&pool->idle))) {
			TAILQ_REMOVE(&pool->idle, conn, entry);
			if (conn_stale(pool, conn, now)) {
				pool->open--;
				pool->ctr.discards++;
				cdp_conn_close(conn);
				continue;
			}
			pool->ctr.reuses++;
			pthread_mutex_unlock(&pool->lock);
			*connp = conn;
			*reusedp = true;
			return 0;
		}
		if (pool->open >= pool->cfg.max_conns &&
		    (victim = TAILQ_LAST(&pool->idle, cdp_conn_list))) {
			/* Room for a connection of another kind. */
			TAILQ_REMOVE(&pool->idle, victim, entry);
			pool->open--;
			pool->ctr.discards++;
			cdp_conn_close(victim);
		}
		if (pool->open < pool->cfg.max_conns)
			break;
		if (cdp_cancel_triggered(cancel)) {
			pthread_mutex_unlock(&pool->lock);
			cdp_res_error(res, CDP_ERR_CANCELLED, ECANCELED,
				      "cancelled while waiting for a "
				      "connection");
			return -ECANCELED;
		}
		if (now >= deadline) {
			pthread_mutex_unlock(&pool->lock);
			/* EBUSY: our own cap, not clamd, used up the time;
			 * a fleet must not hold it against the backend */
			cdp_res_error(res, CDP_ERR_TIMEOUT, EBUSY,
				      "no free connection to clamd within "
				      "the deadline");
			return -ETIMEDOUT;
		}
		if (!waited) {
			pool->ctr.waits++;
			waited = true;
		}
		wait_slot(pool, deadline);
	}
	pool->open++;
	pthread_mutex_unlock(&pool->lock);

	cdeadline = cdp_deadline(pool->cfg.connect_timeout_ms);
	if (cdeadline > deadline)
		cdeadline = deadline;
	rc = cdp_conn_open(pool->addr, pool->tls, cdeadline, cancel, &conn, why,
			   sizeof(why));
	if (rc == 0 && session) {
		rc = cdp_cancel_attach(cancel, conn->fd);
		if (!rc)
			rc = cdp_conn_send(conn, "zIDSESSION", 11, cdeadline,
					   cancel, false);
		cdp_cancel_detach(cancel);
		conn->session = true;
		if (rc)
			cdp_conn_close(conn);
	}
	if (rc) {
		pthread_mutex_lock(&pool->lock);
		pool->open--;
		pthread_cond_signal(&pool->freed);
		pthread_mutex_unlock(&pool->lock);
		if (rc == -ECANCELED)
			cdp_res_error(res, CDP_ERR_CANCELLED, ECANCELED,
				      "cancelled while connecting");
		else if (rc == -ETIMEDOUT && cdeadline == deadline)
			/* the call's deadline, not connect_timeout_ms, cut
			 * it short: maybe only after a wait for a slot, or
			 * an attempt given part of the time */
			cdp_res_error(res, CDP_ERR_TIMEOUT, ETIMEDOUT,
				      "no connection to clamd at %s within "
				      "the deadline",
				      pool->shown);
		else
			cdp_res_error(res, CDP_ERR_CONNECT, -rc,
				      "cannot connect to clamd at %s: %s",
				      pool->shown,
				      why[0] ? why : strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&pool->lock);
	pool->ctr.connects++;
	pthread_mutex_unlock(&pool->lock);
	*connp = conn;
	return 0;
}

/*
 * A reused session was dead: clamd restarted or timed it out, and the idle
 * ones were idle at least as long (the list is most recently used first).
 */
static void drop_idle(struct cdp_pool *pool)
{
	struct cdp_conn *conn;

	pthread_mutex_lock(&pool->lock);
	pool->ctr.dead_sessions++;
	while ((conn = TAILQ_FIRST(&pool->idle))) {
		TAILQ_REMOVE(&pool->idle, conn, entry);
		pool->open--;
		pool->ctr.discards++;
		cdp_conn_close(conn);
	}
	pthread_cond_broadcast(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
}

static void release(struct cdp_pool *pool, struct cdp_conn *conn, bool keep)
{
	keep = keep && conn->session && !conn->broken &&
	       cdp_rbuf_pending(&conn->rb) == 0;
	pthread_mutex_lock(&pool->lock);
	if (keep) {
		conn->idle_since = cdp_now_ms();
		TAILQ_INSERT_HEAD(&pool->idle, conn, entry);
	} else {
		pool->open--;
		if (conn->session)
			pool->ctr.discards++;
	}
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
	if (!keep)
		cdp_conn_close(conn);
}

/* ---------------------------------------------------------------- commands */

enum cmd_kind {
	CMD_FILDES,
	CMD_INSTREAM_FD,
	CMD_INSTREAM_BUF,
	CMD_SCAN,
	CMD_PING,
	CMD_VERSION,
	CMD_STATS,
};

struct cmd {
	enum cmd_kind kind;
	int fd;
	const void *buf;
	size_t len;
	const char *path;
	/* outputs of the non-scan commands */
	struct cdp_version *ver;
	char **stats;
};

static bool is_scan(enum cmd_kind k)
{
	return k <= CMD_SCAN;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Stream @cmd's data as INSTREAM chunks.  0 when everything including the
 * terminating empty chunk went out; -EALREADY/-EPIPE/... when clamd stopped
 * reading (its reply tells why); other errors fill @res. */
static int send_stream(struct cdp_pool *pool, struct cdp_conn *conn,
		       const struct cmd *cmd, int64_t deadline,
		       struct cdp_cancel *cancel, struct cdp_result *res)
{
	size_t csize = pool->cfg.chunk_size;
	char *chunk;
	off_t off = 0;
	struct stat st;
	int rc = 0;

	/* Small files are the common case: a full-size chunk buffer would
	 * cost an mmap and munmap per scan.  The size is only a hint; the
	 * loop reads until EOF whatever it is. */
	if (cmd->kind == CMD_INSTREAM_BUF && cmd->len < csize)
		csize = cmd->len < 4096 ? 4096 : cmd->len;
	else if (cmd->kind == CMD_INSTREAM_FD && fstat(cmd->fd, &st) == 0 &&
		 S_ISREG(st.st_mode) && (uint64_t)st.st_size < csize)
		csize = st.st_size < 4096 ? 4096 : (size_t)st.st_size;
	chunk = malloc(csize + 4);

	if (!chunk) {
		cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		size_t n;
		uint32_t be;

		if (cmd->kind == CMD_INSTREAM_FD) {
			ssize_t got = pread(cmd->fd, chunk + 4, csize, off);

			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				rc = -errno;
				cdp_res_error(res, CDP_ERR_LOCAL, -rc,
					      "cannot read the file: %s",
					      strerror(-rc));
				conn->broken = true;
				goto out;
			}
			n = (size_t)got;
		} else {
			n = cmd->len - (size_t)off;
			if (n > csize)
				n = csize;
			memcpy(chunk + 4, (const char *)cmd->buf + off, n);
		}
		be = htonl((uint32_t)n);
		memcpy(chunk, &be, 4);
		rc = cdp_conn_send(
			conn, chunk, n + 4,
			min64(deadline, cdp_deadline(pool->cfg.io_timeout_ms)),
			cancel, true);
		if (rc || n == 0)
			break;
		off += (off_t)n;
	}
out:
	free(chunk);
	return rc;
}

/* clamd bare errors may arrive without a session number. */
static bool bare_error(const char *s, size_t len, struct cdp_result *res)
{
	struct cdp_result tmp;

	if (cdp_reply_parse(s, len, NULL, &tmp) == 0 &&
	    tmp.cat == CDP_ERR_CLAMD && memchr(s, ':', len) == NULL) {
		*res = tmp;
		return true;
	}
	return false;
}

/* The command met a reused session that clamd had closed. */
static int dead_session(struct cdp_pool *pool, struct cdp_result *res)
{
	cdp_res_error(res, CDP_ERR_CONNECT, ECONNRESET,
		      "clamd at %s had closed the reused session (restarted "
		      "or timed it out)",
		      pool->shown);
	return -ESTALE;
}

/*
 * Read one reply and strip the session number.  Returns 0 with @line and
 * @len; else @res holds the outcome and the return is -ESTALE when a reused
 * session turned out to be dead before answering, another negative errno
 * otherwise.
 */
static int read_reply(struct cdp_pool *pool, struct cdp_conn *conn, bool reused,
		      unsigned id, size_t max, int64_t deadline,
		      struct cdp_cancel *cancel, const char **line, size_t *len,
		      struct cdp_result *res)
{
	unsigned got;
	size_t skip;
	int rc;

	rc = cdp_conn_read(conn, max + (conn->session ? 16 : 0), deadline,
			   cancel, line, len);
	if (rc == -ENODATA && reused) {
		conn->broken = true;
		return dead_session(pool, res);
	}
	if (rc == -EPROTO) {
		conn->broken = true;
		if (bare_error(*line, *len, res)) {
			/* clamd timed the idle session out just as we
			 * started using it. */
			if (reused &&
			    strcmp(res->text, "COMMAND READ TIMED OUT") == 0)
				return dead_session(pool, res);
			return -EPROTO;
		}
		cdp_res_io(res, rc, "reading clamd's reply");
		return rc;
	}
	if (rc) {
		conn->broken = true;
		cdp_res_io(res, rc, "reading clamd's reply");
		return rc;
	}
	if (!conn->session)
		return 0;
	if (cdp_reply_split_id(*line, *len, &got, &skip)) {
		conn->broken = true;
		if (bare_error(*line, *len, res))
			return -EPROTO;
		cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
			      "session reply without a command number");
		return -EPROTO;
	}
	if (got != id) {
		conn->broken = true;
		cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
			      "reply for command %u, expected %u", got, id);
		return -EPROTO;
	}
	*line += skip;
	*len -= skip;
	return 0;
}

/* SCAN may answer with several lines (a directory, a device): the worst
 * one wins, infected before error before clean. */
static void read_scan_lines(struct cdp_conn *conn, const struct cmd *cmd,
			    int64_t deadline, struct cdp_cancel *cancel,
			    struct cdp_result *res)
{
	struct cdp_result *tmp = malloc(sizeof(*tmp));
	size_t plen = strlen(cmd->path);
	bool any = false;

	if (!tmp) {
		cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM, "out of memory");
		return;
	}
	for (;;) {
		const char *line;
		size_t len;
		int rc = cdp_conn_read(conn, CDP_TEXT_MAX, deadline, cancel,
				       &line, &len);

		if (rc == -ENODATA && any)
			break;
		if (rc) {
			if (rc == -EPROTO && bare_error(line, len, tmp))
				*res = *tmp;
			else
				cdp_res_io(res, rc, "reading clamd's reply");
			break;
		}
		cdp_reply_parse(line, len, NULL, tmp);
		if (tmp->verdict == CDP_ERROR && tmp->cat == CDP_ERR_CLAMD &&
		    strncmp(tmp->text, cmd->path, plen) == 0 &&
		    strncmp(tmp->text + plen, ": ", 2) == 0)
			memmove(tmp->text, tmp->text + plen + 2,
				strlen(tmp->text + plen + 2) + 1);
		if (!any || tmp->verdict == CDP_INFECTED ||
		    (tmp->verdict == CDP_ERROR && res->verdict == CDP_CLEAN))
			*res = *tmp;
		any = true;
		if (res->verdict == CDP_INFECTED)
			break;
	}
	free(tmp);
}

/*
 * Send @cmd on @conn and read its outcome into @res.  Returns 0, or -ESTALE
 * when the (reused) session was found dead before it answered (@res then
 * says so, as CDP_ERR_CONNECT).
 */
static int run_on(struct cdp_pool *pool, struct cdp_conn *conn, bool reused,
		  const struct cmd *cmd, int64_t deadline,
		  struct cdp_cancel *cancel, struct cdp_result *res)
{
	static const char *const words[] = {
		[CMD_FILDES] = "zFILDES",
		[CMD_INSTREAM_FD] = "zINSTREAM",
		[CMD_INSTREAM_BUF] = "zINSTREAM",
		[CMD_SCAN] = "zSCAN ",
		[CMD_PING] = "zPING",
		[CMD_VERSION] = "zVERSION",
		[CMD_STATS] = "zSTATS",
	};
	int64_t iodl = min64(deadline, cdp_deadline(pool->cfg.io_timeout_ms));
	int64_t rdl = is_scan(cmd->kind) ? deadline : iodl;
	unsigned id = conn->session ? conn->next_id++ : 0;
	bool sent_all = true;
	char *text = NULL;
	const char *line;
	size_t len, wlen;
	int rc, ret = 0;

	rc = cdp_cancel_attach(cancel, conn->fd);
	if (rc)
		goto io_error;

	if (cmd->kind == CMD_SCAN) {
		size_t plen = strlen(cmd->path);

		wlen = 6 + plen + 1;
		text = malloc(wlen);
		if (!text) {
			rc = -ENOMEM;
			cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM,
				      "out of memory");
			conn->broken = true;
			goto out;
		}
		memcpy(text, "zSCAN ", 6);
		memcpy(text + 6, cmd->path, plen + 1);
		rc = cdp_conn_send(conn, text, wlen, iodl, cancel, false);
	} else {
		rc = cdp_conn_send(conn, words[cmd->kind],
				   strlen(words[cmd->kind]) + 1, iodl, cancel,
				   false);
	}
	if (!rc && cmd->kind == CMD_FILDES)
		rc = cdp_conn_send_fd(conn, cmd->fd, iodl, cancel);
	if (!rc &&
	    (cmd->kind == CMD_INSTREAM_FD || cmd->kind == CMD_INSTREAM_BUF)) {
		rc = send_stream(pool, conn, cmd, deadline, cancel, res);
		if (rc && res->cat == CDP_ERR_LOCAL)
			goto out;
	}
	if (rc == -ETIMEDOUT || rc == -ECANCELED)
		goto io_error;
	if (rc) {
		/* Broken pipe or early reply: clamd may have said why before
		 * hanging up (INSTREAM size limit), so read on. */
		sent_all = false;
		conn->broken = true;
	}

	if (cmd->kind == CMD_SCAN) {
		read_scan_lines(conn, cmd, deadline, cancel, res);
		conn->broken = true;
		goto out;
	}
	rc = read_reply(pool, conn, reused, id,
			cmd->kind == CMD_STATS ? CDP_STATS_MAX : CDP_TEXT_MAX,
			rdl, cancel, &line, &len, res);
	if (rc == -ESTALE) {
		ret = rc;
		goto out;
	}
	if (rc) {
		if (!sent_all && res->cat == CDP_ERR_PROTOCOL)
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPIPE,
				      "clamd hung up before the command was "
				      "sent, and gave no reason");
		goto out;
	}

	switch (cmd->kind) {
	case CMD_FILDES:
	case CMD_INSTREAM_FD:
	case CMD_INSTREAM_BUF:
		cdp_reply_parse(line, len,
				cmd->kind == CMD_FILDES ? "fd[]" : "stream",
				res);
		if (!sent_all && res->verdict == CDP_CLEAN)
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "clamd answered OK to a stream it did "
				      "not fully receive");
		break;
	case CMD_PING:
		if (len == 4 && memcmp(line, "PONG", 4) == 0)
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "PONG");
		else if (!bare_error(line, len, res))
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "PING: unexpected reply");
		break;
	case CMD_VERSION:
		if (cdp_version_parse(line, len, cmd->ver) == 0)
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "%.*s",
				    (int)len, line);
		else if (!bare_error(line, len, res))
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "VERSION: unparseable reply");
		break;
	case CMD_STATS:
		if (bare_error(line, len, res))
			break;
		*cmd->stats = strndup(line, len);
		if (!*cmd->stats)
			cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM,
				      "out of memory");
		else
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "STATS");
		break;
	case CMD_SCAN:
		break;
	}
	goto out;

io_error:
	conn->broken = true;
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN) {
		if (reused) {
			ret = dead_session(pool, res);
			goto out;
		}
	}
	cdp_res_io(res, rc, "sending to clamd");
out:
	cdp_cancel_detach(cancel);
	free(text);
	return ret;
}

static enum cdp_verdict run(struct cdp_pool *pool, const struct cmd *cmd,
			    int timeout_ms, struct cdp_cancel *cancel,
			    struct cdp_result *res)
{
	int64_t deadline = cdp_deadline(timeout_ms);
	struct cdp_conn *conn;
	bool reused;
	int rc;

	rc = acquire(pool, cmd->kind == CMD_SCAN, deadline, cancel, &conn,
		     &reused, res);
	if (rc)
		return res->verdict;
	/* Fail closed should any path forget to say what happened. */
	cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO, "no outcome");
	rc = run_on(pool, conn, reused, cmd, deadline, cancel, res);
	if (rc == -ESTALE) {
		release(pool, conn, false);
		drop_idle(pool);
		return res->verdict;
	}
	/* A connection that saw anything but success is not trusted with the
	 * next caller's file. */
	release(pool, conn,
		res->verdict == CDP_CLEAN && !cdp_cancel_triggered(cancel));
	return res->verdict;
}

static int scan_timeout(const struct cdp_pool *pool, int timeout_ms)
{
	return timeout_ms > 0 ? timeout_ms : pool->cfg.scan_timeout_ms;
}

enum cdp_verdict cdp_scan_fildes(struct cdp_pool *pool, int fd, int timeout_ms,
				 struct cdp_cancel *cancel,
				 struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_FILDES, .fd = fd};

	if (fd < 0) {
		cdp_res_error(res, CDP_ERR_LOCAL, EBADF, "bad file descriptor");
		return CDP_ERROR;
	}
	if (cdp_addr_kind(pool->addr) != CDP_ADDR_UNIX) {
		cdp_res_error(res, CDP_ERR_LOCAL, EAFNOSUPPORT,
			      "fdpass (FILDES) needs a UNIX socket; clamd "
			      "is at a TCP or TLS address");
		return CDP_ERROR;
	}
	return run(pool, &cmd, scan_timeout(pool, timeout_ms), cancel, res);
}

enum cdp_verdict cdp_scan_stream_fd(struct cdp_pool *pool, int fd,
				    int timeout_ms, struct cdp_cancel *cancel,
				    struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_INSTREAM_FD, .fd = fd};

	if (fd < 0) {
		cdp_res_error(res, CDP_ERR_LOCAL, EBADF, "bad file descriptor");
		return CDP_ERROR;
	}
	return run(pool, &cmd, scan_timeout(pool, timeout_ms), cancel, res);
}

enum cdp_verdict cdp_scan_buf(struct cdp_pool *pool, const void *buf,
			      size_t len, int timeout_ms,
			      struct cdp_cancel *cancel, struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_INSTREAM_BUF, .buf = buf, .len = len};

	if (!buf && len) {
		cdp_res_error(res, CDP_ERR_LOCAL, EINVAL, "no buffer");
		return CDP_ERROR;
	}
	return run(pool, &cmd, scan_timeout(pool, timeout_ms), cancel, res);
}

enum cdp_verdict cdp_scan_path(struct cdp_pool *pool, const char *path,
			       int timeout_ms, struct cdp_cancel *cancel,
			       struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_SCAN, .path = path};

	if (!path || path[0] != '/') {
		cdp_res_error(res, CDP_ERR_LOCAL, EINVAL,
			      "SCAN needs an absolute path");
		return CDP_ERROR;
	}
	return run(pool, &cmd, scan_timeout(pool, timeout_ms), cancel, res);
}

static int res_errno(const struct cdp_result *res)
{
	switch (res->cat) {
	case CDP_ERR_NONE:
		return 0;
	case CDP_ERR_CONNECT:
		return res->err ? -res->err : -ECONNREFUSED;
	case CDP_ERR_TIMEOUT:
		return -ETIMEDOUT;
	case CDP_ERR_CANCELLED:
		return -ECANCELED;
	case CDP_ERR_CLAMD:
		return -EIO;
	case CDP_ERR_LOCAL:
		return res->err ? -res->err : -EINVAL;
	case CDP_ERR_PROTOCOL:
	case CDP_ERR_SIZE_LIMIT:
		break;
	}
	return -EPROTO;
}

static int simple(struct cdp_pool *pool, struct cmd *cmd,
		  struct cdp_cancel *cancel, struct cdp_result *res)
{
	struct cdp_result *r = res ? res : malloc(sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	run(pool, cmd, pool->cfg.io_timeout_ms, cancel, r);
	rc = res_errno(r);
	if (r != res)
		free(r);
	return rc;
}

int cdp_ping(struct cdp_pool *pool, struct cdp_result *res)
{
	return cdp_ping_cancel(pool, NULL, res);
}

int cdp_ping_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		    struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_PING};

	return simple(pool, &cmd, cancel, res);
}

int cdp_version(struct cdp_pool *pool, struct cdp_version *ver,
		struct cdp_result *res)
{
	return cdp_version_cancel(pool, NULL, ver, res);
}

int cdp_version_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		       struct cdp_version *ver, struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_VERSION, .ver = ver};

	return simple(pool, &cmd, cancel, res);
}

int cdp_stats(struct cdp_pool *pool, char **textp, struct cdp_result *res)
{
	return cdp_stats_cancel(pool, NULL, textp, res);
}

int cdp_stats_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		     char **textp, struct cdp_result *res)
{
	struct cmd cmd = {.kind = CMD_STATS, .stats = textp};

	*textp = NULL;
	return simple(pool, &cmd, cancel, res);
}
