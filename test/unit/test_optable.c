// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The option table against itself and against the documents that list
 * its keys: clamfs(8) names every -o key, clamfs.ini(5) and the sample
 * etc/clamfs.ini every INI key in its section, and none of them names a
 * key that does not exist. Also what the table derives: defaults, the
 * reload description.
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "optable.h"
#include "opts.h"

#ifndef CLAMFS_SOURCE_DIR
#error "CLAMFS_SOURCE_DIR names the source tree (test/unit/clamfs.cmake)"
#endif

#define MAX_ROWS 128

/* How often each row was named by the document under test. */
static unsigned int seen[MAX_ROWS];

static size_t n_rows(void)
{
	size_t n = 0;

	while (optable[n].name)
		n++;
	assert_true(n < MAX_ROWS);
	return n;
}

static FILE *open_doc(const char *rel)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", CLAMFS_SOURCE_DIR, rel);
	f = fopen(path, "re");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	return f;
}

/*
 * Counts a key named in doc at line: it must be a row (by its name, not
 * an alias) and, when section is not NULL, a key of that INI section.
 */
static void name_key(const char *doc, int line, const char *key,
		     const char *section)
{
	const struct opt_row *row = optable_find(key);

	if (!row || strcmp(row->name, key) != 0)
		fail_msg("%s:%d: names '%s', which is not a key", doc, line,
			 key);
	if (section && (!row->section || strcmp(row->section, section) != 0))
		fail_msg("%s:%d: puts '%s' in [%s]; the table says [%s]", doc,
			 line, key, section,
			 row->section ? row->section : "command line only");
	seen[row - optable]++;
}

/* Every row that pred selects must have been named in doc. */
static void all_named(const char *doc, bool ini_only)
{
	for (size_t i = 0; i < n_rows(); i++) {
		if (ini_only && !optable[i].section)
			continue;
		if (!seen[i])
			fail_msg("%s does not document the key '%s'", doc,
				 optable[i].name);
	}
}

static size_t ident_len(const char *s)
{
	size_t n = 0;

	while (islower((unsigned char)s[n]) || s[n] == '_' ||
	       isdigit((unsigned char)s[n]))
		n++;
	return n;
}

/* The sample INI: "key = value" lines, commented out or not. */
static void test_sample_ini_names_every_key(void **state)
{
	const char *doc = "etc/clamfs.ini";
	FILE *f = open_doc(doc);
	char buf[1024], section[64] = "", key[64];
	int line = 0;

	memset(seen, 0, sizeof(seen));
	while (fgets(buf, sizeof(buf), f)) {
		char *s = buf;
		size_t n;

		line++;
		if (sscanf(buf, "[%63[^]]]", section) == 1)
			continue;
		s += strspn(s, ";# \t");
		n = ident_len(s);
		if (n == 0 || n >= sizeof(key) ||
		    s[n + strspn(s + n, " ")] != '=')
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)n, s);
		if (!section[0])
			fail_msg("%s:%d: '%s' outside a section", doc, line,
				 key);
		name_key(doc, line, key, section);
	}
	fclose(f);
	all_named(doc, true);
	(void)state;
}

/*
 * clamfs.ini(5): under ".SH [section]", the tag line after each .TP
 * names keys as the unquoted words of a .BI/.B line.
 */
static void test_ini_man_page_names_every_key(void **state)
{
	const char *doc = "clamfs/clamfs.ini.5";
	FILE *f = open_doc(doc);
	char buf[1024], section[64] = "";
	bool tag = false;
	int line = 0;

	memset(seen, 0, sizeof(seen));
	while (fgets(buf, sizeof(buf), f)) {
		bool quoted = false;
		char *s;

		line++;
		if (strncmp(buf, ".SH ", 4) == 0) {
			if (sscanf(buf, ".SH [%63[^]]]", section) != 1)
				section[0] = '\0';
			continue;
		}
		if (strncmp(buf, ".TP", 3) == 0) {
			tag = true;
			continue;
		}
		if (!tag || !section[0] || buf[0] != '.') {
			tag = false;
			continue;
		}
		tag = false;
		s = buf + strcspn(buf, " "); /* past the macro */
		for (; *s; s++) {
			size_t n;
			char key[64];

			if (*s == '"') {
				quoted = !quoted;
				continue;
			}
			n = ident_len(s);
			if (quoted || n == 0 || s[-1] != ' ')
				continue;
			snprintf(key, sizeof(key), "%.*s", (int)n, s);
			name_key(doc, line, key, section);
			s += n - 1;
		}
	}
	fclose(f);
	all_named(doc, true);
	(void)state;
}

/*
 * clamfs(8): tag lines starting "\-o" name "key=" (or a bare flag "\-o
 * key"), several per line with ", key=".
 */
static void test_man_page_names_every_option(void **state)
{
	const char *doc = "clamfs/clamfs.8";
	FILE *f = open_doc(doc);
	char buf[1024], text[1024];
	bool tag = false;
	int line = 0;

	memset(seen, 0, sizeof(seen));
	while (fgets(buf, sizeof(buf), f)) {
		char *s, *o = text;

		line++;
		if (strncmp(buf, ".TP", 3) == 0) {
			tag = true;
			continue;
		}
		if (!tag)
			continue;
		tag = false;
		/* the macro, then the text without quotes */
		for (s = buf + strcspn(buf, " "); *s == ' '; s++)
			;
		for (; *s; s++)
			if (*s != '"')
				*o++ = *s;
		*o = '\0';
		if (strncmp(text, "\\-o ", 4) != 0)
			continue;
		for (s = text + 4; *s; s++) {
			size_t n = ident_len(s);
			char key[64];

			if (n == 0 || (s != text + 4 && s[-1] != ' ')) {
				continue;
			}
			/* a bare word after "-o " is a flag; else "key=" */
			if (s[n] == '=' || (s == text + 4 && s[n] != '=')) {
				snprintf(key, sizeof(key), "%.*s", (int)n, s);
				name_key(doc, line, key, NULL);
			}
			s += n - 1;
		}
	}
	fclose(f);
	all_named(doc, false);
	(void)state;
}

/* Every row is complete, and its default passes its own checks. */
static void test_rows_are_complete(void **state)
{
	struct clamfs_opts o;

	for (size_t i = 0; i < n_rows(); i++) {
		const struct opt_row *r = &optable[i];

		assert_non_null(r->help);
		assert_ptr_equal(optable_find(r->name), r);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(optable[j].name, r->name);
		if (r->type == OPT_WORD || r->type == OPT_BOOL_WORD)
			assert_non_null(r->words);
		if (r->type != OPT_FLAG && r->type != OPT_NOT_FLAG)
			assert_non_null(r->metavar);
	}
	/* optable_defaults fails if a default does not parse */
	assert_int_equal(optable_defaults(&o), 0);
	assert_int_equal(o.threads, OPTS_DEFAULT_THREADS);
	assert_string_equal(o.clamd, OPTS_DEFAULT_CLAMD);
	assert_int_equal(o.scan_mode, -1);
	assert_int_equal(o.log_level, LOG_LEVEL_INFO);
	assert_true(o.default_permissions);
	opts_free(&o);
	(void)state;
}

static void set(struct clamfs_opts *o, const char *key, const char *value)
{
	char arg[256], err[256];

	snprintf(arg, sizeof(arg), "%s=%s", key, value);
	assert_int_equal(
		optable_set(o, optable_find(key), value, arg, err, sizeof(err)),
		0);
}

/* The reload line comes from the table's reload column. */
static void test_describe_by_reload_kind(void **state)
{
	struct clamfs_opts a, b;
	char buf[512] = "";

	assert_int_equal(optable_defaults(&a), 0);
	assert_int_equal(optable_defaults(&b), 0);
	assert_false(optable_describe(&a, &b, RELOAD_LIVE, buf, sizeof(buf)));
	set(&b, "on_infected", "log");
	set(&b, "exclude", "*.tmp");
	set(&b, "deny_errno", "EPERM");
	set(&b, "cache_ttl", "600");
	set(&b, "threads", "4");
	set(&b, "clamd_wait", "30");
	assert_true(optable_describe(&a, &b, RELOAD_LIVE, buf, sizeof(buf)));
	assert_string_equal(buf, "exclude 0->1, on_infected deny->log, "
				 "deny_errno EACCES->EPERM");
	buf[0] = '\0';
	assert_true(optable_describe(&a, &b, RELOAD_CACHE, buf, sizeof(buf)));
	assert_string_equal(buf, "cache_ttl 3600->600");
	buf[0] = '\0';
	assert_true(
		optable_name_changes(&a, &b, RELOAD_REMOUNT, buf, sizeof(buf)));
	assert_string_equal(buf, "threads");
	assert_false(optable_differs(&a, &b, RELOAD_POOL));
	assert_false(optable_differs(&a, &b, RELOAD_FLEET));
	assert_false(optable_differs(&a, &b, RELOAD_HOOK));
	/* new connections to the same clamds: no other clamd's verdicts */
	set(&b, "scan_timeout", "30");
	set(&b, "clamd_connections", "4");
	set(&b, "clamd_connect_timeout", "2");
	buf[0] = '\0';
	assert_true(optable_describe(&a, &b, RELOAD_FLEET, buf, sizeof(buf)));
	assert_string_equal(buf, "clamd_connections 0->4, "
				 "clamd_connect_timeout 5->2, "
				 "scan_timeout 60->30");
	assert_false(optable_differs(&a, &b, RELOAD_POOL));
	set(&b, "scan_mode", "stream");
	assert_true(optable_differs(&a, &b, RELOAD_POOL));
	/* read at start only: a reload neither applies nor names it */
	assert_true(optable_differs(&a, &b, RELOAD_STARTUP));
	opts_free(&a);
	opts_free(&b);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_ini_names_every_key),
		cmocka_unit_test(test_ini_man_page_names_every_key),
		cmocka_unit_test(test_man_page_names_every_option),
		cmocka_unit_test(test_rows_are_complete),
		cmocka_unit_test(test_describe_by_reload_kind),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
