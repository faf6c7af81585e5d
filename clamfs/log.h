/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Logging for the clamfs daemon: to stderr while in the foreground, to
 * syslog (ident "clamfs", facility daemon) once daemonized.
 */
#ifndef CLAMFS_LOG_H
#define CLAMFS_LOG_H

#include <stdbool.h>

enum log_level {
	LOG_LEVEL_ERR,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

/* Sets the destination; before the first call messages go to stderr. */
void log_init(bool to_syslog, enum log_level max_level);

/* Changes the level at run time (SIGHUP). */
void log_set_level(enum log_level max_level);

void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Async-signal-safe: writes a fixed message to stderr and the kernel log
 * from a fatal signal handler, where syslog() and stdio may deadlock.
 */
void log_crash(const char *msg);

#endif
