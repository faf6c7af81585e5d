// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mountinfo parsing: topmost mount wins, escaped names, optional fields;
 * and, as root, the moves that replace a dead mount without uncovering the
 * directory beneath (skipped without root).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "mountpoint.h"

static char path[] = "/tmp/clamfs-mountinfo-XXXXXX";

static int write_mountinfo(void **state)
{
	static const char text[] =
		"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
		"30 22 0:30 / /srv/my\\040share rw shared:5 master:2 - ext4 "
		"/dev/vdb rw\n"
		"31 22 0:31 / /mnt rw - tmpfs tmpfs rw\n"
		"40 31 0:40 / /mnt rw,nosuid - fuse.clamfs /srv rw\n"
		"41 22 0:41 / /mnt2 rw - fuse.sshfs host: rw\n"
		"42 22 0:42 / /share rw - fuse.clamfs /share "
		"rw,user_id=0,group_id=0,allow_other\n"
		"43 22 0:43 / /fake rw - fuse.clamfs x "
		"rw,user_id=1000,group_id=1000\n"
		"44 22 0:44 / /fake2 rw - fuse.clamfs x "
		"rw,user_id=00,group_id=0\n"
		"45 22 0:30 /sub\\040dir /bind rw - ext4 /dev/vdb rw\n"
		"garbage line\n";
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return 0;
}

static int remove_mountinfo(void **state)
{
	unlink(path);
	return 0;
}

static void test_top_mount_wins(void **state)
{
	char type[64];

	assert_int_equal(mountpoint_fstype(path, "/mnt", type, sizeof(type)),
			 1);
	assert_string_equal(type, "fuse.clamfs");
	assert_int_equal(mountpoint_fstype(path, "/mnt2", type, sizeof(type)),
			 1);
	assert_string_equal(type, "fuse.sshfs");
}

static void test_escaped_name_and_optional_fields(void **state)
{
	char type[64];

	assert_int_equal(
		mountpoint_fstype(path, "/srv/my share", type, sizeof(type)),
		1);
	assert_string_equal(type, "ext4");
	assert_int_equal(mountpoint_fstype(path, "/srv/my\\040share", type,
					   sizeof(type)),
			 0);
}

static void test_not_a_mountpoint(void **state)
{
	char type[64];

	assert_int_equal(mountpoint_fstype(path, "/srv", type, sizeof(type)),
			 0);
	assert_int_equal(mountpoint_fstype("/nonexistent/mountinfo", "/", type,
					   sizeof(type)),
			 -ENOENT);
}

/* Only a FUSE mount root made counts: a user's may claim the type. */
static void test_made_by_root(void **state)
{
	char type[64];

	(void)state;
	assert_int_equal(
		mountpoint_root_fstype(path, "/share", type, sizeof(type)), 1);
	assert_string_equal(type, "fuse.clamfs");
	assert_int_equal(mountpoint_fstype(path, "/fake", type, sizeof(type)),
			 1);
	assert_int_equal(
		mountpoint_root_fstype(path, "/fake", type, sizeof(type)), 0);
	assert_int_equal(
		mountpoint_root_fstype(path, "/fake2", type, sizeof(type)), 0);
	assert_true(mountpoint_opts_by_root("user_id=0"));
	assert_true(mountpoint_opts_by_root("rw,user_id=0,group_id=5"));
	assert_false(mountpoint_opts_by_root("rw,user_id=01"));
	assert_false(mountpoint_opts_by_root("rw,xuser_id=0"));
	assert_false(mountpoint_opts_by_root(""));
}

struct seen {
	unsigned long long id;
	char root[64], dir[64], fstype[32], superopts[64];
	int calls;
};

/* The daemon's own mount, by id: found at start, looked for later. */
static void test_top_id_and_listed(void **state)
{
	unsigned long long id = 0;

	(void)state;
	assert_int_equal(mountpoint_top_id(path, "/mnt", &id), 1);
	assert_true(id == 40); /* the FUSE mount on top, not the tmpfs */
	assert_int_equal(mountpoint_top_id(path, "/srv/my share", &id), 1);
	assert_true(id == 30);
	assert_int_equal(mountpoint_top_id(path, "/nowhere", &id), 0);
	assert_int_equal(mountpoint_id_listed(path, 40), 1);
	assert_int_equal(mountpoint_id_listed(path, 45), 1);
	assert_int_equal(mountpoint_id_listed(path, 4), 0);
	assert_int_equal(mountpoint_id_listed(path, 46), 0);
	assert_true(mountpoint_id_listed("/nonexistent/mountinfo", 40) < 0);
}

static int remember(const struct mountinfo_entry *m, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	if (m->id != s->id)
		return 0;
	snprintf(s->root, sizeof(s->root), "%s", m->root);
	snprintf(s->dir, sizeof(s->dir), "%s", m->dir);
	snprintf(s->fstype, sizeof(s->fstype), "%s", m->fstype);
	snprintf(s->superopts, sizeof(s->superopts), "%s", m->superopts);
	return 7; /* stops the walk, and is what mountpoint_each returns */
}

/* the fields nodeid.c (mount id, root) and mount_cmd.c (options) rely on */
static void test_each_gives_every_field(void **state)
{
	struct seen s = {.id = 45};

	assert_int_equal(mountpoint_each(path, remember, &s), 7);
	assert_string_equal(s.root, "/sub dir");
	assert_string_equal(s.dir, "/bind");
	assert_string_equal(s.fstype, "ext4");
	assert_string_equal(s.superopts, "rw");
	memset(&s, 0, sizeof(s));
	s.id = 42;
	assert_int_equal(mountpoint_each(path, remember, &s), 7);
	assert_string_equal(s.root, "/");
	assert_string_equal(s.superopts, "rw,user_id=0,group_id=0,allow_other");
	memset(&s, 0, sizeof(s));
	s.id = 99; /* no such mount: every well-formed line seen */
	assert_int_equal(mountpoint_each(path, remember, &s), 0);
	assert_int_equal(s.calls, 9);
}

/* A tmpfs on dir holding an empty file named marker; skips without root. */
static void mount_marked(const char *dir, const char *marker)
{
	char name[PATH_MAX];
	int fd;

	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") == -1) {
		assert_true(errno == EPERM);
		skip(); /* not root */
	}
	snprintf(name, sizeof(name), "%s/%s", dir, marker);
	fd = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
}

struct count {
	const char *dir;
	int n;
};

static int count_at(const struct mountinfo_entry *m, void *arg)
{
	struct count *c = arg;

	if (strcmp(m->dir, c->dir) == 0)
		c->n++;
	return 0;
}

static int mounts_at(const char *dir)
{
	struct count c = {.dir = dir};

	assert_int_equal(mountpoint_each(MOUNTINFO_SELF, count_at, &c), 0);
	return c.n;
}

/* Mounts whose directory names a stage: none may be left behind. */
static int count_staged(const struct mountinfo_entry *m, void *arg)
{
	int *n = arg;

	if (strstr(m->dir, "/clamfs-stage."))
		(*n)++;
	return 0;
}

static int staged_mounts(void)
{
	int n = 0;

	assert_int_equal(mountpoint_each(MOUNTINFO_SELF, count_staged, &n), 0);
	return n;
}

/* a directory in the parent's filesystem, or a filesystem of its own */
static void open_beneath(bool own_fs)
{
	char base[] = "/tmp/clamfs-beneath-XXXXXX", sub[128];
	char under[PATH_MAX], nested[PATH_MAX], link[64], name[PATH_MAX];
	ssize_t n;
	int fd;

	if (geteuid() != 0)
		skip(); /* before leaving a directory behind */
	assert_non_null(mkdtemp(base));
	snprintf(sub, sizeof(sub), "%s/share", base);
	snprintf(under, sizeof(under), "%s/under", sub);
	snprintf(nested, sizeof(nested), "%s/nested", sub);
	assert_int_equal(mkdir(sub, 0755), 0);
	if (own_fs)
		mount_marked(sub, "fs");
	fd = open(under, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	/* a filesystem mounted inside the backend must stay reachable */
	assert_int_equal(mkdir(nested, 0755), 0);
	mount_marked(nested, "inner");
	mount_marked(sub, "over");
	assert_int_equal(access(under, F_OK), -1); /* covered */
	fd = mountpoint_open_beneath(sub);
	assert_true(fd >= 0);
	assert_int_equal(staged_mounts(), 0);
	assert_int_equal(faccessat(fd, "under", F_OK, 0), 0);
	assert_int_equal(faccessat(fd, "over", F_OK, 0), -1);
	assert_int_equal(faccessat(fd, "fs", F_OK, 0), own_fs ? 0 : -1);
	assert_int_equal(faccessat(fd, "nested/inner", F_OK, 0), 0);
	/* named from the copy's own root: what fs_fd_path strips */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, name, sizeof(name) - 1);
	assert_true(n > 0);
	name[n] = '\0';
	assert_string_equal(name, "/");
	close(fd);
	/* the real mounts are untouched */
	assert_int_equal(mounts_at(sub), own_fs ? 2 : 1);
	assert_int_equal(mounts_at(nested), 1);
	assert_int_equal(mountpoint_open_beneath("/nonexistent/x"), -ENOENT);
	assert_int_equal(staged_mounts(), 0);
	while (umount2(sub, MNT_DETACH) == 0)
		;
	while (umount2(nested, MNT_DETACH) == 0)
		;
	rmdir(nested);
	unlink(under);
	rmdir(sub);
	rmdir(base);
}

static void test_open_beneath_sees_the_covered_directory(void **state)
{
	open_beneath(false);
}

static void test_open_beneath_sees_a_covered_filesystem(void **state)
{
	open_beneath(true);
}

static void test_replace_puts_the_new_mount_in_place(void **state)
{
	char base[] = "/tmp/clamfs-replace-XXXXXX", target[128];
	char stage[64], name[PATH_MAX];
	unsigned long long old_id;
	int ret;

	if (geteuid() != 0)
		skip();
	assert_non_null(mkdtemp(base));
	snprintf(target, sizeof(target), "%s/share", base);
	assert_int_equal(mkdir(target, 0755), 0);
	mount_marked(target, "old");
	assert_int_equal(mountpoint_top_id(MOUNTINFO_SELF, target, &old_id), 1);
	assert_int_equal(mountpoint_stage(stage, sizeof(stage)), 0);
	mount_marked(stage, "new");
	/* another mount than the one found at first: left alone */
	ret = mountpoint_replace(stage, target, old_id + 1000000);
	if (ret == 2) {
		snprintf(name, sizeof(name), "%s/old", target);
		assert_int_equal(access(name, F_OK), 0);
		assert_int_equal(mounts_at(target), 2);
		/* ours beneath it: take the old one off by hand, start over */
		assert_int_equal(umount2(target, MNT_DETACH), 0);
		assert_int_equal(umount2(target, MNT_DETACH), 0);
		mount_marked(target, "old");
		assert_int_equal(
			mountpoint_top_id(MOUNTINFO_SELF, target, &old_id), 1);
		mountpoint_unstage(stage);
		assert_int_equal(mountpoint_stage(stage, sizeof(stage)), 0);
		mount_marked(stage, "new");
	}
	ret = mountpoint_replace(stage, target, old_id);
	snprintf(name, sizeof(name), "%s/new", target);
	assert_int_equal(access(name, F_OK), 0);
	/* Linux >= 6.5: in its place; before: on top of it */
	assert_true(ret == 1 || ret == 0);
	assert_int_equal(mounts_at(target), ret == 1 ? 1 : 2);
	mountpoint_unstage(stage);
	assert_int_equal(access(stage, F_OK), -1);
	while (umount2(target, MNT_DETACH) == 0)
		;
	rmdir(target);
	rmdir(base);
}

/*
 * What is mounted on a stage is reached only through a 0700 directory of
 * root's that no mount covers (walking into a mount checks its root's
 * permissions instead), and unstaging leaves neither behind.
 */
static void test_stage_is_behind_a_private_directory(void **state)
{
	char stage[64], outer[64], name[PATH_MAX];
	struct stat st;
	int fd;

	if (geteuid() != 0)
		skip();
	assert_int_equal(mountpoint_stage(stage, sizeof(stage)), 0);
	snprintf(outer, sizeof(outer), "%s", stage);
	*strrchr(outer, '/') = '\0';
	assert_non_null(strstr(outer, "/clamfs-stage."));
	mount_marked(stage, "new");
	snprintf(name, sizeof(name), "%s/new", stage);
	assert_int_equal(access(name, F_OK), 0);
	/* the directory walked through is the 0700 one, whatever is above */
	fd = open(outer, O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, 0);
	close(fd);
	assert_int_equal(mounts_at(outer), 1); /* its own private bind only */
	mountpoint_unstage(stage);
	assert_int_equal(access(stage, F_OK), -1);
	assert_int_equal(access(outer, F_OK), -1);
	assert_int_equal(staged_mounts(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_mount_wins),
		cmocka_unit_test(test_escaped_name_and_optional_fields),
		cmocka_unit_test(test_not_a_mountpoint),
		cmocka_unit_test(test_made_by_root),
		cmocka_unit_test(test_each_gives_every_field),
		cmocka_unit_test(test_top_id_and_listed),
		cmocka_unit_test(test_open_beneath_sees_the_covered_directory),
		cmocka_unit_test(test_open_beneath_sees_a_covered_filesystem),
		cmocka_unit_test(test_replace_puts_the_new_mount_in_place),
		cmocka_unit_test(test_stage_is_behind_a_private_directory),
	};

	return cmocka_run_group_tests(tests, write_mountinfo, remove_mountinfo);
}
