/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Service manager notifications (systemd Type=notify): ready once the
 * mount is up, reloading, stopping. No-ops when built without libsystemd
 * or not started by systemd.
 */
#ifndef CLAMFS_NOTIFY_H
#define CLAMFS_NOTIFY_H

void notify_ready(const char *status);
void notify_reloading(void);
void notify_stopping(void);
/* STATUS= only: what `systemctl status` shows under the unit. */
void notify_status(const char *status);

#endif
