// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Verdict cache: hits need the same stamp, generation and an unexpired
 * entry; LRU eviction; invalidation; bounded memory; thread safety.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vcache.h"

static uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static struct vcache_file file(uint64_t ino)
{
	struct vcache_file f = {.dev = 0x801,
				.ino = ino,
				.ident = 0x5eed0000cafeULL,
				.size = 4096,
				.mtime_ns = 1700000000123456789LL,
				.ctime_ns = 1700000000123456790LL};

	return f;
}

static void test_hit_needs_identical_stamp(void **state)
{
	struct vcache *vc = vcache_new(100, 60, fake_clock, NULL);
	struct vcache_file f = file(1), g;
	uint64_t gen = vcache_generation(vc);

	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);
	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, gen);
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_CLEAN);

	g = f;
	g.ctime_ns++; /* same size, mtime restored: ctime still moved */
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	/* the stale entry is gone, even for the old stamp */
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);

	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, gen);
	g = f;
	g.mtime_ns--;
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, gen);
	g = f;
	g.size++;
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, gen);
	g = f;
	g.dev++; /* another filesystem, same inode number */
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_CLEAN);
	/*
	 * Same device, inode and stamp, another handle: a btrfs snapshot
	 * that took over a removed subvolume's device number.
	 */
	g = f;
	g.ident ^= 0x100000000ULL;
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	assert_false(vcache_file_same(&f, &g));
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);
	vcache_free(vc);
}

static void test_infected_keeps_signature(void **state)
{
	struct vcache *vc = vcache_new(100, 60, fake_clock, NULL);
	struct vcache_file f = file(2);
	char sig[64] = "";

	vcache_insert(vc, &f, VCACHE_INFECTED, "Eicar-Test.UNOFFICIAL",
		      vcache_generation(vc));
	assert_int_equal(vcache_lookup(vc, &f, sig, sizeof(sig)),
			 VCACHE_INFECTED);
	assert_string_equal(sig, "Eicar-Test.UNOFFICIAL");
	/* replaced by a clean verdict for the same inode */
	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, vcache_generation(vc));
	assert_int_equal(vcache_lookup(vc, &f, sig, sizeof(sig)), VCACHE_CLEAN);
	vcache_free(vc);
}

static void test_ttl(void **state)
{
	struct vcache *vc = vcache_new(10, 30, fake_clock, NULL);
	struct vcache_file f = file(3);

	fake_now = 1000;
	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, vcache_generation(vc));
	fake_now = 1029;
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_CLEAN);
	fake_now = 1030;
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);
	vcache_free(vc);
}

static void test_clear_and_stale_generation(void **state)
{
	struct vcache *vc = vcache_new(10, 30, fake_clock, NULL);
	struct vcache_file f = file(4), g = file(5);
	uint64_t before = vcache_generation(vc);

	struct vcache_counters c;

	vcache_insert(vc, &f, VCACHE_INFECTED, "Sig", before);
	vcache_clear(vc);
	vcache_counters(vc, &c);
	assert_int_equal(c.entries, 0);
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);
	/* a scan that began before the clear used the old signatures */
	vcache_insert(vc, &g, VCACHE_CLEAN, NULL, before);
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_MISS);
	vcache_insert(vc, &g, VCACHE_CLEAN, NULL, vcache_generation(vc));
	assert_int_equal(vcache_lookup(vc, &g, NULL, 0), VCACHE_CLEAN);
	vcache_free(vc);
}

static void test_invalidate(void **state)
{
	struct vcache *vc = vcache_new(10, 30, fake_clock, NULL);
	struct vcache_file f = file(6);

	vcache_insert(vc, &f, VCACHE_CLEAN, NULL, vcache_generation(vc));
	vcache_invalidate(vc, f.dev, f.ino);
	assert_int_equal(vcache_lookup(vc, &f, NULL, 0), VCACHE_MISS);
	vcache_invalidate(vc, f.dev, f.ino + 1); /* absent: harmless */
	vcache_free(vc);
}

static void test_lru_eviction(void **state)
{
	/* below 16 entries: one shard, so LRU order is exact */
	struct vcache *vc = vcache_new(3, 30, fake_clock, NULL);
	struct vcache_counters c;
	struct vcache_file f1 = file(11), f2 = file(12), f3 = file(13),
			   f4 = file(14);
	uint64_t gen = vcache_generation(vc);

	vcache_insert(vc, &f1, VCACHE_CLEAN, NULL, gen);
	vcache_insert(vc, &f2, VCACHE_CLEAN, NULL, gen);
	vcache_insert(vc, &f3, VCACHE_CLEAN, NULL, gen);
	assert_int_equal(vcache_lookup(vc, &f1, NULL, 0), VCACHE_CLEAN);
	vcache_insert(vc, &f4, VCACHE_CLEAN, NULL, gen); /* evicts f2 */
	assert_int_equal(vcache_lookup(vc, &f2, NULL, 0), VCACHE_MISS);
	assert_int_equal(vcache_lookup(vc, &f1, NULL, 0), VCACHE_CLEAN);
	assert_int_equal(vcache_lookup(vc, &f3, NULL, 0), VCACHE_CLEAN);
	assert_int_equal(vcache_lookup(vc, &f4, NULL, 0), VCACHE_CLEAN);
	vcache_counters(vc, &c);
	assert_int_equal(c.evictions, 1);
	assert_int_equal(c.entries, 3);
	assert_int_equal(c.hits, 4);
	assert_int_equal(c.misses, 1);
	vcache_free(vc);
}

/*
 * A look that only asks whether a scan would be wasted: no hit or miss
 * counted, no place in the LRU order taken, nothing stale trusted.
 */
static void test_knows_leaves_no_trace(void **state)
{
	struct vcache *vc = vcache_new(2, 30, fake_clock, NULL);
	struct vcache_file f1 = file(21), f2 = file(22), f3 = file(23), g;
	struct vcache_counters c;
	uint64_t gen = vcache_generation(vc);
	char sig[16];

	fake_now = 1000;
	assert_false(vcache_knows(vc, &f1));
	vcache_insert(vc, &f1, VCACHE_CLEAN, NULL, gen);
	vcache_insert(vc, &f2, VCACHE_INFECTED, "Sig", gen);
	assert_true(vcache_knows(vc, &f1));
	assert_true(vcache_knows(vc, &f2));
	assert_int_equal(vcache_peek(vc, &f1, NULL, 0), VCACHE_CLEAN);
	assert_int_equal(vcache_peek(vc, &f2, sig, sizeof(sig)),
			 VCACHE_INFECTED);
	assert_string_equal(sig, "Sig");
	g = f1;
	g.ctime_ns++;
	assert_false(vcache_knows(vc, &g));
	assert_int_equal(vcache_peek(vc, &g, NULL, 0), VCACHE_MISS);
	/* f1 is still the least recently used: f3 evicts it */
	vcache_insert(vc, &f3, VCACHE_CLEAN, NULL, gen);
	assert_false(vcache_knows(vc, &f1));
	assert_true(vcache_knows(vc, &f2));
	vcache_counters(vc, &c);
	assert_int_equal(c.hits, 0);
	assert_int_equal(c.misses, 0);
	fake_now += 31;
	assert_false(vcache_knows(vc, &f2));
	fake_now -= 31;
	vcache_clear(vc);
	assert_false(vcache_knows(vc, &f3));
	vcache_free(vc);
}

static void test_disabled_cache_holds_nothing(void **state)
{
	struct vcache *off_ttl = vcache_new(100, 0, fake_clock, NULL);
	struct vcache *off_cap = vcache_new(0, 60, fake_clock, NULL);
	struct vcache_file f = file(7);

	vcache_insert(off_ttl, &f, VCACHE_CLEAN, NULL, 0);
	vcache_insert(off_cap, &f, VCACHE_CLEAN, NULL, 0);
	assert_int_equal(vcache_lookup(off_ttl, &f, NULL, 0), VCACHE_MISS);
	assert_int_equal(vcache_lookup(off_cap, &f, NULL, 0), VCACHE_MISS);
	vcache_free(off_ttl);
	vcache_free(off_cap);
}

static void test_million_entries_fit_100MB(void **state)
{
	struct vcache *vc = vcache_new(1000000, 60, fake_clock, NULL);
	struct vcache_counters c;
	uint64_t gen = vcache_generation(vc);

	assert_non_null(vc);
	assert_true(vcache_memory_bytes(vc) <= 100u * 1000 * 1000);
	for (uint64_t i = 0; i < 1200000; i++) {
		struct vcache_file f = file(i);

		vcache_insert(vc, &f, VCACHE_CLEAN, NULL, gen);
	}
	vcache_counters(vc, &c);
	assert_true(c.entries <= 1000000);
	assert_true(c.entries >= 1000000 - 16 * 16);
	assert_true(c.evictions >= 1200000 - c.entries);
	vcache_free(vc);
}

static struct vcache *shared;

static void *hammer(void *arg)
{
	uint64_t base = (uintptr_t)arg * 100000;
	uint64_t gen = vcache_generation(shared);

	for (uint64_t i = 0; i < 20000; i++) {
		struct vcache_file f = file(base + i % 500);

		if (vcache_lookup(shared, &f, NULL, 0) == VCACHE_MISS)
			vcache_insert(shared, &f, VCACHE_CLEAN, NULL, gen);
		if (i % 97 == 0)
			vcache_invalidate(shared, f.dev, f.ino);
	}
	return NULL;
}

/* The racily-clean rule, with the stat time injected. */
static void test_stamp_settled(void **state)
{
	const int64_t sec = 1000000000;
	struct vcache_file f = file(9);
	int64_t ctime = f.ctime_ns;

	(void)state;
	/* a whole-second backend: ctime 0.9 s before the stat, window 2 s */
	assert_false(vcache_stamp_settled(&f, ctime + sec * 9 / 10, 2 * sec));
	/* exactly the window old: a rewrite could still share the tick */
	assert_false(vcache_stamp_settled(&f, ctime + 2 * sec, 2 * sec));
	assert_true(vcache_stamp_settled(&f, ctime + 2 * sec + 1, 2 * sec));
	assert_true(vcache_stamp_settled(&f, ctime + 3600 * sec, 2 * sec));
	/* ctime in the future of this host's clock (skew): never settled */
	assert_false(vcache_stamp_settled(&f, ctime - sec, 2 * sec));
	assert_false(vcache_stamp_settled(&f, ctime, 2 * sec));
	/* window 0: every stamp trusted */
	assert_true(vcache_stamp_settled(&f, ctime, 0));
	assert_true(vcache_stamp_settled(&f, ctime - sec, 0));
}

static void test_threads(void **state)
{
	pthread_t th[4];
	struct vcache_counters c;

	shared = vcache_new(1000, 60, fake_clock, NULL);
	for (uintptr_t i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, hammer, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	vcache_counters(shared, &c);
	assert_int_equal(c.hits + c.misses, 4 * 20000);
	assert_true(c.entries <= 1000);
	vcache_free(shared);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_needs_identical_stamp),
		cmocka_unit_test(test_infected_keeps_signature),
		cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_clear_and_stale_generation),
		cmocka_unit_test(test_invalidate),
		cmocka_unit_test(test_lru_eviction),
		cmocka_unit_test(test_knows_leaves_no_trace),
		cmocka_unit_test(test_disabled_cache_holds_nothing),
		cmocka_unit_test(test_million_entries_fit_100MB),
		cmocka_unit_test(test_stamp_settled),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
