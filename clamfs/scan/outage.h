/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether clamd is in an outage, so that one is told once: the first open
 * refused, or check failed, because clamd does not answer begins it (the
 * caller logs that at err), the first answer after it ends it (logged at
 * notice). The scan gate and the version check share one, so an outage
 * shorter than version_check is told too, and not twice when both see it.
 */
#ifndef CLAMFS_OUTAGE_H
#define CLAMFS_OUTAGE_H

#include <stdatomic.h>
#include <stdbool.h>

struct outage {
	atomic_bool down;
};

/* clamd did not answer: true when this begins an outage. */
static inline bool outage_begin(struct outage *o)
{
	return !atomic_exchange(&o->down, true);
}

/* clamd answered: true when this ends an outage. Cheap when none is on. */
static inline bool outage_end(struct outage *o)
{
	return atomic_load_explicit(&o->down, memory_order_relaxed) &&
	       atomic_exchange(&o->down, false);
}

#endif
