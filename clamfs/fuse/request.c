// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What every request handler needs: acting as the requester, and turning a
 * backend name or fd into a FUSE entry with its inode table reference.
 */
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "creds.h"
#include "groupfree.h"
#include "log.h"
#include "procfd.h"
#include "watch.h"

static int identity_fetch_groups(fuse_req_t req, struct req_identity *id)
{
	size_t cap = sizeof(id->small_groups) / sizeof(id->small_groups[0]);
	int n;

	id->groups = id->small_groups;
	stats_inc(&req_fs(req)->stats, STAT_GROUPS_READ);
	n = fuse_req_getgroups(req, (int)cap, id->groups);
	if (n >= 0 && (size_t)n > cap) {
		/* the set can change between calls: ask until it fits */
		cap = (size_t)n + 16;
		id->groups = calloc(cap, sizeof(gid_t));
		if (!id->groups)
			return -ENOMEM;
		n = fuse_req_getgroups(req, (int)cap, id->groups);
		if (n >= 0 && (size_t)n > cap)
			n = -E2BIG;
	}
	return n;
}

/*
 * The requester's supplementary groups, or an error that refuses the
 * request. Judging without them is not "fewer rights": a mode such as
 * 0604 gives others what it denies the group, and ACLs can deny a group.
 */
static int identity_groups(fuse_req_t req, struct req_identity *id,
			   struct creds *who)
{
	static struct log_limit limit;
	unsigned long held_back;
	int n = identity_fetch_groups(req, id);

	if (n >= 0) {
		who->ngroups = n;
		who->groups = id->groups;
		return 0;
	}
	if (log_limit_pass(&limit, &held_back))
		log_warn("request refused: supplementary groups of pid=%d "
			 "uid=%u unknown (%s) suppressed_before=%lu",
			 (int)fuse_req_ctx(req)->pid,
			 (unsigned)fuse_req_ctx(req)->uid, strerror(-n),
			 held_back);
	return -EACCES;
}

/*
 * Whether no object at fds needs the caller's groups to be judged; an
 * opening call (one fd) by either rule of groupfree.h, its ctime kept.
 */
static bool groups_can_wait(struct req_identity *id, const struct creds *who,
			    const int *fds, size_t n, bool opening)
{
	if (opening)
		return groupfree_judged(fds[0], who->uid, who->gid,
					&id->judged_ctime);
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!groupfree_as_owner_or_group(fds[i], who->uid, who->gid))
			return false;
	return true;
}

/*
 * Switches to the requester; without its supplementary groups when the
 * call is judged only on the objects at fds and none needs them (see
 * groupfree.h; req_identity_widen then).
 */
static int identity_enter(fuse_req_t req, struct req_identity *id,
			  bool with_umask, const int *fds, size_t nfds,
			  bool opening)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct creds who = {.uid = ctx->uid, .gid = ctx->gid, .ngroups = 0};
	int ret;

	id->switched = false;
	id->without_groups = false;
	id->lost = false;
	id->groups = NULL;
	if (with_umask) {
		ret = creds_set_umask(ctx->umask);
		if (ret)
			return ret;
	}
	if (!creds_need_switch(ctx->uid, ctx->gid))
		return 0;
	id->without_groups = groups_can_wait(id, &who, fds, nfds, opening);
	ret = id->without_groups ? 0 : identity_groups(req, id, &who);
	if (ret == 0)
		ret = creds_assume(&who);
	if (ret) {
		req_identity_leave(id);
		return ret;
	}
	id->switched = true;
	return 0;
}

bool req_identity_widen(fuse_req_t req, struct req_identity *id, int err)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct creds who = {.uid = ctx->uid, .gid = ctx->gid};

	if (!id->without_groups || (err != EACCES && err != EPERM))
		return false;
	creds_restore();
	id->switched = false;
	id->without_groups = false;
	if (identity_groups(req, id, &who) != 0 || creds_assume(&who) != 0) {
		/* err stands; nothing more may be done for the caller */
		id->lost = true;
		return false;
	}
	id->switched = true;
	return true;
}

bool req_identity_still_alike(fuse_req_t req, struct req_identity *id, int fd)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct timespec now;

	if (!id->without_groups ||
	    groupfree_as_owner_or_group(fd, ctx->uid, ctx->gid))
		return true;
	/* judged as other: alike only if no chmod or ACL came between */
	return groupfree_judged(fd, ctx->uid, ctx->gid, &now) &&
	       now.tv_sec == id->judged_ctime.tv_sec &&
	       now.tv_nsec == id->judged_ctime.tv_nsec;
}

int req_check_access(fuse_req_t req, struct inode *inode, int mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct creds who = {.uid = ctx->uid, .gid = ctx->gid};
	struct req_identity id = {0};
	int ret = 0;

	if (creds_need_switch(ctx->uid, ctx->gid))
		ret = identity_groups(req, &id, &who);
	if (ret == 0)
		ret = inode_pin(req_fs(req)->itab, inode);
	if (ret == 0) {
		ret = creds_access(inode_fd(inode), mode, &who);
		inode_unpin(inode);
	}
	if (id.groups && id.groups != id.small_groups)
		free(id.groups);
	return ret;
}

bool req_writer_enter(fuse_req_t req, int fd)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct creds who = {.uid = ctx->uid, .gid = ctx->gid, .ngroups = 0};
	struct stat st;

	/*
	 * Pages written back from a shared mapping come without credentials
	 * (pid 0, uid 0): charge them to the file's owner, whose file it is.
	 */
	if (ctx->pid == 0 && ctx->uid == 0 && fstat(fd, &st) == 0) {
		who.uid = st.st_uid;
		who.gid = st.st_gid;
	}
	return creds_need_switch(who.uid, who.gid) && creds_assume(&who) == 0;
}

void req_writer_leave(bool switched)
{
	if (switched)
		creds_restore();
}

int req_identity_enter(fuse_req_t req, struct req_identity *id)
{
	return identity_enter(req, id, false, NULL, 0, false);
}

int req_identity_enter_umask(fuse_req_t req, struct req_identity *id)
{
	return identity_enter(req, id, true, NULL, 0, false);
}

int req_identity_enter_on(fuse_req_t req, struct req_identity *id,
			  const int *fds, size_t nfds)
{
	return identity_enter(req, id, false, fds, nfds, false);
}

int req_identity_enter_umask_on(fuse_req_t req, struct req_identity *id,
				const int *fds, size_t nfds)
{
	return identity_enter(req, id, true, fds, nfds, false);
}

int req_identity_enter_opening(fuse_req_t req, struct req_identity *id, int fd)
{
	return identity_enter(req, id, false, &fd, 1, true);
}

void req_identity_leave(struct req_identity *id)
{
	if (id->switched)
		creds_restore();
	id->switched = false;
	if (id->groups != id->small_groups)
		free(id->groups);
	id->groups = NULL;
}

void fs_entry_fill(struct clamfs_fs *fs, struct inode *inode,
		   const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = inode_nodeid(fs, inode);
	e->generation = inode_generation(inode);
	e->attr = *st;
	e->attr_timeout = watch_attr_timeout(fs, st->st_dev);
	e->entry_timeout = watch_entry_timeout(fs, st->st_dev);
}

int fs_lookup_entry(struct clamfs_fs *fs, struct inode *parent,
		    const char *name, struct fuse_entry_param *e)
{
	struct inode *inode;
	struct stat st;
	int fd, ret;

	/*
	 * A known inode needs one fstatat, no open, while the table holds
	 * its O_PATH fd: that pins its identity, (dev, ino) cannot be reused.
	 * A parked one is opened by name and its handle compared.
	 */
	if (fstatat(inode_fd(parent), name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return -errno;
	inode = itab_find_held_ref(fs->itab, st.st_dev, st.st_ino);
	if (inode) {
		fs_entry_fill(fs, inode, &st, e);
		return 0;
	}
	fd = openat(inode_fd(parent), name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	/* the name may have been replaced since the fstatat: trust the fd */
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = itab_insert_ref(fs->itab, fd, &st, &inode);
	if (ret)
		return ret;
	fs_entry_fill(fs, inode, &st, e);
	return 0;
}

int fs_entry_from_fd(struct clamfs_fs *fs, int fd, struct fuse_entry_param *e)
{
	char path[PROC_FD_PATH_MAX];
	struct inode *inode;
	struct stat st;
	int pfd, ret;

	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return -errno;
	inode = itab_find_held_ref(fs->itab, st.st_dev, st.st_ino);
	if (inode) {
		fs_entry_fill(fs, inode, &st, e);
		return 0;
	}
	/*
	 * Reopen the very object as O_PATH: no name, so no race. Following
	 * the magic link is the point, hence no O_NOFOLLOW.
	 */
	proc_fd_path(path, fd);
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd == -1)
		return -errno;
	ret = itab_insert_ref(fs->itab, pfd, &st, &inode);
	if (ret)
		return ret;
	fs_entry_fill(fs, inode, &st, e);
	return 0;
}
