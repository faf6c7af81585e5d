/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The decisions of a fleet of clamd backends, apart from any socket,
 * thread or clock: which backend a scan goes to, when a backend is ejected,
 * when it is probed again and when it is readmitted.  Times are passed in
 * (milliseconds of any monotonic clock), so the unit tests drive a fake one.
 * Not thread-safe: fleet.c calls it under its lock.
 */
#ifndef CDP_FLEETSEL_H
#define CDP_FLEETSEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clamdproto.h"

/* One backend's state as the decisions see it. */
struct cdp_fsel {
	unsigned weight;    /* >= 1: share of the scans in flight */
	unsigned cap;	    /* connections; at cap in flight it is full */
	unsigned inflight;  /* scans handed out and not yet released */
	bool ejected;	    /* not picked while a healthy one is left */
	bool suspect;	    /* healthy, but a scan timed out: probed at
			     * once, picked after the unsuspected ones */
	bool scan_probe;    /* a scan timed out here: only a scan (the
			     * probe's, or a real one) clears it, a PING
			     * says nothing of a clamd wedged in scans */
	unsigned threads;   /* clamd's MaxThreads, 0: not known */
	bool learning;	    /* its MaxThreads is being asked: no slot there
			     * until it is known */
	int64_t failed_at;  /* last failed scan or probe */
	int64_t next_probe; /* when the prober should probe it next */
	int backoff_ms;	    /* while ejected: the current probe interval */
};

struct cdp_fsel_timing {
	int probe_interval_ms; /* between PINGs of a healthy backend */
	int backoff_min_ms;    /* first re-probe after an ejection */
	int backoff_max_ms;    /* the doubling stops here */
};

/* A healthy backend, first probe one interval from @now. */
void cdp_fsel_init(struct cdp_fsel *b, unsigned weight, unsigned cap,
		   const struct cdp_fsel_timing *t, int64_t now);

/*
 * The backend for the next scan: of the healthy ones other than @exclude
 * (-1: none) the one with the fewest scans in flight relative to its
 * weight, preferring one not suspect, then one below its connection cap
 * (a full pool waits for a slot, a suspect backend may be wedged and eat
 * half the deadline); ties go round robin
 * from *rr, which is advanced past the choice.  Without a healthy one,
 * the ejected one (other than @exclude) that failed longest ago: when all
 * are down a scan still fails closed the way it does with one clamd, and
 * one that came back is found.  @exclude itself only when it is the only
 * backend.  Returns the index, or -1 when @n is 0.
 */
int cdp_fsel_pick(const struct cdp_fsel *b, size_t n, int exclude,
		  unsigned *rr);

/*
 * Scans that may be in flight on @b at once: its connection cap, and when
 * its clamd's MaxThreads is known no more than that, one of them kept for
 * small files: a big scan may use threads - 1 (at least 1), a @small one
 * all of them.  More would wait in clamd's own queue, where the small
 * ones queue behind the big ones.
 */
unsigned cdp_fsel_limit(const struct cdp_fsel *b, bool small);

/*
 * cdp_fsel_pick() for a scan that waits for a free slot rather than
 * queue in clamd: only backends below cdp_fsel_limit(@small) are chosen,
 * by the same preferences.  Returns -1 when the one cdp_fsel_pick() would
 * take from (the healthy ones other than @exclude; without those the
 * ejected ones; without those @exclude) are all at their limit: the
 * caller waits for a release and asks again.  A backend whose MaxThreads
 * is being asked (learning) has no slot yet.
 */
int cdp_fsel_pick_slot(const struct cdp_fsel *b, size_t n, int exclude,
		       bool small, unsigned *rr);

/* Healthy backends other than @exclude (-1: none). */
size_t cdp_fsel_healthy(const struct cdp_fsel *b, size_t n, int exclude);

/*
 * Whether a scan's result says the backend may be unwell: it could not be
 * reached, did not answer in time, or garbled its reply.  Not clamd's own
 * error replies (it answered), a cancel, a size limit, or a wait for a
 * free connection of its pool (CDP_ERR_TIMEOUT with EBUSY: our side).
 */
bool cdp_fsel_is_failure(const struct cdp_result *res);

/*
 * @b failed at @now (a probe, or a scan's connect or protocol error).  A
 * healthy backend is ejected and first probed again backoff_min_ms later;
 * returns true then (a state change, to be logged once).  An ejected one
 * that failed again waits twice as long, at most backoff_max_ms; returns
 * false.  cdp_fsel_scan_done() and cdp_fsel_probe_done() decide when a
 * failure gets here.
 */
bool cdp_fsel_failed(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
		     int64_t now);

/*
 * A scan or a probe of @b succeeded at @now: the next probe of a healthy
 * backend is an interval away.  An ejected backend is readmitted; returns
 * true then (a state change).
 */
bool cdp_fsel_succeeded(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
			int64_t now);

/* What an outcome changed: each change is logged once. */
enum cdp_fsel_change {
	CDP_FSEL_SAME = 0,
	CDP_FSEL_EJECTED,    /* healthy before, ejected now */
	CDP_FSEL_READMITTED, /* ejected before, healthy now */
	CDP_FSEL_SUSPECT,    /* healthy, suspect now: wake the prober */
};

/*
 * A scan attempt on @b, handed out at @started, ended at @now with @res.
 * An attempt begun no later than @b's last failure says nothing newer
 * and is ignored: a clamd that dies with scans in flight is ejected once,
 * and one of them that still got its verdict does not readmit it.
 * A connect or protocol error ejects a healthy backend (cdp_fsel_failed).
 * On an ejected one (sent there because none was healthy) any failure,
 * a timeout too, only updates failed_at, so the next scan goes to another
 * that may be back; only failed probes lengthen the backoff.  A timeout
 * only makes a healthy backend suspect and due for a probe at once: the
 * scan may have needed more time than it had (a big file, or a first
 * attempt given half the deadline), and ejecting for that would eject
 * every backend in turn; the probe decides, and after a timeout that
 * probe is a tiny scan, not a PING (scan_probe, also on an ejected
 * one): a clamd wedged in its scans, or a path that drops streams, still
 * answers PING.  A verdict is
 * cdp_fsel_succeeded.  Anything else (clamd's own error, a cancel, a wait
 * for a pool slot) says nothing about the backend's health.
 */
enum cdp_fsel_change
cdp_fsel_scan_done(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
		   int64_t started, const struct cdp_result *res, int64_t now);

/* What the prober sends. */
enum cdp_fsel_probe {
	CDP_FSEL_PING = 0, /* PING: is it there */
	CDP_FSEL_SCAN,	   /* a tiny scan: does it scan */
};

/* The probe @b is due for: a scan while scan_probe is set, else a PING. */
enum cdp_fsel_probe cdp_fsel_probe_kind(const struct cdp_fsel *b);

/*
 * A probe (@kind) of @b sent at @started ended at @now, answered (@ok:
 * clears a suspicion, readmits) or not (cdp_fsel_failed: ejects a healthy
 * or suspect one, doubles the backoff of an ejected one).  A probe sent no
 * later than @b's last failure is ignored, and the next one is a backoff
 * away.  An answered PING of a backend whose scan timed out meanwhile
 * (scan_probe) proves nothing: the scan probe is due at once (a backoff
 * under way stays).
 */
enum cdp_fsel_change cdp_fsel_probe_done(struct cdp_fsel *b,
					 const struct cdp_fsel_timing *t,
					 int64_t started,
					 enum cdp_fsel_probe kind, bool ok,
					 int64_t now);

/* Whether the prober should probe @b at @now. */
bool cdp_fsel_probe_due(const struct cdp_fsel *b, int64_t now);

/* The earliest next_probe of all, INT64_MAX when @n is 0. */
int64_t cdp_fsel_next_due(const struct cdp_fsel *b, size_t n);

#endif /* CDP_FLEETSEL_H */
