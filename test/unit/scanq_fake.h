/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the scan queue's unit tests share (test_scanq*.c): a fake,
 * blocking scanner (no clamd), waiters that record their outcome, submit
 * helpers, and the hooks every test queue has (prepare, confirm, known).
 */
#ifndef CLAMFS_TEST_SCANQ_FAKE_H
#define CLAMFS_TEST_SCANQ_FAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "scanq.h"

#define MAX_SCANS 64
#define BIG	  (SCANQ_SMALL_BYTES + 1)

/*
 * The fake scanner: records which file it was asked about, then blocks
 * until released (or cancelled) unless the file is marked fast.
 */
struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	ino_t order[MAX_SCANS];	 /* files in the order their scans began */
	ino_t fd_ino[MAX_SCANS]; /* what the fd given to the scanner is */
	int nscans;
	int running;
	int max_running_big;
	int running_big;
	ino_t release;	 /* ino whose scan may end; (ino_t)-1: all */
	ino_t fast_from; /* inos from this one on never block */
	enum cdp_verdict verdict;
};
extern struct fake fake;

/*
 * A waiter that records its outcome and when it came. Its interrupts go
 * through t_interrupt, which keeps the contract the daemon gets from
 * libfuse (see scanq_interrupt): done() waits for an interrupt still
 * running, and no interrupt starts once done() has.
 */
struct twaiter {
	struct scan_waiter w; /* first */
	pthread_mutex_t ilock;
	bool answered; /* under ilock */
	atomic_int done;
	int seq; /* 1 for the first done() since the queue was made, ... */
	struct scan_outcome o;
	uint64_t at_ms;
};
extern atomic_int total_done; /* done() calls since the queue was made */
extern int test_timeout_ms;   /* the requests' deadline (new_queue_cfg) */
extern int devnull;	      /* /dev/null, read-only: a file to scan */

/* What count_prepare saw (the prepare tests). */
struct prep_state {
	pthread_mutex_t lock;
	int calls;
	uint64_t key;
	int scans_before; /* fake scans started when it last ran */
	void *ctx;
	bool block; /* it waits until this is cleared */
	int result; /* what it returns */
	pthread_cond_t cond;
};
extern struct prep_state prep;

/* scan_request.confirm codes of the tests: what test_confirm says */
enum { CONFIRM_NO = 1, CONFIRM_YES };

/* the shared queue background scans wait in (and the next one) */
#define BG_QUEUE 1

/* What fake_known answers from: one file cached clean, one infected. */
struct fake_cache {
	atomic_long clean_ino;	  /* the one file "cached" clean (0: none) */
	atomic_long infected_ino; /* ... and the one "cached" infected */
	atomic_int asked;
	uint64_t tag_seen;
};
extern struct fake_cache *known_cache; /* fake_known's; NULL: none known */
extern char held_token;		       /* what the default hold gives */
extern _Atomic(void *) known_held;     /* what fake_known was last given */

void fake_reset(void);
void fake_scan(const struct scanq_scan *s, struct cdp_result *res);
void fake_release(ino_t ino);
uint64_t now_ms(void);
bool fake_wait_scans(int n);
int fake_nscans(void);
void on_done(struct scan_waiter *w, const struct scan_outcome *o);
void twaiter_init(struct twaiter *t, bool answer_first);
void t_interrupt(struct twaiter *t);
bool wait_done(struct twaiter *t, int ms);
bool wait_no_scan_live(struct scanq *q);
int submit_fd(struct scanq *q, ino_t ino, off_t size, uid_t uid,
	      struct twaiter *t, int fd);
int submit(struct scanq *q, ino_t ino, off_t size, uid_t uid,
	   struct twaiter *t);
bool test_confirm(void *ctx, unsigned int how, int fd,
		  const struct vcache_file *f);
/* A queue with the test hooks where cfg has none; requests get timeout_ms. */
struct scanq *new_queue_cfg(const struct scanq_config *cfg, int timeout_ms);
struct scanq *new_queue(unsigned int threads, int timeout_ms,
			unsigned int max_per_uid);
int scanq_fake_setup(void **state);
int scanq_fake_teardown(void **state);
void prep_reset(void);
int prep_get(const int *field);
uint64_t prep_get_key(void);
void prep_unblock(void);
int count_prepare(void *ctx, uint64_t key);
int64_t real_ns(void);
int submit_bg(struct scanq *q, ino_t ino, off_t size, int64_t not_before,
	      unsigned int confirm, struct twaiter *t);
bool fake_known(void *ctx, void *held, int fd, const struct vcache_file *f,
		uint64_t tag, struct cdp_result *res);

#endif
