// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamfs --stats: reads the statistics of running mounts (the xattr
 * trusted.clamfs.stats of each mount's root) and prints them as they are
 * or as one Prometheus exposition (prom.c), to stdout or atomically into a
 * file (for node_exporter's textfile collector).
 */
#include "stats_cmd.h"
#include "exitcode.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cmdnames.h"
#include "prom.h"

static void usage(void)
{
	fprintf(stderr, "clamfs: usage: clamfs --stats [--prometheus] "
			"[--output FILE] MOUNTPOINT...\n");
}

/*
 * The stats text of the mount at path, malloc'd, or NULL with errno set.
 * The text grows while counters gain digits: a size that no longer fits
 * is asked for again.
 */
static char *read_stats(const char *path)
{
	for (int tries = 0; tries < 5; tries++) {
		ssize_t n = getxattr(path, CONTROL_STATS, NULL, 0);
		char *buf;

		if (n < 0)
			return NULL;
		n += 256; /* room to grow between the two calls */
		buf = malloc((size_t)n + 1);
		if (!buf)
			return NULL;
		n = getxattr(path, CONTROL_STATS, buf, (size_t)n);
		if (n >= 0) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		if (errno != ERANGE)
			return NULL;
	}
	return NULL;
}

/* With several mounts asked for, a header line before each one's lines. */
static void plain(const struct prom_mount *m, size_t n, bool headers, FILE *out)
{
	for (size_t i = 0; i < n; i++) {
		if (headers)
			fprintf(out, "%s[%s]\n", i ? "\n" : "",
				m[i].mountpoint);
		fputs(m[i].stats, out);
	}
}

/*
 * Writes what the mounts give into path atomically: into a fresh
 * path.tmp.XXXXXX in the same directory (a name nobody can take first),
 * synced, then renamed over path. A reader (the
 * textfile collector) sees the old file or the new one, never a part.
 * Returns 0 or negative errno.
 */
static int write_atomically(const char *path, bool prometheus, bool headers,
			    const struct prom_mount *m, size_t n)
{
	bool created = false;
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, ret;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		ret = -ENOMEM;
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd == -1) {
		ret = -errno;
		goto out;
	}
	created = true;
	/* whatever the umask: node_exporter runs as its own user */
	if (fchmod(fd, 0644) == -1) {
		ret = -errno;
		goto out;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		goto out;
	}
	fd = -1;
	if (prometheus) {
		ret = prom_render(m, n, f);
	} else {
		plain(m, n, headers, f);
		ret = ferror(f) ? -EIO : 0;
	}
	if (ret)
		goto out;
	if (fflush(f) == EOF || fsync(fileno(f)) == -1) {
		ret = -errno;
		goto out;
	}
	ret = fclose(f) == EOF ? -errno : 0;
	f = NULL;
	if (ret)
		goto out;
	if (rename(tmp, path) == -1)
		ret = -errno;
out:
	if (f)
		fclose(f);
	if (fd != -1)
		close(fd);
	if (ret && created)
		unlink(tmp);
	free(tmp);
	return ret;
}

/* The label of a mount: its canonical path, as the daemon knows it. */
static char *label_of(const char *arg)
{
	char *real = realpath(arg, NULL);

	return real ? real : strdup(arg);
}

int stats_cmd_run(int argc, char *argv[], FILE *out)
{
	struct prom_mount *mounts = NULL;
	const char *output = NULL;
	bool prometheus = false, headers;
	size_t n = 0, nread = 0;
	int ret = EXIT_CONFIG, err;

	mounts = calloc((size_t)argc + 1, sizeof(*mounts));
	if (!mounts) {
		ret = EXIT_FAILED;
		goto out;
	}
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--prometheus") == 0) {
			prometheus = true;
		} else if (strcmp(argv[i], "--output") == 0 && i + 1 < argc) {
			output = argv[++i];
		} else if (strncmp(argv[i], "--", 2) == 0) {
			usage();
			goto out;
		} else {
			mounts[n].mountpoint = label_of(argv[i]);
			if (!mounts[n].mountpoint) {
				ret = EXIT_FAILED;
				goto out;
			}
			/* the same series twice would spoil the exposition */
			for (size_t j = 0; j < n; j++)
				if (strcmp(mounts[j].mountpoint,
					   mounts[n].mountpoint) == 0) {
					fprintf(stderr,
						"clamfs: %s: given twice\n",
						argv[i]);
					n++;
					goto out;
				}
			n++;
		}
	}
	if (n == 0) {
		usage();
		goto out;
	}
	/*
	 * A mount that cannot be read is named and fails the command, but
	 * the others are still written: its figures go missing (an alert
	 * on absent() sees that) instead of going stale.
	 */
	ret = 0;
	for (size_t i = 0; i < n; i++) {
		char *text = read_stats(mounts[i].mountpoint);

		if (!text) {
			bool not_ours = errno == ENODATA || errno == ENOTSUP;

			fprintf(stderr, "clamfs: %s: %s\n",
				mounts[i].mountpoint,
				not_ours ? "not a clamfs mount, or not root"
					 : strerror(errno));
			free((char *)mounts[i].mountpoint);
			ret = not_ours || errno == ENOENT || errno == ENOTCONN
				      ? EXIT_NOT_MOUNTED
				      : EXIT_FAILED;
			continue;
		}
		mounts[nread].mountpoint = mounts[i].mountpoint;
		mounts[nread++].stats = text;
	}
	headers = n > 1;
	n = nread;
	if (output) {
		err = write_atomically(output, prometheus, headers, mounts,
				       nread);
		if (err) {
			fprintf(stderr, "clamfs: %s: %s\n", output,
				strerror(-err));
			ret = EXIT_FAILED;
		}
	} else if (prometheus) {
		if (prom_render(mounts, nread, out))
			ret = EXIT_FAILED;
	} else {
		plain(mounts, nread, headers, out);
	}
out:
	for (size_t i = 0; mounts && i < n; i++) {
		free((char *)mounts[i].mountpoint);
		free((char *)mounts[i].stats);
	}
	free(mounts);
	return ret;
}
