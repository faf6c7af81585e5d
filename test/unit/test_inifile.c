// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Configuration files: sections, error lines naming file, line and key,
 * and precedence: defaults < file < -o options, positional paths last.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "inifile.h"
#include "cmdline.h"
#include "opts.h"

static char path[] = "/tmp/clamfs-config-XXXXXX";

static void write_config(const char *text)
{
	int fd;

	strcpy(path, "/tmp/clamfs-config-XXXXXX");
	fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
}

static int parse(char **argv, struct clamfs_opts *o, struct fuse_args *args,
		 char *err, size_t errlen)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return cmdline_parse(argc, argv, o, args, err, errlen);
}

static void cleanup(void)
{
	unlink(path);
	strcpy(path, "/tmp/clamfs-config-XXXXXX");
}

static void test_file_sets_keys_by_section(void **state)
{
	char cfgopt[128], err[512];
	struct fuse_args args;
	struct clamfs_opts o;

	write_config("; sample\n"
		     "[fuse]\n"
		     "backend = /srv/share\n"
		     "mountpoint = /mnt/share\n"
		     "options = allow_other,noatime\n"
		     "[clamd]\n"
		     "clamd = tcp://127.0.0.1:3310\n"
		     "[scan]\n"
		     "scan_mode = stream\n"
		     "exclude = *.iso\n"
		     "exclude = backups/**\n"
		     "scan_on_close = yes\n"
		     "max_scan_size = 10M\n"
		     "[cache]\n"
		     "cache_ttl = 120\n"
		     "[action]\n"
		     "on_infected = log\n"
		     "[log]\n"
		     "log_level = debug\n");
	snprintf(cfgopt, sizeof(cfgopt), "config=%s", path);
	assert_int_equal(parse((char *[]){"clamfs", "-o", cfgopt, NULL}, &o,
			       &args, err, sizeof(err)),
			 0);
	assert_string_equal(o.backend, "/srv/share");
	assert_string_equal(o.mountpoint, "/mnt/share");
	assert_string_equal(o.clamd, "tcp://127.0.0.1:3310");
	assert_int_equal(o.scan_mode, 1);
	assert_int_equal(o.policy.n_exclude, 2);
	assert_true(o.scan_on_close);
	assert_int_equal(o.policy.max_scan_size, 10 << 20);
	assert_int_equal(o.cache_ttl, 120);
	assert_int_equal(o.policy.on_infected, INFECTED_LOG);
	assert_int_equal(o.log_level, LOG_LEVEL_DEBUG);
	assert_string_equal(o.config, path);
	bool found = false;
	for (int i = 1; i < args.argc; i++)
		if (strcmp(args.argv[i], "allow_other,noatime") == 0)
			found = true;
	assert_true(found);
	fuse_opt_free_args(&args);
	opts_free(&o);
	cleanup();
}

static void test_command_line_wins(void **state)
{
	char cfgopt[128], err[512];
	struct fuse_args args;
	struct clamfs_opts o;

	write_config("[fuse]\nbackend = /file/b\nmountpoint = /file/m\n"
		     "[cache]\ncache_ttl = 120\n[scan]\nexclude = a\n");
	snprintf(cfgopt, sizeof(cfgopt), "config=%s,cache_ttl=7,exclude=b",
		 path);
	/* mount.fuse3's form: positional paths override the file's */
	assert_int_equal(parse((char *[]){"clamfs", "/cli/b", "/cli/m", "-o",
					  cfgopt, NULL},
			       &o, &args, err, sizeof(err)),
			 0);
	assert_string_equal(o.backend, "/cli/b");
	assert_string_equal(o.mountpoint, "/cli/m");
	assert_int_equal(o.cache_ttl, 7);
	/* repeatable keys add up */
	assert_int_equal(o.policy.n_exclude, 2);
	fuse_opt_free_args(&args);
	opts_free(&o);

	/* a single positional path is the mountpoint */
	assert_int_equal(
		parse((char *[]){"clamfs", "/cli/m", "-o", cfgopt, NULL}, &o,
		      &args, err, sizeof(err)),
		0);
	assert_string_equal(o.backend, "/file/b");
	assert_string_equal(o.mountpoint, "/cli/m");
	fuse_opt_free_args(&args);
	opts_free(&o);
	cleanup();
}

static void expect_error(const char *text, const char *needle)
{
	char cfgopt[128], err[512], want[512];
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct clamfs_opts o;

	write_config(text);
	snprintf(cfgopt, sizeof(cfgopt), "config=%s", path);
	assert_int_equal(
		parse((char *[]){"clamfs", "/b", "/m", "-o", cfgopt, NULL}, &o,
		      &args, err, sizeof(err)),
		-EINVAL);
	snprintf(want, sizeof(want), "%s:%s", path, needle);
	if (strstr(err, want) == NULL)
		fail_msg("error '%s' lacks '%s'", err, want);
	assert_null(strchr(err, '\n'));
	cleanup();
}

static void test_errors_name_file_line_key(void **state)
{
	expect_error("[scan]\nscan_mode = stream\nfrobnicate = 1\n",
		     "3: frobnicate: unknown key");
	expect_error("[cache]\n\ncache_ttl = soon\n",
		     "3: cache_ttl: bad value in 'cache_ttl=soon'");
	expect_error("[cache]\nscan_mode = stream\n",
		     "2: scan_mode: belongs in section [scan], not [cache]");
	expect_error("[scan]\nscan_on_close = perhaps\n",
		     "2: scan_on_close: bad value");
	expect_error("[scan]\njust some words\n", "2: just: not 'key = value'");
	expect_error("[scan]\nscan_on_close\n",
		     "2: scan_on_close: not 'key = value' (a flag takes yes");
	expect_error("[scan\nscan_on_close = yes\n",
		     "1: [scan: unclosed section name");
}

/* inih would read an indented line as the previous value's continuation. */
static void test_indented_keys(void **state)
{
	char cfgopt[128], err[512];
	struct fuse_args args;
	struct clamfs_opts o;

	write_config("[scan]\n    exclude = *.iso\n    exclude = *.tmp\n"
		     "\t[cache]\n  cache_ttl = 9\n");
	snprintf(cfgopt, sizeof(cfgopt), "config=%s", path);
	assert_int_equal(
		parse((char *[]){"clamfs", "/b", "/m", "-o", cfgopt, NULL}, &o,
		      &args, err, sizeof(err)),
		0);
	assert_int_equal(o.policy.n_exclude, 2);
	assert_string_equal(o.policy.exclude[1], "*.tmp");
	assert_int_equal(o.cache_ttl, 9);
	fuse_opt_free_args(&args);
	opts_free(&o);
	cleanup();
}

/* A combination is judged once everything is read: no single line. */
static void test_incomplete_combination(void **state)
{
	char cfgopt[128], err[512];
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct clamfs_opts o;

	write_config("[action]\non_infected = quarantine\n");
	snprintf(cfgopt, sizeof(cfgopt), "config=%s", path);
	assert_int_equal(
		parse((char *[]){"clamfs", "/b", "/m", "-o", cfgopt, NULL}, &o,
		      &args, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "needs quarantine_dir="));
	cleanup();
}

static void test_missing_file(void **state)
{
	char err[512];
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct clamfs_opts o;

	assert_int_equal(parse((char *[]){"clamfs", "/b", "/m", "-o",
					  "config=/nonexistent/x.ini", NULL},
			       &o, &args, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/x.ini"));
	assert_non_null(strstr(err, "No such file"));
}

static void test_section_table(void **state)
{
	assert_string_equal(inifile_section_of("cache_ttl"), "cache");
	assert_string_equal(inifile_section_of("clamd"), "clamd");
	assert_null(inifile_section_of("config"));
	assert_null(inifile_section_of("-f"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_sets_keys_by_section),
		cmocka_unit_test(test_command_line_wins),
		cmocka_unit_test(test_errors_name_file_line_key),
		cmocka_unit_test(test_indented_keys),
		cmocka_unit_test(test_incomplete_combination),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_section_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
