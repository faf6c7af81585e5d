// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Timestamp granularity per backend device (tsgrain.h): a small table,
 * filled as files are stamped.
 */
#include "tsgrain.h"

#include <linux/magic.h>
#include <pthread.h>
#include <string.h>
#include <sys/vfs.h>

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#ifndef BCACHEFS_SUPER_MAGIC
#define BCACHEFS_SUPER_MAGIC 0xca451a4e
#endif

/*
 * Devices a daemon meets: the backend and mounts below it. Beyond this
 * many, the rest keep the coarse window.
 */
#define TSGRAIN_DEVICES 64

struct device {
	dev_t dev;
	long f_type;
};

static struct {
	pthread_mutex_t lock;
	unsigned int n;
	struct device d[TSGRAIN_DEVICES];
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool tsgrain_type_may_be_fine(long f_type)
{
	switch ((unsigned long)f_type) {
	/* ext2 and ext3 share the magic; 128-byte inodes keep seconds */
	case EXT4_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case F2FS_SUPER_MAGIC:
	case BCACHEFS_SUPER_MAGIC:
		return true;
	default:
		/* network, FUSE, stacked and FAT-like: another clock or tick */
		return false;
	}
}

bool tsgrain_type_sees_mapped_stores(long f_type)
{
	switch ((unsigned long)f_type) {
	/*
	 * shmem and hugetlbfs ask for no write notification: once a page is
	 * mapped writable (a read fault may do it), stores move no stamp.
	 * overlayfs maps its upper file, which may be one of them.
	 */
	case TMPFS_MAGIC:
	case HUGETLBFS_MAGIC:
	case RAMFS_MAGIC:
	case OVERLAYFS_SUPER_MAGIC:
		return false;
	default:
		return true;
	}
}

bool tsgrain_stamp_is_fine(const struct stat *st)
{
	/*
	 * Per stamp, not per device: an ext4 inode too small for the extra
	 * fields keeps whole seconds on a filesystem whose other inodes keep
	 * nanoseconds. A fine stamp ending in exactly 0 ns only costs a scan.
	 */
	return st->st_ctim.tv_nsec != 0;
}

static struct device *find(dev_t dev)
{
	for (unsigned int i = 0; i < table.n; i++)
		if (table.d[i].dev == dev)
			return &table.d[i];
	return NULL;
}

/* Not learnt yet. */
#define TYPE_UNKNOWN (-2)

void tsgrain_hold_device(dev_t dev)
{
	pthread_mutex_lock(&table.lock);
	if (!find(dev) && table.n < TSGRAIN_DEVICES)
		table.d[table.n++] = (struct device){dev, TYPE_UNKNOWN};
	pthread_mutex_unlock(&table.lock);
}

/*
 * Only held devices are remembered: any other device number may be
 * another filesystem's by the next call (a removed btrfs subvolume's,
 * given to a mount made since), so it is asked each time.
 */
static long device_type(int fd, dev_t dev)
{
	bool held = false;
	struct device *d;
	struct statfs sf;
	long type = -1;

	pthread_mutex_lock(&table.lock);
	d = find(dev);
	if (d) {
		held = true;
		type = d->f_type == TYPE_UNKNOWN ? -1 : d->f_type;
	}
	pthread_mutex_unlock(&table.lock);
	if (type != -1)
		return type;
	if (fstatfs(fd, &sf) == 0)
		type = sf.f_type;
	if (held && type != -1) {
		pthread_mutex_lock(&table.lock);
		d = find(dev);
		if (d)
			d->f_type = type;
		pthread_mutex_unlock(&table.lock);
	}
	return type;
}

bool tsgrain_sees_mapped_stores(int fd, dev_t dev)
{
	long type = device_type(fd, dev);

	return type != -1 && tsgrain_type_sees_mapped_stores(type);
}

int64_t tsgrain_window_ns(int fd, const struct stat *st, int64_t coarse_ns)
{
	if (coarse_ns <= TSGRAIN_FINE_WINDOW_NS || !tsgrain_stamp_is_fine(st))
		return coarse_ns;
	return tsgrain_type_may_be_fine(device_type(fd, st->st_dev))
		       ? TSGRAIN_FINE_WINDOW_NS
		       : coarse_ns;
}

bool tsgrain_stamp_trusted(int fd, const struct stat *st)
{
	return tsgrain_stamp_is_fine(st) &&
	       tsgrain_type_may_be_fine(device_type(fd, st->st_dev));
}

void tsgrain_reset(void)
{
	pthread_mutex_lock(&table.lock);
	table.n = 0;
	memset(table.d, 0, sizeof(table.d));
	pthread_mutex_unlock(&table.lock);
}
