// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Counted configurations and the one in force (generation.h).
 */
#include "generation.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct generations {
	pthread_mutex_t pin_lock; /* current against pins */
	struct generation *current;
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
	if (g->owns_fleet)
		cdp_fleet_free(g->fleet);
	if (g->owns_vcache)
		vcache_free(g->vcache);
	if (g->owns_detect)
		detect_free(g->detect);
	if (g->owns_opts) {
		opts_free(g->opts);
		free(g->opts);
	}
	free(g);
}

int generations_new(struct generation *first, struct generations **out)
{
	struct generations *gs = calloc(1, sizeof(*gs));

	*out = NULL;
	if (!gs)
		return -ENOMEM;
	pthread_mutex_init(&gs->pin_lock, NULL);
	gs->current = first;
	*out = gs;
	return 0;
}

void generations_free(struct generations *gs)
{
	if (!gs)
		return;
	gen_unpin(gs->current);
	pthread_mutex_destroy(&gs->pin_lock);
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
	pthread_mutex_lock(&gs->pin_lock);
	g = gs->current;
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&gs->pin_lock);
	return g;
}

void gen_unpin(struct generation *g)
{
	/* a freed generation lets go of its successor */
	while (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		struct generation *next = g->next;

		generation_free(g);
		g = next;
	}
}

struct cdp_fleet *gen_fleet(struct generation *pin)
{
	return pin ? pin->fleet : NULL;
}

struct generation *generations_current(struct generations *gs)
{
	return gs->current;
}

void generations_publish(struct generations *gs, struct generation *next)
{
	struct generation *g;

	pthread_mutex_lock(&gs->pin_lock);
	g = gs->current;
	gs->current = next;
	pthread_mutex_unlock(&gs->pin_lock);
	/* set before the set's reference goes: g's last unpin reads it */
	g->next = next;
	__atomic_add_fetch(&next->refs, 1, __ATOMIC_RELAXED);
	gen_unpin(g);
}
