/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether anyone holds a backend file open for writing: through the mount,
 * directly on the backend, or through a shared writable mapping that
 * outlived its descriptor. Stores into such a mapping's dirty pages move
 * no timestamp, so no stamp of the file can vouch for its content while
 * one exists; a verdict is trusted or stored only when this says nobody
 * writes. No FUSE here.
 */
#ifndef CLAMFS_WRITERS_H
#define CLAMFS_WRITERS_H

/*
 * Asks about the regular file open read-only at fd. 0: nobody holds it
 * open for writing at this instant; -EBUSY: somebody does (or fd itself
 * may write); another negative errno: it cannot be told on this
 * filesystem (logged, rate-limited), which callers must take as -EBUSY.
 *
 * It takes a read lease and drops it at once: the kernel grants one only
 * while no descriptor and no mapping of the file may write. For that
 * instant a writer's blocking open waits; an O_NONBLOCK open of the
 * backend file for writing fails with EWOULDBLOCK, as it would against
 * any lease holder.
 */
int writers_probe(int fd);

#endif
