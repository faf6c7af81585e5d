// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Parking: near the fd limit the table closes the O_PATH fd of the least
 * recently pinned file nobody pins, and reopens it by file handle when a
 * request pins it again (inode.h says which inodes, and why a file's
 * identity survives it). An inode's fd changes only under the table lock
 * and its own fd_lock both; pins take the fd_lock alone.
 */
#include "inode_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

bool fds_short_locked(struct inode_table *table)
{
	size_t room;

	if (table->target == SIZE_MAX)
		return false;
	room = table->fds < table->target ? table->target - table->fds : 0;
	/*
	 * Eviction is asynchronous (the kernel's FORGETs come back later):
	 * it starts while there is room for a quick succession of lookups to
	 * go on meanwhile, an eighth of the target plus the margin up to the
	 * cap. Starting at half of it kept a tree of 7,500 files out of the
	 * kernel's caches under a limit of 20,000 descriptors (a 10,000-file
	 * find walked 8 times slower than natively the second time, 1.6 times
	 * with an eighth). A small table is kept as small as it goes.
	 */
	return room < table->target / 8 || room < ITAB_LOW_ROOM;
}

/*
 * Parks the least recently pinned inode nobody pins, other than spare
 * (the one the caller just gave an fd): its fd, to close once the lock
 * is let go, or -1 when none was found. A recent one gets a second chance
 * at the end of the order, unless at_cap (an fd is needed now, or the
 * request fails with EMFILE).
 */
int park_one_locked(struct inode_table *table, bool at_cap,
		    const struct inode *spare)
{
	size_t look = 2 * table->held_count; /* the second chances too */
	bool passed_over = false;	     /* one not pinned, just not now */
	struct inode *in;
	int fd = -1;

	if (look > (at_cap ? PARK_LOOK_AT_CAP : PARK_LOOK_MAX))
		look = at_cap ? PARK_LOOK_AT_CAP : PARK_LOOK_MAX;
	for (; look > 0 && (in = TAILQ_FIRST(&table->held)); look--) {
		TAILQ_REMOVE(&table->held, in, held);
		if (in != spare &&
		    (!atomic_exchange(&in->recent, false) || at_cap)) {
			pthread_spin_lock(&in->fd_lock);
			if (in->pins == 0) {
				fd = in->fd;
				in->fd = -1;
			}
			pthread_spin_unlock(&in->fd_lock);
		} else {
			passed_over = true;
		}
		if (fd >= 0) {
			in->on_held = false;
			table->held_count--;
			table->fds--;
			break;
		}
		TAILQ_INSERT_TAIL(&table->held, in, held);
	}
	/* only pinned ones seen: the table is low until some are unpinned */
	table->park_failed = fd < 0 && !passed_over;
	return fd;
}

/*
 * An fd was just added: when that leaves the table short of fds, one
 * other inode is parked at once, so that a tree of reopenable files never
 * has the kernel evict names. The fd to close after unlocking, or -1.
 */
int park_if_short_locked(struct inode_table *table, const struct inode *spare)
{
	return fds_short_locked(table) ? park_one_locked(table, false, spare)
				       : -1;
}

void held_add_locked(struct inode_table *table, struct inode *inode)
{
	table->fds++;
	if (!inode->parkable)
		return;
	/* just asked for: not the next one parked, even in a tiny table */
	atomic_store(&inode->recent, true);
	TAILQ_INSERT_TAIL(&table->held, inode, held);
	inode->on_held = true;
	table->held_count++;
}

void close_if_open(int fd)
{
	if (fd >= 0)
		close(fd);
}

/*
 * Whether files may be parked: open_by_handle_at needs
 * CAP_DAC_READ_SEARCH, and a filesystem that exports handles. Tried on
 * the root itself.
 */
bool can_reopen(int mount_fd, int root_fd, int *root_mnt_id)
{
	struct nodeid_handle h;
	int fd;

	*root_mnt_id = nodeid_handle_of(root_fd, &h);
	if (mount_fd < 0 || *root_mnt_id < 0)
		return false;
	fd = nodeid_handle_open(mount_fd, &h);
	close_if_open(fd);
	return fd >= 0;
}

/*
 * A parked inode takes the fd a lookup just opened on it by name rather
 * than reopening by handle later: only an fd on the backend root's own
 * mount (parkable), as a reopening would be, not one through a bind of
 * the filesystem with other flags. True when it did (fd is its own now).
 */
bool adopt_fd_locked(struct inode_table *table, struct inode *in, int fd)
{
	bool adopted = false;

	if (!in->parkable)
		return false;
	pthread_spin_lock(&in->fd_lock);
	if (in->fd < 0) {
		in->fd = fd;
		adopted = true;
	}
	pthread_spin_unlock(&in->fd_lock);
	if (adopted)
		held_add_locked(table, in);
	return adopted;
}

/*
 * Handles are opened through the backend root's mount: only a file on
 * that very mount comes back as it was. Another mount of the filesystem
 * inside the backend (a read-only bind, nosuid, an idmapped mount) has
 * the same st_dev, and its file reopened so would lose what that mount
 * imposes.
 */
bool parkable_in(struct inode_table *table, const struct inode *in, int mnt_id)
{
	return table->can_reopen && in->type != S_IFDIR &&
	       in->dev == table->root_dev && mnt_id == table->root_mnt_id &&
	       in->handle.len > 0;
}

size_t itab_park_idle(struct inode_table *table, size_t n)
{
	int fds[PARK_LOOK_MAX];
	size_t parked = 0, got;

	do {
		got = 0;
		pthread_mutex_lock(&table->lock);
		while (got < PARK_LOOK_MAX && parked + got < n &&
		       fds_short_locked(table)) {
			int fd = park_one_locked(table, false, NULL);

			if (fd < 0)
				break;
			fds[got++] = fd;
		}
		if (got && table->fds < table->max)
			pthread_cond_broadcast(&table->room);
		pthread_mutex_unlock(&table->lock);
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		parked += got;
	} while (got == PARK_LOOK_MAX);
	return parked;
}

int inode_fd(const struct inode *inode)
{
	struct inode *in = (struct inode *)inode; /* the lock, not the fd */
	int fd;

	if (!in->parkable)
		return in->fd;
	pthread_spin_lock(&in->fd_lock);
	fd = in->pins ? in->fd : -EBADF;
	pthread_spin_unlock(&in->fd_lock);
	return fd;
}

static int reopen_by_handle(struct inode_table *table, struct inode *inode)
{
	struct stat st;
	int fd = nodeid_handle_open(table->mount_fd, &inode->handle);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) == -1 || st.st_dev != inode->dev ||
	    st.st_ino != inode->ino || (st.st_mode & S_IFMT) != inode->type) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/*
 * Installs fd (a reopening of the parked inode) unless another pin did
 * first; the inode is pinned. 0 (fd taken or closed), or -EMFILE at the
 * cap with nothing to park (fd closed).
 */
static int install_reopened(struct inode_table *table, struct inode *inode,
			    int fd)
{
	int parked = -1, parked_too = -1, ret = 0;

	pthread_mutex_lock(&table->lock);
	/* under the table lock nobody else installs or parks it */
	if (inode->fd < 0 && table->fds >= table->max)
		parked = park_one_locked(table, true, NULL);
	if (inode->fd < 0 && table->fds < table->max) {
		pthread_spin_lock(&inode->fd_lock);
		inode->fd = fd;
		pthread_spin_unlock(&inode->fd_lock);
		held_add_locked(table, inode);
		table->reopens++;
		parked_too = park_if_short_locked(table, inode);
		fd = -1;
	} else if (inode->fd < 0) {
		ret = -EMFILE; /* nothing to park: the kernel must forget */
		pthread_cond_signal(&table->low);
	}
	pthread_mutex_unlock(&table->lock);
	close_if_open(parked);
	close_if_open(parked_too);
	close_if_open(fd); /* not needed: another pin reopened it first */
	return ret;
}

static int pin_locked_fd(struct inode *inode)
{
	int fd;

	pthread_spin_lock(&inode->fd_lock);
	inode->pins++;
	fd = inode->fd;
	pthread_spin_unlock(&inode->fd_lock);
	if (inode->parkable)
		atomic_store(&inode->recent, true);
	return fd;
}

int inode_pin(struct inode_table *table, struct inode *inode)
{
	int fd = pin_locked_fd(inode), ret;

	if (fd >= 0 || !inode->parkable)
		return 0;
	fd = reopen_by_handle(table, inode);
	ret = fd < 0 ? fd : install_reopened(table, inode, fd);
	if (ret)
		inode_unpin(inode);
	return ret;
}

void inode_pin_open(struct inode_table *table, struct inode *inode, int file_fd)
{
	char path[32];
	int fd = pin_locked_fd(inode);

	if (fd >= 0 || !inode->parkable)
		return;
	/* the open file is the very object: no handle, no capability */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file_fd);
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		install_reopened(table, inode, fd);
}

void inode_unpin(struct inode *inode)
{
	pthread_spin_lock(&inode->fd_lock);
	inode->pins--;
	pthread_spin_unlock(&inode->fd_lock);
}

uint64_t itab_reopens(struct inode_table *table)
{
	uint64_t n;

	pthread_mutex_lock(&table->lock);
	n = table->reopens;
	pthread_mutex_unlock(&table->lock);
	return n;
}

size_t itab_fds(struct inode_table *table)
{
	size_t n;

	pthread_mutex_lock(&table->lock);
	n = table->fds;
	pthread_mutex_unlock(&table->lock);
	return n;
}
