/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamfs --import-clamfs-xml: reads a configuration of ClamFS 1.2/1.3 (the
 * XML file of Debian's clamfs package) and prints the clamfs INI that does
 * the same, with a "; not supported:" comment line for each setting that
 * has no equivalent. Values that an INI line could not carry intact are
 * never written as settings. No FUSE here.
 */
#ifndef CLAMFS_XMLIMPORT_H
#define CLAMFS_XMLIMPORT_H

#include <stddef.h>
#include <stdio.h>

/*
 * Converts the XML text read from in (name is used in messages and the
 * header) and writes the INI to out. 0, or negative errno with a one-line
 * reason in err (-EINVAL: malformed XML or not a ClamFS configuration).
 */
int xmlimport_convert(FILE *in, const char *name, FILE *out, char *err,
		      size_t errlen);

/*
 * The command: argv holds what follows --import-clamfs-xml (one FILE, "-"
 * for standard input). Prints the INI on standard output; returns the exit
 * status (exitcode.h): 0; EXIT_CONFIG for a usage error, a file that
 * cannot be opened or is no ClamFS configuration; EXIT_FAILED for a read
 * or write error; the reason on standard error.
 */
int xmlimport_main(int argc, char *argv[]);

#endif
