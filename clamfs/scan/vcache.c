// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Verdict cache: fixed arrays per shard (entries linked by 32-bit indices
 * into a hash chain and an LRU list), so memory is bounded and known at
 * creation and no allocation happens on the open path for clean files.
 */
#include "vcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define NIL		  UINT32_MAX
#define VCACHE_MAX_SHARDS 16

struct ventry {
	uint64_t dev;
	uint64_t ino;
	uint64_t ident;
	int64_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
	char *sig; /* infected only */
	uint32_t expires;
	uint32_t gen;
	uint32_t hash_next;
	uint32_t lru_prev;
	uint32_t lru_next; /* also the free list link */
	uint8_t verdict;
};

struct vshard {
	pthread_mutex_t lock;
	struct ventry *e;
	uint32_t *buckets;
	uint32_t nbuckets; /* power of two */
	uint32_t capacity;
	uint32_t free_head;
	uint32_t lru_head; /* most recent */
	uint32_t lru_tail;
	uint64_t hits, misses, evictions, entries;
} __attribute__((aligned(64)));

struct vcache {
	struct vshard *shards;
	unsigned int nshards;
	unsigned int ttl;
	atomic_uint_fast64_t generation;
	vcache_clock_fn clock;
	void *clock_arg;
};

static uint64_t monotonic_seconds(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t key_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL ^ dev * 0xff51afd7ed558ccdULL;

	return h ^ (h >> 31);
}

/*
 * A shard's arrays are mapped, not malloc'd: a reload that changes the
 * cache settings replaces MBs of them, and glibc's malloc, whose mmap
 * threshold grows with each large block freed, would soon place them in
 * its heap, where a freed cache stays resident as a hole (a 60-minute soak
 * saw RSS climb 24 -> 68 MB in 7 MB steps). Unmapping always gives the
 * memory back. Fresh mappings are zeroed.
 */
static void *table_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void table_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

static int shard_init(struct vshard *s, uint32_t capacity)
{
	uint32_t nb = 1;

	while (nb < capacity)
		nb <<= 1;
	/* what vcache_free unmaps, also after a failure here */
	s->nbuckets = nb;
	s->capacity = capacity;
	s->e = table_alloc(sizeof(*s->e) * capacity);
	s->buckets = table_alloc(sizeof(*s->buckets) * nb);
	if (!s->e || !s->buckets)
		return -1;
	memset(s->buckets, 0xff, sizeof(*s->buckets) * nb);
	for (uint32_t i = 0; i < capacity; i++)
		s->e[i].lru_next = i + 1 < capacity ? i + 1 : NIL;
	s->free_head = 0;
	s->lru_head = s->lru_tail = NIL;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

struct vcache *vcache_new(size_t capacity, unsigned int ttl_sec,
			  vcache_clock_fn clock, void *clock_arg)
{
	struct vcache *vc = calloc(1, sizeof(*vc));
	size_t per_shard;

	if (!vc)
		return NULL;
	/*
	 * Generations of different caches never meet: a scan that read one
	 * cache's generation cannot insert into a cache that replaced it.
	 */
	static atomic_uint_fast64_t caches_made;

	atomic_store(&vc->generation, atomic_fetch_add(&caches_made, 1) << 40);
	vc->ttl = ttl_sec;
	vc->clock = clock ? clock : monotonic_seconds;
	vc->clock_arg = clock_arg;
	if (capacity == 0 || ttl_sec == 0 || capacity > UINT32_MAX / 2)
		capacity = 0; /* a cache that holds nothing */
	vc->nshards = capacity == 0		     ? 0
		      : capacity < VCACHE_MAX_SHARDS ? 1
						     : VCACHE_MAX_SHARDS;
	if (vc->nshards == 0)
		return vc;
	per_shard = capacity / vc->nshards;
	vc->shards = aligned_alloc(64, sizeof(*vc->shards) * vc->nshards);
	if (!vc->shards)
		goto fail;
	memset(vc->shards, 0, sizeof(*vc->shards) * vc->nshards);
	/* shares differ by one at most and add up to capacity exactly */
	for (unsigned int i = 0; i < vc->nshards; i++)
		if (shard_init(&vc->shards[i],
			       (uint32_t)(per_shard +
					  (i < capacity % vc->nshards))))
			goto fail;
	return vc;
fail:
	vcache_free(vc);
	return NULL;
}

void vcache_free(struct vcache *vc)
{
	if (!vc)
		return;
	for (unsigned int i = 0; vc->shards && i < vc->nshards; i++) {
		struct vshard *s = &vc->shards[i];

		if (s->e) {
			for (uint32_t k = 0; k < s->capacity; k++)
				free(s->e[k].sig);
			pthread_mutex_destroy(&s->lock);
		}
		table_free(s->e, sizeof(*s->e) * s->capacity);
		table_free(s->buckets, sizeof(*s->buckets) * s->nbuckets);
	}
	free(vc->shards);
	free(vc);
}

void vcache_file_from_stat(struct vcache_file *f, const struct stat *st)
{
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->ident = 0;
	f->size = st->st_size;
	/*
	 * Unsigned arithmetic wraps where a far-future time would overflow;
	 * stamps then only collide for times 584 years apart.
	 */
	f->mtime_ns = (int64_t)((uint64_t)st->st_mtim.tv_sec * 1000000000u +
				(uint64_t)st->st_mtim.tv_nsec);
	f->ctime_ns = (int64_t)((uint64_t)st->st_ctim.tv_sec * 1000000000u +
				(uint64_t)st->st_ctim.tv_nsec);
}

static struct vshard *shard_of(struct vcache *vc, uint64_t h)
{
	return &vc->shards[h % vc->nshards];
}

static uint32_t *bucket_of(struct vshard *s, uint64_t h)
{
	return &s->buckets[(h >> 8) & (s->nbuckets - 1)];
}

static void lru_unlink(struct vshard *s, uint32_t i)
{
	struct ventry *e = &s->e[i];

	if (e->lru_prev != NIL)
		s->e[e->lru_prev].lru_next = e->lru_next;
	else
		s->lru_head = e->lru_next;
	if (e->lru_next != NIL)
		s->e[e->lru_next].lru_prev = e->lru_prev;
	else
		s->lru_tail = e->lru_prev;
}

static void lru_push_front(struct vshard *s, uint32_t i)
{
	struct ventry *e = &s->e[i];

	e->lru_prev = NIL;
	e->lru_next = s->lru_head;
	if (s->lru_head != NIL)
		s->e[s->lru_head].lru_prev = i;
	s->lru_head = i;
	if (s->lru_tail == NIL)
		s->lru_tail = i;
}

/* Returns the index of (dev, ino), and the link pointing at it. */
static uint32_t shard_find(struct vshard *s, uint64_t h, uint64_t dev,
			   uint64_t ino, uint32_t **linkp)
{
	uint32_t *link = bucket_of(s, h);

	while (*link != NIL) {
		struct ventry *e = &s->e[*link];

		if (e->ino == ino && e->dev == dev)
			break;
		link = &e->hash_next;
	}
	*linkp = link;
	return *link;
}

static void shard_remove(struct vshard *s, uint32_t *link)
{
	uint32_t i = *link;
	struct ventry *e = &s->e[i];

	*link = e->hash_next;
	lru_unlink(s, i);
	free(e->sig);
	e->sig = NULL;
	e->lru_next = s->free_head;
	s->free_head = i;
	s->entries--;
}

bool vcache_file_same(const struct vcache_file *a, const struct vcache_file *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->ident == b->ident &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns;
}

bool vcache_stamp_settled(const struct vcache_file *f, int64_t taken_ns,
			  int64_t window_ns)
{
	if (window_ns <= 0)
		return true;
	/* a ctime in the future (clock skew) is never settled */
	return f->ctime_ns < taken_ns && taken_ns - f->ctime_ns > window_ns;
}

static bool stamp_equal(const struct ventry *e, const struct vcache_file *f)
{
	return e->ident == f->ident && e->size == f->size &&
	       e->mtime_ns == f->mtime_ns && e->ctime_ns == f->ctime_ns;
}

/* Under the shard lock: whether e still holds a verdict for f. */
static bool entry_valid(const struct vcache *vc, const struct ventry *e,
			const struct vcache_file *f, uint64_t now)
{
	return e->gen == (uint32_t)atomic_load(&vc->generation) &&
	       (uint32_t)now < e->expires && stamp_equal(e, f);
}

enum vcache_verdict vcache_lookup(struct vcache *vc,
				  const struct vcache_file *f, char *sig,
				  size_t siglen)
{
	enum vcache_verdict v = VCACHE_MISS;
	uint64_t h, now;
	struct vshard *s;
	uint32_t i, *link;

	if (vc->nshards == 0)
		return VCACHE_MISS;
	h = key_hash(f->dev, f->ino);
	s = shard_of(vc, h);
	now = vc->clock(vc->clock_arg);
	pthread_mutex_lock(&s->lock);
	i = shard_find(s, h, f->dev, f->ino, &link);
	if (i != NIL) {
		struct ventry *e = &s->e[i];

		if (entry_valid(vc, e, f, now)) {
			v = e->verdict;
			if (sig && siglen)
				strlcpy(sig, e->sig ? e->sig : "", siglen);
			lru_unlink(s, i);
			lru_push_front(s, i);
		} else {
			shard_remove(s, link); /* stale for good */
		}
	}
	if (v == VCACHE_MISS)
		s->misses++;
	else
		s->hits++;
	pthread_mutex_unlock(&s->lock);
	return v;
}

enum vcache_verdict vcache_peek(struct vcache *vc, const struct vcache_file *f,
				char *sig, size_t siglen)
{
	enum vcache_verdict v = VCACHE_MISS;
	uint32_t i, *link;
	struct vshard *s;
	uint64_t h, now;

	if (vc->nshards == 0)
		return VCACHE_MISS;
	h = key_hash(f->dev, f->ino);
	s = shard_of(vc, h);
	now = vc->clock(vc->clock_arg);
	pthread_mutex_lock(&s->lock);
	i = shard_find(s, h, f->dev, f->ino, &link);
	if (i != NIL && entry_valid(vc, &s->e[i], f, now)) {
		v = s->e[i].verdict;
		if (sig && siglen)
			strlcpy(sig, s->e[i].sig ? s->e[i].sig : "", siglen);
	}
	pthread_mutex_unlock(&s->lock);
	return v;
}

bool vcache_knows(struct vcache *vc, const struct vcache_file *f)
{
	return vcache_peek(vc, f, NULL, 0) != VCACHE_MISS;
}

void vcache_insert(struct vcache *vc, const struct vcache_file *f,
		   enum vcache_verdict verdict, const char *sig, uint64_t gen)
{
	char *sig_copy = NULL;
	uint32_t i, *link;
	struct ventry *e;
	struct vshard *s;
	uint64_t h, now;

	if (vc->nshards == 0 || verdict == VCACHE_MISS)
		return;
	if (verdict == VCACHE_INFECTED) {
		sig_copy = strdup(sig ? sig : "");
		if (!sig_copy)
			return; /* not caching is always safe */
	}
	h = key_hash(f->dev, f->ino);
	s = shard_of(vc, h);
	now = vc->clock(vc->clock_arg);
	pthread_mutex_lock(&s->lock);
	/* checked under the lock: a clear cannot slip in unnoticed after */
	if (gen != atomic_load(&vc->generation)) {
		pthread_mutex_unlock(&s->lock);
		free(sig_copy);
		return;
	}
	i = shard_find(s, h, f->dev, f->ino, &link);
	if (i != NIL)
		shard_remove(s, link);
	if (s->free_head == NIL) {
		struct ventry *ve = &s->e[s->lru_tail];
		uint32_t *vlink;

		shard_find(s, key_hash(ve->dev, ve->ino), ve->dev, ve->ino,
			   &vlink);
		shard_remove(s, vlink);
		s->evictions++;
	}
	i = s->free_head;
	e = &s->e[i];
	s->free_head = e->lru_next;
	e->dev = f->dev;
	e->ino = f->ino;
	e->ident = f->ident;
	e->size = f->size;
	e->mtime_ns = f->mtime_ns;
	e->ctime_ns = f->ctime_ns;
	e->sig = sig_copy;
	e->verdict = (uint8_t)verdict;
	e->gen = (uint32_t)gen;
	e->expires = (uint32_t)(now + vc->ttl);
	e->hash_next = *bucket_of(s, h);
	*bucket_of(s, h) = i;
	lru_push_front(s, i);
	s->entries++;
	pthread_mutex_unlock(&s->lock);
}

void vcache_invalidate(struct vcache *vc, dev_t dev, ino_t ino)
{
	struct vshard *s;
	uint32_t *link;
	uint64_t h;

	if (vc->nshards == 0)
		return;
	h = key_hash(dev, ino);
	s = shard_of(vc, h);
	pthread_mutex_lock(&s->lock);
	if (shard_find(s, h, dev, ino, &link) != NIL)
		shard_remove(s, link);
	pthread_mutex_unlock(&s->lock);
}

uint64_t vcache_generation(struct vcache *vc)
{
	return atomic_load(&vc->generation);
}

/* Empties a shard (under its lock): every slot back on the free list. */
static void shard_wipe(struct vshard *s)
{
	for (uint32_t i = 0; i < s->capacity; i++) {
		free(s->e[i].sig);
		s->e[i].sig = NULL;
		s->e[i].lru_next = i + 1 < s->capacity ? i + 1 : NIL;
	}
	memset(s->buckets, 0xff, sizeof(*s->buckets) * s->nbuckets);
	s->free_head = s->capacity ? 0 : NIL;
	s->lru_head = s->lru_tail = NIL;
	s->entries = 0;
}

void vcache_clear(struct vcache *vc)
{
	/*
	 * Taking every shard lock orders the bump against inserts that
	 * checked the old generation under their shard lock; the memory is
	 * wiped too, so the entry count says what is really cached.
	 */
	for (unsigned int i = 0; i < vc->nshards; i++)
		pthread_mutex_lock(&vc->shards[i].lock);
	atomic_fetch_add(&vc->generation, 1);
	for (unsigned int i = 0; i < vc->nshards; i++)
		shard_wipe(&vc->shards[i]);
	for (unsigned int i = vc->nshards; i-- > 0;)
		pthread_mutex_unlock(&vc->shards[i].lock);
}

size_t vcache_memory_bytes(const struct vcache *vc)
{
	size_t n = sizeof(*vc) + sizeof(*vc->shards) * vc->nshards;

	for (unsigned int i = 0; i < vc->nshards; i++)
		n += sizeof(struct ventry) * vc->shards[i].capacity +
		     sizeof(uint32_t) * vc->shards[i].nbuckets;
	return n;
}

void vcache_counters(struct vcache *vc, struct vcache_counters *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < vc->nshards; i++) {
		struct vshard *s = &vc->shards[i];

		pthread_mutex_lock(&s->lock);
		out->hits += s->hits;
		out->misses += s->misses;
		out->evictions += s->evictions;
		out->entries += s->entries;
		pthread_mutex_unlock(&s->lock);
	}
}
