/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Logging for the clamfs daemon: to stderr while in the foreground, to
 * syslog (ident "clamfs", facility daemon) once daemonized, and to the
 * journal's native socket when stderr is journald's stream (systemd): then
 * every entry has its priority and the mount as fields of their own, and
 * events (detections, clamd going away...) a MESSAGE_ID and their details
 * as fields, so alerting can match on them instead of on the text. Should
 * the journal refuse an entry, it goes to stderr with a "<N>" priority.
 */
#ifndef CLAMFS_LOG_H
#define CLAMFS_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum log_level {
	LOG_LEVEL_ERR,
	LOG_LEVEL_WARN,
	LOG_LEVEL_NOTICE, /* normal but significant: clamd is back */
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

/*
 * The journal's MESSAGE_ID of each kind of event (documented in clamfs(8):
 * `journalctl MESSAGE_ID=...`). Never change one: alerting rules name it.
 */
#define LOG_ID_INFECTED	  "5ddbdbc828e740efa598eb9ccbaf622b"
#define LOG_ID_LIMITS	  "fbba857cdab34f5db12a3b11596bcf37"
#define LOG_ID_SCAN_ERROR "ad30084c538341cfbbba2f321cc74c89"
#define LOG_ID_CLAMD_DOWN "135ccadf8b5f4fc28e8c7deab16098f8"
#define LOG_ID_CLAMD_UP	  "ff83acc91d79408abd5c7c05038989f9"

/* A journal field of an event: NAME is upper case, value any bytes. */
struct log_field {
	const char *name;
	const char *value;
};

/* Sets the destination; before the first call messages go to stderr. */
void log_init(bool to_syslog, enum log_level max_level);

/*
 * Names the mount in every line from now on (' mount="/srv/share"' at
 * the end), so that the lines of several mounts can be told apart.
 */
void log_set_mount(const char *mountpoint);

/*
 * Writes s as a double-quoted log value: quotes, backslashes and control
 * characters escaped, so a file name cannot forge log lines. Every value
 * that comes from outside (names, signatures, reasons) goes through it.
 */
void log_quote(char *buf, size_t len, const char *s);

/* Changes the level at run time (SIGHUP). */
void log_set_level(enum log_level max_level);

/* Whether a message of level would be written: skip costly arguments. */
bool log_wants(enum log_level level);

void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The longest tail of an event line that is kept whole. */
#define LOG_TAIL_MAX 24576

/*
 * An event: the line as fmt says, then the mount, then ": " and tail when
 * tail is not NULL (so a line can end as clamd's "PATH: SIG FOUND" do);
 * in the journal also MESSAGE_ID=id and the n fields (a NULL value is
 * left out). A line too long is cut in its fmt part: the tail (up to
 * LOG_TAIL_MAX bytes) always ends it, as rules that match it expect.
 */
void log_event(enum log_level level, const char *id,
	       const struct log_field *fields, size_t n, const char *tail,
	       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * A budget for one kind of repeated message (e.g. scan failures while
 * clamd is down): at most LOG_BURST lines per LOG_WINDOW seconds; the
 * lines held back are counted and reported with the next one let through.
 * Zero-initialise (static or in a struct).
 */
#define LOG_BURST  10
#define LOG_WINDOW 10

struct log_limit {
	long window_start; /* CLOCK_MONOTONIC seconds */
	unsigned int in_window;
	unsigned long suppressed;
	int lock; /* spinlock: held for a few instructions */
};

/*
 * Whether a line of this kind may be written now. When it may and lines
 * were held back before, *suppressed says how many (else 0).
 */
bool log_limit_pass(struct log_limit *l, unsigned long *suppressed);

/* The same at a given monotonic second (for tests). */
bool log_limit_pass_at(struct log_limit *l, long now_sec,
		       unsigned long *suppressed);

/*
 * Async-signal-safe: writes a fixed message to stderr and the kernel log
 * from a fatal signal handler, where syslog() and stdio may deadlock.
 */
void log_crash(const char *msg);

#endif
