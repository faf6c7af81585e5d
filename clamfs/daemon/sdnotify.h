/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Service manager notifications (systemd Type=notify): ready once the
 * mount is up, reloading, stopping. No-ops when built without libsystemd
 * or not started by systemd.
 */
#ifndef CLAMFS_SDNOTIFY_H
#define CLAMFS_SDNOTIFY_H

void sdnotify_ready(const char *status);
void sdnotify_reloading(void);
void sdnotify_stopping(void);
/* STATUS= only: what `systemctl status` shows under the unit. */
void sdnotify_status(const char *status);

#endif
