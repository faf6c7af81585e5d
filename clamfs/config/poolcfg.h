/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one place that turns a configuration into clamd backends (a fleet
 * of one pool each), for the daemon (at start and on reload) and for
 * --check alike, so both accept the same addresses and scan modes. No FUSE.
 */
#ifndef CLAMFS_POOLCFG_H
#define CLAMFS_POOLCFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clamdproto.h"
#include "opts.h"
#include "scanq.h"

/* Limits of a backend's settings. */
#define POOLCFG_MAX_WEIGHT   1000
#define POOLCFG_MAX_CONNS    256
#define POOLCFG_MAX_BACKENDS 64

/*
 * Checks every clamd= line of opts: "ADDR [weight=N] [conns=N]", ADDR an
 * absolute socket path (also written unix:/path; the daemon runs from "/"
 * once in the background, so a relative one would change meaning) or
 * tcp://HOST:PORT or tls://HOST:PORT (with a loadable CA, and client
 * certificate and key if set), each address once, and a scan mode every address
 * can carry (fdpass needs UNIX sockets). Fills *mode with the scan mode opts
 * resolves to: the one given, else fdpass when every backend is a UNIX
 * socket and stream otherwise (then each UNIX backend still gets fdpass).
 * 0, or -EINVAL (or -ENAMETOOLONG, -ENOMEM) with a one-line reason in err.
 */
int poolcfg_check(const struct clamfs_opts *opts, enum scan_mode *mode,
		  char *err, size_t errlen);

/*
 * Whether opts' clamd is plain tcp:// to a host that is not (or does not
 * resolve only to) loopback: clamd authenticates nobody, so whoever is on
 * the path can answer for it.
 */
bool poolcfg_plaintext_remote(const struct clamfs_opts *opts);

/*
 * poolcfg_check, then a fleet of opts' clamd backends with opts' scan
 * timeout; each backend gets conns=N connections, else max_conns when it
 * is not 0, else clamd_connections, else scan_threads. Its state changes
 * go to clamfs's log; plain TCP to another host logs a warning. 0 and the fleet
 * in *fleet (not started), or a negative errno with a one-line reason in err.
 */
int poolcfg_new(const struct clamfs_opts *opts, unsigned int max_conns,
		enum scan_mode *mode, struct cdp_fleet **fleet, char *err,
		size_t errlen);

/*
 * What the files tls:// backends load (clamd_tls_ca, _cert, _key) were
 * when stamped: identity, size and times of each, so that one replaced
 * under the same name (a rotated CA or client certificate) is noticed.
 * All zero when no backend is tls://.
 */
struct poolcfg_tls_stamp {
	uint64_t file[3]; /* ca, cert, key; 0: not set */
};

/*
 * Stamps opts' TLS files, to be taken before the fleet that loads them is
 * made: a file replaced in between then differs at the next comparison.
 */
void poolcfg_tls_stamp(const struct clamfs_opts *opts,
		       struct poolcfg_tls_stamp *stamp);

/*
 * Whether a and b differ; appends "clamd_tls_ca file replaced" and the
 * like, ", "-separated, to buf for each file that does.
 */
bool poolcfg_tls_describe(const struct poolcfg_tls_stamp *a,
			  const struct poolcfg_tls_stamp *b, char *buf,
			  size_t len);

#endif
