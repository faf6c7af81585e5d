/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamfs --check: the configuration and clamd, checked without mounting.
 */
#ifndef CLAMFS_CHECK_CMD_H
#define CLAMFS_CHECK_CMD_H

#include <stdio.h>

#include "opts.h"

/*
 * Prints what it checked; returns the exit status (exitcode.h) of the
 * first check that failed, 0 when none did.
 */
int check_cmd_run(const struct clamfs_opts *opts, FILE *out);

#endif
