/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The rules a configuration must pass to be put in force, beyond each
 * option's own (optable.h): those that need the mount's paths, checked at
 * startup and on every reload alike.
 */
#ifndef CLAMFS_CHECKS_H
#define CLAMFS_CHECKS_H

#include <stdbool.h>
#include <stddef.h>

#include "opts.h"
#include "scanq.h"

/*
 * For the mount of backend on mountpoint (real paths). running is the
 * configuration in force, NULL at startup: its quarantine directory was
 * checked when it was opened. Fills *mode with the scan mode opts
 * resolves to. 0, or -1 with a one-line reason in err.
 */
int config_check_mount(const struct clamfs_opts *opts,
		       const struct clamfs_opts *running, const char *backend,
		       const char *mountpoint, enum scan_mode *mode, char *err,
		       size_t errlen);

/* Whether two optional strings differ (NULL differs from any string). */
bool config_str_differs(const char *a, const char *b);

/* The store serves what the cache would: nothing when it is off. */
unsigned int config_store_ttl(const struct clamfs_opts *opts);

#endif
