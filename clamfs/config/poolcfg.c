// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Configuration to clamd backends: the clamd= line syntax, the address
 * rules, the TLS settings and the scan mode an address resolves to,
 * shared by the daemon and --check.
 */
#include "poolcfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "log.h"

/* One clamd= line, parsed. */
struct backend {
	char addr[512];
	unsigned int weight; /* 0: the default */
	unsigned int conns;  /* 0: the default */
	bool unix_socket;
};

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

/* Whether s is plain tcp:// to a host that is not all loopback. */
static bool plaintext_remote(const char *s)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct cdp_addr *addr;
	bool remote = true;

	if (cdp_addr_parse(s, &addr) != 0)
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

static int check_addr(const struct clamfs_opts *opts, const char *s,
		      bool *unix_socket, char *err, size_t errlen)
{
	const char *path = s;
	struct cdp_addr *addr;
	int ret;

	if (strncmp(path, "unix:", 5) == 0)
		path += 5;
	if (path[0] != '/' && strncmp(s, "tcp://", 6) != 0 &&
	    strncmp(s, "tls://", 6) != 0) {
		snprintf(err, errlen,
			 "clamd=%s: want an absolute socket path, "
			 "tcp://HOST:PORT or tls://HOST:PORT",
			 s);
		return -EINVAL;
	}
	ret = cdp_addr_parse(s, &addr);
	if (ret) {
		snprintf(err, errlen, "clamd=%s: %s", s, addr_error(ret));
		return ret;
	}
	*unix_socket = cdp_addr_kind(addr) == CDP_ADDR_UNIX;
	cdp_addr_free(addr);
	if (strncmp(s, "tls://", 6) == 0) {
		struct cdp_config cfg;
		char why[400];

		cdp_config_init(&cfg);
		cfg.addr = s;
		tls_settings(opts, &cfg);
		ret = cdp_config_check(&cfg, why, sizeof(why));
		if (ret) {
			snprintf(err, errlen, "clamd=%s: %s", s, why);
			return ret;
		}
	}
	return 0;
}

/* "weight=N" or "conns=N" after the address. */
static int parse_setting(const char *line, const char *word, struct backend *b,
			 char *err, size_t errlen)
{
	unsigned long max = POOLCFG_MAX_WEIGHT, n;
	unsigned int *dst = &b->weight;
	const char *v;
	char *end;

	if (strncmp(word, "weight=", 7) == 0) {
		v = word + 7;
	} else if (strncmp(word, "conns=", 6) == 0) {
		v = word + 6;
		dst = &b->conns;
		max = POOLCFG_MAX_CONNS;
	} else {
		snprintf(err, errlen,
			 "clamd=%s: unknown '%s': want ADDR [weight=N] "
			 "[conns=N]",
			 line, word);
		return -EINVAL;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < 1 || n > max) {
		snprintf(err, errlen, "clamd=%s: bad '%s': want 1 to %lu", line,
			 word, max);
		return -EINVAL;
	}
	*dst = (unsigned int)n;
	return 0;
}

/* One line "ADDR [weight=N] [conns=N]" into *b. */
static int parse_line(const struct clamfs_opts *opts, const char *line,
		      struct backend *b, char *err, size_t errlen)
{
	char copy[1024], *save = NULL, *word;
	int ret;

	memset(b, 0, sizeof(*b));
	if (strlen(line) >= sizeof(copy) - 1) {
		snprintf(err, errlen, "clamd=%.40s...: too long", line);
		return -EINVAL;
	}
	strcpy(copy, line);
	word = strtok_r(copy, " \t", &save);
	if (!word) {
		snprintf(err, errlen, "empty clamd= address");
		return -EINVAL;
	}
	if (strlen(word) >= sizeof(b->addr)) {
		snprintf(err, errlen, "clamd=%.40s...: %s", word,
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	strcpy(b->addr, word);
	ret = check_addr(opts, b->addr, &b->unix_socket, err, errlen);
	if (ret)
		return ret;
	while ((word = strtok_r(NULL, " \t", &save))) {
		ret = parse_setting(line, word, b, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* Every line of opts->clamd into a malloc()ed array. */
static int parse_all(const struct clamfs_opts *opts, struct backend **out,
		     size_t *n, char *err, size_t errlen)
{
	const char *line = opts->clamd ? opts->clamd : CDP_DEFAULT_ADDR;
	struct backend *b = NULL;
	size_t count = 0;
	int ret = 0;

	*out = NULL;
	*n = 0;
	while (line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char one[1024];
		struct backend *grown;

		if (count == POOLCFG_MAX_BACKENDS) {
			snprintf(err, errlen, "more than %d clamd= backends",
				 POOLCFG_MAX_BACKENDS);
			ret = -EINVAL;
			goto fail;
		}
		snprintf(one, sizeof(one), "%.*s", (int)len, line);
		grown = realloc(b, (count + 1) * sizeof(*b));
		if (!grown) {
			snprintf(err, errlen, "out of memory");
			ret = -ENOMEM;
			goto fail;
		}
		b = grown;
		ret = parse_line(opts, one, &b[count], err, errlen);
		if (ret)
			goto fail;
		for (size_t i = 0; i < count; i++)
			if (strcmp(b[i].addr, b[count].addr) == 0) {
				snprintf(err, errlen, "clamd=%s given twice",
					 b[i].addr);
				ret = -EINVAL;
				goto fail;
			}
		count++;
		line = nl ? nl + 1 : NULL;
	}
	*out = b;
	*n = count;
	return 0;
fail:
	free(b);
	return ret;
}

static int resolve_mode(const struct clamfs_opts *opts, const struct backend *b,
			size_t n, enum scan_mode *mode, char *err,
			size_t errlen)
{
	bool all_unix = true;

	for (size_t i = 0; i < n; i++)
		all_unix = all_unix && b[i].unix_socket;
	*mode = opts->scan_mode >= 0 ? (enum scan_mode)opts->scan_mode
		: all_unix	     ? SCAN_MODE_FDPASS
				     : SCAN_MODE_STREAM;
	if (*mode == SCAN_MODE_FDPASS && !all_unix) {
		snprintf(err, errlen,
			 "scan_mode=fdpass needs clamd on a UNIX socket; use "
			 "scan_mode=stream over TCP");
		return -EINVAL;
	}
	return 0;
}

int poolcfg_check(const struct clamfs_opts *opts, enum scan_mode *mode,
		  char *err, size_t errlen)
{
	struct backend *b;
	size_t n;
	int ret;

	ret = parse_all(opts, &b, &n, err, errlen);
	if (ret)
		return ret;
	ret = resolve_mode(opts, b, n, mode, err, errlen);
	free(b);
	return ret;
}

bool poolcfg_plaintext_remote(const struct clamfs_opts *opts)
{
	const char *line = opts->clamd ? opts->clamd : CDP_DEFAULT_ADDR;
	bool remote = false;

	while (line && !remote) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char one[1024];

		snprintf(one, sizeof(one), "%.*s", (int)len, line);
		one[strcspn(one, " \t")] = '\0';
		remote = plaintext_remote(one);
		line = nl ? nl + 1 : NULL;
	}
	return remote;
}

static void fleet_log(void *arg, enum cdp_log_level level, const char *msg)
{
	(void)arg;
	if (level == CDP_LOG_WARNING)
		log_warn("%s", msg);
	else
		log_info("%s", msg);
}

int poolcfg_new(const struct clamfs_opts *opts, unsigned int max_conns,
		enum scan_mode *mode, struct cdp_fleet **fleet, char *err,
		size_t errlen)
{
	struct cdp_backend_config *bc = NULL;
	struct cdp_fleet_config cfg;
	struct backend *b = NULL;
	size_t n, bad;
	int ret;

	*fleet = NULL;
	ret = parse_all(opts, &b, &n, err, errlen);
	if (ret)
		return ret;
	ret = resolve_mode(opts, b, n, mode, err, errlen);
	if (ret)
		goto out;
	ret = -ENOMEM;
	bc = calloc(n, sizeof(*bc));
	if (!bc) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	cdp_fleet_config_init(&cfg);
	cfg.pool.max_conns = max_conns		       ? max_conns
			     : opts->clamd_connections ? opts->clamd_connections
						       : opts->scan_threads;
	cfg.pool.scan_timeout_ms = (int)opts->scan_timeout * 1000;
	cfg.pool.connect_timeout_ms = (int)opts->clamd_connect_timeout * 1000;
	tls_settings(opts, &cfg.pool);
	cfg.log = fleet_log;
	/* for the warning when a clamd has fewer threads (doc/fleet.md) */
	cfg.scanners = opts->scan_threads;
	for (size_t i = 0; i < n; i++) {
		bc[i].addr = b[i].addr;
		bc[i].weight = b[i].weight;
		bc[i].max_conns = max_conns ? max_conns : b[i].conns;
		/* stream wherever fdpass cannot go, unless a mode was given */
		bc[i].fildes = *mode == SCAN_MODE_FDPASS ||
			       (opts->scan_mode < 0 && b[i].unix_socket);
	}
	ret = cdp_fleet_new(&cfg, bc, n, fleet, &bad);
	if (ret) {
		snprintf(err, errlen, "clamd=%s: %s", b[bad].addr,
			 addr_error(ret));
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (plaintext_remote(b[i].addr))
			log_warn(
				"clamd=%s is plain TCP to another host: clamd "
				"has no authentication, so anyone on the path "
				"can answer OK for every file; use tls:// with "
				"a TLS terminator next to clamd "
				"(doc/security.md)",
				b[i].addr);
out:
	free(bc);
	free(b);
	return ret;
}

static bool any_tls(const struct clamfs_opts *opts)
{
	for (const char *line = opts->clamd; line;) {
		line += strspn(line, " \t");
		if (strncmp(line, "tls://", 6) == 0)
			return true;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

/* FNV-1a over what stat says of path (or the errno it gives); never 0. */
static uint64_t stamp_file(const char *path)
{
	uint64_t fields[7] = {0}, h = 0xcbf29ce484222325ULL;
	const unsigned char *p = (const unsigned char *)fields;
	struct stat st;

	if (stat(path, &st) == 0) {
		fields[0] = st.st_dev;
		fields[1] = st.st_ino;
		fields[2] = (uint64_t)st.st_size;
		fields[3] = (uint64_t)st.st_mtim.tv_sec;
		fields[4] = (uint64_t)st.st_mtim.tv_nsec;
		fields[5] = (uint64_t)st.st_ctim.tv_sec;
		fields[6] = (uint64_t)st.st_ctim.tv_nsec;
	} else {
		fields[0] = (uint64_t)errno;
	}
	for (size_t i = 0; i < sizeof(fields); i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

void poolcfg_tls_stamp(const struct clamfs_opts *opts,
		       struct poolcfg_tls_stamp *stamp)
{
	const char *files[] = {opts->clamd_tls_ca, opts->clamd_tls_cert,
			       opts->clamd_tls_key};
	bool tls = any_tls(opts);

	for (size_t i = 0; i < 3; i++)
		stamp->file[i] = tls && files[i] ? stamp_file(files[i]) : 0;
}

bool poolcfg_tls_describe(const struct poolcfg_tls_stamp *a,
			  const struct poolcfg_tls_stamp *b, char *buf,
			  size_t len)
{
	static const char *const names[] = {"clamd_tls_ca", "clamd_tls_cert",
					    "clamd_tls_key"};
	bool any = false;

	for (size_t i = 0; i < 3; i++) {
		size_t used = strlen(buf);

		if (a->file[i] == b->file[i])
			continue;
		snprintf(buf + used, len - used, "%s%s file replaced",
			 used ? ", " : "", names[i]);
		any = true;
	}
	return any;
}
