// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Raising RLIMIT_NOFILE and sizing the inode table's share of it.
 */
#include "fdlimit.h"

#include <errno.h>
#include <stdint.h>

/*
 * The reserve grows with the limit (a server opening many files has many
 * workers and many open handles) but is bounded both ways: below 128 a
 * few busy workers with their splice pipes and clamd sockets would find
 * no fd, above 8192 it only wastes inodes the kernel could keep.
 */
#define FDLIMIT_RESERVE_MIN 128
#define FDLIMIT_RESERVE_MAX 8192

void fdlimit_raise(struct fdlimit *out)
{
	struct rlimit rl;

	out->err = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
		out->err = errno;
		out->before = out->soft = out->hard = 0;
		return;
	}
	out->before = rl.rlim_cur;
	out->hard = rl.rlim_max;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			out->err = errno;
	}
	out->soft = out->err ? out->before : rl.rlim_cur;
}

size_t fdlimit_inode_budget(rlim_t soft)
{
	rlim_t reserve = soft / 4;

	if (soft == RLIM_INFINITY || soft > SIZE_MAX)
		return SIZE_MAX;
	if (reserve < FDLIMIT_RESERVE_MIN)
		reserve = FDLIMIT_RESERVE_MIN;
	if (reserve > FDLIMIT_RESERVE_MAX)
		reserve = FDLIMIT_RESERVE_MAX;
	/* a tiny limit: share it rather than leave the table nothing */
	if (reserve >= soft / 2)
		return (size_t)(soft / 2);
	return (size_t)(soft - reserve);
}

size_t fdlimit_inode_cap(rlim_t soft)
{
	size_t budget = fdlimit_inode_budget(soft);

	if (budget == SIZE_MAX)
		return SIZE_MAX;
	return budget + (size_t)(soft - budget) / 2;
}
