// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Counted configurations and the one in force (generation.h).
 */
#include "generation.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct generations {
	/* current against pins; the live list against frees */
	pthread_mutex_t lock;
	struct generation *current;
	struct generation *live; /* every generation once current, not freed */
};

struct generation *generation_new(void)
{
	struct generation *g = calloc(1, sizeof(*g));

	if (g)
		g->refs = 1; /* the set's, as current */
	return g;
}

void generation_free(struct generation *g)
{
	shared_put(g->fleet);
	shared_put(g->vcache);
	shared_put(g->detect);
	shared_put(g->opts);
	free(g);
}

static void free_opts(void *opts)
{
	opts_free(opts);
	free(opts);
}

static void free_fleet(void *fleet)
{
	cdp_fleet_free(fleet);
}

static void free_vcache(void *vc)
{
	vcache_free(vc);
}

static void free_detect(void *d)
{
	detect_free(d);
}

/* obj counted, or freed on ENOMEM */
static struct shared *share(void *obj, void (*free_obj)(void *obj))
{
	struct shared *s = shared_new(obj, free_obj);

	if (!s && obj && free_obj)
		free_obj(obj);
	return s;
}

struct shared *gen_share_opts(struct clamfs_opts *opts, bool owned)
{
	return share(opts, owned ? free_opts : NULL);
}

struct shared *gen_share_fleet(struct cdp_fleet *fleet)
{
	return share(fleet, free_fleet);
}

struct shared *gen_share_vcache(struct vcache *vc)
{
	return share(vc, free_vcache);
}

struct shared *gen_share_detect(struct detect *d)
{
	return share(d, free_detect);
}

/* Under the set's lock. */
static void live_link(struct generations *gs, struct generation *g)
{
	g->set = gs;
	g->live_prev = NULL;
	g->live_next = gs->live;
	if (gs->live)
		gs->live->live_prev = g;
	gs->live = g;
}

static void live_unlink(struct generations *gs, struct generation *g)
{
	if (g->live_prev)
		g->live_prev->live_next = g->live_next;
	else
		gs->live = g->live_next;
	if (g->live_next)
		g->live_next->live_prev = g->live_prev;
}

int generations_new(struct generation *first, struct generations **out)
{
	struct generations *gs = calloc(1, sizeof(*gs));

	*out = NULL;
	if (!gs)
		return -ENOMEM;
	pthread_mutex_init(&gs->lock, NULL);
	gs->current = first;
	live_link(gs, first);
	*out = gs;
	return 0;
}

void generations_free(struct generations *gs)
{
	if (!gs)
		return;
	gen_unpin(gs->current);
	/* a generation a leaked pin still holds stays, for the leak checker */
	for (struct generation *g = gs->live; g; g = g->live_next)
		g->set = NULL;
	pthread_mutex_destroy(&gs->lock);
	free(gs);
}

struct generation *gen_pin(struct generations *gs)
{
	struct generation *g;

	if (!gs)
		return NULL;
	/*
	 * Reading current and counting the pin are one step: between the
	 * two a reload could retire the generation and its last holder free
	 * it.
	 */
	pthread_mutex_lock(&gs->lock);
	g = gs->current;
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&gs->lock);
	return g;
}

struct generation *gen_pin_again(struct generation *pin)
{
	__atomic_add_fetch(&pin->refs, 1, __ATOMIC_RELAXED);
	return pin;
}

void gen_unpin(struct generation *g)
{
	struct generations *gs;

	if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	/* nobody can pin it any more: it is not current */
	gs = g->set;
	if (gs) {
		pthread_mutex_lock(&gs->lock);
		live_unlink(gs, g);
		pthread_mutex_unlock(&gs->lock);
	}
	generation_free(g);
}

struct cdp_fleet *gen_fleet(const struct generation *pin)
{
	return pin ? shared_obj(pin->fleet) : NULL;
}

struct generation *generations_current(struct generations *gs)
{
	return gs->current;
}

void generations_publish(struct generations *gs, struct generation *next)
{
	struct generation *g;

	pthread_mutex_lock(&gs->lock);
	g = gs->current;
	gs->current = next;
	live_link(gs, next);
	pthread_mutex_unlock(&gs->lock);
	gen_unpin(g);
}

void generations_each(struct generations *gs,
		      void (*fn)(struct generation *g, void *arg), void *arg)
{
	if (!gs)
		return;
	pthread_mutex_lock(&gs->lock);
	for (struct generation *g = gs->live; g; g = g->live_next)
		fn(g, arg);
	pthread_mutex_unlock(&gs->lock);
}
