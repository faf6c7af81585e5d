// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Node ids for export: backend file handles, ids made of them, and the
 * ghosts of forgotten ids (two chained hashes and a FIFO that bounds them).
 */
#include "nodeid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mountpoint.h"

/* include/linux/exportfs.h: 32-bit inode number, 32-bit generation */
#define FILEID_INO32_GEN 1

union handle_buf {
	struct file_handle fh;
	unsigned char raw[sizeof(struct file_handle) + NODEID_HANDLE_MAX];
};

int nodeid_handle_of(int fd, struct nodeid_handle *h)
{
	union handle_buf buf;
	int mount_id;

	memset(h, 0, sizeof(*h));
	buf.fh.handle_bytes = NODEID_HANDLE_MAX;
	/* EOVERFLOW (too large) or EOPNOTSUPP: no handle, len stays 0 */
	if (name_to_handle_at(fd, "", &buf.fh, &mount_id, AT_EMPTY_PATH) == -1)
		return -1;
	h->type = buf.fh.handle_type;
	h->len = buf.fh.handle_bytes;
	memcpy(h->bytes, buf.fh.f_handle, h->len);
	return mount_id;
}

bool nodeid_handle_equal(const struct nodeid_handle *a,
			 const struct nodeid_handle *b)
{
	return a->len == b->len && a->type == b->type &&
	       memcmp(a->bytes, b->bytes, a->len) == 0;
}

int nodeid_handle_open(int mount_fd, const struct nodeid_handle *h)
{
	union handle_buf buf;
	int fd;

	if (h->len == 0 || h->len > NODEID_HANDLE_MAX)
		return -ESTALE;
	buf.fh.handle_bytes = h->len;
	buf.fh.handle_type = h->type;
	memcpy(buf.fh.f_handle, h->bytes, h->len);
	fd = open_by_handle_at(mount_fd, &buf.fh, O_PATH | O_CLOEXEC);
	return fd == -1 ? -errno : fd;
}

struct whole_fs_query {
	unsigned long long id;
	bool whole;
};

static int note_whole_fs(const struct mountinfo_entry *m, void *arg)
{
	struct whole_fs_query *q = arg;

	if (m->id != q->id)
		return 0;
	/* the mount shows its filesystem from the top, not a subtree */
	q->whole = strcmp(m->root, "/") == 0;
	return 1;
}

static bool mount_is_whole_fs(uint64_t mnt_id)
{
	struct whole_fs_query q = {.id = mnt_id};

	return mountpoint_each(MOUNTINFO_SELF, note_whole_fs, &q) == 1 &&
	       q.whole;
}

bool nodeid_fs_root(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) == -1 ||
	    !(stx.stx_mask & STATX_MNT_ID) ||
	    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return false;
	return mount_is_whole_fs(stx.stx_mnt_id);
}

bool nodeid_from_handle(const struct nodeid_handle *h, uint64_t *id)
{
	uint32_t ino, gen;

	if (h->type != FILEID_INO32_GEN || h->len != 8)
		return false;
	memcpy(&ino, h->bytes, 4);
	memcpy(&gen, h->bytes + 4, 4);
	if (ino == 0)
		return false;
	*id = (uint64_t)gen << 32 | ino;
	return *id != NODEID_ROOT;
}

void nodeid_to_handle(uint64_t id, struct nodeid_handle *h)
{
	uint32_t ino = (uint32_t)id, gen = (uint32_t)(id >> 32);

	memset(h, 0, sizeof(*h));
	h->type = FILEID_INO32_GEN;
	h->len = 8;
	memcpy(h->bytes, &ino, 4);
	memcpy(h->bytes + 4, &gen, 4);
}

uint64_t nodeid_counted(uint64_t n, bool handle_ids)
{
	if (handle_ids)
		return n >= 1 && n <= UINT32_MAX ? n << 32 : 0;
	return n >= 1 && n < UINT64_MAX ? n + 1 : 0;
}

struct ghost {
	struct ghost *by_id_next;
	struct ghost *by_key_next;
	TAILQ_ENTRY(ghost) age;
	uint64_t id;
	dev_t dev;
	ino_t ino;
	struct nodeid_handle handle;
};

struct ghosts {
	struct ghost **by_id;
	struct ghost **by_key;
	size_t nbuckets; /* power of two, >= max */
	size_t count, max;
	TAILQ_HEAD(, ghost) oldest_first;
};

static size_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ b * 0xc2b2ae3d27d4eb4fULL;

	return (size_t)(h ^ (h >> 29));
}

static struct ghost **id_slot(struct ghosts *g, uint64_t id)
{
	return &g->by_id[mix(id, 0) & (g->nbuckets - 1)];
}

static struct ghost **key_slot(struct ghosts *g, dev_t dev, ino_t ino)
{
	return &g->by_key[mix(ino, dev) & (g->nbuckets - 1)];
}

struct ghosts *ghosts_create(size_t max)
{
	struct ghosts *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->max = max ? max : 1;
	g->nbuckets = 1;
	while (g->nbuckets < g->max)
		g->nbuckets *= 2;
	g->by_id = calloc(g->nbuckets, sizeof(*g->by_id));
	g->by_key = calloc(g->nbuckets, sizeof(*g->by_key));
	TAILQ_INIT(&g->oldest_first);
	if (!g->by_id || !g->by_key) {
		ghosts_destroy(g);
		return NULL;
	}
	return g;
}

void ghosts_destroy(struct ghosts *g)
{
	struct ghost *gh;

	if (!g)
		return;
	while ((gh = TAILQ_FIRST(&g->oldest_first))) {
		TAILQ_REMOVE(&g->oldest_first, gh, age);
		free(gh);
	}
	free(g->by_id);
	free(g->by_key);
	free(g);
}

static void ghost_remove(struct ghosts *g, struct ghost *gh)
{
	struct ghost **l;

	for (l = id_slot(g, gh->id); *l != gh; l = &(*l)->by_id_next)
		;
	*l = gh->by_id_next;
	for (l = key_slot(g, gh->dev, gh->ino); *l != gh;
	     l = &(*l)->by_key_next)
		;
	*l = gh->by_key_next;
	TAILQ_REMOVE(&g->oldest_first, gh, age);
	g->count--;
	free(gh);
}

static struct ghost *find_key(struct ghosts *g, dev_t dev, ino_t ino)
{
	struct ghost *gh = *key_slot(g, dev, ino);

	while (gh && (gh->ino != ino || gh->dev != dev))
		gh = gh->by_key_next;
	return gh;
}

static struct ghost *find_id(struct ghosts *g, uint64_t id)
{
	struct ghost *gh = *id_slot(g, id);

	while (gh && gh->id != id)
		gh = gh->by_id_next;
	return gh;
}

void ghosts_put(struct ghosts *g, uint64_t id, dev_t dev, ino_t ino,
		const struct nodeid_handle *h)
{
	struct ghost *gh, **slot;

	if (h->len == 0)
		return; /* nothing to reopen it by */
	/* one ghost per id and per identity: the newest record wins */
	while ((gh = find_id(g, id)))
		ghost_remove(g, gh);
	while ((gh = find_key(g, dev, ino)))
		ghost_remove(g, gh);
	if (g->count >= g->max)
		ghost_remove(g, TAILQ_FIRST(&g->oldest_first));
	gh = malloc(sizeof(*gh));
	if (!gh)
		return;
	gh->id = id;
	gh->dev = dev;
	gh->ino = ino;
	gh->handle = *h;
	slot = id_slot(g, id);
	gh->by_id_next = *slot;
	*slot = gh;
	slot = key_slot(g, dev, ino);
	gh->by_key_next = *slot;
	*slot = gh;
	TAILQ_INSERT_TAIL(&g->oldest_first, gh, age);
	g->count++;
}

bool ghosts_take(struct ghosts *g, dev_t dev, ino_t ino,
		 const struct nodeid_handle *h, uint64_t *id)
{
	struct ghost *gh = find_key(g, dev, ino);
	bool same;

	if (!gh)
		return false;
	same = nodeid_handle_equal(&gh->handle, h);
	if (same)
		*id = gh->id;
	ghost_remove(g, gh);
	return same;
}

bool ghosts_find(struct ghosts *g, uint64_t id, dev_t *dev, ino_t *ino,
		 struct nodeid_handle *h)
{
	struct ghost *gh = find_id(g, id);

	if (!gh)
		return false;
	*dev = gh->dev;
	*ino = gh->ino;
	*h = gh->handle;
	return true;
}

size_t ghosts_count(struct ghosts *g)
{
	return g->count;
}
