// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The configurations in force, counted (generation.c): a pin keeps its
 * generation and what it holds, nothing newer; a retired generation goes
 * with its last unpin, on whichever thread that is; an object two
 * generations hold goes with the second (the sanitizer lanes and
 * valgrind see a leak or a double free).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
	g->vcache = gen_share_vcache(vcache_new(16, 60, NULL, NULL));
	assert_non_null(g->vcache);
	return g;
}

/* An object whose frees are counted. */
struct counted {
	int frees;
};

static void count_free(void *obj)
{
	((struct counted *)obj)->frees++;
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
	assert_non_null(gen_vcache(p1));
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

static void test_shared_counts(void **state)
{
	struct counted c = {0};
	struct shared *s = shared_new(&c, count_free), *t;

	assert_null(shared_new(NULL, count_free));
	assert_null(shared_obj(NULL));
	shared_put(NULL);
	assert_null(shared_get(NULL));
	assert_ptr_equal(shared_obj(s), &c);
	t = shared_get(s);
	assert_ptr_equal(t, s);
	shared_put(s);
	assert_int_equal(c.frees, 0);
	shared_put(t);
	assert_int_equal(c.frees, 1);
	/* an object someone else frees: never freed here */
	s = shared_new(&c, NULL);
	shared_put(s);
	assert_int_equal(c.frees, 1);
	(void)state;
}

/*
 * An object a reload keeps is one object with two references: freed once,
 * after the second generation that holds it goes, whatever the order.
 */
static void test_kept_object_freed_once_after_both(void **state)
{
	struct counted kept = {0}, own = {0};
	struct generation *g1 = generation_new(), *g2 = generation_new(),
			  *g3 = generation_new(), *old;
	struct generations *gs;

	assert_non_null(g1);
	assert_non_null(g2);
	assert_non_null(g3);
	g1->detect = shared_new(&kept, count_free);
	g1->vcache = shared_new(&own, count_free);
	g2->detect = shared_get(g1->detect); /* kept by the reload */
	assert_int_equal(generations_new(g1, &gs), 0);
	old = gen_pin(gs);
	generations_publish(gs, g2);
	assert_ptr_equal(gen_detect(g2), gen_detect(old));
	gen_unpin(old); /* g1 goes; its cache with it, not the kept object */
	assert_int_equal(own.frees, 1);
	assert_int_equal(kept.frees, 0);
	generations_publish(gs, g3); /* g2 goes, and the kept object */
	assert_int_equal(kept.frees, 1);
	generations_free(gs);
	assert_int_equal(kept.frees, 1);
	assert_int_equal(own.frees, 1);
	(void)state;
}

static void collect(struct generation *g, void *arg)
{
	struct generation **seen = arg;

	while (*seen)
		seen++;
	*seen = g;
}

static int live_count(struct generations *gs, struct generation **seen)
{
	int n = 0;

	memset(seen, 0, 8 * sizeof(*seen));
	generations_each(gs, collect, seen);
	while (seen[n])
		n++;
	return n;
}

/*
 * A request pinned before two reloads keeps its own generation and what
 * it holds, and nothing newer: the middle one goes at once. The live list
 * (what a verdict clear must reach) is exactly the generations not freed.
 */
static void test_pinned_retired_keeps_only_its_own(void **state)
{
	struct counted a = {0}, b = {0}, c = {0};
	struct generation *g1 = generation_new(), *g2 = generation_new(),
			  *g3 = generation_new(), *old, *again, *seen[8];
	struct generations *gs;

	g1->vcache = shared_new(&a, count_free);
	g2->vcache = shared_new(&b, count_free);
	g3->vcache = shared_new(&c, count_free);
	assert_int_equal(generations_new(g1, &gs), 0);
	old = gen_pin(gs);
	again = gen_pin_again(old);
	assert_ptr_equal(again, old);
	generations_publish(gs, g2);
	assert_int_equal(live_count(gs, seen), 2);
	generations_publish(gs, g3);
	assert_int_equal(b.frees, 1); /* nobody pinned g2 */
	assert_int_equal(a.frees, 0);
	assert_int_equal(refs(old), 2);
	assert_int_equal(live_count(gs, seen), 2);
	assert_true((seen[0] == g3 && seen[1] == old) ||
		    (seen[0] == old && seen[1] == g3));
	assert_ptr_equal(gen_vcache(old), (struct vcache *)&a);
	gen_unpin(old);
	assert_int_equal(a.frees, 0);
	gen_unpin(again);
	assert_int_equal(a.frees, 1);
	assert_int_equal(live_count(gs, seen), 1);
	assert_ptr_equal(seen[0], g3);
	generations_free(gs);
	assert_int_equal(c.frees, 1);
	(void)state;
}

/* Objects given to a generation are freed on ENOMEM, not leaked. */
static void test_share_takes_the_object(void **state)
{
	struct shared *s = gen_share_vcache(vcache_new(4, 1, NULL, NULL));

	assert_non_null(s);
	shared_put(s); /* frees the cache: valgrind and ASan would say */
	assert_null(gen_share_vcache(NULL));
	assert_null(gen_share_opts(NULL, true));
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

		if (p && gen_vcache(p))
			vcache_clear(gen_vcache(p));
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
		cmocka_unit_test(test_shared_counts),
		cmocka_unit_test(test_kept_object_freed_once_after_both),
		cmocka_unit_test(test_pinned_retired_keeps_only_its_own),
		cmocka_unit_test(test_share_takes_the_object),
		cmocka_unit_test(test_unpins_race_publishes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
