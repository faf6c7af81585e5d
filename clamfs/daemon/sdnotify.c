// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sd_notify wrappers.
 */
#include "sdnotify.h"

#ifdef CLAMFS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

void sdnotify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void sdnotify_reloading(void)
{
	sd_notify(0, "RELOADING=1");
}

void sdnotify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void sdnotify_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}
#else
void sdnotify_ready(const char *status)
{
	(void)status;
}

void sdnotify_reloading(void)
{
}

void sdnotify_stopping(void)
{
}

void sdnotify_status(const char *status)
{
	(void)status;
}
#endif
