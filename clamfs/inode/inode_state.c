// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What an inode carries besides its identity: its ids and type, the
 * content stamp of its last open, its writers and writes through the
 * mount, and the I/O mode its open files share.
 */
#include "inode_impl.h"

uint64_t inode_id(const struct inode *inode)
{
	return inode->id;
}

uint64_t inode_hand_out(struct inode *inode)
{
	atomic_store(&inode->handed_out, true);
	return inode->id;
}

uint32_t inode_generation(const struct inode *inode)
{
	return inode->generation;
}

dev_t inode_dev(const struct inode *inode)
{
	return inode->dev;
}

ino_t inode_ino(const struct inode *inode)
{
	return inode->ino;
}

mode_t inode_type(const struct inode *inode)
{
	return inode->type;
}

static bool ts_equal(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

bool inode_stamp_unchanged(struct inode *inode, const struct stat *st,
			   bool trusted)
{
	bool same;

	pthread_mutex_lock(&inode->stamp_lock);
	same = inode->stamp_valid && inode->stamp_size == st->st_size &&
	       ts_equal(&inode->stamp_mtime, &st->st_mtim) &&
	       ts_equal(&inode->stamp_ctime, &st->st_ctim);
	inode->stamp_valid = trusted;
	inode->stamp_size = st->st_size;
	inode->stamp_mtime = st->st_mtim;
	inode->stamp_ctime = st->st_ctim;
	pthread_mutex_unlock(&inode->stamp_lock);
	return same;
}

bool inode_stamp_still(struct inode *inode, const struct stat *st)
{
	bool same;

	pthread_mutex_lock(&inode->stamp_lock);
	same = inode->stamp_valid && inode->stamp_size == st->st_size &&
	       ts_equal(&inode->stamp_mtime, &st->st_mtim) &&
	       ts_equal(&inode->stamp_ctime, &st->st_ctim);
	pthread_mutex_unlock(&inode->stamp_lock);
	return same;
}

int inode_writers_add(struct inode *inode, int delta)
{
	return atomic_fetch_add(&inode->writers, delta) + delta;
}

int inode_writers(const struct inode *inode)
{
	return atomic_load(&((struct inode *)inode)->writers);
}

void inode_note_write(struct inode *inode)
{
	atomic_fetch_add(&inode->write_seq, 1);
}

uint64_t inode_write_seq(const struct inode *inode)
{
	return atomic_load(&((struct inode *)inode)->write_seq);
}

int inode_io_join(struct inode *inode, int (*attach)(void *arg), void *arg)
{
	int id;

	pthread_mutex_lock(&inode->io_lock);
	if (inode->io_opens == 0)
		inode->io_backing_id = attach(arg);
	inode->io_opens++;
	id = inode->io_backing_id;
	pthread_mutex_unlock(&inode->io_lock);
	return id;
}

int inode_io_leave(struct inode *inode)
{
	int id = 0;

	pthread_mutex_lock(&inode->io_lock);
	if (inode->io_opens > 0 && --inode->io_opens == 0) {
		id = inode->io_backing_id;
		inode->io_backing_id = 0;
	}
	pthread_mutex_unlock(&inode->io_lock);
	return id;
}
