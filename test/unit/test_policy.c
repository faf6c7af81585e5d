// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan policy: path globs, extension case, exempt ids, size limits, value
 * parsing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy.h"

static void test_defaults_scan_everything(void **state)
{
	struct policy p;

	policy_init(&p);
	assert_false(policy_needs_path(&p));
	assert_int_equal(policy_decide(&p, "a/b.txt", 1000, 1000, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide(&p, NULL, 0, 0, 10), POLICY_SCAN);
	assert_int_equal(p.deny_errno, EACCES);
	assert_int_equal(p.on_infected, INFECTED_DENY);
	assert_false(p.on_error_allow);
	policy_free(&p);
}

static void test_exclude_globs(void **state)
{
	struct policy p;

	policy_init(&p);
	assert_int_equal(policy_add_glob(&p, false, "*.iso"), 0);
	assert_int_equal(policy_add_glob(&p, false, "/backups/**"), 0);
	assert_true(policy_needs_path(&p));
	/* extension rules: any depth, any case */
	assert_int_equal(policy_decide(&p, "img.iso", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "deep/dir/IMG.ISO", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "img.iso.exe", 1, 1, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "iso", 1, 1, 10), POLICY_SCAN);
	/* a leading slash in the rule is dropped; ** spans directories */
	assert_int_equal(policy_decide(&p, "backups/2024/x.tar", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "other/backups/x", 1, 1, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "backupsX/x", 1, 1, 10),
			 POLICY_SCAN);
	/* without a path, rules cannot let a file through */
	assert_int_equal(policy_decide(&p, NULL, 1, 1, 10), POLICY_SCAN);
	policy_free(&p);
}

static void test_include_limits_scanning(void **state)
{
	struct policy p;

	policy_init(&p);
	assert_int_equal(policy_add_glob(&p, true, "*.exe"), 0);
	assert_int_equal(policy_add_glob(&p, true, "uploads/*"), 0);
	assert_int_equal(policy_decide(&p, "a/setup.EXE", 1, 1, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "uploads/x.txt", 1, 1, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "notes.txt", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	/* exclude wins over include */
	assert_int_equal(policy_add_glob(&p, false, "uploads/safe*"), 0);
	assert_int_equal(policy_decide(&p, "uploads/safe.bin", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	policy_free(&p);
}

static void test_exempt_ids(void **state)
{
	struct policy p;

	policy_init(&p);
	assert_int_equal(policy_add_exempt_uid(&p, 34), 0);
	assert_int_equal(policy_add_exempt_gid(&p, 50), 0);
	assert_int_equal(policy_decide(&p, "x", 34, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "x", 1, 50, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "x", 35, 51, 10), POLICY_SCAN);
	policy_free(&p);
}

/* A scan nobody asked for is judged by path and size, never exempt. */
static void test_decide_file_ignores_exemptions(void **state)
{
	struct policy p;

	(void)state;
	policy_init(&p);
	assert_int_equal(policy_add_exempt_uid(&p, 0), 0);
	assert_int_equal(policy_add_exempt_gid(&p, 0), 0);
	assert_int_equal(policy_add_glob(&p, false, "*.iso"), 0);
	p.max_scan_size = 1000;
	assert_int_equal(policy_decide(&p, "a.txt", 0, 0, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide_file(&p, "a.txt", 10), POLICY_SCAN);
	assert_int_equal(policy_decide_file(&p, "d/a.iso", 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide_file(&p, "a.txt", 1001),
			 POLICY_SKIP_OVERSIZE);
	assert_int_equal(policy_decide_file(&p, NULL, 10), POLICY_SCAN);
	policy_free(&p);
}

/* glob_case=insensitive: every glob ignores case, not only *.EXT. */
static void test_glob_case(void **state)
{
	struct policy p;

	policy_init(&p);
	assert_int_equal(policy_add_glob(&p, false, "Backups/**"), 0);
	assert_int_equal(policy_add_glob(&p, false, "*.iso"), 0);
	assert_int_equal(policy_decide(&p, "Backups/x", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "backups/x", 1, 1, 10), POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "a/B.ISO", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	p.glob_nocase = true;
	assert_int_equal(policy_decide(&p, "backups/x", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "BACKUPS/x", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide(&p, "backupsx", 1, 1, 10), POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "a/B.ISO", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	policy_free(&p);
	/* include rules too */
	policy_init(&p);
	p.glob_nocase = true;
	assert_int_equal(policy_add_glob(&p, true, "uploads/*"), 0);
	assert_int_equal(policy_decide(&p, "Uploads/x", 1, 1, 10), POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "other/x", 1, 1, 10),
			 POLICY_SKIP_EXCLUDED);
	policy_free(&p);
}

/* A member of an exempt group is exempt by a supplementary group too. */
static void test_exempt_supplementary_groups(void **state)
{
	const gid_t groups[] = {7, 50, 9};
	struct policy p;

	policy_init(&p);
	assert_false(policy_wants_groups(&p, 1, 1));
	assert_int_equal(policy_add_exempt_uid(&p, 34), 0);
	assert_false(policy_wants_groups(&p, 1, 1));
	assert_int_equal(policy_add_exempt_gid(&p, 50), 0);
	assert_true(policy_wants_groups(&p, 1, 1));
	/* already decided by the ids: no need to fetch groups */
	assert_false(policy_wants_groups(&p, 34, 1));
	assert_false(policy_wants_groups(&p, 1, 50));
	assert_int_equal(policy_decide_groups(&p, "x", 1, 1, groups, 3, 10),
			 POLICY_SKIP_EXCLUDED);
	assert_int_equal(policy_decide_groups(&p, "x", 1, 1, groups, 1, 10),
			 POLICY_SCAN);
	assert_int_equal(policy_decide_groups(&p, "x", 1, 1, NULL, 0, 10),
			 POLICY_SCAN);
	policy_free(&p);
}

static void test_size_limit(void **state)
{
	struct policy p;

	policy_init(&p);
	p.max_scan_size = 1000;
	assert_int_equal(policy_decide(&p, "x", 1, 1, 1000), POLICY_SCAN);
	assert_int_equal(policy_decide(&p, "x", 1, 1, 1001),
			 POLICY_SKIP_OVERSIZE);
	p.oversize_allow = false;
	assert_int_equal(policy_decide(&p, "x", 1, 1, 1001),
			 POLICY_DENY_OVERSIZE);
	p.max_scan_size = 0; /* no limit */
	assert_int_equal(policy_decide(&p, "x", 1, 1, UINT64_MAX / 2),
			 POLICY_SCAN);
	policy_free(&p);
}

static void test_parse_size_and_action(void **state)
{
	enum infected_action a;
	uint64_t v;

	assert_int_equal(policy_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(policy_parse_size("512", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(policy_parse_size("4k", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(policy_parse_size("100M", &v), 0);
	assert_int_equal(v, 100ULL << 20);
	assert_int_equal(policy_parse_size("2GiB", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(policy_parse_size("1T", &v), 0);
	assert_int_equal(v, 1ULL << 40);
	assert_int_equal(policy_parse_size("", &v), -EINVAL);
	assert_int_equal(policy_parse_size("-1", &v), -EINVAL);
	assert_int_equal(policy_parse_size("10X", &v), -EINVAL);
	assert_int_equal(policy_parse_size("10MBytes", &v), -EINVAL);
	assert_int_equal(policy_parse_size("99999999999999999999", &v),
			 -EINVAL);
	assert_int_equal(policy_parse_size("99999999999T", &v), -EINVAL);

	assert_int_equal(infected_action_parse("quarantine", &a), 0);
	assert_int_equal(a, INFECTED_QUARANTINE);
	assert_string_equal(infected_action_name(a), "quarantine");
	assert_int_equal(infected_action_parse("Delete", &a), -EINVAL);
}

static void test_limits_verdict(void **state)
{
	struct policy p;

	(void)state;
	policy_init(&p);
	assert_int_equal(p.on_limits, LIMITS_DENY);
	policy_free(&p);
	assert_true(policy_is_limits_verdict(
		"Heuristics.Limits.Exceeded.MaxFiles"));
	assert_true(policy_is_limits_verdict(
		"Heuristics.Limits.Exceeded.MaxRecursion"));
	assert_true(policy_is_limits_verdict("Heuristics.Limits.Exceeded"));
	/* detections, including other heuristics an administrator enabled */
	assert_false(policy_is_limits_verdict("Eicar-Test.UNOFFICIAL"));
	assert_false(policy_is_limits_verdict("Heuristics.Encrypted.Zip"));
	assert_false(policy_is_limits_verdict("Heuristics.Limits.ExceededX"));
	assert_false(policy_is_limits_verdict(
		"Win.Heuristics.Limits.Exceeded.MaxFiles"));
	assert_false(policy_is_limits_verdict(""));
	assert_false(policy_is_limits_verdict(NULL));
	assert_string_equal(limits_action_name(LIMITS_INFECTED), "infected");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_scan_everything),
		cmocka_unit_test(test_exclude_globs),
		cmocka_unit_test(test_include_limits_scanning),
		cmocka_unit_test(test_exempt_ids),
		cmocka_unit_test(test_decide_file_ignores_exemptions),
		cmocka_unit_test(test_glob_case),
		cmocka_unit_test(test_exempt_supplementary_groups),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_parse_size_and_action),
		cmocka_unit_test(test_limits_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
