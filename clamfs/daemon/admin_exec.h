/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The administrators' commands of clamfs(8) (--stats, --reload,
 * --drop-cache, --import-clamfs-xml) are a program of their own,
 * clamfs-admin, which clamfs replaces itself with.
 */
#ifndef CLAMFS_ADMIN_EXEC_H
#define CLAMFS_ADMIN_EXEC_H

#include <stdbool.h>

/* Whether arg (argv[1]) names one of clamfs-admin's commands. */
bool admin_exec_wanted(const char *arg);

/*
 * Runs clamfs-admin with argv as it is: the one beside this executable
 * (the build tree), else the installed one (CLAMFS_ADMIN_PATH). Returns
 * only on failure, with the exit status to use (127, as a shell does for
 * a command it cannot run) after saying why on stderr.
 */
int admin_exec(char *argv[]);

#endif
