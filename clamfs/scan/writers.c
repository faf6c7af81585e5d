// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The writer probe behind writers.h: a read lease taken and dropped.
 */
#include "writers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "log.h"

/*
 * Taking a lease makes the daemon the file's owner for SIGIO, which a
 * writer's open sends when it breaks the lease; its default action would
 * end the daemon.
 */
static void lease_broken(int sig)
{
	(void)sig;
}

static void ignore_lease_breaks(void)
{
	sigaction(SIGIO,
		  &(struct sigaction){.sa_handler = lease_broken,
				      .sa_flags = SA_RESTART},
		  NULL);
}

int writers_probe(int fd)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static struct log_limit limit;
	unsigned long held_back;
	int err;

	pthread_once(&once, ignore_lease_breaks);
	/* a writable fd counts itself: EAGAIN */
	if (fcntl(fd, F_SETLEASE, F_RDLCK) == 0) {
		fcntl(fd, F_SETLEASE, F_UNLCK);
		return 0;
	}
	err = errno;
	if (err == EAGAIN)
		return -EBUSY;
	if (log_limit_pass(&limit, &held_back))
		log_warn("cannot tell whether a backend file has writers (read "
			 "lease: %s): its verdicts are not cached "
			 "suppressed_before=%lu",
			 strerror(err), held_back);
	return -err;
}
