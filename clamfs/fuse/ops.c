// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Session setup (capability negotiation), statfs, and the request table.
 */
#include "fs.h"

#include <errno.h>
#include <sys/statvfs.h>

#include "log.h"
#include "ops.h"
#include "passthrough.h"
#include "request.h"

/*
 * The kernel's write-back cache batches small writes where passthrough
 * cannot carry them (Linux < 6.9, libfuse < 3.17). Written data then sits
 * in the kernel until written back, unseen by the backend and a scanner:
 * the gate has it written back before it scans for another open
 * (gate_request.c), and every writer's close writes it back before its
 * release.
 * With passthrough, writes reach the backend at once anyway.
 */
static void writeback_negotiate(struct clamfs_fs *fs,
				struct fuse_conn_info *conn)
{
	const char *why = NULL;

	fs->writeback = false;
	if (!fs->writeback_wanted)
		goto out;
	if (fs->passthrough)
		why = "passthrough writes to the backend directly";
	else if (!fs->default_permissions)
		why = "no_default_permissions: the daemon would set file times "
		      "the kernel did not check";
	else if (!(conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		why = "the kernel does not offer it";
	else {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		fs->writeback = true;
	}
	if (why && !fs->passthrough)
		log_warn("writeback_cache off (%s)", why);
	else if (why)
		log_info("writeback_cache off (%s)", why);
	else
		log_info("writeback_cache on");
out:
	stats_set_writeback_cache(&fs->stats, fs->writeback);
}

void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct clamfs_fs *fs = userdata;
	/*
	 * No FUSE_CAP_FLOCK_LOCKS: a blocking flock() would hold a worker
	 * thread, uninterruptibly, until the lock is free; enough waiters
	 * and the whole mount hangs. The kernel then keeps flock locks
	 * itself, between the mount's users, like POSIX locks.
	 */
	unsigned int want = FUSE_CAP_SPLICE_WRITE | FUSE_CAP_AUTO_INVAL_DATA |
			    FUSE_CAP_DONT_MASK | FUSE_CAP_READDIRPLUS |
			    FUSE_CAP_PARALLEL_DIROPS;

	/*
	 * Export support: the kernel may then look up "." in node ids from
	 * NFS file handles (after it evicted the inode, or after a remount)
	 * and ".." in directories, so that a kernel NFS server can export
	 * the mount. Node ids are opaque and checked (inode.h, nodeid.h).
	 */
	want |= FUSE_CAP_EXPORT_SUPPORT;

	/*
	 * With default_permissions the kernel checks access itself; it must
	 * see ACLs for that, or it would refuse what an ACL grants.
	 */
	if (fs->default_permissions)
		want |= FUSE_CAP_POSIX_ACL;
	conn->want |= want & conn->capable;
	/*
	 * Write-back caching only where asked for (writeback_negotiate).
	 * KILLPRIV (v1) stays with the kernel, which clears setuid bits on
	 * write with the writer's rights, not the daemon's; v2 only where
	 * passthrough makes the backend do it (passthrough.c).
	 */
	conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_HANDLE_KILLPRIV);
	/*
	 * Splicing write payloads from /dev/fuse costs more syscalls than it
	 * saves: 4 KiB writes measured 3x slower with it.
	 */
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	conn->time_gran = 1;
	passthrough_negotiate(fs, conn);
	writeback_negotiate(fs, conn);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct inode *inode = req_inode(req, ino);
	struct statvfs sv;
	int ret;

	ret = inode ? inode_pin(req_fs(req)->itab, inode) : -ESTALE;
	if (ret == 0) {
		ret = fstatvfs(inode_fd(inode), &sv) == -1 ? -errno : 0;
		inode_unpin(inode);
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops clamfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.access = op_access,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.copy_file_range = op_copy_file_range,
	.lseek = op_lseek,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
};
