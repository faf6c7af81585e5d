// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A fleet of clamd backends: one pool per backend for scans, one
 * single-connection pool per backend for health probes, counters, and the
 * prober thread.  The decisions themselves (which backend, when ejected,
 * when probed, whether a scan may start there now) are fleetsel.c's; this
 * file only runs them under its lock with the real clock, learns each
 * clamd's thread limit (STATS), and logs each change of state once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fleetsel.h"
#include "internal.h"

struct backend {
	char *addr;
	struct cdp_pool *pool;	/* scans */
	struct cdp_pool *probe; /* PINGs, probe scans, STATS: one fresh
				 * connection each */
	bool fildes;
	bool probing; /* the prober is at it: not due again meanwhile */
	/* its clamd's MaxThreads: asked when a scan first reaches it, again
	 * after each readmission (clamd may have restarted with another
	 * configuration) and at each cdp_fleet_learn_threads() */
	enum { LEARN_DUE, LEARN_BUSY, LEARN_DONE } learn;
	unsigned said_threads; /* the limit last logged, 0: none */
	bool said_no_stats;    /* a failed STATS was logged */
	uint64_t scans, errors, ejections;
	uint64_t timed, total_us, last_ms, max_ms;
};

struct cdp_fleet {
	struct cdp_fleet_config cfg;
	struct cdp_fsel_timing timing;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_cond_t slot; /* a scan ended or a limit was learnt */
	pthread_t prober;
	bool started, stopping;
	struct cdp_cancel *stop; /* the prober's PINGs; triggered by free */
	unsigned rr;
	uint64_t slot_waits; /* scans that waited for a free slot */
	size_t n;
	struct backend *b;
	struct cdp_fsel *sel; /* backend i's decision state: sel[i] */
};

void cdp_fleet_config_init(struct cdp_fleet_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cdp_config_init(&cfg->pool);
	cfg->probe_interval_ms = 5000;
	cfg->probe_timeout_ms = 2000;
	cfg->backoff_min_ms = 500;
	cfg->backoff_max_ms = 30000;
}

static void say(struct cdp_fleet *f, enum cdp_log_level level, const char *fmt,
		...) __attribute__((format(printf, 3, 4)));

static void say(struct cdp_fleet *f, enum cdp_log_level level, const char *fmt,
		...)
{
	char msg[CDP_TEXT_MAX + 256];
	va_list ap;

	if (!f->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	f->cfg.log(f->cfg.log_arg, level, msg);
}

static int new_pools(struct cdp_fleet *f, struct backend *b,
		     struct cdp_fsel *sel, const struct cdp_backend_config *bc)
{
	struct cdp_config pc = f->cfg.pool, qc = f->cfg.pool;
	int rc;

	b->addr = strdup(bc->addr ? bc->addr : CDP_DEFAULT_ADDR);
	if (!b->addr)
		return -ENOMEM;
	pc.addr = b->addr;
	if (bc->max_conns)
		pc.max_conns = bc->max_conns;
	rc = cdp_pool_new(&pc, &b->pool);
	if (rc)
		return rc;
	if (bc->fildes &&
	    cdp_addr_kind(cdp_pool_addr(b->pool)) != CDP_ADDR_UNIX)
		return -EINVAL;
	b->fildes = bc->fildes;
	qc.addr = b->addr;
	qc.max_conns = 1;
	qc.no_session = 1;
	qc.connect_timeout_ms = f->cfg.probe_timeout_ms;
	qc.io_timeout_ms = f->cfg.probe_timeout_ms;
	rc = cdp_pool_new(&qc, &b->probe);
	if (rc)
		return rc;
	cdp_fsel_init(sel, bc->weight, pc.max_conns ? pc.max_conns : 8,
		      &f->timing, cdp_now_ms());
	return 0;
}

int cdp_fleet_new(const struct cdp_fleet_config *cfg,
		  const struct cdp_backend_config *backends, size_t n,
		  struct cdp_fleet **fleetp, size_t *bad)
{
	struct cdp_fleet_config def;
	pthread_condattr_t ca;
	struct cdp_fleet *f;
	size_t i;
	int rc;

	*fleetp = NULL;
	*bad = 0;
	if (n == 0)
		return -EINVAL;
	cdp_fleet_config_init(&def);
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->cfg = *cfg;
	if (f->cfg.probe_interval_ms <= 0)
		f->cfg.probe_interval_ms = def.probe_interval_ms;
	if (f->cfg.probe_timeout_ms <= 0)
		f->cfg.probe_timeout_ms = def.probe_timeout_ms;
	if (f->cfg.backoff_min_ms <= 0)
		f->cfg.backoff_min_ms = def.backoff_min_ms;
	if (f->cfg.backoff_max_ms < f->cfg.backoff_min_ms)
		f->cfg.backoff_max_ms = f->cfg.backoff_min_ms;
	f->timing = (struct cdp_fsel_timing){
		.probe_interval_ms = f->cfg.probe_interval_ms,
		.backoff_min_ms = f->cfg.backoff_min_ms,
		.backoff_max_ms = f->cfg.backoff_max_ms,
	};
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->wake, &ca);
	pthread_cond_init(&f->slot, &ca);
	pthread_condattr_destroy(&ca);
	f->b = calloc(n, sizeof(*f->b));
	f->sel = calloc(n, sizeof(*f->sel));
	f->stop = cdp_cancel_new();
	if (!f->b || !f->sel || !f->stop) {
		rc = -ENOMEM;
		goto fail;
	}
	f->n = n;
	for (i = 0; i < n; i++) {
		rc = new_pools(f, &f->b[i], &f->sel[i], &backends[i]);
		if (rc) {
			*bad = i;
			goto fail;
		}
	}
	*fleetp = f;
	return 0;
fail:
	cdp_fleet_free(f);
	return rc;
}

/*
 * The probe after a scan timed out: a scan of a few bytes, the way the
 * backend's scans go (FILDES of a memfd, or INSTREAM), bounded like a
 * PING.  A clamd wedged in its scans, or a path that loses streams,
 * answers PING and fails this.  Whether it answered: a verdict, or an
 * error reply of clamd's own (it scans, the way real scans would fail).
 */
static bool probe_scan(struct cdp_fleet *f, struct backend *b,
		       struct cdp_result *res)
{
	static const char data[] = "clamfs fleet probe\n";
	int fd = -1;

	if (b->fildes)
		fd = memfd_create("clamfs-probe", MFD_CLOEXEC);
	if (fd >= 0 &&
	    write(fd, data, sizeof(data) - 1) == (ssize_t)sizeof(data) - 1)
		cdp_scan_fildes(b->probe, fd, f->cfg.probe_timeout_ms, f->stop,
				res);
	else
		cdp_scan_buf(b->probe, data, sizeof(data) - 1,
			     f->cfg.probe_timeout_ms, f->stop, res);
	if (fd >= 0)
		close(fd);
	return res->verdict != CDP_ERROR || res->cat == CDP_ERR_CLAMD;
}

/* Probe every due backend once; called and returns with the lock held. */
static void probe_due(struct cdp_fleet *f)
{
	size_t i;

	for (i = 0; i < f->n && !f->stopping; i++) {
		struct backend *b = &f->b[i];
		enum cdp_fsel_change change;
		enum cdp_fsel_probe kind;
		struct cdp_result res;
		bool ok, suspect;
		int64_t started;

		started = cdp_now_ms();
		if (b->probing || !cdp_fsel_probe_due(&f->sel[i], started))
			continue;
		suspect = f->sel[i].suspect;
		kind = cdp_fsel_probe_kind(&f->sel[i]);
		b->probing = true;
		pthread_mutex_unlock(&f->lock);
		if (kind == CDP_FSEL_SCAN)
			ok = probe_scan(f, b, &res);
		else
			ok = cdp_ping_cancel(b->probe, f->stop, &res) == 0;
		pthread_mutex_lock(&f->lock);
		b->probing = false;
		/* cancelled by cdp_fleet_free: no verdict on the backend */
		if (f->stopping)
			break;
		change = cdp_fsel_probe_done(&f->sel[i], &f->timing, started,
					     kind, ok, cdp_now_ms());
		if (change == CDP_FSEL_EJECTED)
			b->ejections++;
		if (change == CDP_FSEL_SAME)
			continue;
		if (change == CDP_FSEL_READMITTED)
			b->learn = LEARN_DUE;
		pthread_mutex_unlock(&f->lock);
		if (change == CDP_FSEL_READMITTED)
			say(f, CDP_LOG_INFO,
			    "clamd %s: %s again, back in the fleet", b->addr,
			    kind == CDP_FSEL_SCAN ? "scans" : "answers PING");
		else if (kind == CDP_FSEL_SCAN)
			say(f, CDP_LOG_WARNING,
			    "clamd %s: a probe scan failed (%s: %s) after a "
			    "scan "
			    "timed out, ejected from the fleet until it scans "
			    "again",
			    b->addr, cdp_errcat_name(res.cat), res.text);
		else
			say(f, CDP_LOG_WARNING,
			    "clamd %s: PING failed (%s: %s)%s, ejected from "
			    "the fleet until it answers again",
			    b->addr, cdp_errcat_name(res.cat), res.text,
			    suspect ? " after a scan timed out" : "");
		pthread_mutex_lock(&f->lock);
	}
}

static int learn_locked(struct cdp_fleet *f, size_t i, bool probe,
			struct cdp_cancel *cancel);

/*
 * Ask every healthy backend whose MaxThreads is due (at start, after a
 * readmission) for it, the STATS counting as a probe: one that does not
 * answer it would not answer a PING.  Called and returns with the lock
 * held.  Whether one was asked: the state may have changed meanwhile.
 */
static bool learn_due(struct cdp_fleet *f)
{
	for (size_t i = 0; i < f->n && !f->stopping; i++)
		if (f->b[i].learn == LEARN_DUE && !f->sel[i].ejected) {
			f->b[i].learn = LEARN_BUSY;
			learn_locked(f, i, true, f->stop);
			return true;
		}
	return false;
}

static void *prober_main(void *arg)
{
	struct cdp_fleet *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!f->stopping) {
		int64_t due = cdp_fsel_next_due(f->sel, f->n);
		struct timespec ts;

		if (learn_due(f))
			continue;
		if (due > cdp_now_ms()) {
			ts.tv_sec = due / 1000;
			ts.tv_nsec = (long)(due % 1000) * 1000000L;
			pthread_cond_timedwait(&f->wake, &f->lock, &ts);
			continue;
		}
		probe_due(f);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int cdp_fleet_start(struct cdp_fleet *f)
{
	int rc;

	if (f->n < 2 || f->started)
		return 0;
	rc = pthread_create(&f->prober, NULL, prober_main, f);
	if (rc)
		return -rc;
	f->started = true;
	return 0;
}

void cdp_fleet_free(struct cdp_fleet *f)
{
	size_t i;

	if (!f)
		return;
	if (f->started) {
		pthread_mutex_lock(&f->lock);
		f->stopping = true;
		pthread_cond_signal(&f->wake);
		pthread_mutex_unlock(&f->lock);
		/* a PING in flight would hold the join up to its deadline;
		 * its outcome is not used (the loop stops on f->stopping) */
		cdp_cancel_trigger(f->stop);
		pthread_join(f->prober, NULL);
	}
	for (i = 0; f->b && i < f->n; i++) {
		cdp_pool_free(f->b[i].pool);
		cdp_pool_free(f->b[i].probe);
		free(f->b[i].addr);
	}
	free(f->b);
	free(f->sel);
	cdp_cancel_free(f->stop);
	pthread_cond_destroy(&f->wake);
	pthread_cond_destroy(&f->slot);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

size_t cdp_fleet_size(const struct cdp_fleet *f)
{
	return f->n;
}

struct cdp_pool *cdp_fleet_pool(const struct cdp_fleet *f, size_t i)
{
	return i < f->n ? f->b[i].pool : NULL;
}

const char *cdp_fleet_addr(const struct cdp_fleet *f, size_t i)
{
	return i < f->n ? f->b[i].addr : NULL;
}

/* Backend i takes one more scan; under f->lock. */
static void take(struct cdp_fleet *f, int i, struct cdp_fleet_pick *pick)
{
	f->sel[i].inflight++;
	pick->index = i;
	pick->pool = f->b[i].pool;
	pick->fildes = f->b[i].fildes;
	pick->alternatives = cdp_fsel_healthy(f->sel, f->n, i);
	/* under the lock: ordered against the failures release() records */
	pick->started_ms = cdp_now_ms();
	pick->started_us = cdp_now_us();
}

void cdp_fleet_acquire(struct cdp_fleet *f, int exclude,
		       struct cdp_fleet_pick *pick)
{
	pthread_mutex_lock(&f->lock);
	take(f, cdp_fsel_pick(f->sel, f->n, exclude, &f->rr), pick);
	pthread_mutex_unlock(&f->lock);
}

/*
 * Ask backend @i's clamd for its thread limit (STATS through the probe
 * pool, at most probe_timeout_ms), record it and log a change once.  With
 * @probe, a STATS that fails the way a PING can (connect, timeout,
 * protocol) is a failed probe.  Called and returns with the lock held;
 * b->learn must be LEARN_BUSY and is left LEARN_DONE (LEARN_DUE when
 * @cancel cut it short: another caller asks again).  Returns the limit,
 * or a negative errno.
 */
static int learn_locked(struct cdp_fleet *f, size_t i, bool probe,
			struct cdp_cancel *cancel)
{
	enum cdp_fsel_change change = CDP_FSEL_SAME;
	struct backend *b = &f->b[i];
	struct cdp_threads t = {0};
	struct cdp_result res = {0};
	char *text = NULL;
	unsigned was, cap, scanners;
	bool warn = false, said_fail = false;
	int64_t started = cdp_now_ms();
	int rc;

	f->sel[i].learning = true;
	pthread_mutex_unlock(&f->lock);
	rc = cdp_stats_cancel(b->probe, cancel, &text, &res);
	if (rc == 0 && cdp_stats_parse_threads(text, strlen(text), &t) != 0) {
		/* it answered: an old clamd, or something else; no failure */
		rc = -EPROTO;
		res.cat = CDP_ERR_CLAMD;
		snprintf(res.text, sizeof(res.text),
			 "no THREADS line with a max in its reply");
	}
	free(text);
	pthread_mutex_lock(&f->lock);
	f->sel[i].learning = false;
	if (probe && rc && rc != -ECANCELED && cdp_fsel_is_failure(&res)) {
		change =
			cdp_fsel_probe_done(&f->sel[i], &f->timing, started,
					    CDP_FSEL_PING, false, cdp_now_ms());
		if (change == CDP_FSEL_EJECTED)
			b->ejections++;
	}
	was = f->sel[i].threads;
	cap = f->sel[i].cap;
	scanners = f->cfg.scanners;
	if (rc == -ECANCELED) {
		b->learn = LEARN_DUE;
	} else {
		b->learn = LEARN_DONE;
		/* an old clamd, or none: what it said last stays */
		if (rc == 0)
			f->sel[i].threads = t.max;
	}
	if (rc == 0 && t.max != b->said_threads) {
		warn = t.max < cap || t.max < scanners;
		b->said_threads = t.max;
		b->said_no_stats = false;
	} else if (rc && rc != -ECANCELED && !cdp_fsel_is_failure(&res) &&
		   !b->said_no_stats) {
		/* it answered, without thread figures; a clamd that did not
		 * answer at all is told by the probe or the scan that follows
		 */
		said_fail = b->said_no_stats = true;
	}
	pthread_cond_broadcast(&f->slot);
	pthread_mutex_unlock(&f->lock);
	if (warn)
		say(f, CDP_LOG_WARNING,
		    "clamd %s: MaxThreads %u is below scan_threads=%u or "
		    "conns=%u: clamfs keeps at most %u scans in flight there "
		    "(%u big, the rest for small files) and the others wait; "
		    "set scan_threads and conns= to at most %u, or raise "
		    "MaxThreads",
		    b->addr, t.max, scanners, cap, t.max < cap ? t.max : cap,
		    t.max > 1 ? (t.max - 1 < cap ? t.max - 1 : cap) : 1, t.max);
	else if (rc == 0 && t.max != was)
		say(f, CDP_LOG_INFO,
		    "clamd %s: MaxThreads %u: at most %u scans in flight "
		    "there, "
		    "one of them kept for small files",
		    b->addr, t.max, t.max < cap ? t.max : cap);
	else if (change == CDP_FSEL_EJECTED)
		say(f, CDP_LOG_WARNING,
		    "clamd %s: STATS failed (%s: %s), ejected from the fleet "
		    "until it answers again",
		    b->addr, cdp_errcat_name(res.cat), res.text);
	else if (said_fail && was)
		say(f, CDP_LOG_WARNING,
		    "clamd %s: STATS failed (%s: %s): MaxThreads %u as it "
		    "said before still bounds the scans in flight there",
		    b->addr, cdp_errcat_name(res.cat), res.text, was);
	else if (said_fail)
		say(f, CDP_LOG_WARNING,
		    "clamd %s: STATS failed (%s: %s): its MaxThreads is not "
		    "known, conns=%u bounds the scans in flight there",
		    b->addr, cdp_errcat_name(res.cat), res.text, cap);
	pthread_mutex_lock(&f->lock);
	return rc ? rc : (int)t.max;
}

int cdp_fleet_learn_threads(struct cdp_fleet *f, size_t i,
			    struct cdp_cancel *cancel)
{
	int rc;

	if (i >= f->n)
		return -ERANGE;
	pthread_mutex_lock(&f->lock);
	if (f->b[i].learn == LEARN_BUSY) {
		pthread_mutex_unlock(&f->lock);
		return -EBUSY;
	}
	f->b[i].learn = LEARN_BUSY;
	rc = learn_locked(f, i, false, cancel);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* Waits for a scan's end (or a learnt limit) until @deadline, in slices:
 * a cancel only sets a flag, it does not signal this condition. */
#define SLOT_SLICE_MS 50

static void wait_slot(struct cdp_fleet *f, int64_t deadline)
{
	int64_t until = cdp_now_ms() + SLOT_SLICE_MS;
	struct timespec ts;

	if (until > deadline)
		until = deadline;
	ts.tv_sec = until / 1000;
	ts.tv_nsec = (long)(until % 1000) * 1000000L;
	pthread_cond_timedwait(&f->slot, &f->lock, &ts);
}

int cdp_fleet_acquire_slot(struct cdp_fleet *f, int exclude, bool small,
			   int timeout_ms, struct cdp_cancel *cancel,
			   struct cdp_fleet_pick *pick)
{
	int64_t deadline = cdp_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	bool waited = false;
	int rc = 0, i;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		if (cancel && cdp_cancel_triggered(cancel)) {
			rc = -ECANCELED;
			break;
		}
		i = cdp_fsel_pick_slot(f->sel, f->n, exclude, small, &f->rr);
		if (i >= 0 && f->b[i].learn == LEARN_DUE && !f->started) {
			/* first reached, or readmitted: its limit first, or
			 * the scans that start meanwhile would exceed it.
			 * With several backends the prober asks (at start,
			 * after a readmission), and the scan goes on: a
			 * backend that does not answer must not hold it up */
			f->b[i].learn = LEARN_BUSY;
			learn_locked(f, (size_t)i, false, cancel);
			continue;
		}
		/* (a backend being asked is never picked here) */
		if (i >= 0)
			break;
		if (cdp_now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (!waited)
			f->slot_waits++;
		waited = true;
		wait_slot(f, deadline);
	}
	if (rc == 0)
		take(f, i, pick);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

uint64_t cdp_fleet_slot_waits(struct cdp_fleet *f)
{
	uint64_t n;

	pthread_mutex_lock(&f->lock);
	n = f->slot_waits;
	pthread_mutex_unlock(&f->lock);
	return n;
}

void cdp_fleet_restart(struct cdp_fleet *f, struct cdp_fleet_pick *pick)
{
	pthread_mutex_lock(&f->lock);
	pick->started_ms = cdp_now_ms();
	pick->started_us = cdp_now_us();
	pthread_mutex_unlock(&f->lock);
}

void cdp_fleet_release(struct cdp_fleet *f, const struct cdp_fleet_pick *pick,
		       const struct cdp_result *res)
{
	struct backend *b = &f->b[pick->index];
	enum cdp_fsel_change change;
	uint64_t ms, us;
	int64_t now;

	pthread_mutex_lock(&f->lock);
	now = cdp_now_ms();
	us = (uint64_t)(cdp_now_us() - pick->started_us);
	ms = us / 1000;
	f->sel[pick->index].inflight--;
	pthread_cond_broadcast(&f->slot);
	b->scans++;
	if (res->verdict == CDP_ERROR && res->cat != CDP_ERR_CANCELLED)
		b->errors++;
	if (res->cat != CDP_ERR_CANCELLED) {
		b->timed++;
		b->total_us += us;
		b->last_ms = ms;
		if (ms > b->max_ms)
			b->max_ms = ms;
	}
	change = cdp_fsel_scan_done(&f->sel[pick->index], &f->timing,
				    pick->started_ms, res, now);
	if (change == CDP_FSEL_EJECTED)
		b->ejections++;
	if (change == CDP_FSEL_READMITTED)
		b->learn = LEARN_DUE;
	/* a suspect one is due for its probe now, not at the prober's
	 * next wake-up; a readmitted one for its STATS */
	if (change != CDP_FSEL_SAME)
		pthread_cond_signal(&f->wake);
	pthread_mutex_unlock(&f->lock);
	/* one backend has no other to be ejected in favour of: quiet */
	if (f->n < 2)
		return;
	if (change == CDP_FSEL_EJECTED)
		say(f, CDP_LOG_WARNING,
		    "clamd %s: scan failed (%s: %s), ejected from the fleet "
		    "until it answers its probe again",
		    b->addr, cdp_errcat_name(res->cat), res->text);
	else if (change == CDP_FSEL_READMITTED)
		say(f, CDP_LOG_INFO,
		    "clamd %s: answered a scan again, back in the fleet",
		    b->addr);
}

int cdp_fleet_backend_stats(struct cdp_fleet *f, size_t i,
			    struct cdp_backend_stats *st)
{
	struct backend *b;

	if (i >= f->n)
		return -ERANGE;
	b = &f->b[i];
	pthread_mutex_lock(&f->lock);
	*st = (struct cdp_backend_stats){
		.addr = b->addr,
		.healthy = !f->sel[i].ejected,
		.weight = f->sel[i].weight,
		.max_conns = f->sel[i].cap,
		.threads = f->sel[i].threads,
		.inflight = f->sel[i].inflight,
		.scans = b->scans,
		.errors = b->errors,
		.ejections = b->ejections,
		.last_ms = b->last_ms,
		.avg_ms = b->timed ? b->total_us / b->timed / 1000 : 0,
		.max_ms = b->max_ms,
		.timed = b->timed,
		.total_us = b->total_us,
	};
	pthread_mutex_unlock(&f->lock);
	return 0;
}
