// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamd addresses: parsing "tcp://host:port", "tcp://[v6]:port", the same
 * with tls:// (TLS on top: tls.c), and UNIX socket paths, and connecting to
 * them with a deadline.  Host names are
 * resolved per connect so a moved clamd is followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define CDP_DEFAULT_PORT 3310

struct cdp_addr {
	enum cdp_addr_kind kind;
	unsigned port;
	char host[]; /* socket path or host name */
};

static int addr_alloc(enum cdp_addr_kind kind, const char *host, size_t len,
		      unsigned port, struct cdp_addr **addrp)
{
	struct cdp_addr *a = malloc(sizeof(*a) + len + 1);

	if (!a)
		return -ENOMEM;
	a->kind = kind;
	a->port = port;
	memcpy(a->host, host, len);
	a->host[len] = '\0';
	*addrp = a;
	return 0;
}

static int parse_port(const char *s, unsigned *portp)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -EINVAL;
	}
	if (v == 0)
		return -EINVAL;
	*portp = (unsigned)v;
	return 0;
}

static int parse_tcp(const char *s, enum cdp_addr_kind kind,
		     struct cdp_addr **addrp)
{
	const char *host = s, *end, *port = NULL;
	unsigned portnum = CDP_DEFAULT_PORT;
	size_t hlen;
	int rc;

	if (*s == '[') {
		host = s + 1;
		end = strchr(host, ']');
		if (!end || end == host)
			return -EINVAL;
		hlen = (size_t)(end - host);
		if (memchr(host, '[', hlen))
			return -EINVAL;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return -EINVAL;
	} else {
		end = strchr(s, ':');
		hlen = end ? (size_t)(end - s) : strlen(s);
		if (end) {
			port = end + 1;
			/* An IPv6 literal must be bracketed. */
			if (strchr(port, ':'))
				return -EINVAL;
		}
		if (memchr(s, '[', hlen) || memchr(s, ']', hlen) ||
		    memchr(s, '/', hlen))
			return -EINVAL;
	}
	if (hlen == 0 || hlen > 255)
		return -EINVAL;
	if (port) {
		rc = parse_port(port, &portnum);
		if (rc)
			return rc;
	}
	return addr_alloc(kind, host, hlen, portnum, addrp);
}

int cdp_addr_parse(const char *s, struct cdp_addr **addrp)
{
	size_t len;

	if (!s || !*s)
		return -EINVAL;
	if (strncmp(s, "tcp://", 6) == 0)
		return parse_tcp(s + 6, CDP_ADDR_TCP, addrp);
	if (strncmp(s, "tls://", 6) == 0)
		return parse_tcp(s + 6, CDP_ADDR_TLS, addrp);
	if (strncmp(s, "unix:", 5) == 0)
		s += 5;
	if (strstr(s, "://"))
		return -EINVAL; /* a scheme we do not speak */
	len = strlen(s);
	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return addr_alloc(CDP_ADDR_UNIX, s, len, 0, addrp);
}

void cdp_addr_free(struct cdp_addr *addr)
{
	free(addr);
}

enum cdp_addr_kind cdp_addr_kind(const struct cdp_addr *addr)
{
	return addr->kind;
}

const char *cdp_addr_host(const struct cdp_addr *addr)
{
	return addr->host;
}

unsigned cdp_addr_port(const struct cdp_addr *addr)
{
	return addr->port;
}

/*
 * How long to wait before connect() is tried again after EAGAIN: short
 * against a scan's deadline, long enough not to spin.
 */
#define CONNECT_AGAIN_MS 5

/*
 * EAGAIN is no connect in progress: a UNIX socket's listener has a full
 * backlog (clamd's MaxConnectionQueueLength), or (TCP) the kernel had no
 * room for the route, and the socket stays unconnected; polling it would
 * report it writable at once. Wait a moment, as a blocking connect()
 * would, within the deadline and the cancel. 0 to try again, or -errno.
 */
static int connect_again(int64_t deadline, struct cdp_cancel *cancel)
{
	int64_t left = deadline - cdp_now_ms();

	if (cdp_cancel_triggered(cancel))
		return -ECANCELED;
	if (left <= 0)
		return -ETIMEDOUT;
	poll(NULL, 0, left < CONNECT_AGAIN_MS ? (int)left : CONNECT_AGAIN_MS);
	return 0;
}

/* Finish a non-blocking connect() within the deadline. */
static int connect_wait(int fd, const struct sockaddr *sa, socklen_t salen,
			int64_t deadline, struct cdp_cancel *cancel)
{
	socklen_t elen = sizeof(int);
	int rc, err = 0;

	for (;;) {
		if (connect(fd, sa, salen) == 0)
			return 0;
		if (errno != EAGAIN)
			break;
		rc = connect_again(deadline, cancel);
		if (rc)
			return rc;
	}
	if (errno != EINPROGRESS)
		return -errno;
	rc = cdp_wait(fd, POLLOUT, deadline, cancel);
	if (rc < 0)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		return -errno;
	return err ? -err : 0;
}

static int new_socket(int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	return fd < 0 ? -errno : fd;
}

static int connect_unix(const struct cdp_addr *addr, int64_t deadline,
			struct cdp_cancel *cancel)
{
	struct sockaddr_un sun;
	int fd, rc;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, addr->host, strlen(addr->host) + 1);
	fd = new_socket(AF_UNIX);
	if (fd < 0)
		return fd;
	rc = cdp_cancel_attach(cancel, fd);
	if (!rc)
		rc = connect_wait(fd, (struct sockaddr *)&sun, sizeof(sun),
				  deadline, cancel);
	cdp_cancel_detach(cancel);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static int connect_tcp(const struct cdp_addr *addr, int64_t deadline,
		       struct cdp_cancel *cancel)
{
	struct addrinfo hints, *res = NULL, *ai;
	char port[8];
	int fd = -1, rc, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
	snprintf(port, sizeof(port), "%u", addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc == EAI_SYSTEM)
		return -errno;
	if (rc == EAI_MEMORY)
		return -ENOMEM;
	if (rc)
		return -EHOSTUNREACH;

	rc = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = new_socket(ai->ai_family);
		if (fd < 0) {
			rc = fd;
			continue;
		}
		rc = cdp_cancel_attach(cancel, fd);
		if (!rc)
			rc = connect_wait(fd, ai->ai_addr, ai->ai_addrlen,
					  deadline, cancel);
		cdp_cancel_detach(cancel);
		if (!rc)
			break;
		close(fd);
		fd = -1;
		if (rc == -ETIMEDOUT || rc == -ECANCELED)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	/* Commands and chunk headers are small writes; do not let Nagle
	 * hold them back waiting for clamd's delayed ACK. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int cdp_addr_connect(const struct cdp_addr *addr, int64_t deadline,
		     struct cdp_cancel *cancel)
{
	if (addr->kind == CDP_ADDR_UNIX)
		return connect_unix(addr, deadline, cancel);
	return connect_tcp(addr, deadline, cancel);
}
