/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamd's own size limits, read from the clamd.conf of the clamd clamfs
 * talks to, for --check: a clamd limit below clamfs' max_scan_size means
 * files clamd refuses to stream (EIO) or skips and calls clean; and who
 * may connect to clamd's UNIX socket, where anyone connected can stop it.
 */
#ifndef CLAMFS_CLAMDCONF_H
#define CLAMFS_CLAMDCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct clamd_limits {
	uint64_t max_file_size;	    /* MaxFileSize; 0: no limit */
	uint64_t max_scan_size;	    /* MaxScanSize; 0: no limit */
	uint64_t stream_max_length; /* StreamMaxLength; 0: no limit */
	bool alert_exceeds_max;	    /* AlertExceedsMax */
};

/* clamd's defaults for what a clamd.conf does not set (clamd.conf(5)). */
void clamdconf_defaults(struct clamd_limits *l);

/*
 * A clamd.conf size: digits with an optional K/k or M/m suffix. 0 or
 * -EINVAL.
 */
int clamdconf_parse_size(const char *s, uint64_t *out);

/*
 * Reads the limits a clamd.conf sets over the defaults. 0, or negative
 * errno (-EINVAL with the line number in *bad_line for a bad size, or
 * with *bad_line 0 for something that is no regular file of at most
 * CLAMDCONF_MAX_SIZE bytes).
 */
int clamdconf_read(const char *path, struct clamd_limits *l,
		   unsigned int *bad_line);

/*
 * The clamd.conf of the clamd listening at addr (a UNIX socket path,
 * "unix:PATH" or "tcp://127.0.0.1:PORT"): found through the listening
 * process's command line (-c/--config-file), else clamd's default file.
 * Writes the path; returns 1 when the listener was found, 0 when the
 * default is assumed, -EREMOTE when clamd is on another host.
 */
int clamdconf_find(const char *addr, char *path, size_t len);

/*
 * Who may connect to a clamd UNIX socket of this mode: connect() needs
 * write permission, and whoever connects can send SHUTDOWN.
 */
enum clamd_socket_access {
	CLAMD_SOCKET_OWNER,  /* its owner (and root) only */
	CLAMD_SOCKET_GROUP,  /* its group's members too */
	CLAMD_SOCKET_ANYONE, /* every local user (Debian's LocalSocketMode 666)
			      */
};

enum clamd_socket_access clamdconf_socket_access(mode_t mode);

/*
 * The socket path of a UNIX clamd address ("/run/clamd.ctl" or
 * "unix:/run/clamd.ctl"), NULL for tcp:// and tls://.
 */
const char *clamdconf_unix_path(const char *addr);

#define CLAMDCONF_DEFAULT_PATH "/etc/clamav/clamd.conf"

/* Larger is not a clamd.conf (Debian's is about 2 KiB). */
#define CLAMDCONF_MAX_SIZE (1 << 20)

#endif
