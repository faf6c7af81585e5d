// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The fanotify watch. Events come with the directory's handle and the
 * name (FAN_REPORT_DFID_NAME) and the object's own handle (FAN_REPORT_FID):
 * handles, not descriptors, so that watching costs nothing per file and a
 * busy filesystem cannot exhaust our descriptors. A handle is opened
 * (O_PATH) only to learn its device and inode number, which is what the
 * inode table is keyed by.
 */
#include "fanwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define FANWATCH_BUF 65536

#define NAME_EVENTS    (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO)
#define CONTENT_EVENTS (FAN_MODIFY | FAN_CLOSE_WRITE)
#define WATCHED	       (NAME_EVENTS | CONTENT_EVENTS | FAN_ATTRIB | FAN_ONDIR)

struct fanwatch {
	int fd;
	/*
	 * Where handles are opened from, and the mark's object: a real
	 * descriptor of the root (neither call takes an O_PATH one).
	 */
	int root_fd;
	pid_t self;
	/* aligned for the metadata records read into it */
	char buf[FANWATCH_BUF] __attribute__((aligned(8)));
};

/*
 * Local filesystems on which every change is made by this kernel, so that
 * fanotify sees it: not a cluster or network filesystem whose other nodes
 * write behind its back, nor one rolled back under it (ZFS).
 */
static const unsigned long watchable[] = {
	EXT4_SUPER_MAGIC, /* ext2, ext3 too */
	XFS_SUPER_MAGIC,
	BTRFS_SUPER_MAGIC,
	TMPFS_MAGIC,
};

static int check_watchable(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) == -1)
		return -errno;
	for (size_t i = 0; i < sizeof(watchable) / sizeof(watchable[0]); i++)
		if ((unsigned long)sf.f_type == watchable[i])
			return 0;
	return -EOPNOTSUPP;
}

int fanwatch_open(int root_fd, struct fanwatch **out)
{
	struct fanwatch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->self = getpid();
	w->root_fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->root_fd == -1) {
		ret = -errno;
		goto fail;
	}
	ret = check_watchable(w->root_fd);
	if (ret)
		goto fail;
	w->fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK |
				      FAN_REPORT_DFID_NAME | FAN_REPORT_FID,
			      O_RDONLY | O_LARGEFILE);
	if (w->fd == -1) {
		ret = -errno;
		goto fail;
	}
	if (fanotify_mark(w->fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, WATCHED,
			  w->root_fd, NULL) == -1) {
		ret = -errno;
		close(w->fd);
		goto fail;
	}
	*out = w;
	return 0;
fail:
	if (w->root_fd != -1)
		close(w->root_fd);
	free(w);
	return ret;
}

int fanwatch_fd(const struct fanwatch *w)
{
	return w->fd;
}

/* The device and inode number of what handle fh names, if it still is. */
static bool handle_object(struct fanwatch *w, struct file_handle *fh,
			  dev_t *dev, ino_t *ino)
{
	struct stat st;
	int fd = open_by_handle_at(w->root_fd, fh, O_PATH | O_CLOEXEC);
	bool ok;

	if (fd == -1)
		return false; /* gone (ESTALE), or not ours to open */
	ok = fstat(fd, &st) == 0;
	close(fd);
	if (ok) {
		*dev = st.st_dev;
		*ino = st.st_ino;
	}
	return ok;
}

/* The event whose metadata is m, its records from rec on. */
static void one_event(struct fanwatch *w,
		      const struct fanotify_event_metadata *m, const char *rec,
		      void (*each)(void *ctx, const struct fanwatch_event *ev),
		      void *ctx, int *n)
{
	const char *p = rec + m->metadata_len;
	const char *end = rec + m->event_len;
	struct fanwatch_event ev = {0};

	while (p + sizeof(struct fanotify_event_info_header) <= end) {
		const struct fanotify_event_info_fid *info = (const void *)p;
		struct file_handle *fh = (struct file_handle *)info->handle;
		size_t head = sizeof(*info) + sizeof(*fh);
		const char *name;

		if (info->hdr.len < head || p + info->hdr.len > end ||
		    fh->handle_bytes > info->hdr.len - head)
			return; /* malformed: nothing to trust in the rest */
		p += info->hdr.len;
		switch (info->hdr.info_type) {
		case FAN_EVENT_INFO_TYPE_DFID_NAME:
			name = (const char *)fh->f_handle + fh->handle_bytes;
			if (!memchr(name, 0,
				    info->hdr.len - head - fh->handle_bytes))
				return;
			/*
			 * "." is an event on the directory itself, which
			 * comes with no FID record of its own: its mode,
			 * owner or times changed.
			 */
			if (strcmp(name, ".") == 0) {
				if (!(m->mask & FAN_ATTRIB) ||
				    !handle_object(w, fh, &ev.dev, &ev.ino))
					break;
				ev.kind = FANWATCH_ATTR;
				ev.name = NULL;
			} else {
				if (!(m->mask & NAME_EVENTS) ||
				    !handle_object(w, fh, &ev.dev, &ev.ino))
					break;
				ev.kind = FANWATCH_NAME;
				ev.name = name;
			}
			each(ctx, &ev);
			(*n)++;
			break;
		case FAN_EVENT_INFO_TYPE_FID:
			if (!(m->mask & (CONTENT_EVENTS | FAN_ATTRIB)) ||
			    !handle_object(w, fh, &ev.dev, &ev.ino))
				break;
			ev.kind = m->mask & CONTENT_EVENTS ? FANWATCH_CONTENT
							   : FANWATCH_ATTR;
			ev.name = NULL;
			each(ctx, &ev);
			(*n)++;
			break;
		default:
			break;
		}
	}
}

int fanwatch_read(struct fanwatch *w,
		  void (*each)(void *ctx, const struct fanwatch_event *ev),
		  void *ctx)
{
	struct fanotify_event_metadata m;
	ssize_t len, off;
	int n = 0;

	/* one buffer a call: the caller's loop looks at its stop signal */
	for (;;) {
		len = read(w->fd, w->buf, sizeof(w->buf));
		if (len == -1) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? n : -errno;
		}
		/*
		 * Records are aligned to 4 bytes, the metadata's mask to 8:
		 * each is copied out before it is read.
		 */
		for (off = 0; off + (ssize_t)sizeof(m) <= len;
		     off += m.event_len) {
			memcpy(&m, w->buf + off, sizeof(m));
			if (m.vers != FANOTIFY_METADATA_VERSION)
				return -EPROTO;
			if (m.event_len < sizeof(m) ||
			    m.metadata_len < sizeof(m) ||
			    m.metadata_len > m.event_len ||
			    off + (ssize_t)m.event_len > len)
				return -EPROTO;
			if (m.mask & FAN_Q_OVERFLOW) {
				struct fanwatch_event ev = {
					.kind = FANWATCH_OVERFLOW};

				each(ctx, &ev);
				n++;
				continue;
			}
			if (m.pid == w->self)
				continue; /* our own backend calls */
			one_event(w, &m, w->buf + off, each, ctx, &n);
		}
		return n;
	}
}

void fanwatch_close(struct fanwatch *w)
{
	if (!w)
		return;
	close(w->fd);
	close(w->root_fd);
	free(w);
}
