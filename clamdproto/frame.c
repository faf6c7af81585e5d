// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Reply framing: turns a byte stream of arbitrary read sizes into
 * NUL-terminated replies, with a hard size bound.  Pure (no I/O), so the
 * unit tests and the fuzzer drive it directly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cdp_rbuf_init(struct cdp_rbuf *rb, size_t cap)
{
	/* One spare byte so a rest at EOF can always be NUL-terminated. */
	rb->buf = malloc(cap + 1);
	if (!rb->buf)
		return -ENOMEM;
	rb->cap = cap;
	rb->off = 0;
	rb->len = 0;
	return 0;
}

void cdp_rbuf_free(struct cdp_rbuf *rb)
{
	free(rb->buf);
	rb->buf = NULL;
	rb->cap = rb->off = rb->len = 0;
}

void cdp_rbuf_clear(struct cdp_rbuf *rb)
{
	rb->off = 0;
	rb->len = 0;
}

size_t cdp_rbuf_pending(const struct cdp_rbuf *rb)
{
	return rb->len - rb->off;
}

char *cdp_rbuf_space(struct cdp_rbuf *rb, size_t *n)
{
	if (rb->off) {
		memmove(rb->buf, rb->buf + rb->off, rb->len - rb->off);
		rb->len -= rb->off;
		rb->off = 0;
	}
	*n = rb->cap - rb->len;
	return rb->buf + rb->len;
}

void cdp_rbuf_added(struct cdp_rbuf *rb, size_t n)
{
	rb->len += n;
}

int cdp_rbuf_take(struct cdp_rbuf *rb, size_t max, const char **line,
		  size_t *len)
{
	size_t avail = rb->len - rb->off;
	size_t scan = avail < max ? avail : max;
	char *start = rb->buf + rb->off;
	char *nul = memchr(start, '\0', scan);

	if (!nul)
		return avail >= max ? -EMSGSIZE : 0;
	*line = start;
	*len = (size_t)(nul - start);
	rb->off += *len + 1;
	return 1;
}

const char *cdp_rbuf_rest(struct cdp_rbuf *rb, size_t *len)
{
	char *start = rb->buf + rb->off;
	size_t n = rb->len - rb->off;

	if (!n)
		return NULL;
	if (start[n - 1] == '\n')
		n--;
	start[n] = '\0'; /* the spare byte makes this safe when full */
	*len = n;
	rb->off = rb->len;
	return start;
}
