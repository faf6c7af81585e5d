// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mountinfo reader: finds the mount stacked last on a directory; and the
 * mount moves that put a new mount in the place of a dead one without
 * ever uncovering the directory beneath.
 */
#include "mountpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

int mountpoint_each(const char *mountinfo,
		    int (*fn)(const struct mountinfo_entry *m, void *arg),
		    void *arg)
{
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;
	FILE *f;

	f = fopen(mountinfo, "re");
	if (!f)
		return -errno;
	while (ret == 0 && getline(&line, &cap, f) != -1) {
		char *save = NULL, *field[5], *sep, *source, *superopts;
		struct mountinfo_entry m;
		int i;

		/* fields: id parent dev root MOUNTPOINT opts [tags] - TYPE */
		field[0] = strtok_r(line, " ", &save);
		for (i = 1; field[i - 1] && i < 5; i++)
			field[i] = strtok_r(NULL, " ", &save);
		if (!field[i - 1] || sscanf(field[0], "%llu", &m.id) != 1 ||
		    sscanf(field[1], "%llu", &m.parent) != 1)
			continue;
		unescape_octal(field[3]);
		unescape_octal(field[4]);
		sep = strstr(save ? save : "", " - ");
		if (!sep)
			continue;
		m.fstype = strtok_r(sep + 3, " ", &save);
		if (!m.fstype)
			continue;
		/* after the type: the source, then the superblock options */
		source = strtok_r(NULL, " ", &save);
		superopts = source ? strtok_r(NULL, " \n", &save) : NULL;
		m.root = field[3];
		m.dir = field[4];
		m.superopts = superopts ? superopts : "";
		ret = fn(&m, arg);
	}
	free(line);
	fclose(f);
	return ret;
}

struct fstype_query {
	const char *dir;
	char *fstype;
	size_t len;
	bool by_root; /* user_id=0 among the top mount's superblock options */
	unsigned long long id;	   /* the top mount's */
	unsigned long long parent; /* the mount the top one is on */
	int found;
};

bool mountpoint_opts_by_root(const char *superopts)
{
	size_t n = strlen("user_id=0");

	for (const char *o = superopts; (o = strstr(o, "user_id=0")); o += n)
		if ((o == superopts || o[-1] == ',') &&
		    (o[n] == ',' || o[n] == '\0'))
			return true;
	return false;
}

/*
 * The top mount on q->dir: mounts stacked there are each on the one below
 * (parent), so a new one is on top when it is on the current top, and
 * beneath it (MOVE_MOUNT_BENEATH) when the current top is on it; listed
 * in the order they were made, the last is on top otherwise.
 */
static int note_fstype(const struct mountinfo_entry *m, void *arg)
{
	struct fstype_query *q = arg;

	if (strcmp(m->dir, q->dir) != 0)
		return 0;
	if (q->found && q->parent == m->id)
		return 0; /* moved beneath the top one */
	snprintf(q->fstype, q->len, "%s", m->fstype);
	q->by_root = mountpoint_opts_by_root(m->superopts);
	q->id = m->id;
	q->parent = m->parent;
	q->found = 1;
	return 0;
}

int mountpoint_fstype(const char *mountinfo, const char *dir, char *fstype,
		      size_t len)
{
	struct fstype_query q = {dir, fstype, len, false, 0, 0, 0};
	int ret = mountpoint_each(mountinfo, note_fstype, &q);

	return ret < 0 ? ret : q.found;
}

int mountpoint_top_id(const char *mountinfo, const char *dir,
		      unsigned long long *id)
{
	char fstype[64];
	struct fstype_query q = {dir, fstype, sizeof(fstype), false, 0, 0, 0};
	int ret = mountpoint_each(mountinfo, note_fstype, &q);

	if (ret < 0)
		return ret;
	*id = q.id;
	return q.found;
}

static int match_id(const struct mountinfo_entry *m, void *arg)
{
	return m->id == *(const unsigned long long *)arg;
}

int mountpoint_id_listed(const char *mountinfo, unsigned long long id)
{
	return mountpoint_each(mountinfo, match_id, &id);
}

int mountpoint_root_fstype(const char *mountinfo, const char *dir, char *fstype,
			   size_t len)
{
	struct fstype_query q = {dir, fstype, len, false, 0, 0, 0};
	int ret = mountpoint_each(mountinfo, note_fstype, &q);

	if (ret < 0)
		return ret;
	return q.found && q.by_root;
}

/*
 * The absolute name of given without resolving its last component: that
 * is the one a dead FUSE mount makes unresolvable.
 */
static int absolute_unresolved(const char *given, char *out, size_t len)
{
	char dir[PATH_MAX], base[PATH_MAX], *real;
	int n;

	if (snprintf(dir, sizeof(dir), "%s", given) >= (int)sizeof(dir) ||
	    snprintf(base, sizeof(base), "%s", given) >= (int)sizeof(base))
		return -ENAMETOOLONG;
	real = realpath(dirname(dir), NULL);
	if (!real)
		return -errno;
	n = snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "",
		     basename(base));
	free(real);
	return n < (int)len ? 0 : -ENAMETOOLONG;
}

int mountpoint_find_dead(const char *mountinfo, const char *given,
			 const char *fstype, char *dir, size_t len)
{
	struct statfs sfs;
	char top[64];
	int ret;

	ret = absolute_unresolved(given, dir, len);
	if (ret)
		return ret == -ENOTCONN ? 0 : ret;
	/*
	 * Only a mount root made: with user_allow_other, any user can leave
	 * a dead FUSE mount of type fuse.clamfs (fusermount3 -o
	 * subtype=clamfs) where an administrator expects the share.
	 */
	ret = mountpoint_root_fstype(mountinfo, dir, top, sizeof(top));
	if (ret <= 0 || strcmp(top, fstype) != 0)
		return ret < 0 ? ret : 0; /* not ours, or nothing there */
	/* stat may answer from cached attributes; statfs always asks */
	if (statfs(dir, &sfs) == 0 || errno != ENOTCONN)
		return 0;
	return 1;
}

/* The entry of the 0700 stage directory that mounts go on. */
#define STAGE_ENTRY "/m"

int mountpoint_stage(char *dir, size_t len)
{
	static const char *const parents[] = {"/run", "/tmp"};
	int ret = -ENOENT;
	size_t n;

	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]); i++) {
		if (snprintf(dir, len, "%s/clamfs-stage.XXXXXX", parents[i]) >=
		    (int)len)
			return -ENAMETOOLONG;
		if (mkdtemp(dir)) /* 0700: nobody else looks in */
			break;
		ret = -errno;
		dir[0] = '\0';
	}
	if (!dir[0])
		return ret;
	n = strlen(dir);
	if (n + strlen(STAGE_ENTRY) >= len) {
		rmdir(dir);
		return -ENAMETOOLONG;
	}
	/*
	 * A mount cannot be moved away from under a shared mount (systemd
	 * makes / and /run shared): the stage is a private mount of its own.
	 * Nothing is ever mounted on the 0700 directory itself, only on its
	 * entry, so every walk to what is mounted passes its permissions.
	 */
	if (mount(dir, dir, NULL, MS_BIND, NULL) == -1)
		goto fail;
	if (mount(NULL, dir, NULL, MS_PRIVATE, NULL) == -1 ||
	    mkdir(strcat(dir, STAGE_ENTRY), 0700) == -1) {
		ret = -errno;
		dir[n] = '\0';
		umount2(dir, MNT_DETACH);
		rmdir(dir);
		return ret;
	}
	return 0;
fail:
	ret = -errno;
	rmdir(dir);
	return ret;
}

void mountpoint_unstage(const char *dir)
{
	char outer[PATH_MAX];
	size_t n = strlen(dir), m = strlen(STAGE_ENTRY);

	/* whatever is still attached on the entry, then the entry */
	while (umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
	rmdir(dir);
	if (n <= m || n - m >= sizeof(outer) ||
	    strcmp(dir + n - m, STAGE_ENTRY) != 0)
		return;
	memcpy(outer, dir, n - m);
	outer[n - m] = '\0';
	/* the stage's own bind */
	while (umount2(outer, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
	rmdir(outer);
}

/* Dead FUSE mounts stacked on one directory by older kernels, at most. */
#define DEAD_STACK_MAX 16

int mountpoint_open_beneath(const char *dir)
{
	char parent[PATH_MAX], base[PATH_MAX], inside[PATH_MAX], stage[64];
	struct statfs sf;
	int tree, fd = -1, ret, n;

	if (snprintf(parent, sizeof(parent), "%s", dir) >=
		    (int)sizeof(parent) ||
	    snprintf(base, sizeof(base), "%s", dir) >= (int)sizeof(base))
		return -ENAMETOOLONG;
	ret = mountpoint_stage(stage, sizeof(stage));
	if (ret)
		return ret;
	/*
	 * A copy of the mounts from dir's parent down, attached at the
	 * stage: in it the copy of the top mount on dir can go while the
	 * real one stays. Recursive, so that a backend that is a mount of
	 * its own (a filesystem mounted on dir, clamfs over it) is there.
	 */
	tree = open_tree(AT_FDCWD, dirname(parent),
			 OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC);
	if (tree == -1)
		goto fail;
	if (move_mount(tree, "", AT_FDCWD, stage, MOVE_MOUNT_F_EMPTY_PATH) ==
	    -1) {
		ret = -errno;
		close(tree);
		goto out;
	}
	close(tree);
	/*
	 * Copies of shared mounts are peers of the originals: made private
	 * first, or unmounting the copy would unmount the real one too.
	 */
	if (mount(NULL, stage, NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		goto fail;
	if (snprintf(inside, sizeof(inside), "%s/%s", stage, basename(base)) >=
	    (int)sizeof(inside)) {
		ret = -ENAMETOOLONG;
		goto out;
	}
	/*
	 * The dead mount's copy off, and any dead one under it: a kernel
	 * without MOVE_MOUNT_BENEATH stacked each restart's mount on the
	 * dead one, so after a second crash two are there (a dead FUSE
	 * mount answers statfs with ENOTCONN).
	 */
	n = 0;
	do {
		if (umount2(inside, MNT_DETACH | UMOUNT_NOFOLLOW) == -1)
			goto fail;
	} while (++n < DEAD_STACK_MAX && statfs(inside, &sf) == -1 &&
		 errno == ENOTCONN);
	/*
	 * The backend as a tree of its own, its submounts in it: the fd
	 * keeps it alive without a name, so the copies of everything else
	 * under dir's parent (other shares, other FUSE mounts whose daemons
	 * must be able to end) go with the stage.
	 */
	fd = open_tree(AT_FDCWD, inside,
		       OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC);
	if (fd == -1)
		goto fail;
	ret = fd;
	goto out;
fail:
	ret = -errno;
out:
	mountpoint_unstage(stage);
	return ret;
}

#ifndef MOVE_MOUNT_BENEATH
#define MOVE_MOUNT_BENEATH 0x00000200 /* Linux 6.5 */
#endif

int mountpoint_replace(const char *staged, const char *target,
		       unsigned long long dead_id)
{
	unsigned long long top;

	/*
	 * Beneath the dead mount, then the dead one off the top: the
	 * directory under them is never uncovered. A kernel older than 6.5
	 * knows no MOVE_MOUNT_BENEATH (EINVAL): on top of the dead mount
	 * then, which stays under it.
	 */
	if (move_mount(AT_FDCWD, staged, AT_FDCWD, target,
		       MOVE_MOUNT_BENEATH) == 0) {
		/* only the dead mount found at start, never another one */
		if (mountpoint_top_id(MOUNTINFO_SELF, target, &top) != 1 ||
		    top != dead_id)
			return 2;
		if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) == -1)
			return 0; /* still stacked, still covered */
		return 1;
	}
	if (errno != EINVAL)
		return -errno;
	if (move_mount(AT_FDCWD, staged, AT_FDCWD, target, 0) == -1)
		return -errno;
	return 0;
}
