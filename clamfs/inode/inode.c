// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Inode table: a chained hash on (dev, ino) under one mutex (held only for
 * pointer work, never across a syscall), growing by doubling; and the
 * node ids, in a second hash split into shards with a mutex each, so
 * that the lookup every request makes contends neither with the table
 * lock nor much with itself. Changes hold the table lock and the shard's.
 */
#include "inode_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

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
	pthread_spin_init(&inode->fd_lock, PTHREAD_PROCESS_PRIVATE);
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
	if (inode->fd >= 0)
		close(inode->fd);
	pthread_spin_destroy(&inode->fd_lock);
	pthread_mutex_destroy(&inode->stamp_lock);
	pthread_mutex_destroy(&inode->io_lock);
	free(inode);
}

static struct inode **bucket_of(struct inode_table *table, dev_t dev, ino_t ino)
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
	inode->hashed = true;
	table->count++;
}

static void itab_unhash_locked(struct inode_table *table, struct inode *inode)
{
	struct inode **link = bucket_of(table, inode->dev, inode->ino);

	while (*link != inode)
		link = &(*link)->hash_next;
	*link = inode->hash_next;
	inode->hashed = false;
}

static struct inode *itab_find_locked(struct inode_table *table, dev_t dev,
				      ino_t ino)
{
	struct inode *in = *bucket_of(table, dev, ino);

	while (in && (in->ino != ino || in->dev != dev))
		in = in->hash_next;
	return in;
}

/* Whether the fds held leave little room: time to park, or to evict. */
/*
 * Short of fds with none to park (or none found unpinned the last time
 * it was tried): only the kernel forgetting inodes makes room, where
 * there are names to evict or the fds fill the target (directories, open
 * files). A small table whose files are all parked is not low: the
 * floor of ITAB_LOW_ROOM keeps it short, but every new file parks one.
 */
static bool itab_low_locked(struct inode_table *table)
{
	return fds_short_locked(table) &&
	       (TAILQ_EMPTY(&table->held) || table->park_failed) &&
	       (!TAILQ_EMPTY(&table->lru) || table->fds >= table->target);
}

/* inode has fd newly held: it joins the parking order, at the end */
static size_t id_hash(uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h ^ (h >> 31));
}

/* the top bits pick the shard, the low ones the bucket within it */
static struct id_shard *shard_of(struct inode_table *table, uint64_t id)
{
	return &table->shards[(id_hash(id) >> 24) % ID_SHARDS];
}

/* Under the shard's lock or the table's (every change holds both). */
static struct inode *id_find(struct id_shard *sh, uint64_t id)
{
	struct inode *in = sh->buckets[id_hash(id) & (sh->nbuckets - 1)];

	while (in && in->id != id)
		in = in->id_next;
	return in;
}

static struct inode *id_find_locked(struct inode_table *table, uint64_t id)
{
	return id_find(shard_of(table, id), id);
}

/* Doubling, allocated before taking the shard lock; ENOMEM: stays dense. */
static void id_link_locked(struct inode_table *table, struct inode *inode)
{
	struct id_shard *sh = shard_of(table, inode->id);
	struct inode **nb = NULL, **b;
	size_t n = sh->nbuckets;

	if (sh->count >= sh->nbuckets) {
		n = sh->nbuckets * 2;
		nb = calloc(n, sizeof(*nb));
	}
	pthread_mutex_lock(&sh->lock);
	if (nb) {
		for (size_t i = 0; i < sh->nbuckets; i++) {
			struct inode *in = sh->buckets[i], *next;

			for (; in; in = next) {
				next = in->id_next;
				b = &nb[id_hash(in->id) & (n - 1)];
				in->id_next = *b;
				*b = in;
			}
		}
		free(sh->buckets);
		sh->buckets = nb;
		sh->nbuckets = n;
	}
	b = &sh->buckets[id_hash(inode->id) & (sh->nbuckets - 1)];
	inode->id_next = *b;
	*b = inode;
	sh->count++;
	pthread_mutex_unlock(&sh->lock);
}

static void id_unlink_locked(struct inode_table *table, struct inode *inode)
{
	struct id_shard *sh = shard_of(table, inode->id);
	struct inode **l;

	pthread_mutex_lock(&sh->lock);
	l = &sh->buckets[id_hash(inode->id) & (sh->nbuckets - 1)];
	while (*l != inode)
		l = &(*l)->id_next;
	*l = inode->id_next;
	sh->count--;
	pthread_mutex_unlock(&sh->lock);
}

/*
 * A new inode's id: its handle where ids are handles, else the id it had
 * before the kernel forgot it (same file: same handle), else a new one.
 * Counted ids carry this daemon's epoch as generation, so that the ids a
 * daemon before it issued are refused by the kernel. 0 when none is left.
 */
static uint64_t id_assign_locked(struct inode_table *table, struct inode *inode)
{
	uint64_t id;

	inode->generation = 0;
	inode->counted = false;
	if (table->handle_ids && inode->dev == table->root_dev &&
	    nodeid_from_handle(&inode->handle, &id) &&
	    !id_find_locked(table, id))
		return id;
	inode->generation = table->epoch;
	inode->counted = true;
	if (inode->handle.len &&
	    ghosts_take(table->ghosts, inode->dev, inode->ino, &inode->handle,
			&id) &&
	    !id_find_locked(table, id)) {
		/* somebody was told it once: a ghost again when forgotten */
		atomic_store(&inode->handed_out, true);
		return id;
	}
	do
		id = nodeid_counted(++table->counted, table->handle_ids);
	while (id && id_find_locked(table, id));
	return id;
}

static void itab_unname_locked(struct inode_table *table, struct inode *inode)
{
	if (!inode->name)
		return;
	TAILQ_REMOVE(&table->lru, inode, lru);
}

/*
 * open_by_handle_at wants a real fd on the filesystem, not an O_PATH one:
 * the very object again, through its magic link.
 */
static int reopen_dir(int fd)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

struct inode_table *itab_create(int root_fd, const struct stat *root_st)
{
	struct inode_table *table = calloc(1, sizeof(*table));

	if (!table)
		goto fail;
	table->nbuckets = ITAB_INITIAL_BUCKETS;
	table->max = table->target = SIZE_MAX;
	TAILQ_INIT(&table->lru);
	TAILQ_INIT(&table->held);
	table->buckets = calloc(table->nbuckets, sizeof(*table->buckets));
	if (!table->buckets)
		goto fail;
	table->ghosts = ghosts_create(ITAB_GHOSTS_MAX);
	if (!table->ghosts)
		goto fail;
	for (size_t i = 0; i < ID_SHARDS; i++) {
		struct id_shard *sh = &table->shards[i];

		sh->nbuckets = ID_SHARD_INITIAL_BUCKETS;
		sh->buckets = calloc(sh->nbuckets, sizeof(*sh->buckets));
		if (!sh->buckets)
			goto fail;
	}
	table->root = inode_new(root_fd, root_st);
	if (!table->root)
		goto fail;
	/* the kernel never forgets the root: it holds a permanent reference */
	table->root->nlookup = 1;
	table->root->id = NODEID_ROOT;
	table->root_dev = root_st->st_dev;
	table->handle_ids = nodeid_fs_root(root_fd);
	table->mount_fd = reopen_dir(root_fd);
	table->can_reopen =
		can_reopen(table->mount_fd, root_fd, &table->root_mnt_id);
	if (getrandom(&table->epoch, sizeof(table->epoch), 0) !=
	    sizeof(table->epoch))
		table->epoch = (uint32_t)time(NULL) ^ (uint32_t)getpid();
	pthread_mutex_init(&table->lock, NULL);
	pthread_cond_init(&table->low, NULL);
	pthread_cond_init(&table->room, NULL);
	for (size_t i = 0; i < ID_SHARDS; i++)
		pthread_mutex_init(&table->shards[i].lock, NULL);
	itab_link(table, table->root);
	id_link_locked(table, table->root);
	table->fds = 1;
	return table;

fail:
	if (table) {
		free(table->buckets);
		for (size_t i = 0; i < ID_SHARDS; i++)
			free(table->shards[i].buckets);
		ghosts_destroy(table->ghosts);
	}
	free(table);
	close(root_fd);
	return NULL;
}

void itab_destroy(struct inode_table *table)
{
	if (!table)
		return;
	/* by id: every inode is there, an unhashed one too */
	for (size_t i = 0; i < ID_SHARDS; i++) {
		struct id_shard *sh = &table->shards[i];

		for (size_t b = 0; b < sh->nbuckets; b++) {
			struct inode *in = sh->buckets[b], *next;

			for (; in; in = next) {
				next = in->id_next;
				inode_free(in);
			}
		}
		free(sh->buckets);
		pthread_mutex_destroy(&sh->lock);
	}
	free(table->buckets);
	ghosts_destroy(table->ghosts);
	if (table->mount_fd >= 0)
		close(table->mount_fd);
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

struct inode *itab_find_held_ref(struct inode_table *table, dev_t dev,
				 ino_t ino)
{
	struct inode *in;

	pthread_mutex_lock(&table->lock);
	in = itab_find_locked(table, dev, ino);
	/* fd transitions hold the table lock: it is stable here */
	if (in && in->parkable && in->fd < 0)
		in = NULL;
	if (in)
		in->nlookup++;
	pthread_mutex_unlock(&table->lock);
	return in;
}

void itab_ref(struct inode_table *table, struct inode *inode)
{
	pthread_mutex_lock(&table->lock);
	inode->nlookup++;
	pthread_mutex_unlock(&table->lock);
}

struct inode *itab_by_id(struct inode_table *table, uint64_t id)
{
	struct id_shard *sh;
	struct inode *in;

	if (id == NODEID_ROOT)
		return table->root;
	sh = shard_of(table, id);
	pthread_mutex_lock(&sh->lock);
	in = id_find(sh, id);
	pthread_mutex_unlock(&sh->lock);
	return in;
}

/*
 * Which handle an id the table does not hold stands for, and on which
 * device it must land: only handles this daemon issued, or any handle
 * where ids are handles (the whole filesystem is the backend). Never
 * another: open_by_handle_at reaches anything on the filesystem.
 */
static bool id_handle_locked(struct inode_table *table, uint64_t id,
			     struct nodeid_handle *h, dev_t *dev, ino_t *ino)
{
	if (table->handle_ids && (uint32_t)id != 0) {
		nodeid_to_handle(id, h);
		*dev = table->root_dev;
		*ino = 0; /* any: the handle's generation tells the file */
		return true;
	}
	return ghosts_find(table->ghosts, id, dev, ino, h) &&
	       *dev == table->root_dev;
}

bool itab_dir_beneath_root(struct inode_table *table, int dir_fd)
{
	dev_t prev_dev = 0;
	ino_t prev_ino = 0;
	bool found = false;
	struct stat st;
	int fd = dir_fd, up;

	/* bounded: PATH_MAX allows at most 2048 levels of "a/" */
	for (int depth = 0; depth < 4096; depth++) {
		if (fstatat(fd, "", &st, AT_EMPTY_PATH) == -1)
			break;
		if (st.st_dev == table->root->dev &&
		    st.st_ino == table->root->ino) {
			found = true;
			break;
		}
		/* "/" is its own parent: the walk left the backend */
		if (depth > 0 && st.st_dev == prev_dev && st.st_ino == prev_ino)
			break;
		prev_dev = st.st_dev;
		prev_ino = st.st_ino;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (up == -1)
			break;
		if (fd != dir_fd)
			close(fd);
		fd = up;
	}
	if (fd != dir_fd)
		close(fd);
	return found;
}

int itab_resolve_id(struct inode_table *table, uint64_t id, struct inode **out)
{
	struct nodeid_handle h;
	struct inode *in;
	struct stat st;
	dev_t dev;
	ino_t ino;
	bool known;
	int fd, ret;

	if (id == 0)
		return -ESTALE;
	pthread_mutex_lock(&table->lock);
	in = id == NODEID_ROOT ? table->root : id_find_locked(table, id);
	if (in)
		in->nlookup++;
	known = in || id_handle_locked(table, id, &h, &dev, &ino);
	pthread_mutex_unlock(&table->lock);
	if (in) {
		*out = in;
		return 0;
	}
	if (!known || table->mount_fd < 0)
		return -ESTALE;
	fd = nodeid_handle_open(table->mount_fd, &h);
	if (fd < 0)
		return -ESTALE;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1 ||
	    st.st_dev != dev || (ino && st.st_ino != ino) ||
	    (S_ISDIR(st.st_mode) && !itab_dir_beneath_root(table, fd))) {
		close(fd);
		return -ESTALE;
	}
	ret = itab_insert_ref(table, fd, &st, &in);
	if (ret)
		return ret;
	/*
	 * Not the id asked for: the handle was not canonical (ext4 takes
	 * generation 0 as "any"), or names the root, or the file got
	 * another id meanwhile. The kernel would refuse it anyway.
	 */
	if (in->id != id) {
		itab_forget(table, in, 1);
		return -ESTALE;
	}
	*out = in;
	return 0;
}

int itab_insert_ref(struct inode_table *table, int fd, const struct stat *st,
		    struct inode **out)
{
	struct inode *fresh = inode_new(fd, st), *in;
	int parked = -1, parked_too = -1;

	if (!fresh) {
		close(fd);
		return -ENOMEM;
	}
	fresh->parkable =
		parkable_in(table, fresh, nodeid_handle_of(fd, &fresh->handle));
	pthread_mutex_lock(&table->lock);
	in = itab_find_locked(table, st->st_dev, st->st_ino);
	/*
	 * A held fd keeps its file, and so its inode number; a parked one
	 * does not: the file may have gone and its number be another file's
	 * now, which the handle's generation tells. The kernel's node of the
	 * old one stays, known by id, and gets ESTALE when used.
	 */
	if (in && in->parkable && in->fd < 0 &&
	    !nodeid_handle_equal(&in->handle, &fresh->handle)) {
		itab_unhash_locked(table, in);
		in = NULL;
	}
	/* the kernel must forget inodes or some fd be parked to take more */
	if (!in && table->fds >= table->max) {
		parked = park_one_locked(table, true, NULL);
		if (parked < 0) {
			pthread_cond_signal(&table->low);
			pthread_mutex_unlock(&table->lock);
			inode_free(fresh);
			return -EMFILE;
		}
	}
	if (!in) {
		fresh->id = id_assign_locked(table, fresh);
		if (fresh->id == 0) {
			pthread_mutex_unlock(&table->lock);
			close_if_open(parked);
			inode_free(fresh);
			return -ENFILE; /* every id used: 2^32 at least */
		}
		itab_link(table, fresh);
		id_link_locked(table, fresh);
		held_add_locked(table, fresh);
		parked_too = park_if_short_locked(table, fresh);
		in = fresh;
		fresh = NULL;
		if (itab_low_locked(table))
			pthread_cond_signal(&table->low);
	} else if (fresh->parkable && table->fds < table->max &&
		   adopt_fd_locked(table, in, fresh->fd)) {
		fresh->fd = -1;
		parked_too = park_if_short_locked(table, in);
	}
	in->nlookup++;
	pthread_mutex_unlock(&table->lock);
	close_if_open(parked);
	close_if_open(parked_too);
	if (fresh)
		inode_free(fresh); /* lost a race: the other fd is as good */
	*out = in;
	return 0;
}

void itab_forget(struct inode_table *table, struct inode *inode, uint64_t n)
{
	bool dead = false;

	pthread_mutex_lock(&table->lock);
	/* a kernel that over-forgets must not make us free twice */
	inode->nlookup = n >= inode->nlookup ? 0 : inode->nlookup - n;
	if (inode->nlookup == 0 && inode != table->root) {
		/* an unhashed inode's file is gone; its number is another's */
		if (inode->counted && atomic_load(&inode->handed_out) &&
		    inode->hashed)
			ghosts_put(table->ghosts, inode->id, inode->dev,
				   inode->ino, &inode->handle);
		if (inode->hashed)
			itab_unhash_locked(table, inode);
		id_unlink_locked(table, inode);
		itab_unname_locked(table, inode);
		if (inode->on_held) {
			TAILQ_REMOVE(&table->held, inode, held);
			table->held_count--;
		}
		/* nobody pins what nobody holds a reference to */
		if (inode->fd >= 0)
			table->fds--;
		table->count--;
		if (table->fds < table->max)
			pthread_cond_broadcast(&table->room);
		dead = true;
	}
	pthread_mutex_unlock(&table->lock);
	if (dead)
		inode_free(inode);
}

size_t itab_ref_all(struct inode_table *table, struct inode **out, size_t max)
{
	size_t n = 0;

	/* by id: an unhashed inode is still known to the kernel */
	pthread_mutex_lock(&table->lock);
	for (size_t i = 0; i < ID_SHARDS && n < max; i++) {
		struct id_shard *sh = &table->shards[i];

		for (size_t b = 0; b < sh->nbuckets && n < max; b++)
			for (struct inode *in = sh->buckets[b]; in && n < max;
			     in = in->id_next) {
				in->nlookup++;
				out[n++] = in;
			}
	}
	pthread_mutex_unlock(&table->lock);
	return n;
}

size_t itab_count(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = table->count;
	pthread_mutex_unlock(&table->lock);
	return n;
}

void itab_set_max(struct inode_table *table, size_t target, size_t max)
{
	pthread_mutex_lock(&table->lock);
	table->max = max;
	table->target = target < max ? target : max;
	pthread_mutex_unlock(&table->lock);
}

size_t itab_room(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = table->fds >= table->max ? 0 : table->max - table->fds;
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
	 * Nor is a file that can be parked: that frees its fd, and the kernel
	 * keeps what it caches.
	 */
	if (inode == table->root || inode->type == S_IFDIR || inode->parkable ||
	    table->target == SIZE_MAX)
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
	while (table->fds >= table->max && !table->stopping &&
	       pthread_cond_timedwait(&table->room, &table->lock, &until) == 0)
		;
	room = table->fds < table->max;
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

bool itab_handle_ids(struct inode_table *table)
{
	return table->handle_ids;
}

size_t itab_ghosts(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = ghosts_count(table->ghosts);
	pthread_mutex_unlock(&table->lock);
	return n;
}

/* The parked inode's file again, by handle, if it is still that file. */
/* Pins; the fd it holds, or -1 when parked. */