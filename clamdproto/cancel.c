// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Cancellation tokens.  The trigger side may run inside a FUSE interrupt
 * callback under libfuse's lock, so it must never block: it sets a flag and
 * shuts the published socket down.  A tiny spin lock, held by the scanning
 * side only for a few instructions and never across a wait, keeps a trigger
 * from shutting down a descriptor number that was closed and reused.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "internal.h"

struct cdp_cancel {
	atomic_int triggered;
	atomic_flag lock;
	int fd;	    /* under lock */
	bool fresh; /* set between scans only */
};

struct cdp_cancel *cdp_cancel_new(void)
{
	struct cdp_cancel *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	atomic_init(&c->triggered, 0);
	atomic_flag_clear(&c->lock);
	c->fd = -1;
	c->fresh = false;
	return c;
}

void cdp_cancel_free(struct cdp_cancel *c)
{
	free(c);
}

static void lock(struct cdp_cancel *c)
{
	while (atomic_flag_test_and_set_explicit(&c->lock,
						 memory_order_acquire))
		sched_yield();
}

static void unlock(struct cdp_cancel *c)
{
	atomic_flag_clear_explicit(&c->lock, memory_order_release);
}

void cdp_cancel_trigger(struct cdp_cancel *c)
{
	if (!c)
		return;
	atomic_store(&c->triggered, 1);
	lock(c);
	/* shutdown() wakes a poll() in the scanning thread at once. */
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	unlock(c);
}

int cdp_cancel_triggered(const struct cdp_cancel *c)
{
	return c && atomic_load(&c->triggered);
}

void cdp_cancel_want_fresh(struct cdp_cancel *c)
{
	if (c)
		c->fresh = true;
}

bool cdp_cancel_fresh(const struct cdp_cancel *c)
{
	return c && c->fresh;
}

int cdp_cancel_attach(struct cdp_cancel *c, int fd)
{
	if (!c)
		return 0;
	lock(c);
	c->fd = fd;
	unlock(c);
	/* Checked after publishing: a trigger in between either saw the fd
	 * or set the flag before we read it. */
	return atomic_load(&c->triggered) ? -ECANCELED : 0;
}

void cdp_cancel_detach(struct cdp_cancel *c)
{
	if (!c)
		return;
	lock(c);
	c->fd = -1;
	unlock(c);
}
