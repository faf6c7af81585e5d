// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The write-back a stopping daemon still owes (drain.h). A thread asks the
 * kernel for it (syncfs) while this one answers the requests it brings.
 */
#include "drain.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "log.h"
#include "mountpoint.h"
#include "open.h"

/*
 * With nothing to answer for this long while the kernel still waits, it
 * waits for a request nobody will answer.
 */
#define DRAIN_STUCK_MS 3000

struct syncer {
	const char *mnt;
	unsigned long long mnt_id;
	atomic_bool done;
};

/*
 * Thread: syncfs of the mount, if mnt still is it (its open and the
 * write-back are requests the caller answers).
 */
static void *sync_mount(void *arg)
{
	struct syncer *s = arg;
	unsigned long long id;
	int fd;

	if (mountpoint_top_id(MOUNTINFO_SELF, s->mnt, &id) != 1 ||
	    id != s->mnt_id)
		goto out;
	fd = open(s->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		goto out;
	if (syncfs(fd) == -1)
		log_warn("writing back the page cache at stop: %s",
			 strerror(errno));
	close(fd);
out:
	atomic_store(&s->done, true);
	return NULL;
}

/* What serve_one did. */
enum served { SERVED_ONE, SERVED_NONE, SERVED_GONE };

/* Answers one request if one comes within 100 ms. */
static enum served serve_one(struct fuse_session *se, struct fuse_buf *buf)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
	int res;

	if (poll(&pfd, 1, 100) <= 0)
		return SERVED_NONE;
	res = fuse_session_receive_buf(se, buf);
	if (res == -EINTR)
		return SERVED_NONE;
	if (res <= 0)
		return SERVED_GONE;
	fuse_session_process_buf(se, buf);
	return SERVED_ONE;
}

/*
 * libfuse's workers drop the requests they read once the loop is told to
 * end (a write-back among them), and the kernel waits for their answers
 * for ever. Aborting the connection (a forced unmount) ends those waits;
 * what the dropped writes carried is lost, as it was already.
 */
static void abort_connection(const char *mnt, unsigned long long mnt_id)
{
	unsigned long long id;

	log_warn("stop: the kernel waits for requests the FUSE workers "
		 "dropped at exit; aborting the connection");
	if (mountpoint_top_id(MOUNTINFO_SELF, mnt, &id) == 1 && id == mnt_id)
		umount2(mnt, MNT_FORCE);
}

void drain_after_loop(struct clamfs_fs *fs, const char *mnt,
		      unsigned long long mnt_id)
{
	struct syncer s = {.mnt = mnt, .mnt_id = mnt_id};
	struct fuse_buf buf = {.mem = NULL};
	bool syncing = mnt_id != 0;
	unsigned int idle_ms = 0;
	pthread_t tid;

	gate_stop_writebacks(fs);
	if (syncing && pthread_create(&tid, NULL, sync_mount, &s) != 0) {
		log_warn("cannot write back the page cache at stop: no thread");
		syncing = false;
	}
	while ((syncing && !atomic_load(&s.done)) ||
	       gate_writebacks_waited(fs)) {
		enum served r = serve_one(fs->se, &buf);

		if (r == SERVED_GONE)
			break;
		idle_ms = r == SERVED_ONE ? 0 : idle_ms + 100;
		if (idle_ms == DRAIN_STUCK_MS && mnt_id)
			abort_connection(mnt, mnt_id);
	}
	if (syncing)
		pthread_join(tid, NULL);
	free(buf.mem);
}
