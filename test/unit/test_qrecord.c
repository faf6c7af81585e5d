// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Quarantine records: escape/parse round trip of hostile strings, a file
 * name with a newline that tries to forge a field, malformed records, and
 * the relative-path check restore relies on.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "qrecord.h"

static char *format(const struct qrecord *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int closed;

	assert_non_null(f);
	assert_int_equal(qrecord_format(r, f), 0);
	/* apart: cppcheck takes the macro's f for used after fclose */
	closed = fclose(f);
	assert_int_equal(closed, 0);
	return text;
}

static void round_trip(void **state)
{
	char path[] = "dir/a\\b\x01\x7f\xc3\xa9 \t=end";
	struct qrecord r = {
		.path = path,
		.share = "/srv/share with space",
		.signature = "Win.Test.EICAR_HDB-1",
		.when = 1764551579,
		.uid = 1000,
		.gid = 100,
		.mode = 04755,
		.size = 68,
		.mtime = {1700000000, 7},
		.has_opener = true,
		.opener_uid = 1001,
		.opener_name = "alice",
	};
	struct qrecord back;
	char *text = format(&r);

	assert_non_null(strstr(text, "time=2025-12-01T01:12:59Z\n"));
	assert_non_null(strstr(text, "mode=4755\n"));
	assert_int_equal(qrecord_parse(text, strlen(text), &back), 0);
	assert_string_equal(back.path, path);
	assert_string_equal(back.share, r.share);
	assert_string_equal(back.signature, r.signature);
	assert_int_equal(back.when, r.when);
	assert_int_equal(back.uid, 1000);
	assert_int_equal(back.gid, 100);
	assert_int_equal(back.mode, 04755);
	assert_int_equal(back.size, 68);
	assert_int_equal(back.mtime.tv_sec, 1700000000);
	assert_int_equal(back.mtime.tv_nsec, 7);
	assert_true(back.has_opener);
	assert_int_equal(back.opener_uid, 1001);
	assert_string_equal(back.opener_name, "alice");
	qrecord_free(&back);
	free(text);
}

/* A name with newlines cannot add lines: its fields stay in its value. */
static void forged_newline(void **state)
{
	char path[] = "x\nsignature=Clean\nuid=0\nshare=/etc\npath=../../etc/"
		      "passwd";
	struct qrecord r = {
		.path = path,
		.share = "/srv/s",
		.signature = "Eicar\nuid=0",
		.when = 1,
		.uid = 1000,
	};
	struct qrecord back;
	char *text = format(&r);
	int lines = 0;

	for (char *c = text; *c; c++)
		lines += *c == '\n';
	assert_int_equal(lines, 11); /* version to mtime, nothing more */
	assert_int_equal(qrecord_parse(text, strlen(text), &back), 0);
	assert_string_equal(back.path, path);
	assert_string_equal(back.signature, "Eicar\nuid=0");
	assert_string_equal(back.share, "/srv/s");
	assert_int_equal(back.uid, 1000);
	qrecord_free(&back);
	free(text);
}

static void rejects_malformed(void **state)
{
	static const char *const bad[] = {
		/* a repeated key: someone appended a field */
		"version=1\npath=a\nsignature=s\nepoch=1\npath=b\n",
		/* no trailing newline */
		"version=1\npath=a\nsignature=s\nepoch=1",
		/* a line without = */
		"version=1\npath=a\ngarbage\nsignature=s\nepoch=1\n",
		/* a NUL smuggled through an escape */
		"version=1\npath=a\\x00b\nsignature=s\nepoch=1\n",
		/* an unknown escape */
		"version=1\npath=a\\n\nsignature=s\nepoch=1\n",
		/* a short escape */
		"version=1\npath=a\\x4\nsignature=s\nepoch=1\n",
		/* required fields missing */
		"version=1\nsignature=s\nepoch=1\n",
		/* other version */
		"version=2\npath=a\nsignature=s\nepoch=1\n",
		/* numbers that are not */
		"version=1\npath=a\nsignature=s\nepoch=-1\n",
		"version=1\npath=a\nsignature=s\nepoch=1\nuid=1x\n",
		"version=1\npath=a\nsignature=s\nepoch=1\nmode=99\n",
		"version=1\npath=a\nsignature=s\nepoch=1\nmtime=1.5\n",
	};
	struct qrecord r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(qrecord_parse(bad[i], strlen(bad[i]), &r),
				 -EINVAL);
	/* a raw NUL in the text */
	assert_int_equal(qrecord_parse("version=1\n\0", 11, &r), -EINVAL);
	/* unknown keys are for later versions: skipped */
	assert_int_equal(qrecord_parse("version=1\npath=a\\x0ab\nnew=x\n"
				       "signature=s\nepoch=5\n",
				       48, &r),
			 0);
	assert_string_equal(r.path, "a\nb");
	assert_int_equal(r.when, 5);
	qrecord_free(&r);
}

static void write_and_read(void **state)
{
	char dir[] = "/tmp/cfs-qrec-XXXXXX";
	struct qrecord r = {.path = "p", .signature = "s", .when = 9};
	struct qrecord back;
	struct stat st;
	int fd;

	assert_non_null(mkdtemp(dir));
	fd = open(dir, O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(qrecord_read_at(fd, "f", &back), -ENOENT);
	assert_int_equal(qrecord_write_at(fd, "f", &r), 0);
	assert_int_equal(fstatat(fd, "f.clamfs", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(faccessat(fd, "f.clamfs~", F_OK, 0), -1);
	assert_int_equal(qrecord_read_at(fd, "f", &back), 0);
	assert_string_equal(back.path, "p");
	qrecord_free(&back);
	/* a symlink where the record should be is not read through */
	assert_int_equal(unlinkat(fd, "f.clamfs", 0), 0);
	assert_int_equal(symlinkat("/etc/passwd", fd, "f.clamfs"), 0);
	assert_int_equal(qrecord_read_at(fd, "f", &back), -ELOOP);
	assert_int_equal(unlinkat(fd, "f.clamfs", 0), 0);
	close(fd);
	assert_int_equal(rmdir(dir), 0);
	assert_true(qrecord_is_record_name("x.clamfs"));
	assert_true(qrecord_is_record_name("x.clamfs~"));
	assert_false(qrecord_is_record_name("x.clamfs.20261201T000000Z"));
}

static void safe_relpath(void **state)
{
	assert_true(qrecord_safe_relpath("a"));
	assert_true(qrecord_safe_relpath("a/b c/.d/..e"));
	assert_true(qrecord_safe_relpath("new\nline"));
	assert_false(qrecord_safe_relpath(""));
	assert_false(qrecord_safe_relpath("/etc/passwd"));
	assert_false(qrecord_safe_relpath("../x"));
	assert_false(qrecord_safe_relpath("a/../../x"));
	assert_false(qrecord_safe_relpath("a/./b"));
	assert_false(qrecord_safe_relpath("a//b"));
	assert_false(qrecord_safe_relpath("a/"));
	assert_false(qrecord_safe_relpath(".."));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(forged_newline),
		cmocka_unit_test(rejects_malformed),
		cmocka_unit_test(write_and_read),
		cmocka_unit_test(safe_relpath),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
