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
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static enum cdp_verdict run(struct cdp_pool *pool, const struct cdp_cmd *cmd,
			    int timeout_ms, struct cdp_cancel *cancel,
			    struct cdp_result *res)
{
	const struct cdp_cmd_env env = {
		.io_timeout_ms = pool->cfg.io_timeout_ms,
		.chunk_size = pool->cfg.chunk_size,
		.shown = pool->shown,
	};
	int64_t deadline = cdp_deadline(timeout_ms);
	struct cdp_conn *conn;
	bool reused;
	int rc;

	rc = acquire(pool, cmd->kind == CDP_CMD_SCAN, deadline, cancel, &conn,
		     &reused, res);
	if (rc)
		return res->verdict;
	/* Fail closed should any path forget to say what happened. */
	cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO, "no outcome");
	rc = cdp_cmd_run(&env, conn, reused, cmd, deadline, cancel, res);
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
	struct cdp_cmd cmd = {.kind = CDP_CMD_FILDES, .fd = fd};

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
	struct cdp_cmd cmd = {.kind = CDP_CMD_INSTREAM_FD, .fd = fd};

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
	struct cdp_cmd cmd = {
		.kind = CDP_CMD_INSTREAM_BUF, .buf = buf, .len = len};

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
	struct cdp_cmd cmd = {.kind = CDP_CMD_SCAN, .path = path};

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

static int simple(struct cdp_pool *pool, struct cdp_cmd *cmd,
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
	struct cdp_cmd cmd = {.kind = CDP_CMD_PING};

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
	struct cdp_cmd cmd = {.kind = CDP_CMD_VERSION, .ver = ver};

	return simple(pool, &cmd, cancel, res);
}

int cdp_stats(struct cdp_pool *pool, char **textp, struct cdp_result *res)
{
	return cdp_stats_cancel(pool, NULL, textp, res);
}

int cdp_stats_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		     char **textp, struct cdp_result *res)
{
	struct cdp_cmd cmd = {.kind = CDP_CMD_STATS, .stats = textp};

	*textp = NULL;
	return simple(pool, &cmd, cancel, res);
}
