// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Configuration to clamd pool: the address rules, the TLS settings and the
 * scan mode an address resolves to, shared by the daemon and --check.
 */
#include "poolcfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"

static const char *addr_error(int ret)
{
	return ret == -EINVAL ? "not a socket path, tcp://HOST:PORT or "
				"tls://HOST:PORT"
			      : strerror(-ret);
}

static void tls_settings(const struct clamfs_opts *opts, struct cdp_config *cfg)
{
	cfg->tls_ca = opts->clamd_tls_ca;
	cfg->tls_name = opts->clamd_tls_name;
	cfg->tls_cert = opts->clamd_tls_cert;
	cfg->tls_key = opts->clamd_tls_key;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
			&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

bool poolcfg_plaintext_remote(const struct clamfs_opts *opts)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct cdp_addr *addr;
	bool remote = true;

	if (cdp_addr_parse(opts->clamd, &addr) != 0)
		return false;
	if (cdp_addr_kind(addr) != CDP_ADDR_TCP) {
		cdp_addr_free(addr);
		return false;
	}
	/* A name is judged by what it resolves to now: all loopback or
	 * not; one that does not resolve gets the warning. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(cdp_addr_host(addr), NULL, &hints, &res) == 0) {
		remote = false;
		for (ai = res; ai; ai = ai->ai_next)
			if (!is_loopback(ai->ai_addr))
				remote = true;
		freeaddrinfo(res);
	}
	cdp_addr_free(addr);
	return remote;
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
	if (path[0] != '/' && strncmp(opts->clamd, "tcp://", 6) != 0 &&
	    strncmp(opts->clamd, "tls://", 6) != 0) {
		snprintf(err, errlen,
			 "clamd=%s: want an absolute socket path, "
			 "tcp://HOST:PORT or tls://HOST:PORT",
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
	if (strncmp(opts->clamd, "tls://", 6) == 0) {
		struct cdp_config cfg;
		char why[400];

		cdp_config_init(&cfg);
		cfg.addr = opts->clamd;
		tls_settings(opts, &cfg);
		ret = cdp_config_check(&cfg, why, sizeof(why));
		if (ret) {
			snprintf(err, errlen, "clamd=%s: %s", opts->clamd, why);
			return ret;
		}
	}
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
	tls_settings(opts, &cfg);
	ret = cdp_pool_new(&cfg, pool);
	if (ret)
		snprintf(err, errlen, "clamd=%s: %s", opts->clamd,
			 addr_error(ret));
	else if (poolcfg_plaintext_remote(opts))
		log_warn("clamd=%s is plain TCP to another host: clamd has no "
			 "authentication, so anyone on the path can answer OK "
			 "for every file; use tls:// with a TLS terminator "
			 "next to clamd (doc/security.md)",
			 opts->clamd);
	return ret;
}
