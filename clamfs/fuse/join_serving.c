// SPDX-License-Identifier: GPL-2.0-or-later
#include "join_serving.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <time.h>

#include "log.h"
#include "mountpoint.h"

/* How often join_serving looks for requests while waiting for the thread. */
#define JOIN_POLL_MS 50
/* After this long, join_serving aborts the connection (see there). */
#define JOIN_ABORT_MS 2000

/*
 * After the FUSE loop, requests the kernel queued are read by nobody, and
 * a notification in flight may wait for a directory lock that such a
 * request holds (a lookup): serve requests here until the thread is done.
 * They are answered as usual, so the scanner threads must still run. An
 * exited session drops what it reads: the caller resets it first.
 */
static void serve_one(struct fuse_session *se)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
	struct fuse_buf buf = {0};

	if (poll(&pfd, 1, JOIN_POLL_MS) != 1)
		return;
	if (fuse_session_receive_buf(se, &buf) > 0)
		fuse_session_process_buf(se, &buf);
	free(buf.mem);
}

/* Whether our mount (mnt_id) is still the one on top at mountpoint. */
static bool ours(const char *mountpoint, unsigned long long mnt_id)
{
	unsigned long long id;

	return mnt_id &&
	       mountpoint_top_id(MOUNTINFO_SELF, mountpoint, &id) == 1 &&
	       id == mnt_id;
}

void join_serving(struct clamfs_fs *fs, pthread_t thread,
		  const char *mountpoint, unsigned long long mnt_id,
		  const char *who)
{
	struct fuse_session *se = fs->se;
	bool reset = false, aborted = false, busy = false;
	unsigned int waited = 0;
	struct timespec until;

	for (;;) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += JOIN_POLL_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(thread, NULL, &until) == 0)
			break;
		if (!reset && fuse_session_exited(se)) {
			fuse_session_reset(se);
			reset = true;
		}
		serve_one(se);
		/*
		 * libfuse's workers drop a request they read as the loop
		 * ends: its caller keeps the directory locked, and only an
		 * aborted connection lets the notification (and the caller)
		 * return. A forced unmount aborts it; we are stopping anyway.
		 */
		waited += 2 * JOIN_POLL_MS;
		if (waited >= JOIN_ABORT_MS && !aborted &&
		    ours(mountpoint, mnt_id)) {
			log_warn("%s stuck on a dropped request: aborting the "
				 "connection to %s",
				 who, mountpoint);
			busy = umount2(mountpoint,
				       MNT_FORCE | UMOUNT_NOFOLLOW) == -1 &&
			       errno == EBUSY;
			aborted = true;
		}
	}
	/*
	 * libfuse does not unmount a connection it finds aborted. Only when
	 * the forced unmount found the mount busy is it still ours on top.
	 */
	if (busy && ours(mountpoint, mnt_id))
		umount2(mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW);
	if (reset)
		fuse_session_exit(se);
}
