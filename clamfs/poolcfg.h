/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one place that turns a configuration into a clamd connection pool,
 * for the daemon (at start and on reload) and for --check alike, so both
 * accept the same addresses and scan modes. No FUSE.
 */
#ifndef CLAMFS_POOLCFG_H
#define CLAMFS_POOLCFG_H

#include <stdbool.h>
#include <stddef.h>

#include "clamdproto.h"
#include "opts.h"
#include "scanq.h"

/*
 * Checks opts' clamd address and scan mode: an absolute socket path
 * (also written unix:/path; the daemon runs from "/" once in the
 * background, so a relative one would change meaning), tcp://HOST:PORT or
 * tls://HOST:PORT with a loadable CA (and client certificate and key, if
 * set), and a scan mode the address can carry (fdpass needs a UNIX socket).
 * Fills *mode with the scan mode opts resolves to. 0, or -EINVAL (or
 * -ENAMETOOLONG, -ENOMEM) with a one-line reason in err.
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
 * poolcfg_check, then a pool for opts' clamd with opts' scan timeout and
 * max_conns connections (0: clamd_connections, or scan_threads when that
 * is not set). 0 and the pool in *pool, or a negative errno with a
 * one-line reason in err. Logs a warning for plain TCP to another host.
 */
int poolcfg_new(const struct clamfs_opts *opts, unsigned int max_conns,
		enum scan_mode *mode, struct cdp_pool **pool, char *err,
		size_t errlen);

#endif
