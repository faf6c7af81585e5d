// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan gate's decisions. The FUSE worker opens the file as the
 * caller, checks the verdict cache, and on a miss hands the open to the
 * scan queue and returns: the answer comes from a scanner thread, so a
 * long scan pins no worker. The policy before any scan is applied here,
 * the verdict's actions in gate_act.c (the files: gate_impl.h); how an
 * answer reaches the kernel is the FUSE layer's (gate_reply.c).
 */
#include "gate_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ahead.h"
#include "fdpath.h"
#include "log.h"
#include "tsgrain.h"

/* Refuses the open; the FUSE layer undoes what a create would hand over. */
static void refuse(struct gate_open *o, struct inode *inode, int fd, int err)
{
	o->ops->answer(o, inode, fd, err, false);
}

/*
 * Allows the open. Pages cached by an earlier open are kept only if
 * nothing changed, and never while a writer is open: its shared mapping
 * may hold dirty pages that no scan has seen. A stamp too young to vouch
 * for the content, or taken while anyone could write the file (a reader
 * through the mount could then cache bytes the writer put there and took
 * back before this open's scan), is recorded as untrusted, so the next
 * open drops the pages. st is NULL for what is not a regular file.
 */
static void allow(struct gate_open *o, struct inode *inode, int fd,
		  const struct stamp *st)
{
	bool keep_cache =
		st &&
		inode_stamp_unchanged(inode, &st->st,
				      stamp_settled(st) && st->quiet) &&
		inode_writers(inode) == 0;

	o->ops->answer(o, inode, fd, 0, keep_cache);
}

static void gate_open_pinned(struct clamfs_fs *fs, struct generation *pin,
			     struct gate_open *o, struct inode *inode, int fd);

/*
 * Allows an open. One decided as a reader is opened as asked first; if
 * the file's stamp moved meanwhile (somebody wrote it between the two
 * opens), what was decided on is not what the caller would get: the open
 * is decided again on the fd opened as asked, as a read-write open of a
 * file being written is (scanned, its verdict not kept).
 */
static void allow_open(struct clamfs_fs *fs, struct generation *pin,
		       struct gate_open *o, struct inode *inode, int fd,
		       const struct stamp *st)
{
	int asked;

	if (!o->as_reader) {
		allow(o, inode, fd, st);
		return;
	}
	asked = o->ops->open_asked(o);
	if (asked == -EWOULDBLOCK) {
		o->ops->open_later(o, fd);
		return;
	}
	if (asked < 0) {
		refuse(o, inode, fd, -asked);
		return;
	}
	close(fd);
	o->as_reader = false;
	if (st && stamp_unmoved(asked, st)) {
		allow(o, inode, asked, st);
		return;
	}
	stats_inc(&fs->stats, STAT_REDECIDED);
	gate_open_pinned(fs, pin, o, inode, asked);
}

/*
 * With log_level=debug, one line per gated open that no other line tells
 * about: why it was let through or refused without a scan, a cached or
 * fresh clean verdict and how long clamd took. Detections and scan errors
 * have their own lines at higher levels.
 */
static void debug_open(struct clamfs_fs *fs, int fd, const char *decision,
		       pid_t pid, uid_t uid, const char *more)
{
	char buf[PATH_MAX], path[PATH_MAX * 4 + 8];
	const char *rel;

	if (!log_wants(LOG_LEVEL_DEBUG))
		return;
	rel = fs_fd_path(fs, fd, buf, sizeof(buf));
	log_quote(path, sizeof(path), rel ? rel : "?");
	log_debug("open path=%s decision=%s pid=%d uid=%u%s", path, decision,
		  (int)pid, (unsigned)uid, more ? more : "");
}

void gate_scanned(struct scan_waiter *w, const struct scan_outcome *o)
{
	struct pending *p = (struct pending *)w;
	struct clamfs_fs *fs = p->fs;
	/*
	 * The verdict is acted on as the configuration in force now says: a
	 * reload that tightened the policy while the scan ran applies to the
	 * answer. What the open read before (cache, stamp) stays its pin's.
	 */
	struct generation *cur = fs_pin(fs);
	bool created = p->kind == GATE_OPEN && p->open->is_create;
	bool limits = o->res.verdict == CDP_INFECTED &&
		      act_is_limits(gen_policy(cur), o->res.text);
	bool cached;
	int err = 0;

	/* from here on no interrupt callback can run on p */
	if (p->kind == GATE_OPEN)
		p->open->ops->on_interrupt(p->open, NULL);
	/* a known verdict says nothing of clamd */
	if (o->res.verdict != CDP_ERROR && !o->known &&
	    outage_end(&fs->clamd_outage))
		log_event(LOG_LEVEL_NOTICE, LOG_ID_CLAMD_UP, NULL, 0, NULL,
			  "clamd answers again: scanning resumes");
	/* a known verdict is in the cache already, with its own lifetime */
	cached = !o->known && stamp_keep_verdict(p, o);
	if (p->kind != GATE_OPEN) {
		background_scanned(p, cur, o, cached);
		goto out;
	}
	if (scanq_waiter_interrupted(w)) {
		stats_inc(&fs->stats, STAT_INTERRUPTED);
		debug_open(fs, p->fd, "interrupted", p->pid, p->uid, NULL);
		err = EINTR;
	} else if (limits) {
		err = act_on_limits(fs, cur, p, "open", o->res.text, o->known);
	} else if (o->res.verdict == CDP_INFECTED) {
		err = act_on_infected(fs, cur, p, "open", o->res.text,
				      o->known);
	} else if (o->res.verdict == CDP_ERROR) {
		err = act_allow_after_error(fs, cur, p, o) ? 0 : EIO;
	}
	if (err) {
		if (err != EINTR && o->res.verdict == CDP_INFECTED && !limits)
			stats_inc(&fs->stats, STAT_DENIED);
		if (!created)
			act_forget_removed_name(fs, p);
		refuse(p->open, p->inode, p->fd, err);
		if (created)
			act_forget_removed_name(fs, p);
	} else {
		if (o->known) {
			/* counted in opens_scanned: it waited in the queue */
			debug_open(fs, p->fd, "allowed-cached-clean", p->pid,
				   p->uid, NULL);
		} else if (o->res.verdict == CDP_CLEAN &&
			   log_wants(LOG_LEVEL_DEBUG)) {
			char took[48];

			snprintf(took, sizeof(took), " scan_ms=%.1f",
				 (double)o->usec / 1000.0);
			debug_open(fs, p->fd, "allowed-scanned-clean", p->pid,
				   p->uid, took);
		}
		/* a file that changed is decided anew, as configured now */
		allow_open(fs, cur, p->open, p->inode, p->fd, &p->stamp);
	}
out:
	gen_unpin(cur);
	pending_free(p);
}

/*
 * The opener's supplementary groups, for exempt_gid; only fetched when an
 * exempt group could apply, since libfuse reads them from the opener's
 * /proc status file, one small read per open. Not cached by uid: a
 * process may have dropped groups its uid has. NULL (none known, so no
 * exemption by them) on failure; free what is not small.
 */
static gid_t *opener_groups(struct gate_open *o, gid_t *small, size_t cap,
			    size_t *n)
{
	int got = o->ops->groups(o, small, cap);
	gid_t *big;

	*n = 0;
	if (got < 0)
		return NULL;
	if ((size_t)got <= cap) {
		*n = (size_t)got;
		return small;
	}
	cap = (size_t)got + 16; /* it may grow between the calls */
	big = calloc(cap, sizeof(*big));
	if (!big)
		return NULL;
	got = o->ops->groups(o, big, cap);
	if (got < 0 || (size_t)got > cap) {
		free(big);
		return NULL;
	}
	*n = (size_t)got;
	return big;
}

/* What the policy says before any scan. */
enum unscanned {
	UNSCANNED_ALLOW,
	UNSCANNED_DENY, /* with the policy's errno */
	UNSCANNED_SCAN, /* a scan decides */
};

static enum unscanned decide_unscanned(struct gate_open *o,
				       struct clamfs_fs *fs,
				       const struct policy *pol,
				       struct inode *inode, int fd,
				       const struct stat *st)
{
	char buf[PATH_MAX];
	const char *rel = NULL;
	gid_t small[64], *groups = NULL;
	size_t ngroups = 0;
	enum policy_decision d;

	/* empty on the backend, not necessarily in the page cache */
	if (st->st_size == 0 &&
	    !unwritten_data_possible(fs, inode, o->flags, o->is_create)) {
		stats_inc(&fs->stats, STAT_EMPTY);
		debug_open(fs, fd, "allowed-empty", o->pid, o->uid, NULL);
		return UNSCANNED_ALLOW;
	}
	/*
	 * FUSE does not say which name was opened: path rules judge the
	 * file's only name, and a file whose name cannot be proven (hard
	 * linked, renamed or unlinked since the daemon learnt it) is scanned.
	 */
	if (policy_needs_path(pol))
		rel = fs_fd_only_name(fs, fd, buf, sizeof(buf));
	if (policy_wants_groups(pol, o->uid, o->gid))
		groups = opener_groups(o, small, 64, &ngroups);
	d = policy_decide_groups(pol, rel, o->uid, o->gid, groups, ngroups,
				 (uint64_t)st->st_size);
	if (groups != small)
		free(groups);
	switch (d) {
	case POLICY_SCAN:
		break;
	case POLICY_SKIP_EXCLUDED:
		stats_inc(&fs->stats, STAT_EXCLUDED);
		debug_open(fs, fd, "allowed-excluded", o->pid, o->uid, NULL);
		return UNSCANNED_ALLOW;
	case POLICY_SKIP_OVERSIZE:
		stats_inc(&fs->stats, STAT_OVERSIZE_ALLOWED);
		debug_open(fs, fd, "allowed-oversize", o->pid, o->uid, NULL);
		return UNSCANNED_ALLOW;
	case POLICY_DENY_OVERSIZE:
		stats_inc(&fs->stats, STAT_OVERSIZE_DENIED);
		debug_open(fs, fd, "denied-oversize", o->pid, o->uid, NULL);
		return UNSCANNED_DENY;
	}
	return UNSCANNED_SCAN;
}

/*
 * The open of a file the cache knows infected, as its policy says. Not
 * one whose action moves the file: moving or deleting it takes a
 * directory lock that a request waiting for this worker may hold, so a
 * scanner thread does that, after a fresh scan (false: not answered).
 */
static bool answer_known_infected(struct clamfs_fs *fs, struct generation *pin,
				  struct gate_open *o, struct inode *inode,
				  int fd, const struct stamp *st,
				  struct pending *p, const char *sig)
{
	const struct policy *pol = gen_policy(pin);
	bool limits = act_is_limits(pol, sig);
	int ret;

	if (!limits && act_removes_file(pol->on_infected))
		return false;
	stats_inc(&fs->stats, STAT_CACHE_HITS);
	ret = limits ? act_on_limits(fs, pin, p, "open", sig, true)
		     : act_on_infected(fs, pin, p, "open", sig, true);
	if (ret) {
		if (!limits)
			stats_inc(&fs->stats, STAT_DENIED);
		refuse(o, inode, fd, ret);
	} else {
		allow_open(fs, pin, o, inode, fd, st);
	}
	pending_free(p);
	return true;
}

/*
 * A reader's open of a file nobody writes, answered by what the verdict
 * cache or the store knows of its stamp: true once answered (p freed),
 * false when a scan must decide.
 */
static bool answer_known(struct clamfs_fs *fs, struct generation *pin,
			 struct gate_open *o, struct inode *inode, int fd,
			 const struct stamp *st, struct pending *p)
{
	const char *how = NULL;
	char sig[CDP_TEXT_MAX];
	struct vcache_file f;

	stamp_key(st, &f);
	switch (vcache_lookup(gen_vcache(pin), &f, sig, sizeof(sig))) {
	case VCACHE_CLEAN:
		how = "allowed-cached-clean";
		break;
	case VCACHE_INFECTED:
		return answer_known_infected(fs, pin, o, inode, fd, st, p, sig);
	case VCACHE_MISS:
		if (!stamp_store_hit(fs, pin, fd, &f, st))
			return false;
		how = "allowed-stored-clean";
		break;
	}
	stats_inc(&fs->stats, STAT_CACHE_HITS);
	debug_open(fs, fd, how, p->pid, p->uid, NULL);
	pending_free(p);
	allow_open(fs, pin, o, inode, fd, st);
	return true;
}

/* An open that waits for a scan: kept, then handed to the scan queue. */
static void wait_for_scan(struct clamfs_fs *fs, struct generation *pin,
			  struct gate_open *o, struct inode *inode, int fd,
			  const struct stamp *st, struct pending *p)
{
	int ret;

	stats_inc(&fs->stats, STAT_SCANS_WAITED);
	/* the files beside it are likely next: read its directory ahead */
	if (st->quiet && !o->is_create && gen_opts(pin)->scan_ahead_dirs)
		ahead_note_wait(fs->ahead, pin, fd, &st->st, p->uid, p->gid);
	/* o does not outlive gate_open's call */
	p->open = o->ops->keep(o);
	if (!p->open) {
		pending_free(p);
		refuse(o, inode, fd, ENOMEM);
		return;
	}
	o = p->open;
	/* registered first: a scan may finish before submit returns */
	o->ops->on_interrupt(o, &p->w);
	ret = pending_submit(p);
	if (ret) {
		o->ops->on_interrupt(o, NULL);
		if (ret == -EINTR)
			stats_inc(&fs->stats, STAT_INTERRUPTED);
		pending_free(p);
		refuse(o, inode, fd, -ret);
	}
}

static void gate_open_pinned(struct clamfs_fs *fs, struct generation *pin,
			     struct gate_open *o, struct inode *inode, int fd)
{
	const struct policy *pol = gen_policy(pin);
	struct pending *p;
	struct stamp st;
	int ret;

	if (inode_type(inode) != S_IFREG) {
		allow_open(fs, pin, o, inode, fd, NULL);
		return;
	}
	ret = stamp_fd(fs, pol, fd, &st);
	if (ret) {
		refuse(o, inode, fd, -ret);
		return;
	}
	/*
	 * Asked for every reader, scanned or not: the pages a reader caches
	 * are kept for the next one only on a quiet stamp (allow). A
	 * read-write opener's own fd is a writer: never quiet; one decided
	 * as a reader has none yet.
	 */
	st.quiet = gate_may_read(o->flags) &&
		   (!gate_may_write(o->flags) || o->as_reader) &&
		   stamp_quiet(inode, fd, &st.st);
	/*
	 * A writer may leave ctime as it was where the backend lets it be
	 * set (the store trusts local filesystems only, but a verdict kept
	 * for content about to change is worth nothing anyway). One decided
	 * as a reader may write nothing: its writes forget it
	 * (gate_note_write).
	 */
	if (gate_may_write(o->flags) && !o->as_reader)
		vstore_forget(fs->vstore, st.st.st_dev, st.st.st_ino);
	if (!gate_may_read(o->flags)) {
		/* overwriting an infected file is fine: nothing is read */
		allow_open(fs, pin, o, inode, fd, &st);
		return;
	}
	stats_inc(&fs->stats, STAT_OPENS_CHECKED);
	switch (decide_unscanned(o, fs, pol, inode, fd, &st.st)) {
	case UNSCANNED_ALLOW:
		allow_open(fs, pin, o, inode, fd, &st);
		return;
	case UNSCANNED_DENY:
		refuse(o, inode, fd, pol->deny_errno);
		return;
	case UNSCANNED_SCAN:
		break;
	}

	p = pending_new(fs, pin, GATE_OPEN, inode, fd, &st);
	if (!p) {
		refuse(o, inode, fd, ENOMEM);
		return;
	}
	p->pid = o->pid;
	p->uid = o->uid;
	p->gid = o->gid;
	/* anyone who may write makes any cached verdict untrustworthy */
	if (!st.quiet || !answer_known(fs, pin, o, inode, fd, &st, p))
		wait_for_scan(fs, pin, o, inode, fd, &st, p);
}

/* The policy and cache it reads stay while pinned; a scan takes its own. */
void gate_open(struct clamfs_fs *fs, struct gate_open *o, struct inode *inode,
	       int fd)
{
	struct generation *pin = fs_pin(fs);

	gate_open_pinned(fs, pin, o, inode, fd);
	gen_unpin(pin);
}

/*
 * Whether a writer the kernel served itself (passthrough) wrote nothing:
 * the file's stamp is still the settled one its open was allowed on
 * (recorded trusted by allow: a quiet, settled stamp; any open that
 * overlapped a writer records it untrusted), on a filesystem where even
 * a store through a mapping moves the stamp. A write after a settled
 * stamp gives the file a ctime of its own.
 */
static bool passthrough_wrote_nothing(struct inode *inode, int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 &&
	       tsgrain_sees_mapped_stores(fd, st.st_dev) &&
	       inode_stamp_still(inode, &st);
}

void gate_release(struct clamfs_fs *fs, struct inode *inode, int fd, int flags)
{
	/*
	 * Without kernel passthrough every write came as a request (a shared
	 * mapping's stores too, written back before the release) and dropped
	 * the verdict then, and none could be kept while the writer was open
	 * (stamp_quiet): a handle that wrote nothing leaves the verdict as it
	 * was. With passthrough what a writer wrote never passed the daemon:
	 * no verdict taken while it was open outlives it, and no scan that
	 * overlapped it is cached, unless its writes would show.
	 */
	if (gate_may_write(flags) && fs->passthrough &&
	    !passthrough_wrote_nothing(inode, fd))
		gate_note_write(fs, inode);
	if (gate_may_write(flags) && inode_writers_add(inode, -1) == 0 &&
	    inode_type(inode) == S_IFREG)
		background_after_close(fs, inode, fd);
	else
		close(fd);
}

static void invalidate_in(struct generation *g, void *inode)
{
	vcache_invalidate(gen_vcache(g), inode_dev(inode), inode_ino(inode));
}

void gate_note_write(struct clamfs_fs *fs, struct inode *inode)
{
	inode_note_write(inode);
	/* the store outlives a restart, while the write's new stamp may not */
	vstore_forget(fs->vstore, inode_dev(inode), inode_ino(inode));
	/* a request pinned before a reload may still read an older cache */
	generations_each(fs->gens, invalidate_in, inode);
}

void gate_stop_notifying(struct clamfs_fs *fs)
{
	atomic_store(&fs->notify_stopped, true);
}

bool gate_kernel_waits(struct clamfs_fs *fs)
{
	return atomic_load(&fs->kernel_waits) != 0;
}
