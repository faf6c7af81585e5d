// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Which objects may be judged without the caller's supplementary groups
 * (groupfree.c): real files in a directory of the build tree, with modes
 * and ACLs set as an administrator would.
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "scratch_dir.h"

#include "groupfree.h"

static char dir[PATH_MAX];
static int dir_fd = -1;

/* A file (or directory) of mode, open O_PATH as the daemon holds it. */
static int object(const char *name, mode_t mode, bool is_dir)
{
	int fd;

	if (is_dir) {
		assert_int_equal(mkdirat(dir_fd, name, 0700), 0);
	} else {
		fd = openat(dir_fd, name,
			    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	/* chmod: the umask and mkdir would not set every bit */
	assert_int_equal(fchmodat(dir_fd, name, mode, 0), 0);
	fd = openat(dir_fd, name, O_PATH | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* Neither the owner nor of the object's primary group. */
#define STRANGER_UID ((uid_t)4000)
#define STRANGER_GID ((gid_t)4000)

static void assert_judged(const char *name, mode_t mode, bool is_dir, bool want)
{
	int fd = object(name, mode, is_dir);

	assert_int_equal(groupfree_judged(fd, STRANGER_UID, STRANGER_GID, NULL),
			 want);
	close(fd);
}

/* Group bits equal to the other bits: no membership changes anything. */
static void test_group_same_as_other(void **state)
{
	(void)state;
	assert_judged("f0644", 0644, false, true);
	assert_judged("f0600", 0600, false, true);
	assert_judged("f0666", 0666, false, true);
	assert_judged("d0755", 0755, true, true);
	assert_judged("d0711", 0711, true, true);
	/* a shared directory's S_ISGID does not depend on who is a member */
	assert_judged("d2755", 02755, true, true);
}

/*
 * The group gets more, or less, than others: a supplementary group may
 * grant, or deny, so the groups are read first.
 */
static void test_group_differs_from_other(void **state)
{
	(void)state;
	assert_judged("f0640", 0640, false, false);
	assert_judged("f0664", 0664, false, false);
	assert_judged("f0604", 0604, false, false);
	assert_judged("f0646", 0646, false, false);
	assert_judged("d0770", 0770, true, false);
	assert_judged("d2770", 02770, true, false);
	assert_judged("d0705", 0705, true, false);
}

/* The owner, or a caller of the object's primary group: judged alike. */
static void test_owner_and_primary_group(void **state)
{
	struct stat st;
	int fd = object("team", 0460, false);

	(void)state;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(groupfree_judged(fd, st.st_uid, STRANGER_GID, NULL));
	assert_true(groupfree_judged(fd, STRANGER_UID, st.st_gid, NULL));
	assert_false(groupfree_judged(fd, STRANGER_UID, STRANGER_GID, NULL));
	close(fd);
}

/*
 * A change of the object cannot widen the first rule (owner, primary
 * group), which alone may judge calls whose result stays; the second
 * rule's ctime is handed back to be compared after the call.
 */
static void test_owner_or_group_rule(void **state)
{
	struct timespec ctime = {0, 0};
	struct stat st;
	int fd = object("plain", 0644, false);

	(void)state;
	assert_int_equal(fstat(fd, &st), 0);
	assert_false(
		groupfree_as_owner_or_group(fd, STRANGER_UID, STRANGER_GID));
	assert_true(groupfree_as_owner_or_group(fd, st.st_uid, STRANGER_GID));
	assert_true(groupfree_as_owner_or_group(fd, STRANGER_UID, st.st_gid));
	assert_true(groupfree_judged(fd, STRANGER_UID, STRANGER_GID, &ctime));
	assert_int_equal(ctime.tv_sec, st.st_ctim.tv_sec);
	assert_int_equal(ctime.tv_nsec, st.st_ctim.tv_nsec);
	close(fd);
}

/* A file's S_ISGID is kept through a truncate by members only. */
static void test_setgid_file_needs_groups(void **state)
{
	struct stat st;
	int fd = object("f2644", 02644, false);

	(void)state;
	assert_int_equal(fstat(fd, &st), 0);
	assert_false(groupfree_judged(fd, STRANGER_UID, STRANGER_GID, NULL));
	assert_false(groupfree_judged(fd, st.st_uid, st.st_gid, NULL));
	close(fd);
}

/*
 * An ACL may name groups: read them, unless the caller owns the file or
 * is of its owning group.
 */
static void test_access_acl_needs_groups(void **state)
{
	/* owner rw, owning group r, group 4242 nothing, mask r, other r */
	const uint16_t tags[] = {0x01, 0x04, 0x08, 0x10, 0x20};
	const uint16_t perms[] = {6, 4, 0, 4, 4};
	const uint32_t ids[] = {UINT32_MAX, UINT32_MAX, 4242, UINT32_MAX,
				UINT32_MAX};
	unsigned char acl[4 + 5 * 8], *p = acl + 4;
	char path[PATH_MAX + 16];
	uint32_t version = 2;
	struct stat st;
	int fd;

	(void)state;
	memcpy(acl, &version, 4);
	for (int i = 0; i < 5; i++, p += 8) {
		memcpy(p, &tags[i], 2);
		memcpy(p + 2, &perms[i], 2);
		memcpy(p + 4, &ids[i], 4);
	}
	fd = object("acl", 0644, false);
	snprintf(path, sizeof(path), "%s/acl", dir);
	if (setxattr(path, "system.posix_acl_access", acl, sizeof(acl), 0) !=
	    0) {
		close(fd);
		skip(); /* ACLs off on the build tree's filesystem */
	}
	assert_int_equal(fstat(fd, &st), 0);
	assert_false(groupfree_judged(fd, STRANGER_UID, STRANGER_GID, NULL));
	/* of the owning group: granted if any entry it matches grants */
	assert_true(groupfree_judged(fd, STRANGER_UID, st.st_gid, NULL));
	assert_true(groupfree_judged(fd, st.st_uid, STRANGER_GID, NULL));
	close(fd);
}

/* A filesystem judging by rules of its own (here procfs) never. */
static void test_other_filesystems_need_groups(void **state)
{
	int fd = open("/proc/self/status", O_PATH | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_false(groupfree_judged(fd, 0, 0, NULL));
	close(fd);
	assert_false(groupfree_judged(-1, 0, 0, NULL));
}

static int setup(void **state)
{
	(void)state;
	dir_fd = scratch_dir_make(dir, "groupfree");
	return dir_fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return scratch_dir_remove(dir, dir_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_same_as_other),
		cmocka_unit_test(test_group_differs_from_other),
		cmocka_unit_test(test_owner_and_primary_group),
		cmocka_unit_test(test_owner_or_group_rule),
		cmocka_unit_test(test_setgid_file_needs_groups),
		cmocka_unit_test(test_access_acl_needs_groups),
		cmocka_unit_test(test_other_filesystems_need_groups),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
