/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamdproto: the one place that speaks clamd's protocol.  This header is the
 * whole public API: addresses, a bounded thread-safe connection pool, scans
 * (FILDES, INSTREAM, SCAN), PING/VERSION/STATS, cancellation, and the pure
 * reply parsers.  Nothing here knows about FUSE.
 */
#ifndef CLAMDPROTO_H
#define CLAMDPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- results */

/*
 * Longest reply line accepted from clamd, terminator included (the session
 * number prefix does not count).  A longer reply is a protocol error: it is
 * never truncated into a verdict.
 */
#define CDP_TEXT_MAX 4096

/* Longest STATS reply accepted. */
#define CDP_STATS_MAX 65536

/* Verdict of one scan.  Only CDP_CLEAN means "clamd looked at all of it". */
enum cdp_verdict {
	CDP_CLEAN = 0,
	CDP_INFECTED = 1,
	CDP_ERROR = 2,
};

/*
 * Why a scan (or command) ended in CDP_ERROR.  Callers act on the category;
 * the text in struct cdp_result is for humans and logs.
 */
enum cdp_errcat {
	CDP_ERR_NONE = 0,   /* not an error (clean or infected) */
	CDP_ERR_CONNECT,    /* cannot connect (refused, no socket, timeout) */
	CDP_ERR_TIMEOUT,    /* deadline passed: wedged clamd or slow scan;
			     * err EBUSY: no connection of the pool came
			     * free in time, nothing reached clamd */
	CDP_ERR_PROTOCOL,   /* reply unparseable, truncated, oversized, or
			     * connection lost mid-command */
	CDP_ERR_SIZE_LIMIT, /* INSTREAM: clamd's StreamMaxLength exceeded;
			     * the rest of the data was NOT scanned */
	CDP_ERR_CLAMD,	    /* clamd answered with an error (Permission
			     * denied, Not a regular file, UNKNOWN COMMAND,
			     * COMMAND READ TIMED OUT, Can't allocate memory) */
	CDP_ERR_CANCELLED,  /* cdp_cancel_trigger() was called */
	CDP_ERR_LOCAL,	    /* our side: unreadable fd, bad argument, FILDES
			     * over TCP, out of memory */
};

/*
 * The result of every scan and command.  @text holds the signature name for
 * CDP_INFECTED (whole, e.g. "Eicar-Test.UNOFFICIAL"), clamd's or our message
 * for CDP_ERROR, and is empty for CDP_CLEAN.  @err is a positive errno when
 * a system call is the cause, else 0.
 */
struct cdp_result {
	enum cdp_verdict verdict;
	enum cdp_errcat cat;
	int err;
	char text[CDP_TEXT_MAX];
};

/* Short stable names ("connect", "timeout", "protocol", "size-limit",
 * "clamd", "cancelled", "local", "none") for logs and the CLI. */
const char *cdp_errcat_name(enum cdp_errcat cat);
/* "clean", "infected", "error". */
const char *cdp_verdict_name(enum cdp_verdict v);

/* ------------------------------------------------------------- addresses */

struct cdp_addr;

enum cdp_addr_kind {
	CDP_ADDR_UNIX = 1,
	CDP_ADDR_TCP = 2,
	CDP_ADDR_TLS = 3, /* TCP with TLS: a terminator in front of clamd */
};

/*
 * Parse a clamd address: "tcp://host:port", "tcp://[v6]:port", the same
 * with "tls://" (TCP, then TLS: see the tls_ settings of struct cdp_config),
 * or a UNIX socket path ("/run/clamd.ctl", optionally "unix:/run/clamd.ctl").
 * The port defaults to 3310 when omitted.  Host names are resolved at connect
 * time, not here.  Returns 0 and a new address in *addrp, or -EINVAL
 * (malformed), -ENAMETOOLONG (path longer than sun_path allows), -ENOMEM.
 */
int cdp_addr_parse(const char *s, struct cdp_addr **addrp);
void cdp_addr_free(struct cdp_addr *addr);
enum cdp_addr_kind cdp_addr_kind(const struct cdp_addr *addr);
/* UNIX: the socket path.  TCP, TLS: the host (without brackets). */
const char *cdp_addr_host(const struct cdp_addr *addr);
/* TCP (and TLS) port, 0 for UNIX. */
unsigned cdp_addr_port(const struct cdp_addr *addr);

/* ----------------------------------------------------------- cancellation */

/*
 * A cancellation token, owned by the caller, passed to one scan at a time.
 * cdp_cancel_trigger() may be called from any thread, also from a FUSE
 * interrupt callback running under a lock: it only sets a flag and
 * shutdown()s the socket the scan is using; it never blocks and never takes
 * a lock that a scanning thread holds while it waits.  The scan then returns
 * CDP_ERR_CANCELLED within about 100 ms and its connection is discarded.
 * Triggering before the scan starts makes the scan return at once.
 */
struct cdp_cancel;

struct cdp_cancel *cdp_cancel_new(void);
void cdp_cancel_free(struct cdp_cancel *c);
void cdp_cancel_trigger(struct cdp_cancel *c);
int cdp_cancel_triggered(const struct cdp_cancel *c);
/*
 * Makes the scans run with this token connect afresh instead of reusing an
 * idle session: a retry after a dead session must not meet another one that
 * clamd closed at the same moment. Not concurrently with a scan using it.
 */
void cdp_cancel_want_fresh(struct cdp_cancel *c);
/* Whether cdp_cancel_want_fresh was called on the token (NULL: no). */
bool cdp_cancel_fresh(const struct cdp_cancel *c);

/* ------------------------------------------------------------------ pool */

#define CDP_DEFAULT_ADDR "/var/run/clamav/clamd.ctl" /* Debian's clamd */

/*
 * Pool settings.  Initialise with cdp_config_init() and change what you need;
 * zeros are replaced by the defaults shown.  Times are in milliseconds.
 */
struct cdp_config {
	const char *addr;	/* clamd address (copied); default
				 * /var/run/clamav/clamd.ctl */
	unsigned max_conns;	/* 8: connections open at once; callers
				 * beyond it wait (within their deadline).
				 * Keep it below clamd's MaxThreads and
				 * MaxConnectionQueueLength */
	int connect_timeout_ms; /* 5000 */
	int io_timeout_ms;	/* 10000: each send, and each reply that is
				 * not a scan verdict (PING, VERSION, STATS) */
	int scan_timeout_ms;	/* 120000: whole scan, from the call to the
				 * verdict, unless the call passes its own */
	size_t chunk_size;	/* 262144: INSTREAM chunk, clamped to
				 * [4 KiB, 8 MiB] */
	int no_session;		/* 0: keep IDSESSION sessions for reuse;
				 * 1: a new connection per command */
	int idle_max_ms;	/* 20000: an idle session older than this is
				 * closed instead of reused */
	/*
	 * tls:// addresses only (read when the pool is made).  The server's
	 * certificate must chain to @tls_ca and carry @tls_name (default: the
	 * address's host; a DNS name or an IP address).  There is no way to
	 * skip verification: a tls:// address without @tls_ca is an error.
	 */
	const char *tls_ca;   /* PEM file of the trusted CA certificate(s) */
	const char *tls_name; /* NULL: the address's host */
	const char *tls_cert; /* client certificate chain (PEM), or NULL */
	const char *tls_key;  /* its private key (PEM); with tls_cert */
};

void cdp_config_init(struct cdp_config *cfg);

/*
 * Check @cfg as cdp_pool_new() would, with a one-line reason in @err: the
 * address, and for tls:// the CA, the client certificate and key (loaded).
 * Returns 0 or the negative errno cdp_pool_new() would return.
 */
int cdp_config_check(const struct cdp_config *cfg, char *err, size_t errlen);

struct cdp_pool;

/*
 * Create a pool.  No connection is made yet.  Returns 0, -EINVAL (bad
 * address, or TLS settings cdp_config_check() refuses), -ENAMETOOLONG or
 * -ENOMEM.
 */
int cdp_pool_new(const struct cdp_config *cfg, struct cdp_pool **poolp);
/* Close idle sessions (sending END) and free.  No scan may be in flight. */
void cdp_pool_free(struct cdp_pool *pool);
const struct cdp_addr *cdp_pool_addr(const struct cdp_pool *pool);

/* Counters, for tests and statistics; read under the pool lock. */
struct cdp_pool_counters {
	unsigned long connects;	     /* connections opened successfully */
	unsigned long reuses;	     /* commands sent on a reused session */
	unsigned long dead_sessions; /* reused sessions clamd had closed */
	unsigned long discards;	     /* connections closed instead of kept */
	unsigned long waits;	     /* callers that waited for a free slot */
	unsigned open;		     /* connections open now */
	unsigned idle;		     /* of which idle in the pool */
};
void cdp_pool_counters(struct cdp_pool *pool, struct cdp_pool_counters *c);

/*
 * Scans.  Every scan fills *res completely and returns res->verdict.
 * @timeout_ms bounds the whole call (waiting for a free connection,
 * connecting, sending, clamd's scan); 0 means the pool's scan_timeout_ms.
 * @cancel may be NULL.  A connect that fails within connect_timeout_ms is
 * CDP_ERR_CONNECT; one that the call's own deadline cut short is
 * CDP_ERR_TIMEOUT.  Any non-clean outcome discards the connection it
 * used.  The pool never retries: an idle session that clamd closed is
 * replaced when that shows before it is used, and when it shows only as the
 * command is sent or answered (clamd restarted, or timed the session out
 * just then), the command fails with CDP_ERR_CONNECT (ECONNRESET) and every
 * idle session is dropped, so that a retry connects afresh.  Retrying is
 * the caller's choice: it knows its deadline (and, with several clamds,
 * which other one to ask).
 *
 * cdp_scan_fildes: pass @fd to clamd (FILDES, SCM_RIGHTS; UNIX sockets
 *   only, CDP_ERR_LOCAL on TCP and TLS).  clamd reads with pread: the file
 * offset is untouched.  Works for files clamd could not open by path.
 * cdp_scan_stream_fd: send the file's contents (INSTREAM), read with pread
 *   from offset 0 to EOF: the file offset is untouched.
 * cdp_scan_buf: send @len bytes at @buf (INSTREAM).
 * cdp_scan_path: ask clamd to open @path itself (SCAN; absolute path).  Uses
 *   a fresh connection, read to EOF: a path may produce several reply lines
 *   (a directory, a device); the worst one wins.
 *
 * INSTREAM never reports clean for data it did not send: if clamd stops
 * reading (StreamMaxLength), the result is CDP_ERR_SIZE_LIMIT (or a
 * protocol error if clamd's reply is lost), never CDP_CLEAN.
 */
enum cdp_verdict cdp_scan_fildes(struct cdp_pool *pool, int fd, int timeout_ms,
				 struct cdp_cancel *cancel,
				 struct cdp_result *res);
enum cdp_verdict cdp_scan_stream_fd(struct cdp_pool *pool, int fd,
				    int timeout_ms, struct cdp_cancel *cancel,
				    struct cdp_result *res);
enum cdp_verdict cdp_scan_buf(struct cdp_pool *pool, const void *buf,
			      size_t len, int timeout_ms,
			      struct cdp_cancel *cancel,
			      struct cdp_result *res);
enum cdp_verdict cdp_scan_path(struct cdp_pool *pool, const char *path,
			       int timeout_ms, struct cdp_cancel *cancel,
			       struct cdp_result *res);

/* ------------------------------------------------------------------ fleet */

/*
 * A fleet: several clamd backends, each with its own pool, behind one
 * selection.  A scan asks cdp_fleet_acquire() for a backend, scans through
 * its pool and hands the result to cdp_fleet_release(); a retry passes the
 * failed backend as @exclude so it goes elsewhere.  Like the pool, the
 * fleet never retries on its own.
 *
 * Health: a backend whose scan fails to connect or garbles its reply (not
 * clamd's own error replies, a cancel or a size limit) is ejected.  A scan
 * that times out makes it only suspect: the scan may just have needed more
 * time than it had.  A suspect backend gets new scans only when no
 * unsuspected one is healthy, and the prober probes it next (one backend
 * at a time) with a scan of a few bytes, not a PING: a clamd wedged in its
 * scans, or a path that drops streams, still answers PING.  It is ejected
 * if that probe scan fails, and clear again if it gets a verdict or a
 * real scan does; an ejected backend whose scans timed out is probed, and
 * readmitted, by the same tiny scan.  A wait for a free connection of the
 * backend's own pool (CDP_ERR_TIMEOUT with EBUSY) counts for nothing.  The
 * prober thread PINGs ejected backends with a short deadline and a backoff
 * (backoff_min_ms, doubling with each failed PING up to backoff_max_ms) and
 * readmits one that answers, and PINGs healthy ones every probe_interval_ms so
 * that a dead idle one is noticed.  The outcome of a scan or PING begun before
 * the backend's last failure is ignored: the scans in flight when a clamd dies
 * eject it once, and one of them that still gets its verdict does not
 * readmit it.  Each ejection and readmission is logged once.  With every
 * backend ejected, scans go to the one that failed longest ago: they fail
 * closed as with one clamd, and succeed again as soon as one is back.  A
 * fleet of one backend starts no prober: every scan goes to it, as with its
 * pool alone.
 *
 * Threads: clamd scans at most MaxThreads files at once and queues the
 * rest, small ones behind big ones.  The fleet asks each clamd for STATS
 * (with several backends the prober, at start and after each readmission,
 * the STATS counting as a probe; with one, the first scan) and keeps no
 * more scans in flight there than its MaxThreads, one of them for small
 * files (cdp_fleet_acquire_slot); a scan beyond that waits for a slot,
 * within its deadline.  A clamd whose STATS has no thread figures is
 * bounded by its connection cap alone.
 */

/* One backend.  Zeros take the defaults shown. */
struct cdp_backend_config {
	const char *addr;   /* as for cdp_addr_parse (copied) */
	unsigned weight;    /* 1: share of the scans in flight */
	unsigned max_conns; /* the fleet's pool.max_conns: its pool's cap */
	bool fildes;	    /* scans may pass file descriptors (FILDES);
			     * UNIX sockets only, else -EINVAL */
};

/* Log levels of the fleet's messages. */
enum cdp_log_level {
	CDP_LOG_INFO = 0,    /* a backend is healthy again */
	CDP_LOG_WARNING = 1, /* a backend was ejected */
};

struct cdp_fleet_config {
	struct cdp_config pool; /* every backend's pool settings; addr is
				 * not used, max_conns is the default cap */
	int probe_interval_ms;	/* 5000: PING of a healthy backend */
	int probe_timeout_ms;	/* 2000: deadline of one PING, connect
				 * included */
	int backoff_min_ms;	/* 500: first re-probe after an ejection */
	int backoff_max_ms;	/* 30000: re-probe interval at most */
	unsigned scanners;	/* threads that scan through the fleet, for
				 * the warning when a clamd has fewer
				 * threads; 0: not known */
	/* Optional: gets each message (one line, no newline); called from
	 * the prober thread and from scanning threads, never under a lock
	 * of the fleet. */
	void (*log)(void *log_arg, enum cdp_log_level level, const char *msg);
	void *log_arg;
};

void cdp_fleet_config_init(struct cdp_fleet_config *cfg);

struct cdp_fleet;

/*
 * Create a fleet of @n >= 1 backends; no connection is made and no thread
 * started yet.  Returns 0, -EINVAL (bad address, fildes on TCP, n == 0),
 * -ENAMETOOLONG or -ENOMEM; *bad then says which backend (index).
 */
int cdp_fleet_new(const struct cdp_fleet_config *cfg,
		  const struct cdp_backend_config *backends, size_t n,
		  struct cdp_fleet **fleetp, size_t *bad);
/*
 * Start the prober thread (not for a fleet of one, where it is a no-op).
 * After any fork() that must keep it.  0 or a negative errno.
 */
int cdp_fleet_start(struct cdp_fleet *fleet);
/*
 * Stop the prober and free every pool.  No scan may be in flight.  A PING
 * the prober has in flight is cancelled, so this returns at once rather
 * than after probe_timeout_ms (it may run in whatever thread drops the
 * last reference to a fleet).  Not a name lookup: a tcp:// or tls://
 * backend named by a host name waits for getaddrinfo(), which has no
 * cancel, up to the resolver's own timeout.
 */
void cdp_fleet_free(struct cdp_fleet *fleet);

size_t cdp_fleet_size(const struct cdp_fleet *fleet);
/* Backend @i's pool, for commands (PING, VERSION) sent to it. */
struct cdp_pool *cdp_fleet_pool(const struct cdp_fleet *fleet, size_t i);
/* Backend @i's address as configured. */
const char *cdp_fleet_addr(const struct cdp_fleet *fleet, size_t i);

/* A backend handed out for one scan attempt. */
struct cdp_fleet_pick {
	int index;
	struct cdp_pool *pool;
	bool fildes;	     /* as configured for it */
	size_t alternatives; /* healthy backends other than this one */
	int64_t started_ms;  /* to ignore outcomes begun before the
			      * backend's last failure */
	int64_t started_us;  /* for the latency */
};

/*
 * Choose the backend for a scan attempt (see cdp_fsel_pick in the sources:
 * the healthy one with the fewest scans in flight relative to its weight,
 * not @exclude unless it is the only one; -1 excludes none) and count the
 * scan in flight there.  Every pick must be released.
 */
void cdp_fleet_acquire(struct cdp_fleet *fleet, int exclude,
		       struct cdp_fleet_pick *pick);
/*
 * cdp_fleet_acquire() for a scan that must not queue inside clamd: only a
 * backend below its limit (cdp_fsel_limit in the sources: its connection
 * cap, and MaxThreads - 1 for a big scan, MaxThreads for a @small one) is
 * chosen, by the same preferences; when the backends to choose from are
 * all at it, waits for a scan to end, at most @timeout_ms, cut short
 * (within 50 ms) by @cancel (may be NULL).  In a fleet without a prober
 * (one backend) a backend first reached or just readmitted is asked for
 * its MaxThreads first (STATS, at most probe_timeout_ms); a backend being
 * asked has no slot meanwhile.  A change of the limit is logged once, as
 * a warning when it is below the config's scanners or the backend's
 * connection cap.  Returns 0 with @pick filled (release it), -ETIMEDOUT
 * or -ECANCELED.
 */
int cdp_fleet_acquire_slot(struct cdp_fleet *fleet, int exclude, bool small,
			   int timeout_ms, struct cdp_cancel *cancel,
			   struct cdp_fleet_pick *pick);
/*
 * Ask backend @i's clamd for its MaxThreads now (a periodic check: clamd
 * may have been restarted with another MaxThreads) and apply it as above.
 * Returns the limit, -EBUSY when another caller is asking it, -ERANGE, or
 * the negative errno of the STATS (the limit known before stays).
 */
int cdp_fleet_learn_threads(struct cdp_fleet *fleet, size_t i,
			    struct cdp_cancel *cancel);
/* Scans that had to wait in cdp_fleet_acquire_slot for a free slot. */
uint64_t cdp_fleet_slot_waits(struct cdp_fleet *fleet);
/*
 * The attempt under @pick starts now, not at its acquire: the caller
 * waited first (a pause before a retry), and that wait is neither the
 * backend's latency nor older than a failure recorded meanwhile.
 */
void cdp_fleet_restart(struct cdp_fleet *fleet, struct cdp_fleet_pick *pick);
/* The attempt ended with @res: counters, latency, ejection. */
void cdp_fleet_release(struct cdp_fleet *fleet,
		       const struct cdp_fleet_pick *pick,
		       const struct cdp_result *res);

/* One backend's state and counters. */
struct cdp_backend_stats {
	const char *addr; /* valid while the fleet is */
	bool healthy;
	unsigned weight;
	unsigned max_conns;
	unsigned threads; /* its clamd's MaxThreads (STATS), 0: not known */
	unsigned inflight;
	uint64_t scans;	    /* attempts released */
	uint64_t errors;    /* of which ended in an error (not cancelled) */
	uint64_t ejections; /* times it went from healthy to ejected */
	uint64_t last_ms;   /* latency of the last scan not cancelled */
	uint64_t avg_ms;    /* mean latency of scans not cancelled */
	uint64_t max_ms;    /* highest latency */
	/* scans not cancelled and the sum of their latencies: counters a
	 * monitor can aggregate over backends and time, unlike a mean */
	uint64_t timed;
	uint64_t total_us;
};

/* Fills @st for backend @i; -ERANGE when there is none. */
int cdp_fleet_backend_stats(struct cdp_fleet *fleet, size_t i,
			    struct cdp_backend_stats *st);

/* ---------------------------------------------------------- other commands */

/* Parsed VERSION reply. */
struct cdp_version {
	char engine[32];	  /* "1.4.6" */
	unsigned long db_version; /* 27123, or 0 in the short form */
	char db_date[64];	  /* "Mon Jan  1 09:00:00 2024", or "" */
	time_t db_time;		  /* db_date as UTC time_t, or 0 */
};

/*
 * PING, VERSION, STATS through the pool, bounded by io_timeout_ms.  Return 0,
 * or a negative errno (-ECONNREFUSED/-ENOENT... for connect failures,
 * -ETIMEDOUT, -EPROTO, -EIO for a clamd error) with details in *res when
 * @res is not NULL.  cdp_stats() stores a malloc()ed NUL-terminated copy of
 * clamd's text in *textp (free() it).
 */
int cdp_ping(struct cdp_pool *pool, struct cdp_result *res);
int cdp_version(struct cdp_pool *pool, struct cdp_version *ver,
		struct cdp_result *res);
int cdp_stats(struct cdp_pool *pool, char **textp, struct cdp_result *res);
/*
 * cdp_ping(), cdp_version() and cdp_stats() under @cancel (may be NULL):
 * -ECANCELED, res->cat CDP_ERR_CANCELLED, once it triggers (a thread
 * being stopped, a scan given up).
 */
int cdp_ping_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		    struct cdp_result *res);
int cdp_stats_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		     char **textp, struct cdp_result *res);
int cdp_version_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
		       struct cdp_version *ver, struct cdp_result *res);

/* -------------------------------------------------------- pure parsers */

/*
 * Parse one scan reply line @s of @len bytes (terminator removed, session
 * prefix removed) into @res.  The verdict is read from the END of the line:
 * "<name>: <sig> FOUND", "<name>: OK", "<message> ERROR", or one of clamd's
 * bare messages (UNKNOWN COMMAND, COMMAND UNAVAILABLE, COMMAND READ TIMED
 * OUT).  A path containing ": ... FOUND" or a newline cannot change the
 * verdict.  @name, when not NULL, is the object name clamd must echo before
 * ": OK" or ": <sig> FOUND" ("stream", a path); the special form "fd[]"
 * matches "fd[<digits>]".  An error reply's leading "<name>: " is removed
 * from the message.  Returns 0, or -EPROTO with res->cat CDP_ERR_PROTOCOL.
 * No I/O, no allocation: safe on hostile input.
 */
int cdp_reply_parse(const char *s, size_t len, const char *name,
		    struct cdp_result *res);

/*
 * Split an IDSESSION reply "<id>: <rest>".  Returns 0 and stores the number
 * and the offset of <rest>, or -EPROTO when the prefix is missing or
 * malformed (no digits, leading zero, overflow, no ": ").
 */
int cdp_reply_split_id(const char *s, size_t len, unsigned *idp, size_t *restp);

/*
 * Parse a VERSION reply: "ClamAV 1.4.6/27123/Mon Jan  1 09:00:00 2024" or
 * the short "ClamAV 1.4.6".  Returns 0 or -EPROTO.
 */
int cdp_version_parse(const char *s, size_t len, struct cdp_version *ver);

/* clamd's thread pool as its STATS reply tells it. */
struct cdp_threads {
	unsigned live; /* threads running now */
	unsigned idle; /* of which waiting for work */
	unsigned max;  /* MaxThreads: scans beyond it wait in clamd's queue */
};

/*
 * Find the "THREADS: live N  idle N max N ..." line of a STATS reply @s of
 * @len bytes (the first such line: clamd has one pool) and read its
 * figures by keyword; fields it does not know are skipped.  Returns 0, or
 * -EPROTO (and *t zeroed) when there is no such line, a figure is not a
 * plain decimal number up to 1000000, or max is missing or 0.  No I/O, no
 * allocation: safe on hostile input.
 */
int cdp_stats_parse_threads(const char *s, size_t len, struct cdp_threads *t);

#ifdef __cplusplus
}
#endif

#endif /* CLAMDPROTO_H */
