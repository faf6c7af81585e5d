// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Counted objects (shared.h).
 */
#include "shared.h"

#include <stdlib.h>

struct shared {
	unsigned int refs; /* __atomic */
	void *obj;
	void (*free_obj)(void *obj);
};

struct shared *shared_new(void *obj, void (*free_obj)(void *obj))
{
	struct shared *s;

	if (!obj)
		return NULL;
	s = malloc(sizeof(*s));
	if (!s)
		return NULL;
	s->refs = 1;
	s->obj = obj;
	s->free_obj = free_obj;
	return s;
}

struct shared *shared_get(struct shared *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void shared_put(struct shared *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (s->free_obj)
		s->free_obj(s->obj);
	free(s);
}

void *shared_obj(const struct shared *s)
{
	return s ? s->obj : NULL;
}
