// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The configurations in force, counted (generation.c): a pin keeps its
 * generation and every newer one; a retired generation goes with its
 * last unpin, on whichever thread that is; what a generation owns is
 * freed with it (the sanitizer lanes and valgrind see a leak or a double
 * free).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "generation.h"

static unsigned int refs(const struct generation *g)
{
	return __atomic_load_n(&g->refs, __ATOMIC_ACQUIRE);
}

/* A generation owning a cache of its own, as a reload builds one. */
static struct generation *owning_generation(void)
{
	struct generation *g = generation_new();

	assert_non_null(g);
	g->vcache = vcache_new(16, 60, NULL, NULL);
	assert_non_null(g->vcache);
	g->owns_vcache = true;
	return g;
}

static void test_pin_counts_and_unpin_drops(void **state)
{
	struct generation *g = owning_generation(), *p1, *p2;
	struct generations *gs;

	assert_int_equal(generations_new(g, &gs), 0);
	assert_ptr_equal(generations_current(gs), g);
	assert_int_equal(refs(g), 1);
	p1 = gen_pin(gs);
	p2 = gen_pin(gs);
	assert_ptr_equal(p1, g);
	assert_ptr_equal(p2, g);
	assert_int_equal(refs(g), 3);
	assert_ptr_equal(gen_fleet(p1), NULL);
	gen_unpin(p1);
	gen_unpin(p2);
	assert_int_equal(refs(g), 1);
	gen_unpin(NULL);
	assert_null(gen_pin(NULL));
	assert_null(gen_fleet(NULL));
	generations_free(gs);
	generations_free(NULL);
	(void)state;
}

/*
 * A request pinned before two reloads keeps its generation and both
 * successors readable; the middle one goes only after the old pin.
 */
static void test_pinned_retired_keeps_successors(void **state)
{
	struct generation *g1 = owning_generation(), *g2, *g3, *old;
	struct generations *gs;

	assert_int_equal(generations_new(g1, &gs), 0);
	old = gen_pin(gs);
	g2 = owning_generation();
	generations_publish(gs, g2);
	assert_ptr_equal(generations_current(gs), g2);
	assert_ptr_equal(old->next, g2);
	assert_int_equal(refs(g1), 1); /* the pin's only */
	assert_int_equal(refs(g2), 2); /* the set's and g1's link */
	g3 = owning_generation();
	generations_publish(gs, g3);
	assert_int_equal(refs(g2), 1); /* g1's link keeps it */
	assert_int_equal(refs(g3), 2);
	/* what the old request reads through its chain is all there */
	assert_non_null(old->vcache);
	assert_non_null(old->next->vcache);
	assert_ptr_equal(old->next->next, g3);
	gen_unpin(old); /* frees g1, then g2 */
	assert_int_equal(refs(g3), 1);
	generations_free(gs);
	(void)state;
}

struct churn {
	struct generations *gs;
	unsigned int rounds;
	unsigned int bad;     /* __atomic: pins that found nothing to read */
	pthread_barrier_t go; /* the publishes start with the pins */
};

static void *pin_churn(void *arg)
{
	struct churn *c = arg;

	pthread_barrier_wait(&c->go);
	for (unsigned int i = 0; i < c->rounds; i++) {
		struct generation *p = gen_pin(c->gs);

		if (p && p->vcache)
			vcache_clear(p->vcache);
		else
			__atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
		gen_unpin(p);
	}
	return NULL;
}

/* Pins on other threads while generations are published: each retired
 * one is freed exactly once, by whichever unpin is last. */
static void test_unpins_race_publishes(void **state)
{
	struct churn c = {.rounds = 20000};
	pthread_t t[2];

	assert_int_equal(generations_new(owning_generation(), &c.gs), 0);
	assert_int_equal(pthread_barrier_init(&c.go, NULL, 3), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, pin_churn, &c), 0);
	pthread_barrier_wait(&c.go);
	for (int i = 0; i < 200; i++)
		generations_publish(c.gs, owning_generation());
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&c.go);
	assert_int_equal(c.bad, 0);
	assert_int_equal(refs(generations_current(c.gs)), 1);
	generations_free(c.gs);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pin_counts_and_unpin_drops),
		cmocka_unit_test(test_pinned_retired_keeps_successors),
		cmocka_unit_test(test_unpins_race_publishes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
