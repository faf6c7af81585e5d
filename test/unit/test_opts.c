// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Command line parsing: both argument forms, defaults, value checking, and
 * what is handed on to libfuse.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cmdline.h"
#include "opts.h"

#define ARGV(...) ((char *[]){"clamfs", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof(ARGV(__VA_ARGS__)) / sizeof(char *)) - 1)
#define PARSE(opts, args, err, ...)                                            \
	cmdline_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), opts, args, err,   \
		      sizeof(err))

/*
 * Whether libfuse will see mount option opt: fuse_opt gathers kept options
 * into "-o" "a,b" pairs, and cmdline_parse adds its own as "-oname".
 */
static bool has_mount_opt(const struct fuse_args *args, const char *opt)
{
	for (int i = 1; i < args->argc; i++) {
		const char *a = args->argv[i];

		if (strcmp(a, "-o") == 0 && i + 1 < args->argc)
			a = args->argv[++i];
		else if (strncmp(a, "-o", 2) == 0)
			a += 2;
		else
			continue;
		if (strcmp(a, opt) == 0)
			return true;
		/* one option inside a comma list */
		for (const char *p = a; (p = strstr(p, opt)); p++) {
			size_t n = strlen(opt);

			if ((p == a || p[-1] == ',') &&
			    (p[n] == ',' || p[n] == '\0'))
				return true;
		}
	}
	return false;
}

static bool has_arg(const struct fuse_args *args, const char *arg)
{
	for (int i = 1; i < args->argc; i++)
		if (strcmp(args->argv[i], arg) == 0)
			return true;
	return false;
}

static void test_positional_form(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "/srv/share", "/mnt/share", "-o",
			       "allow_other,ro"),
			 0);
	assert_string_equal(o.backend, "/srv/share");
	assert_string_equal(o.mountpoint, "/mnt/share");
	assert_false(o.foreground);
	assert_int_equal(o.threads, OPTS_DEFAULT_THREADS);
	assert_true(o.default_permissions);
	assert_true(has_mount_opt(&args, "allow_other"));
	assert_true(has_mount_opt(&args, "ro"));
	assert_true(has_mount_opt(&args, "default_permissions"));
	assert_false(has_arg(&args, "/srv/share"));
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void test_backend_option_form(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(
		PARSE(&o, &args, err, "-o", "backend=/b,threads=4", "-f", "/m"),
		0);
	assert_string_equal(o.backend, "/b");
	assert_string_equal(o.mountpoint, "/m");
	assert_true(o.foreground);
	assert_int_equal(o.threads, 4);
	/* clamfs's own options do not reach libfuse */
	for (int i = 1; i < args.argc; i++)
		assert_null(strstr(args.argv[i], "backend"));
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void test_debug_implies_foreground_and_passes_on(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "-d", "/b", "/m"), 0);
	assert_true(o.debug);
	assert_true(o.foreground);
	assert_true(has_arg(&args, "-d"));
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void test_timeouts_and_permissions(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "/b", "/m", "-o",
			       "attr_timeout=2.5,entry_timeout=0,"
			       "negative_timeout=7,no_default_permissions,"
			       "clone_fd"),
			 0);
	assert_true(o.attr_timeout == 2.5);
	assert_true(o.entry_timeout == 0.0);
	assert_true(o.negative_timeout == 7.0);
	assert_false(o.default_permissions);
	assert_true(o.clone_fd);
	assert_false(has_mount_opt(&args, "default_permissions"));
	fuse_opt_free_args(&args);
	opts_free(&o);
}

/* Exempt users and groups by name (resolved at parse time) or number. */
static void test_exempt_names(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "/b", "/m", "-o",
			       "exempt_uid=root,exempt_uid=34,"
			       "exempt_gid=root,exempt_gid=50"),
			 0);
	assert_int_equal(o.policy.n_exempt_uids, 2);
	assert_int_equal(o.policy.exempt_uids[0], 0);
	assert_int_equal(o.policy.exempt_uids[1], 34);
	assert_int_equal(o.policy.n_exempt_gids, 2);
	assert_int_equal(o.policy.exempt_gids[0], 0);
	assert_int_equal(o.policy.exempt_gids[1], 50);
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void test_glob_case_option(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "/b", "/m"), 0);
	assert_false(o.policy.glob_nocase); /* compatible default */
	fuse_opt_free_args(&args);
	opts_free(&o);
	assert_int_equal(PARSE(&o, &args, err, "/b", "/m", "-o",
			       "glob_case=insensitive"),
			 0);
	assert_true(o.policy.glob_nocase);
	fuse_opt_free_args(&args);
	opts_free(&o);
	assert_int_equal(PARSE(&o, &args, err, "/b", "/m", "-o",
			       "glob_case=insensitive,glob_case=sensitive"),
			 0);
	assert_false(o.policy.glob_nocase);
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void expect_usage_error(int argc, char **argv, const char *needle)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(cmdline_parse(argc, argv, &o, &args, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, needle));
	assert_null(strchr(err, '\n'));
	assert_null(o.backend);
	assert_null(o.mountpoint);
}

#define EXPECT_USAGE_ERROR(needle, ...)                                        \
	expect_usage_error(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), needle)

static void test_bad_values(void **state)
{
	EXPECT_USAGE_ERROR("threads=abc", "/b", "/m", "-o", "threads=abc");
	EXPECT_USAGE_ERROR("threads=0", "/b", "/m", "-o", "threads=0");
	EXPECT_USAGE_ERROR("threads=-3", "/b", "/m", "-o", "threads=-3");
	EXPECT_USAGE_ERROR("threads=99999", "/b", "/m", "-o", "threads=99999");
	EXPECT_USAGE_ERROR("attr_timeout=x", "/b", "/m", "-o",
			   "attr_timeout=x");
	EXPECT_USAGE_ERROR("entry_timeout=-1", "/b", "/m", "-o",
			   "entry_timeout=-1");
	EXPECT_USAGE_ERROR("attr_timeout=nan", "/b", "/m", "-o",
			   "attr_timeout=nan");
	EXPECT_USAGE_ERROR("empty backend", "-o", "backend=", "/m");
	EXPECT_USAGE_ERROR("exempt_uid=no-such-user-cfs': no such user", "/b",
			   "/m", "-o", "exempt_uid=no-such-user-cfs");
	EXPECT_USAGE_ERROR("exempt_gid=no-such-group-cfs': no such group", "/b",
			   "/m", "-o", "exempt_gid=no-such-group-cfs");
	EXPECT_USAGE_ERROR("exempt_uid=", "/b", "/m", "-o", "exempt_uid=");
	EXPECT_USAGE_ERROR("glob_case=nocase", "/b", "/m", "-o",
			   "glob_case=nocase");
	EXPECT_USAGE_ERROR("exempt_gid=12x", "/b", "/m", "-o",
			   "exempt_gid=12x");
}

static void test_bad_arguments(void **state)
{
	EXPECT_USAGE_ERROR("missing backend and mountpoint", "-f");
	/* one path is the mountpoint: the backend may come from a file */
	EXPECT_USAGE_ERROR("missing backend", "/m");
	EXPECT_USAGE_ERROR("missing mountpoint", "-o", "backend=/b");
	EXPECT_USAGE_ERROR("unexpected argument 'z'", "/b", "/m", "z");
	EXPECT_USAGE_ERROR("backend given twice", "-o", "backend=/b", "/x",
			   "/m");
	EXPECT_USAGE_ERROR("unknown option '--frobnicate'", "--frobnicate",
			   "/b", "/m");
}

static void test_help_needs_no_paths(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "--help"), 0);
	assert_true(o.show_help);
	fuse_opt_free_args(&args);
	opts_free(&o);
	assert_int_equal(PARSE(&o, &args, err, "-V", "/b"), 0);
	assert_true(o.show_version);
	fuse_opt_free_args(&args);
	opts_free(&o);
}

static void test_mount_names_escaped_and_not_overridden(void **state)
{
	struct fuse_args args;
	struct clamfs_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, &args, err, "/b", "/m"), 0);
	assert_int_equal(cmdline_add_mount_names(&args, "/srv/a,b"), 0);
	/* a comma inside the path must not split the option list */
	assert_true(has_arg(&args, "fsname=/srv/a\\,b,subtype=clamfs"));
	fuse_opt_free_args(&args);
	opts_free(&o);

	assert_int_equal(PARSE(&o, &args, err, "/b", "/m", "-o",
			       "fsname=mine,subtype=other"),
			 0);
	assert_int_equal(cmdline_add_mount_names(&args, "/b"), 0);
	assert_true(has_mount_opt(&args, "fsname=mine"));
	assert_true(has_mount_opt(&args, "subtype=other"));
	for (int i = 1; i < args.argc; i++)
		assert_null(strstr(args.argv[i], "clamfs"));
	fuse_opt_free_args(&args);
	opts_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_positional_form),
		cmocka_unit_test(test_backend_option_form),
		cmocka_unit_test(test_debug_implies_foreground_and_passes_on),
		cmocka_unit_test(test_timeouts_and_permissions),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_exempt_names),
		cmocka_unit_test(test_glob_case_option),
		cmocka_unit_test(test_help_needs_no_paths),
		cmocka_unit_test(test_mount_names_escaped_and_not_overridden),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
