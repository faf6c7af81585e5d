// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One connection to clamd: non-blocking sends and bounded reads, each under
 * a CLOCK_MONOTONIC deadline and a cancellation token, in plain text or over
 * TLS (tls.c).  MSG_NOSIGNAL on every send, so a clamd that hung up never
 * raises SIGPIPE in the caller.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

int cdp_conn_adopt(int fd, bool is_unix, struct cdp_tls *tls, const char *host,
		   int64_t deadline, struct cdp_cancel *cancel,
		   struct cdp_conn **connp, char *why, size_t whylen)
{
	struct cdp_conn *conn;
	int rc;

	if (whylen)
		why[0] = '\0';
	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		rc = -ENOMEM;
		goto out_close;
	}
	rc = cdp_rbuf_init(&conn->rb, CDP_STATS_MAX + 32);
	if (rc)
		goto out_free;
	conn->fd = fd;
	conn->is_unix = is_unix;
	conn->next_id = 1;
	if (tls) {
		rc = cdp_tls_connect(tls, fd, host, deadline, cancel,
				     &conn->ssl, why, whylen);
		if (rc)
			goto out_rbuf;
	}
	*connp = conn;
	return 0;
out_rbuf:
	cdp_rbuf_free(&conn->rb);
out_free:
	free(conn);
out_close:
	close(fd);
	return rc;
}

int cdp_conn_open(const struct cdp_addr *addr, struct cdp_tls *tls,
		  int64_t deadline, struct cdp_cancel *cancel,
		  struct cdp_conn **connp, char *why, size_t whylen)
{
	bool is_tls = cdp_addr_kind(addr) == CDP_ADDR_TLS;
	int fd;

	if (whylen)
		why[0] = '\0';
	if (is_tls && !tls)
		return -EINVAL; /* never fall back to plain text */
	fd = cdp_addr_connect(addr, deadline, cancel);
	if (fd < 0)
		return fd;
	return cdp_conn_adopt(fd, cdp_addr_kind(addr) == CDP_ADDR_UNIX,
			      is_tls ? tls : NULL, cdp_addr_host(addr),
			      deadline, cancel, connp, why, whylen);
}

void cdp_conn_close(struct cdp_conn *conn)
{
	if (!conn)
		return;
	if (conn->ssl)
		cdp_tls_close(conn->ssl);
	close(conn->fd);
	cdp_rbuf_free(&conn->rb);
	free(conn);
}

void cdp_conn_goodbye(struct cdp_conn *conn)
{
	short events;

	if (conn->ssl)
		cdp_tls_send(conn->ssl, "zEND", 5, &events);
	else
		send(conn->fd, "zEND", 5, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool cdp_conn_has_input(struct cdp_conn *conn)
{
	struct pollfd pfd = {.fd = conn->fd, .events = POLLIN};

	/* Over TLS, readable may mean a record without data, and data may
	 * wait in OpenSSL's buffer with nothing on the socket. */
	if (conn->ssl)
		return cdp_tls_has_input(conn->ssl);
	return poll(&pfd, 1, 0) != 0;
}

/* A failed TLS call after a trigger shut the socket down is a cancel. */
static int tls_result(int rc, struct cdp_cancel *cancel)
{
	return cdp_cancel_triggered(cancel) ? -ECANCELED : rc;
}

static int tls_send(struct cdp_conn *conn, const char *p, size_t len,
		    int64_t deadline, struct cdp_cancel *cancel,
		    bool stop_on_input)
{
	while (len) {
		short events;
		ssize_t n = cdp_tls_send(conn->ssl, p, len, &events);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n != -EAGAIN)
			return tls_result((int)n, cancel);
		if (stop_on_input)
			events |= POLLIN;
		rc = cdp_wait(conn->fd, events, deadline, cancel);
		if (rc < 0)
			return rc;
		if (stop_on_input && (rc & (POLLIN | POLLHUP)) &&
		    cdp_tls_has_input(conn->ssl))
			return -EALREADY;
	}
	return 0;
}

int cdp_conn_send(struct cdp_conn *conn, const void *buf, size_t len,
		  int64_t deadline, struct cdp_cancel *cancel,
		  bool stop_on_input)
{
	const char *p = buf;
	short events = POLLOUT | (stop_on_input ? POLLIN : 0);

	if (conn->ssl)
		return tls_send(conn, p, len, deadline, cancel, stop_on_input);
	while (len) {
		ssize_t n = send(conn->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = cdp_wait(conn->fd, events, deadline, cancel);
		if (rc < 0)
			return rc;
		if (stop_on_input && (rc & (POLLIN | POLLHUP)))
			return -EALREADY;
	}
	return 0;
}

int cdp_conn_send_fd(struct cdp_conn *conn, int fd, int64_t deadline,
		     struct cdp_cancel *cancel)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char dummy = '\0';
	struct iovec iov = {.iov_base = &dummy, .iov_len = 1};
	struct msghdr msg;
	struct cmsghdr *cmsg;

	if (conn->ssl)
		return -EAFNOSUPPORT; /* descriptors do not cross TLS */
	memset(&ctl, 0, sizeof(ctl));
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));

	for (;;) {
		ssize_t n =
			sendmsg(conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n == 1)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = cdp_wait(conn->fd, POLLOUT, deadline, cancel);
		if (rc < 0)
			return rc;
	}
}

int cdp_conn_read(struct cdp_conn *conn, size_t max, int64_t deadline,
		  struct cdp_cancel *cancel, const char **line, size_t *len)
{
	for (;;) {
		size_t space;
		char *p;
		ssize_t n;
		int rc = cdp_rbuf_take(&conn->rb, max, line, len);

		if (rc == 1)
			return 0;
		if (rc < 0)
			return rc;
		p = cdp_rbuf_space(&conn->rb, &space);
		/* Never read past the bound: the buffer holds at most max
		 * bytes of one reply plus what is already pending. */
		if (space == 0)
			return -EMSGSIZE;
		if (conn->ssl) {
			short events;

			n = cdp_tls_recv(conn->ssl, p, space, &events);
			if (n == -EAGAIN) {
				rc = cdp_wait(conn->fd, events, deadline,
					      cancel);
				if (rc < 0)
					return rc;
				continue;
			}
			if (n < 0) {
				rc = tls_result((int)n, cancel);
				/* as a reset on a plain socket: keep clamd's
				 * last words */
				if (rc == -ECONNRESET &&
				    cdp_rbuf_pending(&conn->rb)) {
					*line = cdp_rbuf_rest(&conn->rb, len);
					return -EPROTO;
				}
				return rc;
			}
			if (n == 0 && cdp_cancel_triggered(cancel))
				return -ECANCELED;
		} else {
			n = recv(conn->fd, p, space, MSG_DONTWAIT);
		}
		if (n > 0) {
			cdp_rbuf_added(&conn->rb, (size_t)n);
			continue;
		}
		if (n == 0) {
			*line = cdp_rbuf_rest(&conn->rb, len);
			if (!*line)
				return -ENODATA;
			return -EPROTO;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			/* A reset after clamd's last words: keep them. */
			if (errno == ECONNRESET &&
			    cdp_rbuf_pending(&conn->rb)) {
				*line = cdp_rbuf_rest(&conn->rb, len);
				return -EPROTO;
			}
			return -errno;
		}
		rc = cdp_wait(conn->fd, POLLIN, deadline, cancel);
		if (rc < 0)
			return rc;
	}
}
