/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one escaping of untrusted text (file names, signature names, clamd
 * replies, user names) for the places it is shown: log lines, quarantine
 * records and listings, comments of an imported configuration. Backslash
 * becomes "\\"; control characters (C0, DEL, C1) and every byte that is
 * not part of a well-formed UTF-8 character become "\xHH", so a value is
 * always one line and cannot drive a terminal, UTF-8 or 8-bit. Printable
 * ASCII and well-formed UTF-8 pass unchanged.
 */
#ifndef CLAMFS_ESCAPE_H
#define CLAMFS_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum escape_flags {
	ESCAPE_DQUOTE = 1 << 0, /* '"' as \" too, for double-quoted values */
};

/*
 * Writes s escaped to out, at most max bytes of output: it stops before a
 * character (a whole UTF-8 sequence) or an escape that would not fit, so
 * the output never ends inside either. *cut (may be NULL) tells whether s
 * was shortened. 0 or -EIO.
 */
int escape_put(FILE *out, const char *s, size_t max, unsigned int flags,
	       bool *cut);

#endif
