// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Log sink: one line per message, "clamfs: " prefixed on stderr, priority
 * mapped on syslog, fields of their own in the journal.
 */
#include "log.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"

static bool log_to_syslog;
/* ' mount="/srv/share"' once the mountpoint is known: every line names it */
static char log_mount[4200];
static char log_mount_raw[4096]; /* the same for the journal's field */
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
	snprintf(log_mount_raw, sizeof(log_mount_raw), "%s", mountpoint);
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
/* the journal's native socket, -1 when stderr is no journal stream */
static int journal_fd = -1;
static struct sockaddr_un journal_addr;

/*
 * Where journald listens; CLAMFS_JOURNAL_SOCKET names another socket (a
 * container's journal, the tests' reader).
 */
static void find_journal(void)
{
	const char *path = getenv("CLAMFS_JOURNAL_SOCKET");

	log_to_journal = stderr_is_journal();
	if (!log_to_journal)
		return;
	if (!path || !*path)
		path = "/run/systemd/journal/socket";
	if (strlen(path) >= sizeof(journal_addr.sun_path))
		return;
	journal_addr.sun_family = AF_UNIX;
	strcpy(journal_addr.sun_path, path);
	journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
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

/* Iovecs of one journal field at most: name, separator, length, value, end. */
#define FIELD_IOVS 5
#define MAX_FIELDS 24

struct entry {
	struct iovec iov[MAX_FIELDS * FIELD_IOVS];
	uint64_t lens[MAX_FIELDS]; /* little endian, for values with a '\n' */
	size_t niov, nfields;
};

/*
 * One field in the native protocol: NAME=value\n, or, for a value holding
 * a newline (a file name may), NAME\n, its length as 64-bit little endian,
 * the bytes and \n.
 */
static void entry_add(struct entry *e, const char *name, const char *value)
{
	size_t vlen = strlen(value);
	struct iovec *v = &e->iov[e->niov];

	if (e->nfields == MAX_FIELDS)
		return;
	v[0] = (struct iovec){(void *)name, strlen(name)};
	if (memchr(value, '\n', vlen)) {
		e->lens[e->nfields] = htole64((uint64_t)vlen);
		v[1] = (struct iovec){(void *)"\n", 1};
		v[2] = (struct iovec){&e->lens[e->nfields], 8};
		v[3] = (struct iovec){(void *)value, vlen};
		v[4] = (struct iovec){(void *)"\n", 1};
		e->niov += 5;
	} else {
		v[1] = (struct iovec){(void *)"=", 1};
		v[2] = (struct iovec){(void *)value, vlen};
		v[3] = (struct iovec){(void *)"\n", 1};
		e->niov += 4;
	}
	e->nfields++;
}

/*
 * Never blocks: a journal that cannot take the entry now gets it through
 * stderr instead (the caller's fallback), as a full stream would block.
 */
static int journal_send(int prio, const char *message, const char *id,
			const struct log_field *fields, size_t n)
{
	static struct entry e;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	char priority[4];
	struct msghdr mh = {
		.msg_name = &journal_addr,
		.msg_namelen = sizeof(journal_addr),
	};
	int ret = 0;

	if (journal_fd < 0)
		return -ENOTCONN;
	snprintf(priority, sizeof(priority), "%d", prio);
	pthread_mutex_lock(&lock);
	e.niov = e.nfields = 0;
	entry_add(&e, "MESSAGE", message);
	entry_add(&e, "PRIORITY", priority);
	entry_add(&e, "SYSLOG_IDENTIFIER", "clamfs");
	entry_add(&e, "SYSLOG_FACILITY", "3"); /* daemon, as syslog() says */
	if (log_mount_raw[0])
		entry_add(&e, "CLAMFS_MOUNT", log_mount_raw);
	if (id)
		entry_add(&e, "MESSAGE_ID", id);
	for (size_t i = 0; i < n; i++)
		if (fields[i].value)
			entry_add(&e, fields[i].name, fields[i].value);
	mh.msg_iov = e.iov;
	mh.msg_iovlen = e.niov;
	if (sendmsg(journal_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		ret = -errno;
	pthread_mutex_unlock(&lock);
	return ret;
}

static void log_vemit(enum log_level level, const char *id,
		      const struct log_field *fields, size_t n,
		      const char *tail, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO,
				   LOG_DEBUG};
	char line[8192 + sizeof(log_mount) + 2 + LOG_TAIL_MAX];
	size_t used, tail_len = tail ? strnlen(tail, LOG_TAIL_MAX) : 0;
	size_t room;
	int len;

	if (level > __atomic_load_n(&log_max, __ATOMIC_RELAXED))
		return;
	/* what fmt may fill, so that mount and tail always fit after it */
	room = sizeof(line) - strlen(log_mount) - (tail ? 2 + tail_len : 0);
	len = vsnprintf(line, room, fmt, ap);
	used = len < 0 ? 0 : (size_t)len < room ? (size_t)len : room - 1;
	snprintf(line + used, sizeof(line) - used, "%s%s%.*s", log_mount,
		 tail ? ": " : "", (int)tail_len, tail ? tail : "");
	if (log_to_syslog)
		syslog(prio[level], "%s", line);
	else if (!journal_stream())
		fprintf(stderr, "clamfs: %s\n", line);
	/* journald names the program itself: no "clamfs: " of ours */
	else if (journal_send(prio[level], line, id, fields, n) != 0)
		fprintf(stderr, "<%d>%s\n", prio[level], line);
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
		log_vemit(level, NULL, NULL, 0, NULL, fmt, ap);                \
		va_end(ap);                                                    \
	}

LOG_FN(log_err, LOG_LEVEL_ERR)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_notice, LOG_LEVEL_NOTICE)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_debug, LOG_LEVEL_DEBUG)

void log_event(enum log_level level, const char *id,
	       const struct log_field *fields, size_t n, const char *tail,
	       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(level, id, fields, n, tail, fmt, ap);
	va_end(ap);
}

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
