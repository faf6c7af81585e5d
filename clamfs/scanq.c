// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan queue: a FIFO of jobs served by a fixed set of scanner threads, and
 * a map of jobs in flight keyed by file identity and stamp for single
 * flight. Waiters join a job under the queue lock; interruption is
 * lock-free (atomics and cdp_cancel_trigger only).
 */
#include "scanq.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SCANQ_BUCKETS 256

struct scan_job {
	struct vcache_file file;
	uint64_t tag;
	void (*prepare)(void *arg);
	void *prepare_arg;
	int fd;
	char *path;
	uint64_t gen;
	struct cdp_cancel *cancel;
	atomic_uint interested; /* waiters not interrupted */
	struct scan_waiter *waiters;
	bool in_map;
	TAILQ_ENTRY(scan_job) queue_link;
	LIST_ENTRY(scan_job) map_link;
};

TAILQ_HEAD(job_queue, scan_job);
LIST_HEAD(job_list, scan_job);

struct scanq {
	struct scanq_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct job_queue pending;
	struct job_list map[SCANQ_BUCKETS];
	bool stopping;
	pthread_t *threads;
	unsigned int nthreads;
	struct scanq_counters counters; /* under lock */
};

const char *scan_mode_name(enum scan_mode mode)
{
	switch (mode) {
	case SCAN_MODE_FDPASS:
		return "fdpass";
	case SCAN_MODE_STREAM:
		return "stream";
	case SCAN_MODE_PATH:
		return "path";
	}
	return "?";
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static struct job_list *bucket_of(struct scanq *q, const struct vcache_file *f)
{
	uint64_t h = f->ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)f->dev;

	return &q->map[(h >> 20) % SCANQ_BUCKETS];
}

static bool same_content(const struct vcache_file *a,
			 const struct vcache_file *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static void job_free(struct scan_job *job)
{
	if (job->fd >= 0)
		close(job->fd);
	free(job->path);
	cdp_cancel_free(job->cancel);
	free(job);
}

static struct scan_job *job_new(const struct vcache_file *f, int fd,
				const char *path, uint64_t gen)
{
	struct scan_job *job = calloc(1, sizeof(*job));

	if (!job)
		return NULL;
	char link[32];

	/*
	 * clamd gets a read-only reopening of the opener's file, never the
	 * opener's fd, which may be open for writing.
	 */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	job->fd = open(link, O_RDONLY | O_CLOEXEC);
	job->cancel = cdp_cancel_new();
	job->path = path ? strdup(path) : NULL;
	if (job->fd < 0 || !job->cancel || (path && !job->path)) {
		job_free(job);
		return NULL;
	}
	job->file = *f;
	job->gen = gen;
	return job;
}

/* SCAN by path: clamd must have seen our very file, before and after. */
static bool path_is_file(const char *path, const struct vcache_file *f)
{
	struct vcache_file now;
	struct stat st;

	if (stat(path, &st) == -1)
		return false;
	vcache_file_from_stat(&now, &st);
	return same_content(&now, f);
}

static void scan_once(const struct scanq_config *cfg, struct scan_job *job,
		      int timeout_ms, struct cdp_result *res)
{
	struct cdp_pool *pool = cfg->pool;

	switch (cfg->mode) {
	case SCAN_MODE_FDPASS:
		cdp_scan_fildes(pool, job->fd, timeout_ms, job->cancel, res);
		return;
	case SCAN_MODE_STREAM:
		cdp_scan_stream_fd(pool, job->fd, timeout_ms, job->cancel,
				   res);
		return;
	case SCAN_MODE_PATH:
		if (!job->path || !path_is_file(job->path, &job->file))
			goto moved;
		cdp_scan_path(pool, job->path, timeout_ms, job->cancel, res);
		if (res->verdict != CDP_ERROR &&
		    !path_is_file(job->path, &job->file))
			goto moved;
		return;
	}
moved:
	memset(res, 0, sizeof(*res));
	res->verdict = CDP_ERROR;
	res->cat = CDP_ERR_LOCAL;
	res->err = ESTALE;
	strlcpy(res->text, "file moved or changed while scanned by path",
		sizeof(res->text));
}

static bool worth_retry(const struct cdp_result *res)
{
	return res->verdict == CDP_ERROR &&
	       (res->cat == CDP_ERR_CONNECT || res->cat == CDP_ERR_PROTOCOL);
}

static void run_job(struct scanq *q, struct scan_job *job,
		    struct scan_outcome *out)
{
	uint64_t start = now_usec(), spent_ms;
	struct scanq_config cfg;

	pthread_mutex_lock(&q->lock);
	cfg = q->cfg;
	pthread_mutex_unlock(&q->lock);
	memset(out, 0, sizeof(*out));
	out->gen = job->gen;
	out->tag = job->tag;
	if (job->prepare && !cdp_cancel_triggered(job->cancel))
		job->prepare(job->prepare_arg);
	if (cdp_cancel_triggered(job->cancel)) {
		out->res.verdict = CDP_ERROR;
		out->res.cat = CDP_ERR_CANCELLED;
		strlcpy(out->res.text, "cancelled", sizeof(out->res.text));
		goto out;
	}
	scan_once(&cfg, job, cfg.timeout_ms, &out->res);
	spent_ms = (now_usec() - start) / 1000;
	/* a broken connection gets one immediate retry within the deadline */
	if (worth_retry(&out->res) && !cdp_cancel_triggered(job->cancel) &&
	    spent_ms + 1 < (uint64_t)cfg.timeout_ms) {
		pthread_mutex_lock(&q->lock);
		q->counters.retries++;
		pthread_mutex_unlock(&q->lock);
		scan_once(&cfg, job, cfg.timeout_ms - (int)spent_ms, &out->res);
	}
out:
	out->usec = now_usec() - start;
}

static void record_latency(struct scanq_counters *c, uint64_t usec)
{
	unsigned int b = 0;

	while (b + 1 < SCANQ_LATENCY_BUCKETS && usec >= (1ULL << b))
		b++;
	c->latency_log2_us[b]++;
}

uint64_t scanq_latency_quantile(const struct scanq_counters *c, double q)
{
	uint64_t total = 0, seen = 0;

	for (int b = 0; b < SCANQ_LATENCY_BUCKETS; b++)
		total += c->latency_log2_us[b];
	if (total == 0)
		return 0;
	for (int b = 0; b < SCANQ_LATENCY_BUCKETS; b++) {
		seen += c->latency_log2_us[b];
		if ((double)seen >= q * (double)total)
			return 1ULL << b;
	}
	return 1ULL << (SCANQ_LATENCY_BUCKETS - 1);
}

static void *scanner_main(void *arg)
{
	struct scanq *q = arg;

	for (;;) {
		struct scan_waiter *w, *next;
		struct scan_outcome outcome;
		struct scan_job *job;

		pthread_mutex_lock(&q->lock);
		while (!q->stopping && TAILQ_EMPTY(&q->pending))
			pthread_cond_wait(&q->wake, &q->lock);
		job = TAILQ_FIRST(&q->pending);
		if (!job) {
			pthread_mutex_unlock(&q->lock);
			return NULL;
		}
		TAILQ_REMOVE(&q->pending, job, queue_link);
		q->counters.queued--;
		if (q->stopping)
			cdp_cancel_trigger(job->cancel);
		else
			q->counters.scans++;
		pthread_mutex_unlock(&q->lock);

		run_job(q, job, &outcome);

		pthread_mutex_lock(&q->lock);
		if (job->in_map)
			LIST_REMOVE(job, map_link);
		job->in_map = false;
		if (outcome.res.cat == CDP_ERR_CANCELLED)
			q->counters.cancelled++;
		else
			record_latency(&q->counters, outcome.usec);
		w = job->waiters;
		job->waiters = NULL;
		pthread_mutex_unlock(&q->lock);

		/* done() may free its waiter: read the link first */
		for (; w; w = next) {
			next = w->next;
			w->done(w, &outcome);
		}
		job_free(job);
	}
}

int scanq_new(const struct scanq_config *cfg, struct scanq **out)
{
	struct scanq *q = calloc(1, sizeof(*q));
	int ret = -ENOMEM;

	if (!q)
		return -ENOMEM;
	q->cfg = *cfg;
	if (q->cfg.threads == 0)
		q->cfg.threads = 1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	TAILQ_INIT(&q->pending);
	for (int i = 0; i < SCANQ_BUCKETS; i++)
		LIST_INIT(&q->map[i]);
	q->threads = calloc(q->cfg.threads, sizeof(*q->threads));
	if (!q->threads)
		goto fail;
	for (; q->nthreads < q->cfg.threads; q->nthreads++) {
		ret = -pthread_create(&q->threads[q->nthreads], NULL,
				      scanner_main, q);
		if (ret)
			goto fail;
	}
	*out = q;
	return 0;
fail:
	scanq_free(q);
	return ret;
}

void scanq_free(struct scanq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_cond_broadcast(&q->wake);
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	free(q->threads);
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* Lock-free: called from interrupt callbacks too. */
static void withdraw(struct scan_waiter *w, struct scan_job *job)
{
	if (atomic_exchange(&w->withdrawn, true))
		return;
	if (atomic_fetch_sub(&job->interested, 1) == 1)
		cdp_cancel_trigger(job->cancel);
}

int scanq_submit(struct scanq *q, const struct scan_request *r,
		 struct scan_waiter *w)
{
	struct job_list *bucket = bucket_of(q, r->file);
	struct scan_job *job = NULL;

	if (atomic_load(&w->interrupted))
		return -EINTR;
	pthread_mutex_lock(&q->lock);
	LIST_FOREACH(job, bucket, map_link)
	{
		if (same_content(&job->file, r->file) && job->tag == r->tag &&
		    !job->prepare && !r->prepare)
			break;
	}
	/* a job everybody gave up on is being cancelled: start afresh */
	if (job && atomic_fetch_add(&job->interested, 1) == 0) {
		atomic_fetch_sub(&job->interested, 1);
		LIST_REMOVE(job, map_link);
		job->in_map = false;
		job = NULL;
	}
	if (job) {
		q->counters.joined++;
	} else {
		job = job_new(r->file, r->fd, r->path, r->gen);
		if (!job) {
			pthread_mutex_unlock(&q->lock);
			return -ENOMEM;
		}
		job->tag = r->tag;
		job->prepare = r->prepare;
		job->prepare_arg = r->prepare_arg;
		atomic_store(&job->interested, 1);
		LIST_INSERT_HEAD(bucket, job, map_link);
		job->in_map = true;
		TAILQ_INSERT_TAIL(&q->pending, job, queue_link);
		q->counters.queued++;
		pthread_cond_signal(&q->wake);
	}
	w->next = job->waiters;
	job->waiters = w;
	atomic_store(&w->job, job);
	/* an interrupt that came before w->job was visible found no job */
	if (atomic_load(&w->interrupted))
		withdraw(w, job);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void scanq_interrupt(struct scan_waiter *w)
{
	struct scan_job *job;

	atomic_store(&w->interrupted, true);
	job = atomic_load(&w->job);
	if (job)
		withdraw(w, job);
}

void scanq_reconfigure(struct scanq *q, struct cdp_pool *pool,
		       enum scan_mode mode, int timeout_ms)
{
	pthread_mutex_lock(&q->lock);
	q->cfg.pool = pool;
	q->cfg.mode = mode;
	q->cfg.timeout_ms = timeout_ms;
	pthread_mutex_unlock(&q->lock);
}

enum scan_mode scanq_mode(struct scanq *q)
{
	enum scan_mode mode;

	pthread_mutex_lock(&q->lock);
	mode = q->cfg.mode;
	pthread_mutex_unlock(&q->lock);
	return mode;
}

bool scanq_waiter_interrupted(const struct scan_waiter *w)
{
	return atomic_load(&w->interrupted);
}

void scanq_counters(struct scanq *q, struct scanq_counters *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->counters;
	pthread_mutex_unlock(&q->lock);
}
