/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Interfaces shared between clamdproto's files but not part of its API:
 * the reply framer (pure, unit-tested and fuzzed), one connection's I/O with
 * deadlines, cancellation hooks, result helpers, and the command codec the
 * pool runs on a connection.
 */
#ifndef CDP_INTERNAL_H
#define CDP_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "clamdproto.h"

/* Longest wait between checks of a cancellation flag. */
#define CDP_CANCEL_SLICE_MS 100

/* ---------------------------------------------------------- result.c */

void cdp_res_set(struct cdp_result *res, enum cdp_verdict v,
		 enum cdp_errcat cat, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void cdp_res_error(struct cdp_result *res, enum cdp_errcat cat, int err,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Map a negative errno from the I/O layer to an error result. */
void cdp_res_io(struct cdp_result *res, int rc, const char *what);

/* ----------------------------------------------------------- frame.c */

/*
 * Reassembles NUL-terminated replies from reads of any size.  The caller
 * reads into cdp_rbuf_space() and commits with cdp_rbuf_added(); then takes
 * complete replies with cdp_rbuf_take().  Bounded: a reply longer than the
 * limit is an error, never truncated.
 */
struct cdp_rbuf {
	char *buf;
	size_t cap; /* allocated bytes */
	size_t off; /* start of unconsumed data */
	size_t len; /* end of data */
};

int cdp_rbuf_init(struct cdp_rbuf *rb, size_t cap);
void cdp_rbuf_free(struct cdp_rbuf *rb);
void cdp_rbuf_clear(struct cdp_rbuf *rb);
/* Free space after compacting; at most cap - pending bytes. */
char *cdp_rbuf_space(struct cdp_rbuf *rb, size_t *n);
void cdp_rbuf_added(struct cdp_rbuf *rb, size_t n);
size_t cdp_rbuf_pending(const struct cdp_rbuf *rb);
/*
 * 1: a reply of at most @max - 1 bytes is at *line (NUL-terminated in place,
 * valid until the next call), its length in *len; 0: need more bytes;
 * -EMSGSIZE: @max bytes arrived without a terminator.
 */
int cdp_rbuf_take(struct cdp_rbuf *rb, size_t max, const char **line,
		  size_t *len);
/*
 * At EOF: the unterminated rest, with one trailing '\n' removed (clamd ends
 * "COMMAND READ TIMED OUT" that way), NUL-terminated; NULL when nothing is
 * pending.
 */
const char *cdp_rbuf_rest(struct cdp_rbuf *rb, size_t *len);

/* ----------------------------------------------------------- cancel.c */

/* Publish @fd as the socket a trigger should shut down; -ECANCELED if the
 * token was already triggered.  @c may be NULL. */
int cdp_cancel_attach(struct cdp_cancel *c, int fd);

void cdp_cancel_detach(struct cdp_cancel *c);

/* ------------------------------------------------------------- addr.c */

/*
 * Open a non-blocking, close-on-exec stream socket to @addr, connected
 * within @deadline (CLOCK_MONOTONIC ms).  Returns the fd, or a negative
 * errno (-ETIMEDOUT, -ECANCELED, -ECONNREFUSED, -ENOENT, -EHOSTUNREACH...).
 */
int cdp_addr_connect(const struct cdp_addr *addr, int64_t deadline,
		     struct cdp_cancel *cancel);

/* -------------------------------------------------------------- tls.c */

typedef struct ssl_st SSL;

/* A TLS client context: the CA to verify against, the name to expect, an
 * optional client certificate.  Shared by a pool's connections. */
struct cdp_tls;

/* 0, or -EINVAL (no CA, unreadable file, key not matching the
 * certificate) / -ENOMEM with a one-line reason in @err. */
int cdp_tls_new(const struct cdp_config *cfg, struct cdp_tls **tlsp, char *err,
		size_t errlen);
void cdp_tls_free(struct cdp_tls *t);
/*
 * Handshake on the connected non-blocking socket @fd, verifying the
 * server's certificate against the CA and the configured name (default
 * @host), within @deadline and under @cancel.  0 and the session in *sslp,
 * or a negative errno (-EPROTO: refused, the reason in @why; -ETIMEDOUT,
 * -ECANCELED, -ECONNRESET...).  @fd stays the caller's.
 */
int cdp_tls_connect(struct cdp_tls *t, int fd, const char *host,
		    int64_t deadline, struct cdp_cancel *cancel, SSL **sslp,
		    char *why, size_t whylen);
void cdp_tls_close(SSL *ssl);
/*
 * Non-blocking record I/O: bytes moved (recv: 0 at EOF), -EAGAIN with the
 * poll events to wait for in *events, or another negative errno (a TLS
 * error on the connection: -ECONNRESET, never -EPROTO).  A send that returned
 * -EAGAIN must be repeated with the same arguments.
 */
ssize_t cdp_tls_send(SSL *ssl, const void *buf, size_t len, short *events);
ssize_t cdp_tls_recv(SSL *ssl, void *buf, size_t len, short *events);
/* 1 when application data, EOF or an error is waiting; 0 when what made
 * the socket readable carried no data (a TLS 1.3 session ticket). */
int cdp_tls_has_input(SSL *ssl);

/* ------------------------------------------------------------- wait.c */

int64_t cdp_now_ms(void);
int64_t cdp_now_us(void);
int64_t cdp_deadline(int timeout_ms);

/*
 * Wait until @fd is ready for @events, the deadline passes, or @cancel
 * triggers.  Returns the revents (> 0), -ETIMEDOUT or -ECANCELED.
 */
int cdp_wait(int fd, short events, int64_t deadline, struct cdp_cancel *cancel);

/* ------------------------------------------------------------- conn.c */

struct cdp_conn {
	int fd;
	bool is_unix;
	SSL *ssl;	  /* tls:// addresses; NULL otherwise */
	bool session;	  /* IDSESSION sent */
	bool broken;	  /* must not be reused */
	unsigned next_id; /* number of the next command in the session */
	int64_t idle_since;
	struct cdp_rbuf rb;
	TAILQ_ENTRY(cdp_conn) entry;
};

/*
 * Connect to @addr (and for a tls:// address, shake hands with @tls)
 * within @deadline.  0, or a negative errno with, when there is more to
 * say than the errno (a refused certificate), a reason in @why (else "").
 */
int cdp_conn_open(const struct cdp_addr *addr, struct cdp_tls *tls,
		  int64_t deadline, struct cdp_cancel *cancel,
		  struct cdp_conn **connp, char *why, size_t whylen);
/*
 * The same for a socket already connected (non-blocking, close-on-exec):
 * takes @fd, closed on failure too. With @tls, shakes hands as @host.
 */
int cdp_conn_adopt(int fd, bool is_unix, struct cdp_tls *tls, const char *host,
		   int64_t deadline, struct cdp_cancel *cancel,
		   struct cdp_conn **connp, char *why, size_t whylen);
void cdp_conn_close(struct cdp_conn *conn);
/* Best-effort "zEND" on an idle session before closing it; never waits. */
void cdp_conn_goodbye(struct cdp_conn *conn);
/* Whether an idle session has input waiting (clamd wrote or closed). */
bool cdp_conn_has_input(struct cdp_conn *conn);

/*
 * Send all @len bytes.  With @stop_on_input, return -EALREADY as soon as the
 * peer has something for us to read (clamd answering early means it stopped
 * reading).  Returns 0 or a negative errno (-EPIPE, -ECONNRESET, ...).
 */
int cdp_conn_send(struct cdp_conn *conn, const void *buf, size_t len,
		  int64_t deadline, struct cdp_cancel *cancel,
		  bool stop_on_input);
/* Send one byte carrying @fd as SCM_RIGHTS. */
int cdp_conn_send_fd(struct cdp_conn *conn, int fd, int64_t deadline,
		     struct cdp_cancel *cancel);
/*
 * Read one NUL-terminated reply of at most @max - 1 bytes.  Returns 0 with
 * the reply in @line and @len, -ENODATA on EOF before any byte, -EPROTO on
 * EOF mid-reply (@line and @len then hold the unterminated rest), -EMSGSIZE,
 * -ETIMEDOUT, -ECANCELED, or another negative errno.
 */
int cdp_conn_read(struct cdp_conn *conn, size_t max, int64_t deadline,
		  struct cdp_cancel *cancel, const char **line, size_t *len);

/* ---------------------------------------------------------- command.c */

enum cdp_cmd_kind {
	CDP_CMD_FILDES,
	CDP_CMD_INSTREAM_FD,
	CDP_CMD_INSTREAM_BUF,
	CDP_CMD_SCAN,
	CDP_CMD_PING,
	CDP_CMD_VERSION,
	CDP_CMD_STATS,
};

/* One command: what it scans (by kind), or where its answer goes. */
struct cdp_cmd {
	enum cdp_cmd_kind kind;
	int fd;
	const void *buf;
	size_t len;
	const char *path;
	/* outputs of the non-scan commands */
	struct cdp_version *ver;
	char **stats;
};

/* What the codec takes from its pool's configuration. */
struct cdp_cmd_env {
	int io_timeout_ms; /* each send, and the reply of a non-scan */
	size_t chunk_size; /* INSTREAM */
	const char *shown; /* the address, for messages */
};

/*
 * Sends @cmd on @conn and reads its outcome into @res, by @deadline (a
 * scan's reply; sends and other replies also by env->io_timeout_ms).
 * Marks @conn broken when it must not be reused. Returns 0, or -ESTALE
 * when the (reused) session was found dead before it answered (@res then
 * says so, as CDP_ERR_CONNECT).
 */
int cdp_cmd_run(const struct cdp_cmd_env *env, struct cdp_conn *conn,
		bool reused, const struct cdp_cmd *cmd, int64_t deadline,
		struct cdp_cancel *cancel, struct cdp_result *res);

#endif /* CDP_INTERNAL_H */
