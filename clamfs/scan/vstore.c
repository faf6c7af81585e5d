/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "vstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "vstore_dir.h"

#define STORE_FILE "verdicts.mdb"
#define STORE_LOCK "verdicts.mdb-lock"
#define FORMAT	   "clamfs-verdicts 2"
#define META_KEY   "clamfs:meta"
/* puts beyond this are dropped; a forget commits the full queue first */
#define QUEUE_MAX	4096
#define COMMIT_EVERY_MS 1000
/* FUSE workers and scanner threads each hold one read at most */
#define MAX_READERS 512

enum op_kind { OP_PUT, OP_FORGET, OP_CLEAR };

struct op {
	enum op_kind kind;
	struct vcache_file f;
	int64_t scanned_ns;
	char db[VSTORE_DB_ID_MAX];
};

/* The key and value on disk: native byte order, the machine's own file. */
struct stored_key {
	uint64_t dev;
	uint64_t ino;
};

struct stored_val {
	uint64_t ident; /* vcache_file's: since format 2 */
	int64_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
	int64_t scanned_ns;
	char db[VSTORE_DB_ID_MAX];
};

struct vstore {
	MDB_env *env; /* NULL when a recreate failed: nothing hits */
	MDB_dbi dbi;
	int dfd; /* the directory, flock()ed: one clamfs at a time */
	char *dir;
	char path[64];	 /* through dfd: nobody can swap a path component */
	char meta[1024]; /* FORMAT, the backend's and clamd's identity */
	size_t max_bytes;
	pthread_rwlock_t env_lock; /* lookups against a recreate */

	pthread_mutex_t lock; /* the queue and the counters */
	pthread_cond_t wake;
	struct op *queue;
	size_t queued;
	struct op *inflight; /* being committed; read under lock */
	size_t ninflight;
	struct op *spare; /* the next queue */
	bool broken;	  /* a clear or forget was lost: never hit */
	uint64_t clears_asked, clears_done;
	size_t forgets; /* queued or in flight */
	bool stop;
	struct vstore_counters c;

	pthread_mutex_t commit_lock; /* one commit at a time */
	pthread_t thread;
	bool thread_started;
};

static int mdb_errno(int rc)
{
	/* LMDB returns errno values (> 0) or its own codes (< 0) */
	if (rc > 0)
		return -rc;
	return rc == MDB_MAP_FULL ? -ENOSPC : -EIO;
}

static void backend_identity(int backend_fd, const char *clamd_id, char *buf,
			     size_t len)
{
	struct statfs sfs;
	struct stat st;

	memset(&sfs, 0, sizeof(sfs));
	memset(&st, 0, sizeof(st));
	/* both fail only on a bad fd: an identity of zeros matches nothing
	 * kept by a working mount */
	(void)fstatfs(backend_fd, &sfs);
	(void)fstat(backend_fd, &st);
	snprintf(buf, len,
		 "%s type=%lx fsid=%x:%x dev=%" PRIu64 " ino=%" PRIu64
		 " clamd=%s",
		 FORMAT, (unsigned long)sfs.f_type,
		 (unsigned int)sfs.f_fsid.__val[0],
		 (unsigned int)sfs.f_fsid.__val[1], (uint64_t)st.st_dev,
		 (uint64_t)st.st_ino, clamd_id);
}

/* A file cut short would fault on its missing pages: LMDB trusts them. */
static bool whole(struct vstore *vs)
{
	MDB_envinfo info;
	MDB_stat ms;
	struct stat st;

	if (mdb_env_info(vs->env, &info) != 0 ||
	    mdb_env_stat(vs->env, &ms) != 0 ||
	    fstatat(vs->dfd, STORE_FILE, &st, 0) == -1)
		return false;
	return (uint64_t)st.st_size >=
	       ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize;
}

static int env_open(struct vstore *vs)
{
	int rc = mdb_env_create(&vs->env);

	if (rc == 0)
		rc = mdb_env_set_mapsize(vs->env, vs->max_bytes);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(vs->env, MAX_READERS);
	if (rc == 0)
		rc = mdb_env_open(vs->env, vs->path,
				  MDB_NOSUBDIR | MDB_NOTLS | MDB_NOMETASYNC,
				  0600);
	if (rc == 0 && !whole(vs))
		rc = MDB_CORRUPTED;
	if (rc != 0 && vs->env) {
		mdb_env_close(vs->env);
		vs->env = NULL;
	}
	return rc;
}

/* Verdicts held now (the identity record aside); vs->lock held. */
static void count_entries_locked(struct vstore *vs)
{
	MDB_stat ms;

	if (vs->env && mdb_env_stat(vs->env, &ms) == 0)
		vs->c.entries = ms.ms_entries ? ms.ms_entries - 1 : 0;
}

/* Empties the store and writes its identity, in txn. */
static int reset_in(struct vstore *vs, MDB_txn *txn)
{
	MDB_val k = {.mv_size = strlen(META_KEY), .mv_data = META_KEY};
	MDB_val v = {.mv_size = strlen(vs->meta), .mv_data = vs->meta};
	int rc = mdb_drop(txn, vs->dbi, 0);

	return rc ? rc : mdb_put(txn, vs->dbi, &k, &v, 0);
}

/*
 * 0: the file is a store of ours for this backend (emptied and stamped
 * when it was another backend's). 1: not a store of this format.
 */
static int adopt(struct vstore *vs)
{
	MDB_val k = {.mv_size = strlen(META_KEY), .mv_data = META_KEY}, v;
	size_t flen = strlen(FORMAT);
	MDB_txn *txn = NULL;
	MDB_stat ms;
	int rc;

	rc = mdb_txn_begin(vs->env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, NULL, 0, &vs->dbi);
	if (rc == 0)
		rc = mdb_stat(txn, vs->dbi, &ms);
	if (rc != 0)
		goto fail;
	rc = mdb_get(txn, vs->dbi, &k, &v);
	if (rc == MDB_NOTFOUND && ms.ms_entries == 0) {
		rc = reset_in(vs, txn);
	} else if (rc == MDB_NOTFOUND ||
		   (rc == 0 && (v.mv_size < flen ||
				memcmp(v.mv_data, FORMAT, flen) != 0))) {
		mdb_txn_abort(txn);
		return 1;
	} else if (rc == 0 && (v.mv_size != strlen(vs->meta) ||
			       memcmp(v.mv_data, vs->meta, v.mv_size) != 0)) {
		log_info("verdict store: %s/%s was kept for another backend "
			 "filesystem or clamd (%.*s): emptied",
			 vs->dir, STORE_FILE, (int)v.mv_size,
			 (char *)v.mv_data);
		rc = reset_in(vs, txn);
	}
	if (rc != 0)
		goto fail;
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc == 0) {
		pthread_mutex_lock(&vs->lock);
		count_entries_locked(vs);
		pthread_mutex_unlock(&vs->lock);
		return 0;
	}
fail:
	if (txn)
		mdb_txn_abort(txn);
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
			       rc == MDB_INVALID || rc == MDB_BAD_TXN
		       ? 1
		       : mdb_errno(rc);
}

/* Also from a recreate in the writer thread, while others read them. */
static void count_rebuild(struct vstore *vs)
{
	pthread_mutex_lock(&vs->lock);
	vs->c.rebuilds++;
	pthread_mutex_unlock(&vs->lock);
}

static int remove_files(struct vstore *vs)
{
	if (unlinkat(vs->dfd, STORE_FILE, 0) == -1 && errno != ENOENT)
		return -errno;
	if (unlinkat(vs->dfd, STORE_LOCK, 0) == -1 && errno != ENOENT)
		return -errno;
	return 0;
}

/* LMDB never shrinks a file, and adopts a bigger one's size. */
static int refuse_too_big(struct vstore *vs)
{
	struct stat st;

	if (fstatat(vs->dfd, STORE_FILE, &st, 0) == -1 ||
	    (uint64_t)st.st_size <= vs->max_bytes)
		return 0;
	log_info("verdict store: %s/%s is bigger (%jd MiB) than "
		 "verdict_store_size: started again",
		 vs->dir, STORE_FILE, (intmax_t)(st.st_size >> 20));
	return remove_files(vs) ?: 1;
}

static int open_file(struct vstore *vs)
{
	for (int attempt = 0;; attempt++) {
		int rc =
			vstore_dir_refuse_foreign(vs->dfd, vs->dir, STORE_FILE);

		if (rc >= 0)
			rc = vstore_dir_refuse_foreign(vs->dfd, vs->dir,
						       STORE_LOCK);
		if (rc == 0)
			rc = refuse_too_big(vs);
		if (rc < 0)
			return rc;
		if (rc == 1)
			count_rebuild(vs);
		rc = env_open(vs);
		if (rc == 0) {
			rc = adopt(vs);
			if (rc <= 0)
				return rc;
			mdb_env_close(vs->env);
			vs->env = NULL;
		} else if (rc != MDB_INVALID && rc != MDB_VERSION_MISMATCH &&
			   rc != MDB_CORRUPTED && rc != MDB_PANIC) {
			log_err("verdict store: cannot open %s/%s: %s", vs->dir,
				STORE_FILE, mdb_strerror(rc));
			return mdb_errno(rc);
		}
		if (attempt > 0)
			return -EIO;
		log_err("verdict store: %s/%s is not a clamfs verdict store of "
			"this version, or is damaged: removed, the store "
			"starts empty",
			vs->dir, STORE_FILE);
		rc = remove_files(vs);
		if (rc)
			return rc;
		count_rebuild(vs);
	}
}

/*
 * Full: the oldest verdicts are not worth an index, and emptying a full
 * map in place may need pages it has not got. Readers are kept out.
 */
static int recreate(struct vstore *vs)
{
	int ret;

	pthread_rwlock_wrlock(&vs->env_lock);
	if (vs->env)
		mdb_env_close(vs->env);
	vs->env = NULL;
	ret = remove_files(vs);
	if (ret == 0)
		ret = open_file(vs);
	pthread_rwlock_unlock(&vs->env_lock);
	return ret;
}

static void key_of(struct stored_key *k, dev_t dev, ino_t ino)
{
	memset(k, 0, sizeof(*k));
	k->dev = (uint64_t)dev;
	k->ino = (uint64_t)ino;
}

static int apply(struct vstore *vs, MDB_txn *txn, const struct op *op)
{
	struct stored_key key;
	struct stored_val val;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = &key};
	MDB_val v = {.mv_size = sizeof(val), .mv_data = &val};
	int rc;

	switch (op->kind) {
	case OP_CLEAR:
		return reset_in(vs, txn);
	case OP_FORGET:
		key_of(&key, op->f.dev, op->f.ino);
		rc = mdb_del(txn, vs->dbi, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	case OP_PUT:
		key_of(&key, op->f.dev, op->f.ino);
		memset(&val, 0, sizeof(val));
		val.ident = op->f.ident;
		val.size = op->f.size;
		val.mtime_ns = op->f.mtime_ns;
		val.ctime_ns = op->f.ctime_ns;
		val.scanned_ns = op->scanned_ns;
		memcpy(val.db, op->db, sizeof(val.db));
		return mdb_put(txn, vs->dbi, &k, &v, 0);
	}
	return 0;
}

static int commit_ops(struct vstore *vs, const struct op *ops, size_t n,
		      size_t *written)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(vs->env, NULL, 0, &txn);

	*written = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = apply(vs, txn, &ops[i]);
		if (rc == 0 && ops[i].kind == OP_PUT)
			(*written)++;
	}
	if (rc == 0)
		return mdb_txn_commit(txn);
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

int vstore_flush(struct vstore *vs)
{
	bool must_land = false;
	size_t n, written = 0;
	uint64_t clears;
	int rc;

	if (!vs)
		return 0;
	pthread_mutex_lock(&vs->commit_lock);
	pthread_mutex_lock(&vs->lock);
	vs->inflight = vs->queue;
	vs->ninflight = n = vs->queued;
	vs->queue = vs->spare;
	vs->queued = 0;
	clears = vs->clears_asked;
	pthread_mutex_unlock(&vs->lock);
	for (size_t i = 0; i < n; i++)
		must_land |= vs->inflight[i].kind != OP_PUT;
	rc = !n	       ? 0
	     : vs->env ? commit_ops(vs, vs->inflight, n, &written)
		       : MDB_PANIC;
	if (rc == MDB_MAP_FULL) {
		log_warn("verdict store: %s/%s reached verdict_store_size "
			 "(%zu MiB): started again",
			 vs->dir, STORE_FILE, vs->max_bytes >> 20);
		rc = recreate(vs);
		written = 0;
		rc = rc < 0 ? -rc : rc;
	}
	if (rc != 0)
		log_warn("verdict store: cannot write %s/%s: %s%s", vs->dir,
			 STORE_FILE, mdb_strerror(rc),
			 must_land ? "; no longer trusted, removed at the stop"
				   : "");
	pthread_mutex_lock(&vs->lock);
	vs->spare = vs->inflight;
	vs->inflight = NULL;
	vs->ninflight = 0;
	vs->forgets = 0;
	for (size_t i = 0; i < vs->queued; i++)
		vs->forgets += vs->queue[i].kind == OP_FORGET;
	if (rc == 0) {
		vs->clears_done = clears;
		count_entries_locked(vs);
	} else {
		vs->c.write_fails++;
		/* a lost clear or forget would let a stale verdict back */
		vs->broken |= must_land;
	}
	vs->c.writes += written;
	pthread_mutex_unlock(&vs->lock);
	pthread_mutex_unlock(&vs->commit_lock);
	return rc > 0 ? -rc : rc == 0 ? 0 : -EIO;
}

static void *writer(void *arg)
{
	struct vstore *vs = arg;

	for (;;) {
		struct timespec until;
		bool stop;

		pthread_mutex_lock(&vs->lock);
		while (!vs->stop && vs->queued == 0)
			pthread_cond_wait(&vs->wake, &vs->lock);
		/* gather a second's worth into one commit (one sync) */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += COMMIT_EVERY_MS / 1000;
		while (!vs->stop && vs->queued < QUEUE_MAX / 2 &&
		       pthread_cond_timedwait(&vs->wake, &vs->lock, &until) ==
			       0)
			;
		stop = vs->stop;
		pthread_mutex_unlock(&vs->lock);
		vstore_flush(vs);
		if (stop)
			return NULL;
	}
}

int vstore_check_dir(const char *dir)
{
	int fd = vstore_dir_open(dir);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int vstore_open(const char *dir, size_t max_bytes, int backend_fd,
		const char *clamd_id, struct vstore **out)
{
	struct vstore *vs;
	int ret;

	*out = NULL;
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return -ENOMEM;
	vs->dfd = -1;
	vs->max_bytes = max_bytes;
	pthread_mutex_init(&vs->lock, NULL);
	pthread_mutex_init(&vs->commit_lock, NULL);
	pthread_rwlock_init(&vs->env_lock, NULL);
	pthread_cond_init(&vs->wake, NULL);
	backend_identity(backend_fd, clamd_id, vs->meta, sizeof(vs->meta));
	vs->queue = calloc(QUEUE_MAX, sizeof(*vs->queue));
	vs->spare = calloc(QUEUE_MAX, sizeof(*vs->spare));
	vs->dir = strdup(dir);
	if (!vs->queue || !vs->spare || !vs->dir) {
		ret = -ENOMEM;
		goto fail;
	}
	vs->dfd = vstore_dir_open(dir);
	if (vs->dfd < 0) {
		ret = vs->dfd;
		goto fail;
	}
	if (flock(vs->dfd, LOCK_EX | LOCK_NB) == -1) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		log_err("verdict store: %s is in use by another clamfs: not "
			"used (give each mount its own directory)",
			dir);
		goto fail;
	}
	snprintf(vs->path, sizeof(vs->path), "/proc/self/fd/%d/%s", vs->dfd,
		 STORE_FILE);
	ret = open_file(vs);
	if (ret != 0)
		goto fail;
	ret = -pthread_create(&vs->thread, NULL, writer, vs);
	if (ret != 0)
		goto fail;
	vs->thread_started = true;
	*out = vs;
	return 0;
fail:
	vstore_close(vs);
	return ret;
}

void vstore_close(struct vstore *vs)
{
	if (!vs)
		return;
	if (vs->thread_started) {
		pthread_mutex_lock(&vs->lock);
		vs->stop = true;
		pthread_cond_signal(&vs->wake);
		pthread_mutex_unlock(&vs->lock);
		pthread_join(vs->thread, NULL);
	}
	if (vs->env)
		mdb_env_close(vs->env);
	/* a clear or forget that never landed must not come back */
	if (vs->broken && vs->dfd >= 0 && remove_files(vs) == 0)
		log_info("verdict store: %s/%s removed", vs->dir, STORE_FILE);
	if (vs->dfd >= 0)
		close(vs->dfd);
	pthread_cond_destroy(&vs->wake);
	pthread_rwlock_destroy(&vs->env_lock);
	pthread_mutex_destroy(&vs->commit_lock);
	pthread_mutex_destroy(&vs->lock);
	free(vs->queue);
	free(vs->spare);
	free(vs->dir);
	free(vs);
}

/* Whether an op of this kind for the inode is queued or being committed. */
static bool op_pending(const struct vstore *vs, enum op_kind kind, dev_t dev,
		       ino_t ino)
{
	const struct op *lists[] = {vs->queue, vs->inflight};
	const size_t lens[] = {vs->queued, vs->ninflight};

	for (size_t l = 0; l < 2; l++)
		for (size_t i = 0; i < lens[l]; i++)
			if (lists[l][i].kind == kind &&
			    lists[l][i].f.dev == dev &&
			    lists[l][i].f.ino == ino)
				return true;
	return false;
}

/* The entry kept for the inode, if any. */
static bool read_kept(struct vstore *vs, dev_t dev, ino_t ino,
		      struct stored_val *val)
{
	struct stored_key key;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = &key}, v;
	MDB_txn *txn;
	bool found = false;

	key_of(&key, dev, ino);
	pthread_rwlock_rdlock(&vs->env_lock);
	if (vs->env && mdb_txn_begin(vs->env, NULL, MDB_RDONLY, &txn) == 0) {
		if (mdb_get(txn, vs->dbi, &k, &v) == 0 &&
		    v.mv_size == sizeof(*val)) {
			memcpy(val, v.mv_data, sizeof(*val));
			val->db[sizeof(val->db) - 1] = '\0';
			found = true;
		}
		mdb_txn_abort(txn);
	}
	pthread_rwlock_unlock(&vs->env_lock);
	return found;
}

bool vstore_lookup_clean(struct vstore *vs, const struct vcache_file *f,
			 const char *db_id, unsigned int ttl_sec,
			 int64_t now_ns)
{
	struct stored_val val;
	bool hit = false;

	if (!vs || !db_id[0] || ttl_sec == 0)
		return false;
	pthread_mutex_lock(&vs->lock);
	if (vs->broken || vs->clears_asked != vs->clears_done ||
	    (vs->forgets && op_pending(vs, OP_FORGET, f->dev, f->ino))) {
		pthread_mutex_unlock(&vs->lock);
		return false;
	}
	pthread_mutex_unlock(&vs->lock);
	if (!read_kept(vs, f->dev, f->ino, &val))
		return false;
	hit = val.ident == f->ident && val.size == f->size &&
	      val.mtime_ns == f->mtime_ns && val.ctime_ns == f->ctime_ns &&
	      strcmp(val.db, db_id) == 0 && val.scanned_ns <= now_ns &&
	      now_ns - val.scanned_ns < (int64_t)ttl_sec * 1000000000;
	if (hit) {
		pthread_mutex_lock(&vs->lock);
		vs->c.hits++;
		pthread_mutex_unlock(&vs->lock);
	}
	return hit;
}

/* Called with vs->lock held. */
static void queue_clear_locked(struct vstore *vs)
{
	/* what was queued before is moot */
	vs->queue[0] = (struct op){.kind = OP_CLEAR};
	vs->queued = 1;
	vs->forgets = 0;
	for (size_t i = 0; i < vs->ninflight; i++)
		vs->forgets += vs->inflight[i].kind == OP_FORGET;
	vs->clears_asked++;
	pthread_cond_signal(&vs->wake);
}

/* The next slot of the queue, which has room; called with vs->lock held. */
static struct op *queue_op_locked(struct vstore *vs, enum op_kind kind)
{
	struct op *op = &vs->queue[vs->queued++];

	memset(op, 0, sizeof(*op));
	op->kind = kind;
	return op;
}

void vstore_put_clean(struct vstore *vs, const struct vcache_file *f,
		      const char *db_id, int64_t scanned_ns)
{
	struct op *op;

	if (!vs || !db_id[0])
		return;
	pthread_mutex_lock(&vs->lock);
	if (vs->queued == QUEUE_MAX) {
		vs->c.dropped++;
		goto out;
	}
	op = queue_op_locked(vs, OP_PUT);
	op->f = *f;
	op->scanned_ns = scanned_ns;
	snprintf(op->db, sizeof(op->db), "%s", db_id);
	if (vs->queued == 1 || vs->queued == QUEUE_MAX / 2)
		pthread_cond_signal(&vs->wake);
out:
	pthread_mutex_unlock(&vs->lock);
}

void vstore_forget(struct vstore *vs, dev_t dev, ino_t ino)
{
	struct stored_val val;
	struct op *op;
	bool pending;

	if (!vs)
		return;
	/* most files opened for writing were never kept: no write then */
	pthread_mutex_lock(&vs->lock);
	pending = op_pending(vs, OP_PUT, dev, ino);
	/*
	 * A writer's every open forgets the file again: once is enough,
	 * unless a put queued after that forget would land last.
	 */
	if (!pending && vs->forgets && op_pending(vs, OP_FORGET, dev, ino)) {
		pthread_mutex_unlock(&vs->lock);
		return;
	}
	pthread_mutex_unlock(&vs->lock);
	if (!pending && !read_kept(vs, dev, ino, &val))
		return;
	pthread_mutex_lock(&vs->lock);
	/*
	 * Full (a user opened thousands of kept files for writing within a
	 * commit's time): the caller commits the queue itself and waits for
	 * it, rather than have every user's verdicts emptied. Only when that
	 * fails is everything forgotten: a forget must not be lost.
	 */
	if (vs->queued == QUEUE_MAX) {
		pthread_mutex_unlock(&vs->lock);
		vstore_flush(vs);
		pthread_mutex_lock(&vs->lock);
	}
	if (vs->queued == QUEUE_MAX) {
		queue_clear_locked(vs);
		goto out;
	}
	op = queue_op_locked(vs, OP_FORGET);
	op->f.dev = dev;
	op->f.ino = ino;
	vs->forgets++;
	pthread_cond_signal(&vs->wake);
out:
	pthread_mutex_unlock(&vs->lock);
}

int vstore_clear(struct vstore *vs)
{
	if (!vs)
		return 0;
	pthread_mutex_lock(&vs->lock);
	queue_clear_locked(vs);
	pthread_mutex_unlock(&vs->lock);
	/* on disk before anybody is told: a crash must not bring it back */
	return vstore_flush(vs);
}

void vstore_counters(struct vstore *vs, struct vstore_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (!vs)
		return;
	pthread_mutex_lock(&vs->lock);
	*out = vs->c;
	pthread_mutex_unlock(&vs->lock);
}
