// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Opens and creates through the scan gate (gate_reply.h): the request's
 * opener, groups and interrupts for the gate, its answer as the reply.
 */
#include "gate_reply.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "gate.h"
#include "passthrough.h"
#include "procfd.h"
#include "request.h"

struct fuse_open {
	struct gate_open o; /* first: the gate hands it back */
	fuse_req_t req;
	struct fuse_file_info *fi;
	/* an open decided as a reader: how to open it as asked */
	fuse_ino_t ino;
	struct inode *inode;
	const struct gate_reply_asked *asked;
	const struct fuse_entry_param *created; /* NULL: an open */
	/* kept (the answer comes from a scanner thread): the copies */
	bool kept;
	struct fuse_file_info fi_copy;
	struct fuse_entry_param created_copy;
};

static int opener_groups(struct gate_open *o, gid_t *buf, size_t cap)
{
	fuse_req_t req = ((struct fuse_open *)o)->req;

	stats_inc(&req_fs(req)->stats, STAT_GROUPS_READ);
	return fuse_req_getgroups(req, (int)cap, buf);
}

static int reopen_readonly_as_opener(struct gate_open *o, int fd)
{
	fuse_req_t req = ((struct fuse_open *)o)->req;
	struct req_identity id;
	int ret;

	ret = req_identity_enter_opening(req, &id, fd);
	if (ret)
		return ret;
	for (;;) {
		ret = proc_fd_reopen_readonly(fd, 0);
		if (ret >= 0 && !req_identity_still_alike(req, &id, ret)) {
			close(ret);
			ret = -EACCES;
		}
		if (ret >= 0 || !req_identity_widen(req, &id, -ret))
			break;
	}
	req_identity_leave(&id);
	return ret;
}

static int open_asked(struct gate_open *o)
{
	struct fuse_open *fo = (struct fuse_open *)o;

	return fo->asked->open(fo->req, fo->inode, fo->fi);
}

static struct gate_open *keep(struct gate_open *o)
{
	struct fuse_open *fo = (struct fuse_open *)o;
	struct fuse_open *k;

	if (fo->kept)
		return o;
	k = malloc(sizeof(*k));
	if (!k)
		return NULL;
	*k = *fo;
	k->kept = true;
	/* neither outlives the request handler's call */
	k->fi_copy = *fo->fi;
	k->fi = &k->fi_copy;
	if (fo->created) {
		k->created_copy = *fo->created;
		k->created = &k->created_copy;
	}
	return &k->o;
}

static void interrupted(fuse_req_t req, void *data)
{
	(void)req;
	scanq_interrupt(data);
}

static void on_interrupt(struct gate_open *o, struct scan_waiter *w)
{
	fuse_req_interrupt_func(((struct fuse_open *)o)->req,
				w ? interrupted : NULL, w);
}

static void reply_refused(struct fuse_open *fo, int fd, int err)
{
	fuse_req_t req = fo->req;

	close(fd);
	if (fo->created)
		itab_forget(req_fs(req)->itab, req_inode(req, fo->created->ino),
			    1);
	fuse_reply_err(req, err);
}

static void reply_allowed(struct fuse_open *fo, struct inode *inode, int fd,
			  bool keep_cache)
{
	fuse_req_t req = fo->req;
	struct clamfs_fs *fs = req_fs(req);
	struct fuse_file_info *fi = fo->fi;
	bool writer = gate_may_write(fi->flags);
	bool regular = inode_type(inode) == S_IFREG;
	int ret;

	fi->keep_cache = keep_cache;
	/* nothing to flush on close for a reader; spares a round trip */
	fi->noflush = !writer;
	fi->fh = (uint64_t)fd;
	if (writer) {
		inode_writers_add(inode, 1);
		/*
		 * With passthrough its writes never reach the daemon: a scan
		 * running now must not be cached, even if this writer is
		 * gone by the time the scan ends. Without, its writes are
		 * noted as they come (gate_note_write).
		 */
		if (fs->passthrough)
			inode_note_write(inode);
	}
	if (regular)
		passthrough_open(fs, req, inode, fd, fi);
	ret = fo->created ? fuse_reply_create(req, fo->created, fi)
			  : fuse_reply_open(req, fi);
	/* an interrupted open gets no release: undo what it holds */
	if (ret != 0) {
		if (regular)
			passthrough_release(fs, inode);
		if (writer)
			inode_writers_add(inode, -1);
		close(fd);
		if (fo->created)
			itab_forget(fs->itab, req_inode(req, fo->created->ino),
				    1);
	}
}

static void answer(struct gate_open *o, struct inode *inode, int fd, int err,
		   bool keep_cache)
{
	struct fuse_open *fo = (struct fuse_open *)o;

	if (err)
		reply_refused(fo, fd, err);
	else
		reply_allowed(fo, inode, fd, keep_cache);
	if (fo->kept)
		free(fo);
}

static void open_later(struct gate_open *o, int fd)
{
	struct fuse_open *fo = (struct fuse_open *)o;

	close(fd);
	fo->asked->later(fo->req, fo->ino, fo->fi);
	if (fo->kept)
		free(fo);
}

static const struct gate_open_ops fuse_open_ops = {
	.groups = opener_groups,
	.reopen_readonly = reopen_readonly_as_opener,
	.open_asked = open_asked,
	.keep = keep,
	.on_interrupt = on_interrupt,
	.answer = answer,
	.open_later = open_later,
};

static void open_through_gate(fuse_req_t req, struct inode *inode, int fd,
			      struct fuse_file_info *fi,
			      const struct fuse_entry_param *created,
			      fuse_ino_t ino,
			      const struct gate_reply_asked *asked)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_open fo = {
		.o = {.ops = &fuse_open_ops,
		      .pid = ctx->pid,
		      .uid = ctx->uid,
		      .gid = ctx->gid,
		      .flags = fi->flags,
		      .is_create = created != NULL,
		      .as_reader = asked != NULL},
		.req = req,
		.fi = fi,
		.ino = ino,
		.inode = inode,
		.asked = asked,
		.created = created,
	};

	gate_open(req_fs(req), &fo.o, inode, fd);
}

void gate_reply_open(fuse_req_t req, struct inode *inode, int fd,
		     struct fuse_file_info *fi,
		     const struct fuse_entry_param *created)
{
	open_through_gate(req, inode, fd, fi, created, 0, NULL);
}

void gate_reply_open_as_reader(fuse_req_t req, fuse_ino_t ino,
			       struct inode *inode, int ro_fd,
			       struct fuse_file_info *fi,
			       const struct gate_reply_asked *asked)
{
	open_through_gate(req, inode, ro_fd, fi, NULL, ino, asked);
}

static int inval_inode(struct clamfs_fs *fs, uint64_t nodeid)
{
	return fuse_lowlevel_notify_inval_inode(fs->se, nodeid, 0, 0);
}

static int inval_entry(struct clamfs_fs *fs, uint64_t parent, const char *name,
		       size_t len)
{
	return fuse_lowlevel_notify_inval_entry(fs->se, parent, name, len);
}

const struct fs_kernel_ops gate_reply_kernel = {
	.inval_inode = inval_inode,
	.inval_entry = inval_entry,
};
