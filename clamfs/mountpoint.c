// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mountinfo reader: finds the mount stacked last on a directory.
 */
#include "mountpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

int mountpoint_fstype(const char *mountinfo, const char *dir, char *fstype,
		      size_t len)
{
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	f = fopen(mountinfo, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) != -1) {
		char *save = NULL, *field, *mnt = NULL, *sep;
		int i = 0;

		/* fields: id parent dev root MOUNTPOINT opts [tags] - TYPE */
		for (field = strtok_r(line, " ", &save); field && i < 4;
		     field = strtok_r(NULL, " ", &save))
			i++;
		mnt = field;
		if (!mnt)
			continue;
		unescape_octal(mnt);
		if (strcmp(mnt, dir) != 0)
			continue;
		sep = strstr(save ? save : "", " - ");
		if (!sep)
			continue;
		field = strtok_r(sep + 3, " ", &save);
		if (!field)
			continue;
		snprintf(fstype, len, "%s", field);
		found = 1; /* keep going: the last entry is the top mount */
	}
	free(line);
	fclose(f);
	return found;
}
