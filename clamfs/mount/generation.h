/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Configurations in force, counted. Each configuration loaded is a
 * generation: requests pin the one in force and read what they use
 * through the pin, and a generation a reload retired is freed by its last
 * unpin, whenever that comes. The runtime assembles generations (reload.c)
 * and publishes them here; requests only pin, read and unpin.
 */
#ifndef CLAMFS_GENERATION_H
#define CLAMFS_GENERATION_H

#include <stdbool.h>

#include "clamdproto.h"
#include "detect.h"
#include "opts.h"
#include "poolcfg.h"
#include "scanq.h"
#include "shared.h"
#include "vcache.h"

/*
 * One configuration as loaded and the objects it put in force, each
 * counted (shared.h): a reload that keeps one holds another reference,
 * so an object lives as long as the last generation that uses it.
 */
struct generation {
	unsigned int refs;     /* the set's while current, one per pin */
	struct shared *opts;   /* struct clamfs_opts */
	struct shared *fleet;  /* struct cdp_fleet: the clamd backends */
	struct shared *vcache; /* struct vcache */
	struct shared *detect; /* struct detect */
	enum scan_mode mode;   /* how its fleet is asked */
	/*
	 * Its fleet reaches other clamds than its predecessor's, or the same
	 * addresses trusted otherwise: their verdicts are not carried over.
	 * Timeouts and connection counts alone keep them.
	 */
	bool other_clamds;
	/* the TLS files as fleet loaded them: a reload reads new ones */
	struct poolcfg_tls_stamp tls_stamp;
	/* the set's list of generations not freed yet (generations_each) */
	struct generations *set;
	struct generation *live_prev, *live_next;
};

/* A generation with one reference (the set's, once current); NULL: ENOMEM */
struct generation *generation_new(void);

/* Frees a generation nobody else references, dropping its objects. */
void generation_free(struct generation *g);

/*
 * The objects of a generation, counted (NULL for a NULL object). Each
 * takes its object: on ENOMEM it is freed and NULL returned. Options a
 * generation does not own (main's, owned false) are never freed here.
 */
struct shared *gen_share_opts(struct clamfs_opts *opts, bool owned);
struct shared *gen_share_fleet(struct cdp_fleet *fleet);
struct shared *gen_share_vcache(struct vcache *vc);
struct shared *gen_share_detect(struct detect *d);

/* What a generation holds; valid while it is pinned (or current). */
static inline struct clamfs_opts *gen_opts(const struct generation *g)
{
	return shared_obj(g->opts);
}

static inline const struct policy *gen_policy(const struct generation *g)
{
	return &gen_opts(g)->policy;
}

static inline struct vcache *gen_vcache(const struct generation *g)
{
	return shared_obj(g->vcache);
}

static inline struct detect *gen_detect(const struct generation *g)
{
	return shared_obj(g->detect);
}

/* The clamd backends of the pinned generation; NULL for NULL. */
struct cdp_fleet *gen_fleet(const struct generation *pin);

/* The generation in force, and the lock that makes pinning it safe. */
struct generations;

/* A set with first in force (taking its reference); -ENOMEM. */
int generations_new(struct generation *first, struct generations **out);

/*
 * Drops the reference on the generation in force, which frees it unless
 * a pin is still held, and frees the set. NULL is a no-op. No pin may be
 * taken or dropped after.
 */
void generations_free(struct generations *gs);

/*
 * A pin on the generation in force: while it is held, nothing the
 * generation holds is freed, however many reloads replace it. A request
 * pins once before its first read and unpins after its last, from any
 * thread: a waiting scan carries its pin to the scanner thread. A short
 * mutex and an atomic increment. NULL for a NULL set.
 */
struct generation *gen_pin(struct generations *gs);

/*
 * Another pin on the generation pin holds already (the same, even if a
 * reload retired it since): for what outlives the first holder's use, a
 * scan waiting on behalf of a request. Returns pin.
 */
struct generation *gen_pin_again(struct generation *pin);

/* Drops a pin; may free a retired generation. NULL is a no-op. */
void gen_unpin(struct generation *pin);

/*
 * The generation in force, without a pin: for the one thread that
 * publishes (reloads are serialized by the runtime), and for start-up.
 */
struct generation *generations_current(struct generations *gs);

/*
 * Puts next in force in place of the current generation, which is
 * retired: it is freed by its last unpin (maybe this call's). Takes
 * next's reference.
 */
void generations_publish(struct generations *gs, struct generation *next);

/*
 * Calls fn on every generation not freed yet, current and retired ones
 * still pinned, under the set's lock: what must reach every verdict
 * cache a request may still read (a clear after a signature update).
 * fn must be quick and must not pin or unpin.
 */
void generations_each(struct generations *gs,
		      void (*fn)(struct generation *g, void *arg), void *arg);

#endif
