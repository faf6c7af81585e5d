// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One connection to clamd: non-blocking sends and bounded reads, each under
 * a CLOCK_MONOTONIC deadline and a cancellation token.  MSG_NOSIGNAL on every
 * send, so a clamd that hung up never raises SIGPIPE in the caller.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int64_t cdp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cdp_deadline(int timeout_ms)
{
	return cdp_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
}

int cdp_wait(int fd, short events, int64_t deadline, struct cdp_cancel *cancel)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	for (;;) {
		int64_t left = deadline - cdp_now_ms();
		int slice, rc;

		if (cdp_cancel_triggered(cancel))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		/* shutdown() by a trigger wakes us, but a connecting socket
		 * may not notice it: look at the flag now and then. */
		slice = left > CDP_CANCEL_SLICE_MS && cancel
				? CDP_CANCEL_SLICE_MS
				: (int)left;
		rc = poll(&pfd, 1, slice);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (rc > 0) {
			if (cdp_cancel_triggered(cancel))
				return -ECANCELED;
			return pfd.revents;
		}
	}
}

int cdp_conn_open(const struct cdp_addr *addr, int64_t deadline,
		  struct cdp_cancel *cancel, struct cdp_conn **connp)
{
	struct cdp_conn *conn;
	int fd, rc;

	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return -ENOMEM;
	rc = cdp_rbuf_init(&conn->rb, CDP_STATS_MAX + 32);
	if (rc)
		goto out_free;
	fd = cdp_addr_connect(addr, deadline, cancel);
	if (fd < 0) {
		rc = fd;
		goto out_rbuf;
	}
	conn->fd = fd;
	conn->is_unix = cdp_addr_kind(addr) == CDP_ADDR_UNIX;
	conn->next_id = 1;
	*connp = conn;
	return 0;
out_rbuf:
	cdp_rbuf_free(&conn->rb);
out_free:
	free(conn);
	return rc;
}

void cdp_conn_close(struct cdp_conn *conn)
{
	if (!conn)
		return;
	close(conn->fd);
	cdp_rbuf_free(&conn->rb);
	free(conn);
}

int cdp_conn_send(struct cdp_conn *conn, const void *buf, size_t len,
		  int64_t deadline, struct cdp_cancel *cancel,
		  bool stop_on_input)
{
	const char *p = buf;
	short events = POLLOUT | (stop_on_input ? POLLIN : 0);

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
		n = recv(conn->fd, p, space, MSG_DONTWAIT);
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
