// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Inode table: a chained hash on (dev, ino) under one mutex (held only for
 * pointer work, never across a syscall), growing by doubling.
 */
#include "inode.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

struct inode {
	struct inode *hash_next;
	int fd;
	mode_t type;
	dev_t dev;
	ino_t ino;
	uint64_t nlookup; /* under table->lock */

	/* the name it was last looked up by; under table->lock */
	TAILQ_ENTRY(inode) lru; /* linked while name is set */
	char *name;
	dev_t parent_dev;
	ino_t parent_ino;

	atomic_int writers;
	atomic_uint_fast64_t write_seq;

	pthread_mutex_t io_lock; /* held across attach: one decides */
	unsigned int io_opens;
	int io_backing_id;
	atomic_bool io_rw_passthrough;

	pthread_mutex_t stamp_lock;
	bool stamp_valid;
	off_t stamp_size;
	struct timespec stamp_mtime;
	struct timespec stamp_ctime;
};

struct inode_table {
	pthread_mutex_t lock;
	struct inode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	size_t max; /* cap on count, i.e. on the O_PATH fds held */
	struct inode *root;
	TAILQ_HEAD(, inode) lru; /* named inodes, least recent first */
	pthread_cond_t low;	 /* signalled when itab_low turns true */
	pthread_cond_t room;	 /* signalled when count drops below max */
	bool stopping;
};

#define ITAB_INITIAL_BUCKETS 1024
/* below this much room the table is low whatever its cap */
#define ITAB_LOW_ROOM 1024

static size_t inode_hash(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL;

	h ^= (uint64_t)dev * 0xc2b2ae3d27d4eb4fULL;
	return (size_t)(h ^ (h >> 29));
}

static struct inode *inode_new(int fd, const struct stat *st)
{
	struct inode *inode = calloc(1, sizeof(*inode));

	if (!inode)
		return NULL;
	inode->fd = fd;
	inode->type = st->st_mode & S_IFMT;
	inode->dev = st->st_dev;
	inode->ino = st->st_ino;
	pthread_mutex_init(&inode->stamp_lock, NULL);
	pthread_mutex_init(&inode->io_lock, NULL);
	return inode;
}

static void inode_free(struct inode *inode)
{
	free(inode->name);
	close(inode->fd);
	pthread_mutex_destroy(&inode->stamp_lock);
	pthread_mutex_destroy(&inode->io_lock);
	free(inode);
}

static struct inode **bucket_of(struct inode_table *table, dev_t dev,
				ino_t ino)
{
	return &table->buckets[inode_hash(dev, ino) & (table->nbuckets - 1)];
}

/* Doubling keeps chains short; on ENOMEM the table just stays denser. */
static void itab_grow(struct inode_table *table)
{
	size_t n = table->nbuckets * 2;
	struct inode **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return;
	for (size_t i = 0; i < table->nbuckets; i++) {
		struct inode *in = table->buckets[i], *next;

		for (; in; in = next) {
			size_t b = inode_hash(in->dev, in->ino) & (n - 1);

			next = in->hash_next;
			in->hash_next = nb[b];
			nb[b] = in;
		}
	}
	free(table->buckets);
	table->buckets = nb;
	table->nbuckets = n;
}

static void itab_link(struct inode_table *table, struct inode *inode)
{
	struct inode **b;

	if (table->count >= table->nbuckets)
		itab_grow(table);
	b = bucket_of(table, inode->dev, inode->ino);
	inode->hash_next = *b;
	*b = inode;
	table->count++;
}

static struct inode *itab_find_locked(struct inode_table *table, dev_t dev,
				      ino_t ino)
{
	struct inode *in = *bucket_of(table, dev, ino);

	while (in && (in->ino != ino || in->dev != dev))
		in = in->hash_next;
	return in;
}

static bool itab_low_locked(struct inode_table *table)
{
	size_t room;

	if (table->max == SIZE_MAX)
		return false;
	room = table->count < table->max ? table->max - table->count : 0;
	/*
	 * Eviction is asynchronous (the kernel's FORGETs come back later):
	 * it starts while there is room for a quick succession of lookups to
	 * go on meanwhile. A small table is kept as small as it goes.
	 */
	return room < table->max / 2 || room < ITAB_LOW_ROOM;
}

static void itab_unname_locked(struct inode_table *table, struct inode *inode)
{
	if (!inode->name)
		return;
	TAILQ_REMOVE(&table->lru, inode, lru);
}

struct inode_table *itab_create(int root_fd, const struct stat *root_st)
{
	struct inode_table *table = calloc(1, sizeof(*table));

	if (!table)
		goto fail;
	table->nbuckets = ITAB_INITIAL_BUCKETS;
	table->max = SIZE_MAX;
	TAILQ_INIT(&table->lru);
	table->buckets = calloc(table->nbuckets, sizeof(*table->buckets));
	if (!table->buckets)
		goto fail;
	table->root = inode_new(root_fd, root_st);
	if (!table->root)
		goto fail;
	/* the kernel never forgets the root: it holds a permanent reference */
	table->root->nlookup = 1;
	pthread_mutex_init(&table->lock, NULL);
	pthread_cond_init(&table->low, NULL);
	pthread_cond_init(&table->room, NULL);
	itab_link(table, table->root);
	return table;

fail:
	if (table)
		free(table->buckets);
	free(table);
	close(root_fd);
	return NULL;
}

void itab_destroy(struct inode_table *table)
{
	if (!table)
		return;
	for (size_t i = 0; i < table->nbuckets; i++) {
		struct inode *in = table->buckets[i], *next;

		for (; in; in = next) {
			next = in->hash_next;
			inode_free(in);
		}
	}
	free(table->buckets);
	pthread_cond_destroy(&table->low);
	pthread_cond_destroy(&table->room);
	pthread_mutex_destroy(&table->lock);
	free(table);
}

struct inode *itab_root(struct inode_table *table)
{
	return table->root;
}

struct inode *itab_find_ref(struct inode_table *table, dev_t dev, ino_t ino)
{
	struct inode *in;

	pthread_mutex_lock(&table->lock);
	in = itab_find_locked(table, dev, ino);
	if (in)
		in->nlookup++;
	pthread_mutex_unlock(&table->lock);
	return in;
}

int itab_insert_ref(struct inode_table *table, int fd, const struct stat *st,
		    struct inode **out)
{
	struct inode *fresh = inode_new(fd, st), *in;

	if (!fresh) {
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_lock(&table->lock);
	in = itab_find_locked(table, st->st_dev, st->st_ino);
	if (!in && table->count >= table->max) {
		/* the kernel must forget inodes before we take more fds */
		pthread_cond_signal(&table->low);
		pthread_mutex_unlock(&table->lock);
		inode_free(fresh);
		return -EMFILE;
	}
	if (!in) {
		itab_link(table, fresh);
		in = fresh;
		fresh = NULL;
		if (itab_low_locked(table))
			pthread_cond_signal(&table->low);
	}
	in->nlookup++;
	pthread_mutex_unlock(&table->lock);
	if (fresh)
		inode_free(fresh); /* lost a race: the other fd is as good */
	*out = in;
	return 0;
}

void itab_forget(struct inode_table *table, struct inode *inode, uint64_t n)
{
	struct inode **link;
	bool dead = false;

	pthread_mutex_lock(&table->lock);
	/* a kernel that over-forgets must not make us free twice */
	inode->nlookup = n >= inode->nlookup ? 0 : inode->nlookup - n;
	if (inode->nlookup == 0 && inode != table->root) {
		link = bucket_of(table, inode->dev, inode->ino);
		while (*link != inode)
			link = &(*link)->hash_next;
		*link = inode->hash_next;
		itab_unname_locked(table, inode);
		table->count--;
		if (table->count < table->max)
			pthread_cond_broadcast(&table->room);
		dead = true;
	}
	pthread_mutex_unlock(&table->lock);
	if (dead)
		inode_free(inode);
}

size_t itab_count(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = table->count;
	pthread_mutex_unlock(&table->lock);
	return n;
}

void itab_set_max(struct inode_table *table, size_t max)
{
	pthread_mutex_lock(&table->lock);
	table->max = max;
	pthread_mutex_unlock(&table->lock);
}

size_t itab_room(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = table->count >= table->max ? 0 : table->max - table->count;
	pthread_mutex_unlock(&table->lock);
	return n;
}

bool itab_low(struct inode_table *table)
{
	bool low;

	pthread_mutex_lock(&table->lock);
	low = itab_low_locked(table);
	pthread_mutex_unlock(&table->lock);
	return low;
}

void itab_note_name(struct inode_table *table, struct inode *inode,
		    const struct inode *parent, const char *name)
{
	char *copy, *old;

	/*
	 * Invalidating a directory's name also detaches whatever is mounted
	 * on it or below it (d_invalidate): directories are never evicted.
	 */
	if (inode == table->root || inode->type == S_IFDIR ||
	    table->max == SIZE_MAX)
		return;
	pthread_mutex_lock(&table->lock);
	if (inode->name && inode->parent_dev == parent->dev &&
	    inode->parent_ino == parent->ino &&
	    strcmp(inode->name, name) == 0) {
		/* a revalidation: same name, just recently used again */
		TAILQ_REMOVE(&table->lru, inode, lru);
		TAILQ_INSERT_TAIL(&table->lru, inode, lru);
		pthread_mutex_unlock(&table->lock);
		return;
	}
	pthread_mutex_unlock(&table->lock);
	copy = strdup(name);
	if (!copy)
		return; /* it just cannot be evicted: harmless */
	pthread_mutex_lock(&table->lock);
	old = inode->name;
	if (old)
		TAILQ_REMOVE(&table->lru, inode, lru);
	inode->name = copy;
	inode->parent_dev = parent->dev;
	inode->parent_ino = parent->ino;
	TAILQ_INSERT_TAIL(&table->lru, inode, lru);
	if (itab_low_locked(table))
		pthread_cond_signal(&table->low);
	pthread_mutex_unlock(&table->lock);
	free(old);
}

size_t itab_pick_victims(struct inode_table *table, struct itab_victim *v,
			 size_t n)
{
	struct inode *in;
	size_t i = 0;

	pthread_mutex_lock(&table->lock);
	while (i < n && (in = TAILQ_FIRST(&table->lru))) {
		TAILQ_REMOVE(&table->lru, in, lru);
		v[i].parent_dev = in->parent_dev;
		v[i].parent_ino = in->parent_ino;
		v[i].name = in->name;
		in->name = NULL;
		i++;
	}
	pthread_mutex_unlock(&table->lock);
	return i;
}

bool itab_wait_room(struct inode_table *table, unsigned int ms)
{
	struct timespec until;
	bool room;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&table->lock);
	pthread_cond_signal(&table->low);
	while (table->count >= table->max && !table->stopping &&
	       pthread_cond_timedwait(&table->room, &table->lock, &until) == 0)
		;
	room = table->count < table->max;
	pthread_mutex_unlock(&table->lock);
	return room;
}

bool itab_wait_low(struct inode_table *table)
{
	bool low;

	pthread_mutex_lock(&table->lock);
	while (!table->stopping &&
	       (!itab_low_locked(table) || TAILQ_EMPTY(&table->lru)))
		pthread_cond_wait(&table->low, &table->lock);
	low = !table->stopping;
	pthread_mutex_unlock(&table->lock);
	return low;
}

void itab_stop_waiters(struct inode_table *table)
{
	pthread_mutex_lock(&table->lock);
	table->stopping = true;
	pthread_cond_broadcast(&table->low);
	pthread_cond_broadcast(&table->room);
	pthread_mutex_unlock(&table->lock);
}

int inode_fd(const struct inode *inode)
{
	return inode->fd;
}

dev_t inode_dev(const struct inode *inode)
{
	return inode->dev;
}

ino_t inode_ino(const struct inode *inode)
{
	return inode->ino;
}

mode_t inode_type(const struct inode *inode)
{
	return inode->type;
}

static bool ts_equal(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

bool inode_stamp_unchanged(struct inode *inode, const struct stat *st,
			   bool trusted)
{
	bool same;

	pthread_mutex_lock(&inode->stamp_lock);
	same = inode->stamp_valid && inode->stamp_size == st->st_size &&
	       ts_equal(&inode->stamp_mtime, &st->st_mtim) &&
	       ts_equal(&inode->stamp_ctime, &st->st_ctim);
	inode->stamp_valid = trusted;
	inode->stamp_size = st->st_size;
	inode->stamp_mtime = st->st_mtim;
	inode->stamp_ctime = st->st_ctim;
	pthread_mutex_unlock(&inode->stamp_lock);
	return same;
}

int inode_writers_add(struct inode *inode, int delta)
{
	return atomic_fetch_add(&inode->writers, delta) + delta;
}

int inode_writers(const struct inode *inode)
{
	return atomic_load(&((struct inode *)inode)->writers);
}

void inode_note_write(struct inode *inode)
{
	atomic_fetch_add(&inode->write_seq, 1);
}

uint64_t inode_write_seq(const struct inode *inode)
{
	return atomic_load(&((struct inode *)inode)->write_seq);
}

int inode_io_join(struct inode *inode, int (*attach)(void *arg), void *arg)
{
	int id;

	pthread_mutex_lock(&inode->io_lock);
	if (inode->io_opens == 0)
		inode->io_backing_id = attach(arg);
	inode->io_opens++;
	id = inode->io_backing_id;
	pthread_mutex_unlock(&inode->io_lock);
	return id;
}

void inode_io_mark_rw(struct inode *inode)
{
	atomic_store(&inode->io_rw_passthrough, true);
}

bool inode_io_marked_rw(struct inode *inode)
{
	return atomic_load(&inode->io_rw_passthrough);
}

void inode_io_clear_rw(struct inode *inode)
{
	atomic_store(&inode->io_rw_passthrough, false);
}

int inode_io_leave(struct inode *inode)
{
	int id = 0;

	pthread_mutex_lock(&inode->io_lock);
	if (inode->io_opens > 0 && --inode->io_opens == 0) {
		id = inode->io_backing_id;
		inode->io_backing_id = 0;
	}
	pthread_mutex_unlock(&inode->io_lock);
	return id;
}
