// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Identity switching: a switch gives the thread exactly the caller's fsuid,
 * fsgid and groups, and a restore gives back exactly the daemon's, also
 * when a switch to the daemon's own group set skipped setgroups. Needs root.
 */
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include <cmocka.h>

#include "creds.h"

static void assert_groups(int n, const gid_t *want)
{
	gid_t got[64];

	assert_int_equal(getgroups(64, got), n);
	for (int i = 0; i < n; i++)
		assert_int_equal(got[i], want[i]);
}

static void assert_fs_ids(uid_t uid, gid_t gid)
{
	assert_int_equal((uid_t)setfsuid((uid_t)-1), uid);
	assert_int_equal((gid_t)setfsgid((gid_t)-1), gid);
}

/* The process (every thread, through glibc) gets these groups, then init. */
static void daemon_with_groups(int n, const gid_t *groups)
{
	assert_int_equal(setgroups((size_t)n, groups), 0);
	assert_int_equal(creds_init(), 0);
}

static void switch_and_back(int dn, const gid_t *dgroups)
{
	static const gid_t two[] = {60010, 60020};
	struct creds none = {.uid = 60001, .gid = 60001, .ngroups = 0};
	struct creds some = {60001, 60001, 2, two};
	struct creds same = {60001, 60001, dn, dgroups};
	struct creds keep = {60002, 60002, -1, NULL};

	assert_int_equal(creds_assume(&none), 0);
	assert_fs_ids(60001, 60001);
	assert_groups(0, NULL);
	creds_restore();
	assert_fs_ids(0, 0);
	assert_groups(dn, dgroups);

	assert_int_equal(creds_assume(&some), 0);
	assert_groups(2, two);
	creds_restore();
	assert_groups(dn, dgroups);

	assert_int_equal(creds_assume(&same), 0);
	assert_fs_ids(60001, 60001);
	assert_groups(dn, dgroups);
	creds_restore();
	assert_groups(dn, dgroups);

	assert_int_equal(creds_assume(&keep), 0);
	assert_fs_ids(60002, 60002);
	assert_groups(dn, dgroups);
	creds_restore();
	assert_fs_ids(0, 0);
	assert_groups(dn, dgroups);
}

static void daemon_without_groups(void **state)
{
	(void)state;
	daemon_with_groups(0, NULL);
	switch_and_back(0, NULL);
}

static void daemon_in_groups(void **state)
{
	static const gid_t mine[] = {0, 4};

	(void)state;
	daemon_with_groups(2, mine);
	switch_and_back(2, mine);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(daemon_without_groups),
		cmocka_unit_test(daemon_in_groups),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_creds: needs root, skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
