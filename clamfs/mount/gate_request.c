// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The requests that wait for a verdict, one kind each (gate_impl.h), and
 * their submission to the scan queue as their kind says: which queue,
 * whether in the background, what is confirmed before the scan.
 */
#include "gate_impl.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* The shared queues of the scan queue (scanq.h), for work of nobody's. */
enum {
	QUEUE_OPENERS,	 /* 0: each opener's own queue, by uid */
	QUEUE_CLOSE,	 /* close scans: writing to another user's files
			  * must not fill that user's queue */
	QUEUE_AHEAD,	 /* scans ahead at a writer's close */
	QUEUE_AHEAD_DIR, /* scans beside a reader's (ahead.h) */
};

/* How a request of each kind is queued and confirmed. */
static const struct kind_rules {
	unsigned int queue; /* QUEUE_* */
	/* in the background: after every scan somebody waits for */
	bool background;
	/* ... and beside one somebody waits for (scan_request.beside_one) */
	bool beside_one;
	/* not before the stamp has settled: only then can it be kept */
	bool settled_first;
	/* the file still as stamped, right before the scan (confirm) */
	bool (*confirm)(void *ctx, int fd, const struct vcache_file *f);
} kind_rules[] = {
	[GATE_OPEN] = {.queue = QUEUE_OPENERS},
	[GATE_CLOSE] = {.queue = QUEUE_CLOSE, .confirm = stamp_close_quiet},
	[GATE_AHEAD] = {.queue = QUEUE_AHEAD,
			.background = true,
			.settled_first = true,
			.confirm = stamp_still_quiet},
	[GATE_AHEAD_BESIDE] = {.queue = QUEUE_AHEAD_DIR,
			       .background = true,
			       .beside_one = true,
			       .settled_first = true,
			       .confirm = stamp_still_quiet},
};

/* A request's scan_request.confirm: its kind, offset so that 0 is none. */
static unsigned int confirm_code(enum gate_kind kind)
{
	return kind_rules[kind].confirm ? (unsigned int)kind + 1 : 0;
}

/* scanq_hooks.confirm: the one of the request's kind. */
static bool confirm_by_kind(void *ctx, unsigned int code, int fd,
			    const struct vcache_file *f)
{
	return kind_rules[code - 1].confirm(ctx, fd, f);
}

void pending_free(struct pending *p)
{
	gen_unpin(p->pin);
	free(p);
}

struct pending *pending_new(struct clamfs_fs *fs, struct generation *pin,
			    enum gate_kind kind, struct inode *inode, int fd,
			    const struct stamp *st)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->w.done = gate_scanned;
	p->fs = fs;
	p->kind = kind;
	p->inode = inode;
	p->fd = fd;
	p->stamp = *st;
	p->write_seq = inode_write_seq(inode);
	p->pin = gen_pin_again(pin);
	return p;
}

bool pending_room(struct clamfs_fs *fs, enum gate_kind kind)
{
	/* only a shared queue's: an opener's is by uid */
	assert(kind_rules[kind].queue != QUEUE_OPENERS);
	return scanq_background_room(fs->scanq, 0, kind_rules[kind].queue);
}

/*
 * Scanner thread, before scanning a file a writer holds open: have the
 * kernel write back the pages dirtied through a shared mapping (and with
 * writeback_cache by write()), so the scan sees them. Not on the FUSE
 * worker: the write-back needs one. -ESHUTDOWN once a stop has ended
 * such notifications (drain.h): the scan then fails.
 */
static int flush_writer_pages(void *ctx, uint64_t nodeid)
{
	struct clamfs_fs *fs = ctx;
	int ret = 0;

	/* counted first: gate_stop_notifying looks the other way round */
	atomic_fetch_add(&fs->kernel_waits, 1);
	if (atomic_load(&fs->notify_stopped))
		ret = -ESHUTDOWN; /* the scan would not see what is read */
	else
		fs->kernel->inval_inode(fs, nodeid);
	atomic_fetch_sub(&fs->kernel_waits, 1);
	return ret;
}

/*
 * An open with O_TRUNC under the write-back cache: the kernel holds back
 * all write-back of the file until the open is answered, so a flush
 * before its scan would wait for itself; it then drops the page cache,
 * dirty pages too, so there is nothing to flush.
 */
static bool truncates_page_cache(struct clamfs_fs *fs, int flags,
				 bool is_create)
{
	/* a create holds only its directory's lock */
	return fs->writeback && (flags & O_TRUNC) && !is_create;
}

/*
 * Whether the kernel may hold written data of the file that the backend
 * has not seen yet, which a reader's open would then read unless a scan
 * has it written back first: under the write-back cache while a writer
 * has it open (every writer's close writes it back before its release).
 */
bool unwritten_data_possible(struct clamfs_fs *fs, struct inode *inode,
			     int flags, bool is_create)
{
	return fs->writeback && inode_writers(inode) != 0 &&
	       !truncates_page_cache(fs, flags, is_create);
}

int pending_submit(struct pending *p)
{
	const struct kind_rules *k = &kind_rules[p->kind];
	struct gate_open *o = p->kind == GATE_OPEN ? p->open : NULL;
	struct clamfs_fs *fs = p->fs;
	struct vcache_file f;
	int ret, ro_fd = -1;
	struct scan_request r = {
		.file = &f,
		.tag = p->write_seq,
		.fd = p->fd,
		.gen = vcache_generation(gen_vcache(p->pin)),
		.uid = p->uid,
		/* the deadline of the configuration it was decided under */
		.timeout_ms = (int)gen_opts(p->pin)->scan_timeout * 1000,
		.shared_queue = k->queue,
		.background = k->background,
		.beside_one = k->beside_one,
		.confirm = confirm_code(p->kind),
	};

	if (k->settled_first)
		r.not_before_ns = p->stamp.st.st_ctim.tv_sec * 1000000000LL +
				  p->stamp.st.st_ctim.tv_nsec +
				  p->stamp.window_ns + 1000000;
	if (o && inode_writers(p->inode) != 0 &&
	    !truncates_page_cache(fs, o->flags, o->is_create)) {
		r.prepare = true;
		r.prepare_key = inode_hand_out(p->inode);
	}
	stamp_key(&p->stamp, &f);
	/* it holds its directory's lock until answered */
	p->w.answer_first = o && o->is_create;
	/*
	 * For the scan of an opener's read-write file, reopened as the
	 * opener: clamd must not get a writable fd, and root may not be able
	 * to read it (NFS root_squash). A close scan's fd is read-only
	 * already, opened as the owner.
	 */
	if (o && gate_may_write(o->flags) && !o->as_reader) {
		ro_fd = o->ops->reopen_readonly(o, p->fd);
		if (ro_fd < 0)
			return ro_fd;
		r.fd = ro_fd;
	}
	ret = scanq_submit(fs->scanq, &r, &p->w);
	if (ro_fd >= 0)
		close(ro_fd);
	return ret;
}

/*
 * scanq_hooks.hold: a scan runs on the configuration in force right
 * before clamd is asked, pinned until it ends, and asks its clamds.
 */
static void *hold_generation(void *ctx, struct cdp_fleet **fleet,
			     enum scan_mode *mode)
{
	struct generation *pin = fs_pin(ctx);

	*fleet = gen_fleet(pin);
	*mode = pin->mode;
	return pin;
}

static void release_generation(void *ctx, void *pin)
{
	(void)ctx;
	gen_unpin(pin);
}

void gate_scanq_hooks(struct scanq_hooks *hooks)
{
	hooks->hold = hold_generation;
	hooks->release = release_generation;
	hooks->prepare = flush_writer_pages;
	hooks->confirm = confirm_by_kind;
	hooks->known = stamp_verdict_known;
}
