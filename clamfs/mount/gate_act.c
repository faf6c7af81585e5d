// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What is done with a file clamd found infected (on_infected: deny, log,
 * quarantine, delete), with one it gave up on at a scan limit
 * (on_limits), and with an open whose scan failed (on_error).
 */

#include "gate_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "action.h"
#include "fdpath.h"
#include "log.h"

/*
 * The name a quarantine or delete removed is still in the kernel's dentry
 * cache for entry_timeout: a write through it would land in the removed
 * file. The notification takes the directory lock, which a create holds
 * until answered: creates waiting on the same scan are answered before
 * everybody else (answer_first), and a create itself notifies after its
 * reply. Any other opener notifies before its reply, so the name is gone
 * once its open returns.
 */
void act_forget_removed_name(struct clamfs_fs *fs, struct pending *p)
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

/* Room for the outcome of a removal, for the log: a quoted name and more. */
#define OUTCOME_MAX (PATH_MAX * 4 + 136)

/*
 * Quarantines or deletes the infected file p opened, known at rel (NULL:
 * it has no name the daemon can prove), and writes what came of it into
 * outcome. The verdict goes with the file, whatever came of it.
 */
static void remove_infected(struct clamfs_fs *fs, struct generation *cur,
			    struct pending *p, const char *rel,
			    struct quarantine_note *note, char *outcome)
{
	bool quarantine = gen_policy(cur)->on_infected == INFECTED_QUARANTINE;
	const char *what = quarantine ? "quarantine" : "delete";
	int root = inode_fd(itab_root(fs->itab));
	char dest[PATH_MAX], qdest[PATH_MAX * 4 + 8];
	int ret = -ENOENT;

	if (rel && quarantine)
		ret = action_quarantine(root, rel, p->stamp.st.st_dev,
					p->stamp.st.st_ino, fs->quarantine_fd,
					dest, sizeof(dest), &p->removed_from,
					note);
	else if (rel)
		ret = action_delete(root, rel, p->stamp.st.st_dev,
				    p->stamp.st.st_ino, &p->removed_from);
	if (ret) {
		snprintf(outcome, OUTCOME_MAX, "%s_failed=\"%s\"", what,
			 strerror(-ret));
	} else if (quarantine) {
		note_removed(p, rel);
		/* the uploader chose the name: quoted like any */
		log_quote(qdest, sizeof(qdest), dest);
		snprintf(outcome, OUTCOME_MAX, "quarantined_as=%s%s%s%s", qdest,
			 note->record_error ? " record_failed=\"" : "",
			 note->record_error ? strerror(-note->record_error)
					    : "",
			 note->record_error ? "\"" : "");
		stats_inc(&fs->stats, STAT_QUARANTINED);
	} else {
		note_removed(p, rel);
		strlcpy(outcome, "deleted=yes", OUTCOME_MAX);
		stats_inc(&fs->stats, STAT_DELETED);
	}
	forget_verdict(cur, p);
	vstore_forget(fs->vstore, p->stamp.st.st_dev, p->stamp.st.st_ino);
}

/*
 * Carries out the on_infected action of cur, the configuration in force
 * when the verdict is acted on (a reload while the scan ran applies);
 * returns the errno to refuse with.
 */
int act_on_infected(struct clamfs_fs *fs, struct generation *cur,
		    struct pending *p, const char *event, const char *sig,
		    bool cached)
{
	const struct policy *pol = gen_policy(cur);
	char buf[PATH_MAX], outcome[OUTCOME_MAX];
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

	if (act_removes_file(pol->on_infected)) {
		remove_infected(fs, cur, p, rel, &note, outcome);
		det.outcome = outcome;
	}
	detect_report(gen_detect(cur), &det);
	return pol->on_infected == INFECTED_LOG ? 0 : pol->deny_errno;
}

/* Whether the action moves the file out of the backend's way. */
bool act_removes_file(enum infected_action a)
{
	return a == INFECTED_QUARANTINE || a == INFECTED_DELETE;
}

/*
 * Whether the verdict is clamd giving up at one of its scan limits rather
 * than a detection, as the policy wants it told apart.
 */
bool act_is_limits(const struct policy *pol, const char *sig)
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
int act_on_limits(struct clamfs_fs *fs, struct generation *cur,
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

/* Scan failed: fail closed with EIO unless cur says on_error=allow. */
bool act_allow_after_error(struct clamfs_fs *fs, struct generation *cur,
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
