// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Log rate limiting: a burst passes, the rest is counted and reported with
 * the first line of the next window. The journal's native protocol, byte
 * for byte as journald parses it, and the fallback to stderr with a
 * priority when the journal's socket is gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static void test_burst_then_count(void **state)
{
	struct log_limit l = {0};
	unsigned long held;

	for (int i = 0; i < LOG_BURST; i++) {
		assert_true(log_limit_pass_at(&l, 100, &held));
		assert_int_equal(held, 0);
	}
	for (int i = 0; i < 25; i++)
		assert_false(
			log_limit_pass_at(&l, 100 + LOG_WINDOW - 1, &held));
	/* a new window: the first line says how many were held back */
	assert_true(log_limit_pass_at(&l, 100 + LOG_WINDOW, &held));
	assert_int_equal(held, 25);
	assert_true(log_limit_pass_at(&l, 100 + LOG_WINDOW, &held));
	assert_int_equal(held, 0);
}

static void test_quiet_kind_always_passes(void **state)
{
	struct log_limit l = {0};
	unsigned long held;

	for (long t = 0; t < 1000; t += LOG_WINDOW) {
		assert_true(log_limit_pass_at(&l, t, &held));
		assert_int_equal(held, 0);
	}
}

static void test_journal_native_then_stderr(void **state)
{
	char dir[] = "/tmp/clamfs-logtest-XXXXXX", path[128], env[64];
	char got[4096], err[512];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	FILE *errf = tmpfile();
	int sock, saved = dup(STDERR_FILENO);
	ssize_t n;
	const struct log_field fields[] = {
		{"FILE_PATH", "a\nb"},
		{"SIGNATURE", NULL}, /* left out */
		{"USER_ID", "1000"},
	};
	static const char want[] =
		"MESSAGE=infected x mount=\"/srv/s\\x0ah\": /srv/s T FOUND\n"
		"PRIORITY=4\nSYSLOG_IDENTIFIER=clamfs\nSYSLOG_FACILITY=3\n"
		"CLAMFS_MOUNT\n\x08\0\0\0\0\0\0\0/srv/s\nh\n"
		"MESSAGE_ID=" LOG_ID_INFECTED "\n"
		"FILE_PATH\n\x03\0\0\0\0\0\0\0a\nb\n"
		"USER_ID=1000\n";

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/journal", dir);
	strcpy(sa.sun_path, path);
	sock = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_int_equal(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* stderr is the journal's stream, as systemd sets it up */
	assert_non_null(errf);
	assert_int_equal(dup2(fileno(errf), STDERR_FILENO), STDERR_FILENO);
	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	setenv("CLAMFS_JOURNAL_SOCKET", path, 1);
	log_set_mount("/srv/s\nh");

	log_event(LOG_LEVEL_WARN, LOG_ID_INFECTED, fields, 3, "/srv/s T FOUND",
		  "infected %s", "x");
	n = recv(sock, got, sizeof(got), MSG_DONTWAIT);
	assert_int_equal(n, sizeof(want) - 1);
	assert_memory_equal(got, want, sizeof(want) - 1);

	/* no journal to take it: stderr, with the priority, no "clamfs: " */
	close(sock);
	unlink(path);
	log_notice("clamd answers %s", "again");
	fflush(stderr);
	rewind(errf);
	n = (ssize_t)fread(err, 1, sizeof(err) - 1, errf);
	err[n < 0 ? 0 : n] = '\0';
	assert_string_equal(err,
			    "<5>clamd answers again mount=\"/srv/s\\x0ah\"\n");

	dup2(saved, STDERR_FILENO);
	close(saved);
	fclose(errf);
	rmdir(dir);
}

/*
 * A name can make the fields before the tail as long as it likes: they are
 * cut, and the line still ends in "PATH: SIG FOUND" for the rules that
 * look for it.
 */
static void test_long_line_keeps_its_tail(void **state)
{
	static char big[12000], err[40000], tail[LOG_TAIL_MAX];
	FILE *errf = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n, want, off;

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	memset(tail, 'p', sizeof(tail) - 1);
	memcpy(tail + sizeof(tail) - 12, ": T FOUND", 10);
	assert_non_null(errf);
	unsetenv("JOURNAL_STREAM");
	assert_int_equal(dup2(fileno(errf), STDERR_FILENO), STDERR_FILENO);
	log_set_mount("/srv/s");
	log_event(LOG_LEVEL_WARN, LOG_ID_INFECTED, NULL, 0, tail,
		  "infected path=\"%s\"", big);
	fflush(stderr);
	rewind(errf);
	n = fread(err, 1, sizeof(err) - 1, errf);
	err[n] = '\0';
	dup2(saved, STDERR_FILENO);
	close(saved);
	fclose(errf);
	want = strlen(tail) + strlen(" mount=\"/srv/s\": \n");
	assert_true(n > want + 8192);
	/* "clamfs: " or, once the journal test ran, "<4>" (once per run) */
	off = strncmp(err, "<4>", 3) == 0 ? 3 : 8;
	assert_memory_equal(err + off, "infected path=\"aaa", 18);
	assert_memory_equal(err + n - want, " mount=\"/srv/s\": ", 17);
	assert_string_equal(err + n - want + 17 + strlen(tail), "\n");
	assert_memory_equal(err + n - want + 17, tail, strlen(tail));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_count),
		cmocka_unit_test(test_quiet_kind_always_passes),
		cmocka_unit_test(test_journal_native_then_stderr),
		cmocka_unit_test(test_long_line_keeps_its_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
