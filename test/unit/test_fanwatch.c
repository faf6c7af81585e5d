// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The backend watch's events (fanwatch.c) from real changes in a directory
 * of the build tree, made by a child process (the watch skips its own).
 * Needs root (CAP_SYS_ADMIN): skipped without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "scratch_dir.h"

#include "fanwatch.h"

#define MAX_EVENTS 256
#define MAX_WANTED 4

static char dir[PATH_MAX];
static int dir_fd = -1;

/*
 * The events about the inodes a test names (the watch covers the whole
 * filesystem, which others write meanwhile).
 */
struct seen {
	dev_t dev;
	ino_t want[MAX_WANTED];
	size_t nwant;
	size_t n;
	struct {
		enum fanwatch_kind kind;
		dev_t dev;
		ino_t ino;
		char name[NAME_MAX + 1];
	} ev[MAX_EVENTS];
};

static void note(void *ctx, const struct fanwatch_event *ev)
{
	struct seen *s = ctx;
	bool wanted = false;

	for (size_t i = 0; i < s->nwant; i++)
		wanted |= ev->dev == s->dev && ev->ino == s->want[i];
	if (!wanted || s->n == MAX_EVENTS)
		return;
	s->ev[s->n].kind = ev->kind;
	s->ev[s->n].dev = ev->dev;
	s->ev[s->n].ino = ev->ino;
	snprintf(s->ev[s->n].name, sizeof(s->ev[s->n].name), "%s",
		 ev->name ? ev->name : "");
	s->n++;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * What the watch reports in ms about the inodes wanted (up to
 * MAX_WANTED, 0-terminated), read as the daemon's thread does.
 */
static void collect(struct fanwatch *w, struct seen *s, int ms,
		    const ino_t *want)
{
	struct pollfd pfd = {.fd = fanwatch_fd(w), .events = POLLIN};
	long long until = now_ms() + ms;
	struct stat d;

	assert_int_equal(fstat(dir_fd, &d), 0);
	memset(s, 0, sizeof(*s));
	s->dev = d.st_dev;
	for (; s->nwant < MAX_WANTED && want[s->nwant]; s->nwant++)
		s->want[s->nwant] = want[s->nwant];
	for (long long left = ms; left > 0; left = until - now_ms())
		if (poll(&pfd, 1, (int)left) == 1)
			assert_true(fanwatch_read(w, note, s) >= 0);
}

static bool has(const struct seen *s, enum fanwatch_kind kind,
		const struct stat *st, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ev[i].kind == kind && s->ev[i].dev == st->st_dev &&
		    s->ev[i].ino == st->st_ino &&
		    (!name || strcmp(s->ev[i].name, name) == 0))
			return true;
	return false;
}

static void stat_at(const char *name, struct stat *st)
{
	assert_int_equal(fstatat(dir_fd, name, st, AT_EMPTY_PATH), 0);
}

/* Runs change(arg) in a child process, as another user of the backend. */
static void by_another(void (*change)(const char *), const char *arg)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		change(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void create(const char *name)
{
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, "x", 1) != 1)
		_exit(1);
	close(fd);
}

static void append(const char *name)
{
	int fd = openat(dir_fd, name, O_WRONLY | O_APPEND | O_CLOEXEC);

	if (fd < 0 || write(fd, "more", 4) != 4)
		_exit(1);
	close(fd);
}

static void make_private(const char *name)
{
	if (fchmodat(dir_fd, name, 0600, 0) != 0)
		_exit(1);
}

static void rename_to_b(const char *name)
{
	if (renameat(dir_fd, name, dir_fd, "b") != 0)
		_exit(1);
}

static void remove_it(const char *name)
{
	if (unlinkat(dir_fd, name, 0) != 0)
		_exit(1);
}

/*
 * Not root, or a build tree on a filesystem that cannot be watched
 * (overlayfs in a container): skipped, except in CI, whose machine can.
 */
static bool cannot_watch_here(int ret)
{
	return ret == -EPERM ||
	       (!getenv("CI") &&
		(ret == -EOPNOTSUPP || ret == -EXDEV || ret == -ENODEV));
}

static struct fanwatch *watch(void)
{
	struct fanwatch *w = NULL;
	int ret = fanwatch_open(dir_fd, &w);

	if (cannot_watch_here(ret))
		skip();
	assert_int_equal(ret, 0);
	return w;
}

static void test_names_come_with_their_directory(void **state)
{
	struct fanwatch *w = watch();
	struct stat d, f;
	struct seen *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	stat_at("", &d);
	ino_t want[] = {d.st_ino, 0};

	by_another(create, "a");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_NAME, &d, "a"));
	stat_at("a", &f);

	by_another(rename_to_b, "a");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_NAME, &d, "a"));
	assert_true(has(s, FANWATCH_NAME, &d, "b"));

	by_another(remove_it, "b");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_NAME, &d, "b"));
	free(s);
	fanwatch_close(w);
}

static void test_content_and_attributes_name_the_object(void **state)
{
	struct fanwatch *w;
	struct stat f;
	struct seen *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	by_another(create, "c");
	stat_at("c", &f);
	ino_t want[] = {f.st_ino, 0};
	w = watch();

	by_another(append, "c");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_CONTENT, &f, NULL));
	assert_false(has(s, FANWATCH_ATTR, &f, NULL));

	by_another(make_private, "c");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_ATTR, &f, NULL));
	assert_false(has(s, FANWATCH_CONTENT, &f, NULL));
	free(s);
	fanwatch_close(w);
}

static void test_own_changes_are_not_reported(void **state)
{
	struct fanwatch *w = watch();
	struct seen *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	struct stat d, f;

	stat_at("", &d);
	/* this process: what the daemon does on the kernel's behalf */
	create("own");
	stat_at("own", &f);
	ino_t want[] = {d.st_ino, f.st_ino, 0};
	append("own");
	make_private("own");
	remove_it("own");
	collect(w, s, 300, want);
	assert_int_equal(s->n, 0);
	/* and the watch still reports others' */
	by_another(create, "theirs");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_NAME, &d, "theirs"));
	free(s);
	fanwatch_close(w);
}

static void make_dir_private(const char *name)
{
	if (fchmodat(dir_fd, name, 0700, 0) != 0)
		_exit(1);
}

static void test_a_directory_s_own_attributes(void **state)
{
	struct fanwatch *w;
	struct stat sub;
	struct seen *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	assert_int_equal(mkdirat(dir_fd, "sub", 0755), 0);
	stat_at("sub", &sub);
	ino_t want[] = {sub.st_ino, 0};
	w = watch();
	/* comes as the directory's handle and ".", with no FID record */
	by_another(make_dir_private, "sub");
	collect(w, s, 300, want);
	assert_true(has(s, FANWATCH_ATTR, &sub, NULL));
	free(s);
	fanwatch_close(w);
}

static void test_refused_where_no_watch_fits(void **state)
{
	struct fanwatch *w = NULL;
	int fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int ret;

	(void)state;
	assert_true(fd >= 0);
	/* procfs has no file handles to report */
	ret = fanwatch_open(fd, &w);
	if (ret == -EPERM)
		skip(); /* not root */
	assert_true(ret < 0);
	assert_null(w);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	dir_fd = scratch_dir_make(dir, "fanwatch");
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
		cmocka_unit_test(test_names_come_with_their_directory),
		cmocka_unit_test(test_content_and_attributes_name_the_object),
		cmocka_unit_test(test_own_changes_are_not_reported),
		cmocka_unit_test(test_a_directory_s_own_attributes),
		cmocka_unit_test(test_refused_where_no_watch_fits),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
