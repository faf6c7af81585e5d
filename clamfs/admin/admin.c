/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamfs-admin: the administrators' commands, which clamfs execs for
 * --stats, --reload, --drop-cache and --import-clamfs-xml (daemon's
 * admin_exec.h). Apart from the daemon, so that the process serving the
 * share links neither the XML parser nor the Prometheus renderer.
 */
#include <stdio.h>
#include <string.h>

#include "exitcode.h"
#include "mount_cmd.h"
#include "stats_cmd.h"
#include "xmlimport.h"

static int import_xml(int argc, char *argv[], FILE *out)
{
	(void)out;
	return xmlimport_main(argc, argv);
}

static const struct {
	const char *verb;
	int (*run)(int argc, char *argv[], FILE *out);
} commands[] = {
	{"--stats", stats_cmd_run},
	{"--reload", mount_cmd_reload},
	{"--drop-cache", mount_cmd_drop_cache},
	{"--import-clamfs-xml", import_xml},
};

int main(int argc, char *argv[])
{
	for (size_t i = 0;
	     argc >= 2 && i < sizeof(commands) / sizeof(*commands); i++)
		if (strcmp(argv[1], commands[i].verb) == 0)
			return commands[i].run(argc - 2, argv + 2, stdout);
	fprintf(stderr,
		"usage: clamfs --stats|--reload|--drop-cache TARGET ...\n"
		"       clamfs --import-clamfs-xml FILE\n"
		"(clamfs-admin runs these for clamfs; see clamfs(8))\n");
	return EXIT_CONFIG;
}
