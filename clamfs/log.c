// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Log sink: one line per message, "clamfs: " prefixed on stderr, priority
 * mapped on syslog.
 */
#include "log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"

static bool log_to_syslog;
/* ' mount="/srv/share"' once the mountpoint is known: every line names it */
static char log_mount[4200];
static enum log_level log_max = LOG_LEVEL_INFO; /* read racily: a level */

void log_init(bool to_syslog, enum log_level max_level)
{
	log_to_syslog = to_syslog;
	log_max = max_level;
	if (to_syslog)
		openlog("clamfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_quote(char *buf, size_t len, const char *s)
{
	FILE *f;

	if (len < 3 || !(f = fmemopen(buf, len, "w"))) {
		if (len)
			buf[0] = '\0';
		return;
	}
	/* room for both quotes and the NUL fmemopen adds at fclose */
	fputc('"', f);
	escape_put(f, s, len - 3, ESCAPE_DQUOTE, NULL);
	fputc('"', f);
	fclose(f);
}

void log_set_mount(const char *mountpoint)
{
	char quoted[sizeof(log_mount) - 8];

	log_quote(quoted, sizeof(quoted), mountpoint);
	snprintf(log_mount, sizeof(log_mount), " mount=%s", quoted);
}

/*
 * Under systemd, stderr is a stream to journald when JOURNAL_STREAM names
 * it: a "<N>" prefix then gives each line its syslog priority, so that
 * journalctl -p warning shows detections. A JOURNAL_STREAM inherited by a
 * program started from a service's shell names another file: no prefix.
 */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) == -1)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

static bool log_to_journal;

static void find_journal(void)
{
	log_to_journal = stderr_is_journal();
}

static bool journal_stream(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, find_journal);
	return log_to_journal;
}

void log_set_level(enum log_level max_level)
{
	__atomic_store_n(&log_max, max_level, __ATOMIC_RELAXED);
}

static void log_vemit(enum log_level level, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char line[8192];

	if (level > __atomic_load_n(&log_max, __ATOMIC_RELAXED))
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (log_to_syslog)
		syslog(prio[level], "%s%s", line, log_mount);
	else if (journal_stream())
		fprintf(stderr, "<%d>clamfs: %s%s\n", prio[level], line,
			log_mount);
	else
		fprintf(stderr, "clamfs: %s%s\n", line, log_mount);
}

bool log_wants(enum log_level level)
{
	return level <= __atomic_load_n(&log_max, __ATOMIC_RELAXED);
}

#define LOG_FN(name, level)                                                    \
	void name(const char *fmt, ...)                                        \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		log_vemit(level, fmt, ap);                                     \
		va_end(ap);                                                    \
	}

LOG_FN(log_err, LOG_LEVEL_ERR)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_debug, LOG_LEVEL_DEBUG)

void log_crash(const char *msg)
{
	int kmsg;
	ssize_t ignored;

	ignored = write(STDERR_FILENO, msg, strlen(msg));
	/* stderr is /dev/null once daemonized: the kernel log survives. */
	kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (kmsg >= 0) {
		ignored = write(kmsg, msg, strlen(msg));
		close(kmsg);
	}
	(void)ignored;
}

bool log_limit_pass(struct log_limit *l, unsigned long *suppressed)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return log_limit_pass_at(l, (long)now.tv_sec, suppressed);
}

bool log_limit_pass_at(struct log_limit *l, long now_sec,
		       unsigned long *suppressed)
{
	bool pass;

	while (__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE))
		;
	if (l->in_window == 0 || now_sec - l->window_start >= LOG_WINDOW) {
		l->window_start = now_sec;
		l->in_window = 0;
	}
	pass = l->in_window < LOG_BURST;
	*suppressed = 0;
	if (pass) {
		l->in_window++;
		*suppressed = l->suppressed;
		l->suppressed = 0;
	} else {
		l->suppressed++;
	}
	__atomic_store_n(&l->lock, 0, __ATOMIC_RELEASE);
	return pass;
}
