/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Configurations in force, counted. Each configuration loaded is a
 * generation: requests pin the one in force while they use its objects,
 * and a generation a reload retired is freed by its last unpin, whenever
 * that comes. The runtime assembles generations (runtime.c) and publishes
 * them here; requests only pin, read and unpin.
 */
#ifndef CLAMFS_GENERATION_H
#define CLAMFS_GENERATION_H

#include <stdbool.h>

#include "clamdproto.h"
#include "detect.h"
#include "opts.h"
#include "poolcfg.h"
#include "vcache.h"

/*
 * One configuration as loaded and the objects it put in force. Its
 * references: one of the set while it is current, one of its predecessor
 * until that is freed, one per pin. So generations are freed oldest
 * first, and a pin keeps every newer generation alive too: what a pinned
 * request reads later from the fs (the newest objects), and the pool the
 * scan queue took for its scan after the pin, are covered.
 */
struct generation {
	unsigned int refs;	 /* __atomic */
	struct generation *next; /* the successor once retired */
	struct clamfs_opts *opts;
	bool owns_opts; /* not the first: that one is main()'s */
	/*
	 * In use by this generation. One a reload keeps moves on to the
	 * successor, which then frees it: it lives as long as the newest.
	 */
	struct cdp_fleet *fleet; /* the clamd backends */
	struct vcache *vcache;
	struct detect *detect;
	bool owns_fleet, owns_vcache, owns_detect;
	/*
	 * Its fleet reaches other clamds than its predecessor's, or the same
	 * addresses trusted otherwise: their verdicts are not carried over.
	 * Timeouts and connection counts alone keep them.
	 */
	bool other_clamds;
	/* the TLS files as fleet loaded them: a reload reads new ones */
	struct poolcfg_tls_stamp tls_stamp;
};

/* A generation with one reference (the set's, once current); NULL: ENOMEM */
struct generation *generation_new(void);

/* Frees a generation nobody else references, with the objects it owns. */
void generation_free(struct generation *g);

/* The generation in force, and the lock that makes pinning it safe. */
struct generations;

/* A set with first in force (taking its reference); -ENOMEM. */
int generations_new(struct generation *first, struct generations **out);

/*
 * Drops the reference on the generation in force, which frees the whole
 * chain unless a pin is still held, and frees the set. NULL is a no-op.
 */
void generations_free(struct generations *gs);

/*
 * A pin on the generation in force: while it is held, nothing that
 * fs_policy(), fs_vcache() and fs_detect() return, nor the clamd pool a
 * scan runs on, is freed, however many reloads replace them. A request
 * pins once before its first such read and unpins after its last, from
 * any thread: a waiting scan carries its pin to the scanner thread. A
 * short mutex and an atomic increment. NULL for a NULL set.
 */
struct generation *gen_pin(struct generations *gs);

/* Drops a pin; may free retired generations. NULL is a no-op. */
void gen_unpin(struct generation *pin);

/* The clamd backends of the pinned generation; valid under the pin. */
struct cdp_fleet *gen_fleet(struct generation *pin);

/*
 * The generation in force, without a pin: for the one thread that
 * publishes (reloads are serialized by the runtime), and for start-up.
 */
struct generation *generations_current(struct generations *gs);

/*
 * Puts next in force in place of the current generation, which is
 * retired: it keeps next alive until it is freed by its last unpin
 * (maybe this call's). Takes next's reference.
 */
void generations_publish(struct generations *gs, struct generation *next);

#endif
