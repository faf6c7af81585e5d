// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sd_notify wrappers.
 */
#include "notify.h"

#ifdef CLAMFS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

void notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void notify_reloading(void)
{
	sd_notify(0, "RELOADING=1");
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void notify_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}
#else
void notify_ready(const char *status)
{
	(void)status;
}

void notify_reloading(void)
{
}

void notify_stopping(void)
{
}

void notify_status(const char *status)
{
	(void)status;
}
#endif
