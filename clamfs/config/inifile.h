/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The configuration file: INI sections grouping the same keys that -o
 * takes (e.g. [scan] scan_mode = stream). Read with inih; every problem is
 * reported as "FILE:LINE: key: reason".
 */
#ifndef CLAMFS_INIFILE_H
#define CLAMFS_INIFILE_H

#include <stddef.h>

struct clamfs_opts;

/*
 * Applies the file at path to opts (on top of what opts holds). Returns 0,
 * or a negative errno with a one-line message in err.
 */
int inifile_load(const char *path, struct clamfs_opts *opts, char *err,
		 size_t errlen);

/* The section a key belongs to, or NULL for a key files may not set. */
const char *inifile_section_of(const char *key);

#endif
