// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Kernel FUSE passthrough. Everything that needs libfuse >= 3.17 is inside
 * CLAMFS_HAVE_PASSTHROUGH; without it every open does I/O through the
 * daemon, and the per-inode bookkeeping still runs so both builds take
 * the same paths.
 */
#include "passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"
#include "log.h"

#ifdef FUSE_CAP_PASSTHROUGH
#define CLAMFS_HAVE_PASSTHROUGH 1
#include <linux/fuse.h>
#include <sys/ioctl.h>
#endif

bool passthrough_compiled(void)
{
#ifdef CLAMFS_HAVE_PASSTHROUGH
	return true;
#else
	return false;
#endif
}

/* Registering a backing file needs CAP_SYS_ADMIN (the daemon as root). */
static bool may_register(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	return syscall(SYS_capget, &hdr, data) == 0 &&
	       (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
		CAP_TO_MASK(CAP_SYS_ADMIN));
}

/* A backing file on overlayfs is one stacking level too deep. */
static bool backend_stacked(struct clamfs_fs *fs)
{
	struct statfs sf;

	return fstatfs(inode_fd(itab_root(fs->itab)), &sf) == 0 &&
	       sf.f_type == OVERLAYFS_SUPER_MAGIC;
}

#define PT_OFF(name, word, why)                                                \
	static const struct stats_passthrough name = {                         \
		.on = false, .reason = word, .text = "off (" why ")"}

static const struct stats_passthrough pt_on = {
	.on = true, .reason = "none", .text = "on"};
PT_OFF(pt_option, "option", "passthrough=off");
PT_OFF(pt_libfuse, "libfuse", "built with libfuse < 3.17");
PT_OFF(pt_not_root, "not-root", "no CAP_SYS_ADMIN: not run as root");
PT_OFF(pt_overlayfs, "overlayfs", "the backend is on overlayfs");
PT_OFF(pt_kernel, "kernel", "the kernel does not offer it");

void passthrough_negotiate(struct clamfs_fs *fs, struct fuse_conn_info *conn)
{
	const struct stats_passthrough *state;

	fs->passthrough = false;
	if (!fs->passthrough_wanted) {
		state = &pt_option;
	} else if (!passthrough_compiled()) {
		state = &pt_libfuse;
	} else if (!may_register()) {
		state = &pt_not_root;
	} else if (backend_stacked(fs)) {
		state = &pt_overlayfs;
	} else {
#ifdef CLAMFS_HAVE_PASSTHROUGH
		if (conn->capable & FUSE_CAP_PASSTHROUGH) {
			conn->want |= FUSE_CAP_PASSTHROUGH;
			fs->passthrough = true;
		}
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
		/*
		 * Otherwise the kernel asks the daemon for security.capability
		 * before every write(), passthrough or not (measured: 100 per
		 * 100 writes; 1 with this). Set-id bits and capabilities are
		 * then cleared by the backend itself: passthrough writes carry
		 * credentials without CAP_FSETID (attach_as_backing), and the
		 * daemon writes, truncates, chowns and opens with O_TRUNC as
		 * the caller. Not without passthrough: a root caller lacking
		 * CAP_FSETID would keep set-id bits on a daemon write.
		 */
		if (fs->passthrough)
			conn->want |=
				FUSE_CAP_HANDLE_KILLPRIV_V2 & conn->capable;
#endif
#endif
		state = fs->passthrough ? &pt_on : &pt_kernel;
	}
	(void)conn;
	stats_set_passthrough(&fs->stats, state);
	log_info("passthrough %s", state->text);
}

#ifdef CLAMFS_HAVE_PASSTHROUGH
struct attach_ctx {
	struct clamfs_fs *fs;
	fuse_req_t req;
	int fd;
};

/* The kernel's overflowuid/gid: nobody's, and never the root reserve's. */
#define OVERFLOW_ID 65534

static int caps_get(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};

	return syscall(SYS_capget, &hdr, data) == -1 ? -errno : 0;
}

static int caps_set(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};

	return syscall(SYS_capset, &hdr, data) == -1 ? -errno : 0;
}

static void cap_put(struct __user_cap_data_struct data[2], int cap, bool on)
{
	uint32_t bit = CAP_TO_MASK(cap);
	struct __user_cap_data_struct *d = &data[CAP_TO_INDEX(cap)];

	if (on)
		d->effective |= bit & d->permitted;
	else
		d->effective &= ~bit;
}

/*
 * The kernel does every later read and write of the backing file with the
 * credentials of the thread that registers it, so they are chosen here:
 * - no CAP_FSETID: a write clears setuid and setgid bits (and file
 *   capabilities) as it does natively for anyone but root;
 * - the fsuid of the file's owner, or the overflow uid for root's files,
 *   never root's: ext4 grants its reserved blocks to fsuid 0, and a user
 *   must not fill them through the mount (whoever opened first, all later
 *   opens of the inode share these credentials);
 * - DAC override kept: the opener's rights were checked when it opened,
 *   and each later open of the inode reopens the backing file with these
 *   credentials, whoever the opener is.
 * (The daemon runs without CAP_SYS_RESOURCE already: quotas hold.)
 */
static int attach_as_backing(void *arg)
{
	struct attach_ctx *c = arg;
	struct __user_cap_data_struct saved[2], caps[2];
	struct creds who = {.ngroups = 0};
	bool switched = false;
	struct stat st;
	int id = 0;

	if (fstat(c->fd, &st) == -1)
		return 0;
	who.uid = st.st_uid ? st.st_uid : OVERFLOW_ID;
	who.gid = st.st_uid ? st.st_gid : OVERFLOW_ID;
	/* always a switch: creds_restore then raises every fs cap again */
	if (!creds_need_switch(who.uid, who.gid) || creds_assume(&who) != 0)
		return 0;
	switched = true;
	if (caps_get(saved) != 0)
		goto out;
	memcpy(caps, saved, sizeof(caps));
	cap_put(caps, CAP_FSETID, false);
	cap_put(caps, CAP_DAC_OVERRIDE, true);
	cap_put(caps, CAP_DAC_READ_SEARCH, true);
	if (caps_set(caps) != 0)
		goto out;
	id = fuse_passthrough_open(c->req, c->fd);
	caps_set(saved);
out:
	if (switched)
		creds_restore();
	if (id <= 0) {
		static struct log_limit limit;
		unsigned long held_back;

		stats_inc(&c->fs->stats, STAT_PASSTHROUGH_FAILED);
		if (log_limit_pass(&limit, &held_back))
			log_warn("passthrough refused by the kernel for an "
				 "open: its I/O goes through the daemon "
				 "suppressed_before=%lu",
				 held_back);
		return 0;
	}
	return id;
}

/*
 * libfuse's fuse_passthrough_close needs a live request, which a failed
 * reply no longer has: the ioctl it wraps takes the connection's fd.
 */
static void backing_close(struct clamfs_fs *fs, int id)
{
	uint32_t backing_id = (uint32_t)id;

	if (ioctl(fuse_session_fd(fs->se), FUSE_DEV_IOC_BACKING_CLOSE,
		  &backing_id) == -1)
		log_warn("closing passthrough backing id %d: %s", id,
			 strerror(errno));
}
#endif

static int attach_none(void *arg)
{
	(void)arg;
	return 0;
}

void passthrough_open(struct clamfs_fs *fs, fuse_req_t req, struct inode *inode,
		      int fd, struct fuse_file_info *fi)
{
#ifdef CLAMFS_HAVE_PASSTHROUGH
	struct attach_ctx c = {fs, req, fd};
	int id;

	inode_pin_open(fs->itab, inode, fd);
	id = inode_io_join(
		inode, fs->passthrough ? attach_as_backing : attach_none, &c);
	fi->backing_id = id;
	if (id > 0) {
		/* the kernel refuses page cache flags with passthrough */
		fi->keep_cache = 0;
		stats_inc(&fs->stats, STAT_PASSTHROUGH_OPENS);
	}
#else
	(void)req, (void)fi;
	inode_pin_open(fs->itab, inode, fd);
	inode_io_join(inode, attach_none, NULL);
#endif
}

void passthrough_release(struct clamfs_fs *fs, struct inode *inode)
{
	int id = inode_io_leave(inode);

	inode_unpin(inode);

#ifdef CLAMFS_HAVE_PASSTHROUGH
	if (id > 0)
		backing_close(fs, id);
#else
	(void)fs, (void)id;
#endif
}
