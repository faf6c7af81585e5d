// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Configuration to clamd pool: the address rules and the scan mode an
 * address resolves to, shared by the daemon and --check.
 */
#include "poolcfg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *addr_error(int ret)
{
	return ret == -EINVAL ? "not a socket path or tcp://HOST:PORT"
			      : strerror(-ret);
}

int poolcfg_check(const struct clamfs_opts *opts, enum scan_mode *mode,
		  char *err, size_t errlen)
{
	const char *path = opts->clamd;
	struct cdp_addr *addr;
	bool unix_socket;
	int ret;

	if (strncmp(path, "unix:", 5) == 0)
		path += 5;
	if (path[0] != '/' && strncmp(opts->clamd, "tcp://", 6) != 0) {
		snprintf(err, errlen,
			 "clamd=%s: want an absolute socket path or "
			 "tcp://HOST:PORT",
			 opts->clamd);
		return -EINVAL;
	}
	ret = cdp_addr_parse(opts->clamd, &addr);
	if (ret) {
		snprintf(err, errlen, "clamd=%s: %s", opts->clamd,
			 addr_error(ret));
		return ret;
	}
	unix_socket = cdp_addr_kind(addr) == CDP_ADDR_UNIX;
	cdp_addr_free(addr);
	*mode = opts->scan_mode >= 0 ? (enum scan_mode)opts->scan_mode
		: unix_socket	     ? SCAN_MODE_FDPASS
				     : SCAN_MODE_STREAM;
	if (*mode == SCAN_MODE_FDPASS && !unix_socket) {
		snprintf(err, errlen,
			 "scan_mode=fdpass needs clamd on a UNIX socket; use "
			 "scan_mode=stream over TCP");
		return -EINVAL;
	}
	return 0;
}

int poolcfg_new(const struct clamfs_opts *opts, unsigned int max_conns,
		enum scan_mode *mode, struct cdp_pool **pool, char *err,
		size_t errlen)
{
	struct cdp_config cfg;
	int ret;

	*pool = NULL;
	ret = poolcfg_check(opts, mode, err, errlen);
	if (ret)
		return ret;
	cdp_config_init(&cfg);
	cfg.addr = opts->clamd;
	cfg.max_conns = max_conns		  ? max_conns
			: opts->clamd_connections ? opts->clamd_connections
						  : opts->scan_threads;
	cfg.scan_timeout_ms = (int)opts->scan_timeout * 1000;
	cfg.connect_timeout_ms = (int)opts->clamd_connect_timeout * 1000;
	ret = cdp_pool_new(&cfg, pool);
	if (ret)
		snprintf(err, errlen, "clamd=%s: %s", opts->clamd,
			 addr_error(ret));
	return ret;
}
