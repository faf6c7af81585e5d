// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan gate. The FUSE worker opens the file as the caller, checks the
 * verdict cache, and on a miss hands the open to the scan queue and
 * returns: the answer comes from a scanner thread, so a long scan pins no
 * worker. Policy (exclusions, size, actions, errors) is applied here; how
 * an answer reaches the kernel is the FUSE layer's (gate_reply.c).
 */
#include "gate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "ahead.h"
#include "creds.h"
#include "log.h"
#include "tsgrain.h"
#include "writers.h"
#include "procfd.h"
#include "fdpath.h"
#include "fileid.h"

/*
 * A file's stat and the wall-clock time read just before it: whether the
 * stat can vouch for the content depends on how old its ctime was then.
 */
struct stamp {
	struct stat st;
	uint64_t ident;	   /* file_ident() */
	int64_t taken_ns;  /* CLOCK_REALTIME */
	int64_t window_ns; /* the racy window for this file (tsgrain.h) */
	/*
	 * Nobody held the file open for writing, through the mount or not,
	 * right after the stat: no mapping could store into it without
	 * moving its timestamps, so the stat vouches for what a scan reads.
	 */
	bool quiet;
};

/*
 * What names the file at dirfd/name beyond its device and inode numbers
 * (fileid.h), which the verdict cache and store compare with the stamp.
 * On the backend root's own device nothing more is needed (0): the mount
 * holds the root open, so that number stays its filesystem's, and an
 * inode number used again there comes with a ctime younger than any
 * settled stamp of the file it had before. Any other device's number may
 * have been another filesystem's or subvolume's: its files are known by
 * their handles, and a file without one matches nothing.
 */
static uint64_t file_ident(struct clamfs_fs *fs, int dirfd, const char *name,
			   int flags, dev_t dev)
{
	uint64_t id;

	if (dev == inode_dev(itab_root(fs->itab)))
		return 0;
	id = fileid_at(dirfd, name, flags, NULL);
	return id ? id : fileid_unmatched();
}

static int stamp_fd(struct clamfs_fs *fs, const struct policy *pol, int fd,
		    struct stamp *s)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	s->quiet = false; /* until asked */
	s->taken_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	if (fstat(fd, &s->st) == -1)
		return -errno;
	s->ident = file_ident(fs, fd, "", AT_EMPTY_PATH, s->st.st_dev);
	s->window_ns = (int64_t)pol->racy_window * 1000000000;
	if (pol->racy_learn)
		s->window_ns = tsgrain_window_ns(fd, &s->st, s->window_ns);
	return 0;
}

/* The verdict cache's and store's key and stamp for a stamp. */
static void stamp_key(const struct stamp *s, struct vcache_file *f)
{
	vcache_file_from_stat(f, &s->st);
	f->ident = s->ident;
}

static bool stamp_settled(const struct stamp *s)
{
	struct vcache_file f;

	stamp_key(s, &f);
	return vcache_stamp_settled(&f, s->taken_ns, s->window_ns);
}

/* What a look at whether a file is written found (writes_now). */
enum quiet_state {
	QUIET,		   /* nobody writes it */
	QUIET_NOT,	   /* written through the mount, or cannot be told */
	QUIET_WRITER_OPEN, /* a descriptor or mapping outside the mount's
			    * count may write it */
};

/*
 * Whether a verdict, or the kernel's page cache, may be trusted or stored
 * for the file open read-only at fd on device dev: no writer through
 * the mount, nor on the backend (a descriptor or a shared writable
 * mapping that outlived one), on a filesystem where a writer that came
 * and went left its mark on the stamp (tsgrain.h).
 */
static enum quiet_state writes_now(struct inode *inode, int fd, dev_t dev)
{
	int probe;

	if (inode_writers(inode) != 0 || !tsgrain_sees_mapped_stores(fd, dev))
		return QUIET_NOT;
	probe = writers_probe(fd);
	if (probe == 0)
		return QUIET;
	return probe == -EBUSY ? QUIET_WRITER_OPEN : QUIET_NOT;
}

static bool stamp_quiet(struct inode *inode, int fd, const struct stat *st)
{
	return writes_now(inode, fd, st->st_dev) == QUIET;
}

/* The scan queue all close scans wait in (no user has this uid). */
#define CLOSE_SCAN_QUEUE ((uid_t)(-2))
/* The background queue of scans ahead of a reader (nor this one). */
#define SCAN_AHEAD_QUEUE ((uid_t)(-3))
/* ... and the one of directories read ahead (ahead.h), nor this one. */
#define SCAN_AHEAD_DIR_QUEUE ((uid_t)(-4))
/*
 * Scanned ahead: files up to this size (a bigger one's scan would hold
 * a general scanner thread long), on filesystems whose racy window is
 * at most the longest a background scan is held back (a coarse one's
 * verdict could not be kept anyway).
 */
#define SCAN_AHEAD_MAX_BYTES	 (64LL * 1024 * 1024)
#define SCAN_AHEAD_MAX_WINDOW_NS (SCANQ_NOT_BEFORE_MAX_MS * 1000000LL)
/* How long a close scan waits for its writer to be quite gone. */
#define CLOSE_QUIET_WAIT_MS 50

/* An open (or close scan) waiting for its verdict. */
struct pending {
	struct scan_waiter w; /* first: the queue hands it back */
	struct clamfs_fs *fs;
	/* the open kept to answer; NULL: a scan_on_close, nobody to answer */
	struct gate_open *open;
	bool ahead;  /* with open NULL: a scan ahead, nothing to act on */
	bool beside; /* ... of a directory a reader waits in (ahead.h) */
	struct inode *inode;
	int fd;
	struct stamp stamp;
	uint64_t write_seq;
	struct stat removed_from; /* parent dir of a quarantined/deleted name */
	char removed_name[NAME_MAX + 1];
	pid_t pid;
	uid_t uid;
	gid_t gid;
	struct generation *pin; /* held until the verdict is acted on */
};

static void pending_free(struct pending *p)
{
	gen_unpin(p->pin);
	free(p);
}

static bool may_read(int flags)
{
	return (flags & O_ACCMODE) != O_WRONLY;
}

static bool may_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY;
}

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

/* Whether the file open at fd is the one stamped in st, as stamped. */
static bool stamp_unmoved(int fd, const struct stamp *st)
{
	struct vcache_file was, now;
	struct stat cur;

	if (fstat(fd, &cur) == -1)
		return false;
	stamp_key(st, &was);
	vcache_file_from_stat(&now, &cur);
	/* the same device and inode number: the same handle */
	now.ident = was.ident;
	return vcache_file_same(&now, &was);
}

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
 * The name a quarantine or delete removed is still in the kernel's dentry
 * cache for entry_timeout: a write through it would land in the removed
 * file. The notification takes the directory lock, which a create holds
 * until answered: creates waiting on the same scan are answered before
 * everybody else (answer_first), and a create itself notifies after its
 * reply. Any other opener notifies before its reply, so the name is gone
 * once its open returns.
 */
static void forget_removed_name(struct clamfs_fs *fs, struct pending *p)
{
	struct inode *parent;
	uint64_t nodeid;

	if (!p->removed_name[0])
		return;
	parent = itab_find_ref(fs->itab, p->removed_from.st_dev,
			       p->removed_from.st_ino);
	if (!parent)
		return; /* the kernel does not know the directory: no entry */
	nodeid = inode_hand_out(parent);
	/*
	 * Takes the directory's lock, which a lookup waiting for its answer
	 * holds: counted as a write-back is, and not once a stop ended them.
	 */
	atomic_fetch_add(&fs->kernel_waits, 1);
	if (!atomic_load(&fs->notify_stopped)) {
		fs->kernel->inval_entry(fs, nodeid, p->removed_name,
					strlen(p->removed_name));
		/*
		 * and the directory's listing, which the kernel keeps under
		 * watch_backend (the watch skips our own calls), even when
		 * it had no entry for the name
		 */
		fs->kernel->inval_inode(fs, nodeid);
	}
	atomic_fetch_sub(&fs->kernel_waits, 1);
	itab_forget(fs->itab, parent, 1);
}

static void note_removed(struct pending *p, const char *rel)
{
	const char *base = strrchr(rel, '/');

	strlcpy(p->removed_name, base ? base + 1 : rel,
		sizeof(p->removed_name));
}

/* The verdict of a file moved away, in the caches the open could read. */
static void forget_verdict(struct generation *cur, struct pending *p)
{
	vcache_invalidate(gen_vcache(cur), p->stamp.st.st_dev,
			  p->stamp.st.st_ino);
	if (gen_vcache(p->pin) != gen_vcache(cur))
		vcache_invalidate(gen_vcache(p->pin), p->stamp.st.st_dev,
				  p->stamp.st.st_ino);
}

/*
 * Carries out the on_infected action of cur, the configuration in force
 * when the verdict is acted on (a reload while the scan ran applies);
 * returns the errno to refuse with.
 */
static int act_on_infected(struct clamfs_fs *fs, struct generation *cur,
			   struct pending *p, const char *event,
			   const char *sig, bool cached)
{
	const struct policy *pol = gen_policy(cur);
	char buf[PATH_MAX], dest[PATH_MAX], qdest[PATH_MAX * 4 + 8];
	char outcome[sizeof(qdest) + 128];
	const char *rel = fs_fd_path(fs, p->fd, buf, sizeof(buf));
	struct detection det = {
		.event = event,
		.relpath = rel,
		.signature = sig,
		.action = infected_action_name(pol->on_infected),
		.pid = p->pid,
		.uid = p->uid,
		.gid = p->gid,
		.cached = cached,
	};
	struct quarantine_note note = {
		.share = fs->backend_path,
		.signature = sig,
		.opener_uid = p->uid,
	};
	int ret;

	switch (pol->on_infected) {
	case INFECTED_LOG:
		detect_report(gen_detect(cur), &det);
		return 0;
	case INFECTED_DENY:
		break;
	case INFECTED_QUARANTINE:
		ret = rel ? action_quarantine(
				    inode_fd(itab_root(fs->itab)), rel,
				    p->stamp.st.st_dev, p->stamp.st.st_ino,
				    fs->quarantine_fd, dest, sizeof(dest),
				    &p->removed_from, &note)
			  : -ENOENT;
		if (ret == 0) {
			note_removed(p, rel);
			/* the uploader chose the name: quoted like any */
			log_quote(qdest, sizeof(qdest), dest);
			snprintf(outcome, sizeof(outcome),
				 "quarantined_as=%s%s%s%s", qdest,
				 note.record_error ? " record_failed=\"" : "",
				 note.record_error
					 ? strerror(-note.record_error)
					 : "",
				 note.record_error ? "\"" : "");
			stats_inc(&fs->stats, STAT_QUARANTINED);
		} else {
			snprintf(outcome, sizeof(outcome),
				 "quarantine_failed=\"%s\"", strerror(-ret));
		}
		det.outcome = outcome;
		forget_verdict(cur, p);
		vstore_forget(fs->vstore, p->stamp.st.st_dev,
			      p->stamp.st.st_ino);
		break;
	case INFECTED_DELETE:
		ret = rel ? action_delete(inode_fd(itab_root(fs->itab)), rel,
					  p->stamp.st.st_dev,
					  p->stamp.st.st_ino, &p->removed_from)
			  : -ENOENT;
		if (ret == 0) {
			note_removed(p, rel);
			det.outcome = "deleted=yes";
			stats_inc(&fs->stats, STAT_DELETED);
		} else {
			snprintf(outcome, sizeof(outcome),
				 "delete_failed=\"%s\"", strerror(-ret));
			det.outcome = outcome;
		}
		forget_verdict(cur, p);
		vstore_forget(fs->vstore, p->stamp.st.st_dev,
			      p->stamp.st.st_ino);
		break;
	}
	detect_report(gen_detect(cur), &det);
	return pol->deny_errno;
}

/* Whether the action moves the file out of the backend's way. */
static bool removes_file(enum infected_action a)
{
	return a == INFECTED_QUARANTINE || a == INFECTED_DELETE;
}

/*
 * Whether the verdict is clamd giving up at one of its scan limits rather
 * than a detection, as the policy wants it told apart.
 */
static bool is_limits(const struct policy *pol, const char *sig)
{
	return pol->on_limits != LIMITS_INFECTED &&
	       policy_is_limits_verdict(sig);
}

/*
 * clamd gave up on the file at one of its scan limits (MaxFiles,
 * MaxRecursion, MaxScanSize... with AlertExceedsMax): nothing was found,
 * so nothing is moved, deleted or handed to infected_cmd, and on_limits
 * says whether the open goes ahead. Refused, it fails as a scan that
 * could not finish does: EIO. Returns the errno to refuse with, or 0.
 */
static int act_on_limits(struct clamfs_fs *fs, struct generation *cur,
			 struct pending *p, const char *event, const char *sig,
			 bool cached)
{
	const struct policy *pol = gen_policy(cur);
	char buf[PATH_MAX], path[PATH_MAX * 4 + 8], qsig[CDP_TEXT_MAX + 8];
	const char *rel = fs_fd_path(fs, p->fd, buf, sizeof(buf));

	char uid[16], pid[16];
	const struct log_field fields[] = {
		{"SIGNATURE", sig},
		{"CLAMFS_PATH", rel},
		{"CLAMFS_ACTION", limits_action_name(pol->on_limits)},
		{"CLAMFS_EVENT", event},
		{"USER_ID", uid},
		{"PROCESS_ID", p->pid ? pid : NULL},
	};

	stats_inc(&fs->stats, STAT_LIMITS);
	log_quote(path, sizeof(path), rel ? rel : "?");
	log_quote(qsig, sizeof(qsig), sig);
	snprintf(uid, sizeof(uid), "%u", (unsigned)p->uid);
	snprintf(pid, sizeof(pid), "%d", (int)p->pid);
	log_event(LOG_LEVEL_WARN, LOG_ID_LIMITS, fields,
		  sizeof(fields) / sizeof(fields[0]), NULL,
		  "limits path=%s signature=%s event=%s action=%s pid=%d "
		  "uid=%u cached=%s",
		  path, qsig, event, limits_action_name(pol->on_limits),
		  (int)p->pid, (unsigned)p->uid, cached ? "yes" : "no");
	return pol->on_limits == LIMITS_ALLOW ? 0 : EIO;
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

/* Scan failed: fail closed with EIO unless cur says on_error=allow. */
static bool allow_after_error(struct clamfs_fs *fs, struct generation *cur,
			      struct pending *p, const struct scan_outcome *o)
{
	char buf[PATH_MAX], path[PATH_MAX * 4 + 8], text[CDP_TEXT_MAX + 8];
	const char *rel = fs_fd_path(fs, p->fd, buf, sizeof(buf));
	const struct cdp_result *res = &o->res;
	/* on_error=allow is for clamd's failures, not for a file never sent */
	bool allow = gen_policy(cur)->on_error_allow && !o->expired_queued;
	static struct log_limit limit;
	unsigned long held_back;
	char more[48] = "", uid[16], pid[16];
	const char *decision = allow ? "allowed-unscanned" : "denied-EIO";
	const struct log_field fields[] = {
		{"CLAMFS_PATH", rel},
		{"CLAMFS_ERROR", cdp_errcat_name(res->cat)},
		{"CLAMFS_REASON", res->text},
		{"CLAMFS_OPEN", decision},
		{"USER_ID", uid},
		{"PROCESS_ID", p->pid ? pid : NULL},
	};

	stats_error(&fs->stats, res->cat);
	stats_inc(&fs->stats, allow ? STAT_ERRORS_ALLOWED : STAT_ERRORS_DENIED);
	log_quote(text, sizeof(text), res->text);
	/*
	 * The first open an outage refuses is an error an administrator must
	 * see at any log level (the version check may not look for a while):
	 * once per outage, whatever the rate limit below let through.
	 */
	if (res->cat == CDP_ERR_CONNECT && outage_begin(&fs->clamd_outage))
		log_event(LOG_LEVEL_ERR, LOG_ID_CLAMD_DOWN, NULL, 0, NULL,
			  "clamd is not answering (%s): every open that needs "
			  "a scan is %s until it answers",
			  text,
			  allow ? "served unscanned (on_error=allow)"
				: "refused");
	/* clamd down means a failure per open: do not flood the log */
	if (!log_limit_pass(&limit, &held_back))
		return allow;
	if (held_back)
		snprintf(more, sizeof(more), " suppressed_before=%lu",
			 held_back);
	log_quote(path, sizeof(path), rel ? rel : "?");
	snprintf(uid, sizeof(uid), "%u", (unsigned)p->uid);
	snprintf(pid, sizeof(pid), "%d", (int)p->pid);
	log_event(LOG_LEVEL_WARN, LOG_ID_SCAN_ERROR, fields,
		  sizeof(fields) / sizeof(fields[0]), NULL,
		  "scan failed path=%s error=%s reason=%s pid=%d uid=%u "
		  "open=%s%s",
		  path, cdp_errcat_name(res->cat), text, (int)p->pid,
		  (unsigned)p->uid, decision, more);
	return allow;
}

/*
 * The instant from which a write must have moved the file's stamp for
 * the verdict to be kept: the stamp's (or a later confirmation's: the
 * file still so and nobody writing it), but never after clamd was asked,
 * since what a write made after that may not be in what clamd read. A
 * waiter that joined a scan under way stamped after the scan began.
 */
static int64_t verdict_stamp_ns(const struct pending *p,
				const struct scan_outcome *o)
{
	int64_t at = p->stamp.taken_ns;

	if (o->confirmed_ns > at)
		at = o->confirmed_ns;
	if (o->started_ns < at)
		at = o->started_ns;
	return at;
}

/*
 * Whether nobody could write the file when its stamp was taken. The
 * stamp of a scan at a writer's close (scan_on_close or ahead) may find
 * the writer not quite gone (with kernel passthrough the kernel drops
 * its own writable backing file after the release is answered): its
 * confirmation, made later before the scan, found the stamp unchanged
 * and nobody writing.
 */
static bool stamp_was_quiet(const struct pending *p,
			    const struct scan_outcome *o)
{
	return p->stamp.quiet || (!p->open && o->confirmed_ns != 0);
}

/*
 * Whether the store may hold a verdict for this stamp (a local filesystem
 * whose ctime nobody can set back) and under which database (db, and in
 * *since when the watch first knew it).
 */
static bool store_label(struct clamfs_fs *fs, int fd, const struct stat *st,
			char db[VSTORE_DB_ID_MAX], int64_t *since)
{
	return fs->vstore && tsgrain_stamp_trusted(fd, st) &&
	       dbwatch_db_identity(fs->dbwatch, db, VSTORE_DB_ID_MAX, since) ==
		       0;
}

/*
 * A clean verdict the cache kept goes to the store too, labelled with the
 * database in force. A database change clears the cache (its generation
 * moves) before the store: a clear that came after the insert but before
 * the put is seen here and the put undone, one that comes later wipes it.
 */
static void maybe_store(struct pending *p, const struct scan_outcome *o,
			const struct vcache_file *f)
{
	struct clamfs_fs *fs = p->fs;
	char db[VSTORE_DB_ID_MAX];
	int64_t since;

	if (o->res.verdict != CDP_CLEAN ||
	    !__atomic_load_n(&fs->store_ttl, __ATOMIC_RELAXED) ||
	    !store_label(fs, p->fd, &p->stamp.st, db, &since) ||
	    o->started_ns <= since)
		return;
	vstore_put_clean(fs->vstore, f, db, o->started_ns);
	if (vcache_generation(gen_vcache(p->pin)) != o->gen)
		vstore_forget(fs->vstore, f->dev, f->ino);
}

/*
 * The store's verdict for a stamp the cache had none for. It is not put
 * in the cache: there it would live a whole TTL from now, not from the
 * scan.
 */
static bool store_hit(struct clamfs_fs *fs, int fd, const struct vcache_file *f,
		      const struct stamp *st)
{
	char db[VSTORE_DB_ID_MAX];
	struct timespec now;
	int64_t since;

	if (!store_label(fs, fd, &st->st, db, &since) ||
	    !vcache_stamp_settled(f, st->taken_ns, st->window_ns))
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	return vstore_lookup_clean(
		fs->vstore, f, db,
		__atomic_load_n(&fs->store_ttl, __ATOMIC_RELAXED),
		(int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
}

static bool maybe_cache(struct pending *p, const struct scan_outcome *o)
{
	struct vcache *vc = gen_vcache(p->pin);
	struct vcache_file f;

	/*
	 * Not cached: errors; a file anyone could write when it was stamped
	 * (stores into a mapping's dirty pages during the scan would leave
	 * the stamp as it was) or can write now; scans after a write through
	 * the mount; a stamp too young to tell a same-tick rewrite from the
	 * content scanned.
	 */
	stamp_key(&p->stamp, &f);
	if (o->res.verdict == CDP_ERROR || !stamp_was_quiet(p, o) ||
	    inode_write_seq(p->inode) != o->tag ||
	    !vcache_stamp_settled(&f, verdict_stamp_ns(p, o),
				  p->stamp.window_ns) ||
	    !stamp_quiet(p->inode, p->fd, &p->stamp.st))
		return false;
	vcache_insert(vc, &f,
		      o->res.verdict == CDP_CLEAN ? VCACHE_CLEAN
						  : VCACHE_INFECTED,
		      o->res.text, o->gen);
	/* a writer that came in meanwhile did not see the entry: drop it */
	if (inode_writers(p->inode) != 0 ||
	    inode_write_seq(p->inode) != o->tag) {
		vcache_invalidate(vc, f.dev, f.ino);
		return false;
	}
	if (o->res.verdict == CDP_CLEAN)
		maybe_store(p, o, &f);
	else
		vstore_forget(p->fs->vstore, f.dev, f.ino);
	return true;
}

static void close_scanned(struct pending *p, struct generation *cur,
			  const struct scan_outcome *o)
{
	if (o->res.verdict == CDP_INFECTED &&
	    is_limits(gen_policy(cur), o->res.text)) {
		act_on_limits(p->fs, cur, p, "close", o->res.text, o->known);
	} else if (o->res.verdict == CDP_INFECTED) {
		act_on_infected(p->fs, cur, p, "close", o->res.text, o->known);
		forget_removed_name(p->fs, p);
	} else if (o->res.verdict == CDP_ERROR)
		allow_after_error(p->fs, cur, p, o);
}

/* Scanner thread: the verdict for one waiter. */
static void scanned(struct scan_waiter *w, const struct scan_outcome *o)
{
	struct pending *p = (struct pending *)w;
	struct clamfs_fs *fs = p->fs;
	/*
	 * The verdict is acted on as the configuration in force now says: a
	 * reload that tightened the policy while the scan ran applies to the
	 * answer. What the open read before (cache, stamp) stays its pin's.
	 */
	struct generation *cur = fs_pin(fs);
	bool created = p->open && p->open->is_create;
	bool limits = o->res.verdict == CDP_INFECTED &&
		      is_limits(gen_policy(cur), o->res.text);
	bool cached;
	int err = 0;

	/* from here on no interrupt callback can run on p */
	if (p->open)
		p->open->ops->on_interrupt(p->open, NULL);
	/* a known verdict says nothing of clamd */
	if (o->res.verdict != CDP_ERROR && !o->known &&
	    outage_end(&fs->clamd_outage))
		log_event(LOG_LEVEL_NOTICE, LOG_ID_CLAMD_UP, NULL, 0, NULL,
			  "clamd answers again: scanning resumes");
	/* a known verdict is in the cache already, with its own lifetime */
	cached = !o->known && maybe_cache(p, o);
	if (!p->open) {
		/* a scan ahead is for the next reader, who acts on it */
		if (!p->ahead)
			close_scanned(p, cur, o);
		else if (cached)
			stats_inc(&fs->stats, STAT_AHEAD_CACHED);
		close(p->fd);
		itab_forget(fs->itab, p->inode, 1);
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
		err = allow_after_error(fs, cur, p, o) ? 0 : EIO;
	}
	if (err) {
		if (err != EINTR && o->res.verdict == CDP_INFECTED && !limits)
			stats_inc(&fs->stats, STAT_DENIED);
		if (!created)
			forget_removed_name(fs, p);
		refuse(p->open, p->inode, p->fd, err);
		if (created)
			forget_removed_name(fs, p);
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

static struct pending *pending_new(struct clamfs_fs *fs, struct generation *pin,
				   struct inode *inode, int fd,
				   const struct stamp *st)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->w.done = scanned;
	p->fs = fs;
	p->inode = inode;
	p->fd = fd;
	p->stamp = *st;
	p->write_seq = inode_write_seq(inode);
	p->pin = gen_pin_again(pin);
	return p;
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
 * Whether the file open at fd is still as stamped in f, still has a name,
 * and nobody writes it; with tag, no write went through the mount since.
 * QUIET_NOT also for a file changed or unlinked.
 */
static enum quiet_state quiet_now(struct clamfs_fs *fs, int fd,
				  const struct vcache_file *f,
				  const uint64_t *tag)
{
	enum quiet_state state = QUIET_NOT;
	struct vcache_file now;
	struct inode *inode;
	struct stat st;

	/* a temporary file removed unread needs no verdict */
	if (fstat(fd, &st) == -1 || st.st_nlink == 0)
		return QUIET_NOT;
	vcache_file_from_stat(&now, &st);
	/* fd names the same inode as when f was taken, whoever it is */
	now.ident = f->ident;
	if (!vcache_file_same(&now, f))
		return QUIET_NOT;
	inode = itab_find_ref(fs->itab, f->dev, f->ino);
	if (!inode)
		return QUIET_NOT;
	if (!tag || inode_write_seq(inode) == *tag)
		state = writes_now(inode, fd, st.st_dev);
	itab_forget(fs->itab, inode, 1);
	return state;
}

static bool still_quiet(struct clamfs_fs *fs, int fd,
			const struct vcache_file *f, const uint64_t *tag)
{
	return quiet_now(fs, fd, f, tag) == QUIET;
}

/*
 * Scanner thread, right before a scan ahead: the file is still as
 * stamped at its writer's close and nobody writes it, so that stamp may
 * vouch for what the scan reads (scan_outcome.confirmed_ns).
 */
static bool stamp_still_quiet(void *ctx, int fd, const struct vcache_file *f)
{
	return still_quiet(ctx, fd, f, NULL);
}

/*
 * Scanner thread, right before clamd is asked: the cache's verdict for
 * the stamp, if an open made now would take it (the file still so,
 * nobody writing it, no write through the mount since the submit). Not
 * an infected one whose action moves the file: as on open, that is done
 * after a fresh scan.
 */
static bool verdict_known(void *ctx, int fd, const struct vcache_file *f,
			  uint64_t tag, struct cdp_result *res)
{
	struct clamfs_fs *fs = ctx;
	struct generation *pin = fs_pin(fs);
	const struct policy *pol = gen_policy(pin);
	struct vcache *vc = gen_vcache(pin);
	enum vcache_verdict v;
	char sig[CDP_TEXT_MAX];
	bool known = false;

	/*
	 * Most scans find nothing: the first look spares them the probe's
	 * syscalls. The second, after the probe, is the one an open would
	 * make (probe, then cache): an entry dropped meanwhile is not used.
	 */
	v = vcache_peek(vc, f, sig, sizeof(sig));
	if (v == VCACHE_MISS ||
	    (v == VCACHE_INFECTED && !is_limits(pol, sig) &&
	     removes_file(pol->on_infected)) ||
	    !still_quiet(fs, fd, f, &tag) || vcache_peek(vc, f, NULL, 0) != v)
		goto out;
	memset(res, 0, sizeof(*res));
	res->verdict = v == VCACHE_CLEAN ? CDP_CLEAN : CDP_INFECTED;
	if (v == VCACHE_INFECTED)
		strlcpy(res->text, sig, sizeof(res->text));
	known = true;
out:
	gen_unpin(pin);
	return known;
}

/*
 * Scanner thread, right before a scan_on_close: as stamp_still_quiet,
 * giving the kernel's passthrough backing file of the writer that just
 * closed a moment to go (it goes after the release is answered), so
 * that the verdict can be kept. Only that wait can help: a file changed,
 * unlinked or written through the mount since stays so, and without
 * passthrough there is no backing file. The scan is made either way.
 */
static bool close_stamp_quiet(void *ctx, int fd, const struct vcache_file *f)
{
	const struct timespec nap = {.tv_nsec = 1000000};
	struct clamfs_fs *fs = ctx;
	enum quiet_state state;

	for (int i = 0;; i++) {
		state = quiet_now(fs, fd, f, NULL);
		if (state != QUIET_WRITER_OPEN || !fs->passthrough ||
		    i == CLOSE_QUIET_WAIT_MS)
			return state == QUIET;
		nanosleep(&nap, NULL);
	}
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
static bool unwritten_data_possible(struct clamfs_fs *fs, struct inode *inode,
				    int flags, bool is_create)
{
	return fs->writeback && inode_writers(inode) != 0 &&
	       !truncates_page_cache(fs, flags, is_create);
}

static int submit(struct clamfs_fs *fs, struct pending *p)
{
	struct vcache_file f;
	int ret, ro_fd = -1;
	struct scan_request r = {
		.file = &f,
		.tag = p->write_seq,
		.fd = p->fd,
		.gen = vcache_generation(gen_vcache(p->pin)),
		/*
		 * Whose queue: the opener's. Close scans are background work
		 * and share one: writing to another user's files must not
		 * fill that user's queue.
		 */
		.uid = p->open ? p->uid : CLOSE_SCAN_QUEUE,
		.known = verdict_known,
		.known_ctx = fs,
	};

	if (!p->open && !p->ahead) {
		r.confirm = close_stamp_quiet;
		r.confirm_ctx = fs;
	}
	if (p->ahead) {
		r.uid = SCAN_AHEAD_QUEUE;
		r.background = true;
		/* a verdict can be kept once the stamp has settled */
		r.not_before_ns = p->stamp.st.st_ctim.tv_sec * 1000000000LL +
				  p->stamp.st.st_ctim.tv_nsec +
				  p->stamp.window_ns + 1000000;
		r.confirm = stamp_still_quiet;
		r.confirm_ctx = fs;
	}
	if (p->beside) {
		r.uid = SCAN_AHEAD_DIR_QUEUE;
		r.beside_one = true;
	}
	if (p->open && inode_writers(p->inode) != 0 &&
	    !truncates_page_cache(p->fs, p->open->flags, p->open->is_create)) {
		r.prepare = flush_writer_pages;
		r.prepare_ctx = fs;
		r.prepare_key = inode_hand_out(p->inode);
	}
	stamp_key(&p->stamp, &f);
	/* it holds its directory's lock until answered */
	p->w.answer_first = p->open && p->open->is_create;
	/*
	 * For the scan of an opener's read-write file, reopened as the
	 * opener: clamd must not get a writable fd, and root may not be able
	 * to read it (NFS root_squash). A close scan's fd is read-only
	 * already, opened as the owner.
	 */
	if (p->open && may_write(p->open->flags) && !p->open->as_reader) {
		ro_fd = p->open->ops->reopen_readonly(p->open, p->fd);
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

static void gate_open_pinned(struct clamfs_fs *fs, struct generation *pin,
			     struct gate_open *o, struct inode *inode, int fd)
{
	const struct policy *pol = gen_policy(pin);
	char sig[CDP_TEXT_MAX];
	struct vcache_file f;
	struct pending *p;
	const char *how;
	struct stamp st;
	bool limits;
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
	st.quiet = may_read(o->flags) &&
		   (!may_write(o->flags) || o->as_reader) &&
		   stamp_quiet(inode, fd, &st.st);
	/*
	 * A writer may leave ctime as it was where the backend lets it be
	 * set (the store trusts local filesystems only, but a verdict kept
	 * for content about to change is worth nothing anyway). One decided
	 * as a reader may write nothing: its writes forget it
	 * (gate_note_write).
	 */
	if (may_write(o->flags) && !o->as_reader)
		vstore_forget(fs->vstore, st.st.st_dev, st.st.st_ino);
	if (!may_read(o->flags)) {
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

	p = pending_new(fs, pin, inode, fd, &st);
	if (!p) {
		refuse(o, inode, fd, ENOMEM);
		return;
	}
	p->pid = o->pid;
	p->uid = o->uid;
	p->gid = o->gid;
	/* anyone who may write makes any cached verdict untrustworthy */
	if (st.quiet) {
		stamp_key(&st, &f);
		switch (vcache_lookup(gen_vcache(pin), &f, sig, sizeof(sig))) {
		case VCACHE_CLEAN:
			how = "allowed-cached-clean";
			goto known_clean;
		case VCACHE_INFECTED:
			/*
			 * Moving or deleting it takes a directory lock that a
			 * request waiting for this worker may hold: a scanner
			 * thread does that, after a fresh scan.
			 */
			limits = is_limits(pol, sig);
			if (!limits && removes_file(pol->on_infected))
				break;
			stats_inc(&fs->stats, STAT_CACHE_HITS);
			ret = limits ? act_on_limits(fs, pin, p, "open", sig,
						     true)
				     : act_on_infected(fs, pin, p, "open", sig,
						       true);
			if (ret) {
				if (!limits)
					stats_inc(&fs->stats, STAT_DENIED);
				refuse(o, inode, fd, ret);
			} else {
				allow_open(fs, pin, o, inode, fd, &st);
			}
			pending_free(p);
			return;
		case VCACHE_MISS:
			if (!store_hit(fs, fd, &f, &st))
				break;
			how = "allowed-stored-clean";
			goto known_clean;
		}
	}

	stats_inc(&fs->stats, STAT_SCANS_WAITED);
	/* the files beside it are likely next: read its directory ahead */
	if (st.quiet && !o->is_create && fs_scan_ahead_dirs(fs))
		ahead_note_wait(fs->ahead, fd, &st.st, p->uid, p->gid);
	/* o does not outlive this call */
	p->open = o->ops->keep(o);
	if (!p->open) {
		pending_free(p);
		refuse(o, inode, fd, ENOMEM);
		return;
	}
	o = p->open;
	/* registered first: a scan may finish before submit returns */
	o->ops->on_interrupt(o, &p->w);
	ret = submit(fs, p);
	if (ret) {
		o->ops->on_interrupt(o, NULL);
		if (ret == -EINTR)
			stats_inc(&fs->stats, STAT_INTERRUPTED);
		pending_free(p);
		refuse(o, inode, fd, -ret);
	}
	return;
known_clean:
	stats_inc(&fs->stats, STAT_CACHE_HITS);
	debug_open(fs, fd, how, p->pid, p->uid, NULL);
	pending_free(p);
	allow_open(fs, pin, o, inode, fd, &st);
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
 * A read-only reopening of a writer's file for its close scan, as the
 * file's owner: root may not read it (NFS root_squash), and the daemon
 * should not read what the owner could not. A scan ahead reads a file
 * nobody asked to read: it must not move its access time (O_NOATIME in
 * flags, which only the owner may ask for; without it, no scan ahead).
 * -errno on failure.
 */
static int reopen_readonly_as_owner(int fd, const struct stat *st, int flags)
{
	struct creds owner = {.uid = st->st_uid, .gid = st->st_gid};
	int ret;

	ret = creds_assume(&owner);
	if (ret)
		return ret;
	ret = proc_fd_reopen_readonly(fd, flags);
	creds_restore();
	return ret;
}

/*
 * Whether the policy wants this file scanned when its writer closes. A
 * release carries no caller: for a close scan the owner, the uploader of
 * a new file, is who exempt_uid/exempt_gid judge; a scan ahead is for
 * whoever reads next, so only the path and size rules apply. Oversize
 * files are left to the open-time rule; there is nobody to refuse here.
 */
static bool close_scan_wanted(struct clamfs_fs *fs, const struct policy *pol,
			      int fd, const struct stat *st, bool ahead)
{
	char buf[PATH_MAX];
	const char *rel = NULL;

	if (st->st_size == 0 || (ahead && st->st_size > SCAN_AHEAD_MAX_BYTES))
		return false;
	if (policy_needs_path(pol))
		rel = fs_fd_only_name(fs, fd, buf, sizeof(buf));
	return policy_decide(pol, rel, ahead ? SCAN_AHEAD_QUEUE : st->st_uid,
			     ahead ? (gid_t)SCAN_AHEAD_QUEUE : st->st_gid,
			     (uint64_t)st->st_size) == POLICY_SCAN;
}

/*
 * A scan ahead is worth its clamd time only if its verdict can be kept
 * and used: its filesystem's racy window is short enough to wait out,
 * and it still has a name. (Whether anybody still writes it is asked
 * again right before the scan: see stamp_was_quiet.)
 */
static bool ahead_keepable(const struct stamp *st)
{
	/* nobody will open a file removed before its last close */
	return st->window_ns <= SCAN_AHEAD_MAX_WINDOW_NS && st->st.st_nlink > 0;
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
	struct generation *pin = NULL;
	struct pending *p = NULL;
	struct stamp st;
	bool ahead;
	int rfd;

	/*
	 * Without kernel passthrough every write came as a request (a shared
	 * mapping's stores too, written back before the release) and dropped
	 * the verdict then, and none could be kept while the writer was open
	 * (writes_now): a handle that wrote nothing leaves the verdict as it
	 * was. With passthrough what a writer wrote never passed the daemon:
	 * no verdict taken while it was open outlives it, and no scan that
	 * overlapped it is cached, unless its writes would show.
	 */
	if (may_write(flags) && fs->passthrough &&
	    !passthrough_wrote_nothing(inode, fd))
		gate_note_write(fs, inode);
	if (!may_write(flags) || inode_writers_add(inode, -1) != 0 ||
	    inode_type(inode) != S_IFREG)
		goto out;
	/* scan_on_close acts on what it finds; a scan ahead only tells */
	ahead = !fs_scan_on_close(fs);
	if (ahead &&
	    (!fs_scan_ahead(fs) || !scanq_background_possible(fs->scanq)))
		goto out;
	pin = fs_pin(fs);
	if (stamp_fd(fs, gen_policy(pin), fd, &st) != 0 ||
	    !close_scan_wanted(fs, gen_policy(pin), fd, &st.st, ahead))
		goto out;
	/* the writer's fd may be write-only: clamd needs to read */
	rfd = reopen_readonly_as_owner(fd, &st.st, ahead ? O_NOATIME : 0);
	if (rfd < 0)
		goto out;
	close(fd);
	fd = -1;
	/*
	 * A close scan stamps again without the writer's own descriptor,
	 * which the probe would count as a writer; a scan ahead is confirmed
	 * right before it runs (stamp_was_quiet), so the stamp above serves.
	 */
	if (ahead) {
		if (ahead_keepable(&st))
			p = pending_new(fs, pin, inode, rfd, &st);
	} else if (stamp_fd(fs, gen_policy(pin), rfd, &st) == 0) {
		st.quiet = stamp_quiet(inode, rfd, &st.st);
		p = pending_new(fs, pin, inode, rfd, &st);
	}
	if (!p) {
		close(rfd);
		goto out;
	}
	p->ahead = ahead;
	p->uid = st.st.st_uid;
	p->gid = st.st.st_gid;
	stats_inc(&fs->stats, ahead ? STAT_AHEAD_SCANS : STAT_CLOSE_SCANS);
	/* nothing else keeps the inode alive until the verdict is in */
	itab_ref(fs->itab, inode);
	if (submit(fs, p) != 0) {
		itab_forget(fs->itab, inode, 1);
		close(rfd);
		pending_free(p);
	}
out:
	gen_unpin(pin);
	if (fd >= 0)
		close(fd);
}

/* A regular file, neither empty nor too big to scan ahead. */
static bool ahead_size_wanted(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_size > 0 &&
	       st->st_size <= SCAN_AHEAD_MAX_BYTES;
}

/*
 * The stamp of a file about to be scanned ahead, open at rfd, still the
 * one looked at through the directory (pst) and not known to the cache.
 */
static bool ahead_entry_wanted(struct clamfs_fs *fs, struct generation *pin,
			       int rfd, const struct stat *pst,
			       struct stamp *st)
{
	struct vcache_file f;

	if (stamp_fd(fs, gen_policy(pin), rfd, st) != 0 ||
	    st->st.st_dev != pst->st_dev || st->st.st_ino != pst->st_ino ||
	    !ahead_keepable(st))
		return false;
	stamp_key(st, &f);
	return !vcache_knows(gen_vcache(pin), &f) &&
	       !store_hit(fs, rfd, &f, st) &&
	       close_scan_wanted(fs, gen_policy(pin), rfd, &st->st, true);
}

int gate_scan_ahead_entry(struct clamfs_fs *fs, int dir_fd, const char *name,
			  off_t *bytes)
{
	struct generation *pin = fs_pin(fs);
	struct inode *inode = NULL;
	struct pending *p = NULL;
	int pfd, rfd = -1, ret;
	struct vcache_file f;
	struct stamp st;
	struct stat pst;

	/* without a cache its verdict would be thrown away */
	if (!__atomic_load_n(&fs->store_ttl, __ATOMIC_RELAXED)) {
		ret = -ENOTSUP;
		goto out;
	}
	/* most of a directory a reader goes through is known: one call */
	if (fstatat(dir_fd, name, &pst, AT_SYMLINK_NOFOLLOW) == -1) {
		ret = -errno;
		goto out;
	}
	if (!ahead_size_wanted(&pst)) {
		ret = -ENOENT;
		goto out;
	}
	vcache_file_from_stat(&f, &pst);
	f.ident = file_ident(fs, dir_fd, name, 0, pst.st_dev);
	if (vcache_knows(gen_vcache(pin), &f)) {
		ret = -EALREADY;
		goto out;
	}
	if (!scanq_background_room(fs->scanq, SCAN_AHEAD_DIR_QUEUE)) {
		ret = -EAGAIN;
		goto out;
	}
	/* the descriptors opens and lookups need come first */
	if (itab_low(fs->itab)) {
		ret = -EMFILE;
		goto out;
	}
	pfd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd == -1) {
		ret = -errno;
		goto out;
	}
	if (fstat(pfd, &pst) == -1 || !ahead_size_wanted(&pst)) {
		close(pfd);
		ret = -ENOENT;
		goto out;
	}
	/* held until the verdict is in, as a closed writer's file is */
	ret = itab_insert_ref(fs->itab, pfd, &pst, &inode);
	if (ret)
		goto out;
	ret = -EBUSY;
	if (inode_writers(inode) != 0)
		goto out;
	/*
	 * A lease another user holds on it (Samba's oplocks) is not waited
	 * for: this open would break it, and nobody asked to read the file.
	 */
	ret = inode_pin(fs->itab, inode);
	if (ret)
		goto out;
	rfd = reopen_readonly_as_owner(inode_fd(inode), &pst,
				       O_NOATIME | O_NONBLOCK);
	inode_unpin(inode);
	if (rfd < 0) {
		ret = rfd;
		goto out;
	}
	ret = -EALREADY;
	if (!ahead_entry_wanted(fs, pin, rfd, &pst, &st))
		goto out;
	ret = -ENOMEM;
	p = pending_new(fs, pin, inode, rfd, &st);
	if (!p)
		goto out;
	p->ahead = true;
	p->beside = true;
	p->uid = st.st.st_uid;
	p->gid = st.st.st_gid;
	ret = submit(fs, p);
	if (ret)
		goto out;
	stats_inc(&fs->stats, STAT_AHEAD_DIR_SCANS);
	*bytes = st.st.st_size;
	/* the verdict's callback owns them now */
	p = NULL;
	rfd = -1;
	inode = NULL;
out:
	if (p)
		pending_free(p);
	if (rfd >= 0)
		close(rfd);
	if (inode)
		itab_forget(fs->itab, inode, 1);
	gen_unpin(pin);
	return ret;
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
