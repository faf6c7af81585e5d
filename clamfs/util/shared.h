/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An object with a reference count: each configuration in force
 * (generation.h) holds its options, clamd backends, verdict cache and
 * detection reporter this way, so a reload that keeps one takes a
 * reference instead of moving ownership, and the object goes with the
 * last configuration that used it.
 */
#ifndef CLAMFS_SHARED_H
#define CLAMFS_SHARED_H

struct shared;

/*
 * obj with one reference; free_obj(obj) runs when the last goes (NULL:
 * someone else frees obj, after every reference). NULL when obj is NULL,
 * or on ENOMEM, when obj stays the caller's.
 */
struct shared *shared_new(void *obj, void (*free_obj)(void *obj));

/* Another reference; returns s. NULL is a no-op. */
struct shared *shared_get(struct shared *s);

/* Drops a reference, freeing the object with the last. NULL: a no-op. */
void shared_put(struct shared *s);

/* The object; NULL for NULL. */
void *shared_obj(const struct shared *s);

#endif
