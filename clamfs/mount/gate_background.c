// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scans nobody waits for: a writer's close scan (scan_on_close) or
 * scan ahead for the next reader, and the scans ahead of a reader of the
 * files beside the one it waits for (ahead.h).
 */

#include "gate_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "checks.h"
#include "creds.h"
#include "fdpath.h"
#include "procfd.h"

/*
 * Scanned ahead: files up to this size (a bigger one's scan would hold
 * a general scanner thread long), on filesystems whose racy window is
 * at most the longest a background scan is held back (a coarse one's
 * verdict could not be kept anyway).
 */
#define SCAN_AHEAD_MAX_BYTES	 (64LL * 1024 * 1024)
#define SCAN_AHEAD_MAX_WINDOW_NS (SCANQ_NOT_BEFORE_MAX_MS * 1000000LL)

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
	if (ahead)
		return policy_decide_file(pol, rel, (uint64_t)st->st_size) ==
		       POLICY_SCAN;
	return policy_decide(pol, rel, st->st_uid, st->st_gid,
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

void background_scanned(struct pending *p, struct generation *cur,
			const struct scan_outcome *o, bool cached)
{
	struct clamfs_fs *fs = p->fs;
	bool infected = o->res.verdict == CDP_INFECTED;

	/* a scan ahead is for the next reader, who acts on it */
	if (p->kind != GATE_CLOSE) {
		if (cached)
			stats_inc(&fs->stats, STAT_AHEAD_CACHED);
	} else if (infected && act_is_limits(gen_policy(cur), o->res.text)) {
		act_on_limits(fs, cur, p, "close", o->res.text, o->known);
	} else if (infected) {
		act_on_infected(fs, cur, p, "close", o->res.text, o->known);
		act_forget_removed_name(fs, p);
	} else if (o->res.verdict == CDP_ERROR) {
		act_allow_after_error(fs, cur, p, o);
	}
	close(p->fd);
	itab_forget(fs->itab, p->inode, 1);
}

void background_after_close(struct clamfs_fs *fs, struct inode *inode, int fd)
{
	struct generation *pin = NULL;
	struct pending *p = NULL;
	struct stamp st;
	bool ahead;
	int rfd;

	/*
	 * The configuration in force at the close: no request pinned one for
	 * it. scan_on_close acts on what it finds; a scan ahead only tells.
	 */
	pin = fs_pin(fs);
	ahead = !gen_opts(pin)->scan_on_close;
	if (ahead && (!gen_opts(pin)->scan_ahead ||
		      !scanq_background_possible(fs->scanq)))
		goto out;
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
	 * right before it runs (stamp_still_quiet), so the stamp above
	 * serves.
	 */
	if (ahead) {
		if (ahead_keepable(&st))
			p = pending_new(fs, pin, GATE_AHEAD, inode, rfd, &st);
	} else if (stamp_fd(fs, gen_policy(pin), rfd, &st) == 0) {
		st.quiet = stamp_quiet(inode, rfd, &st.st);
		p = pending_new(fs, pin, GATE_CLOSE, inode, rfd, &st);
	}
	if (!p) {
		close(rfd);
		goto out;
	}
	p->uid = st.st.st_uid;
	p->gid = st.st.st_gid;
	stats_inc(&fs->stats, ahead ? STAT_AHEAD_SCANS : STAT_CLOSE_SCANS);
	/* nothing else keeps the inode alive until the verdict is in */
	itab_ref(fs->itab, inode);
	if (pending_submit(p) != 0) {
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
	       !stamp_store_hit(fs, pin, rfd, &f, st) &&
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

	/*
	 * A reload turned walks off, or there is no cache to keep the
	 * verdict in: the walk ends (ahead.h).
	 */
	if (!gen_opts(pin)->scan_ahead_dirs ||
	    !config_store_ttl(gen_opts(pin))) {
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
	f.ident = stamp_file_ident(fs, dir_fd, name, 0, pst.st_dev);
	if (vcache_knows(gen_vcache(pin), &f)) {
		ret = -EALREADY;
		goto out;
	}
	if (!pending_room(fs, GATE_AHEAD_BESIDE)) {
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
	p = pending_new(fs, pin, GATE_AHEAD_BESIDE, inode, rfd, &st);
	if (!p)
		goto out;
	p->uid = st.st.st_uid;
	p->gid = st.st.st_gid;
	ret = pending_submit(p);
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
