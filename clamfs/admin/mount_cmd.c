// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamfs --reload and --drop-cache (mount_cmd.h).
 */
#include "mount_cmd.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cmdnames.h"
#include "exitcode.h"
#include "mountpoint.h"

struct pid_query {
	const char *pid;
	char *mnt;
	size_t len;
	bool found;
};

static int match_pid(const struct mountinfo_entry *m, void *arg)
{
	struct pid_query *q = arg;
	char pid[32];
	ssize_t n;

	/*
	 * mount(8) and clamfs itself name the type fuse.clamfs; a user's
	 * FUSE mount could claim the type and answer with any PID
	 */
	if (strcmp(m->fstype, "fuse.clamfs") != 0 ||
	    !mountpoint_opts_by_root(m->superopts))
		return 0;
	n = getxattr(m->dir, CONTROL_PID, pid, sizeof(pid) - 1);
	if (n <= 0)
		return 0; /* dead, or not ours to ask */
	pid[n] = '\0';
	if (strcmp(pid, q->pid) != 0)
		return 0;
	snprintf(q->mnt, q->len, "%s", m->dir);
	q->found = true;
	return 1;
}

int mount_cmd_target(const char *target, char *mnt, size_t len)
{
	struct pid_query q = {target, mnt, len, false};
	bool digits = *target != '\0';
	int ret;

	for (const char *c = target; *c; c++)
		digits &= isdigit((unsigned char)*c) != 0;
	if (!digits) {
		if (snprintf(mnt, len, "%s", target) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	ret = mountpoint_each(MOUNTINFO_SELF, match_pid, &q);
	if (ret < 0)
		return ret;
	return q.found ? 0 : -ESRCH;
}

/* A directory inside the mount, or the backend under a dead one, is not it. */
static bool is_clamfs_root(const char *mnt)
{
	char *real = realpath(mnt, NULL), fstype[64];
	int ret;

	if (!real) {
		fprintf(stderr, "clamfs: %s: %s\n", mnt, strerror(errno));
		return false;
	}
	ret = mountpoint_root_fstype(MOUNTINFO_SELF, real, fstype,
				     sizeof(fstype));
	free(real);
	if (ret == 1 && strcmp(fstype, "fuse.clamfs") == 0)
		return true;
	fprintf(stderr, "clamfs: %s: not the mountpoint of a clamfs mount\n",
		mnt);
	return false;
}

/* One target, no other argument: the mountpoint, or an exit status. */
static int one_target(int argc, char *argv[], const char *cmd, char *mnt,
		      size_t len)
{
	int ret;

	if (argc != 1 || argv[0][0] == '-') {
		fprintf(stderr, "clamfs: usage: clamfs %s MOUNTPOINT|PID\n",
			cmd);
		return EXIT_CONFIG;
	}
	ret = mount_cmd_target(argv[0], mnt, len);
	if (ret == -ESRCH) {
		fprintf(stderr,
			"clamfs: no clamfs mount served by process %s\n",
			argv[0]);
		return EXIT_NOT_MOUNTED;
	}
	if (ret) {
		fprintf(stderr, "clamfs: %s: %s\n", argv[0], strerror(-ret));
		return EXIT_NOT_MOUNTED;
	}
	return is_clamfs_root(mnt) ? EXIT_OK : EXIT_NOT_MOUNTED;
}

static int command_failed(const char *mnt)
{
	if (errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP) {
		fprintf(stderr, "clamfs: %s: not a clamfs mount\n", mnt);
		return EXIT_NOT_MOUNTED;
	}
	if (errno == EPERM) {
		fprintf(stderr, "clamfs: %s: only root may do this\n", mnt);
		return EXIT_FAILED;
	}
	fprintf(stderr, "clamfs: %s: %s\n", mnt, strerror(errno));
	return errno == ENOTCONN ? EXIT_NOT_MOUNTED : EXIT_FAILED;
}

int mount_cmd_reload(int argc, char *argv[], FILE *out)
{
	char mnt[4096], text[4096], token[CONTROL_TOKEN_MAX + 1],
		name[sizeof(CONTROL_RELOAD) + CONTROL_TOKEN_MAX + 1];
	struct timespec now;
	ssize_t n;
	int ret, err;

	ret = one_target(argc, argv, "--reload", mnt, sizeof(mnt));
	if (ret)
		return ret;
	/* the daemon keeps the outcome under this token for us alone */
	clock_gettime(CLOCK_MONOTONIC, &now);
	snprintf(token, sizeof(token), "%ld-%lld-%ld", (long)getpid(),
		 (long long)now.tv_sec, now.tv_nsec);
	snprintf(name, sizeof(name), "%s.%s", CONTROL_RELOAD, token);
	ret = setxattr(mnt, CONTROL_RELOAD, token, strlen(token), 0);
	err = errno;
	if (ret == -1 && err != EINVAL)
		return command_failed(mnt);
	n = getxattr(mnt, name, text, sizeof(text) - 1);
	if (n < 0)
		snprintf(text, sizeof(text), "%s",
			 ret == 0 ? "reloaded" : "rejected");
	else
		text[n] = '\0';
	/* the daemon's words, but no terminal control from anyone */
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < 0x20 && *c != '\n')
			*c = '?';
	fprintf(ret == 0 ? out : stderr, "clamfs: %s: %s\n", mnt, text);
	return ret == 0 ? EXIT_OK : EXIT_CONFIG;
}

int mount_cmd_drop_cache(int argc, char *argv[], FILE *out)
{
	char mnt[4096];
	int ret;

	ret = one_target(argc, argv, "--drop-cache", mnt, sizeof(mnt));
	if (ret)
		return ret;
	if (setxattr(mnt, CONTROL_DROP_CACHE, "1", 1, 0) == -1)
		return command_failed(mnt);
	fprintf(out,
		"clamfs: %s: verdict cache dropped; every file is scanned "
		"again at its next open\n",
		mnt);
	return EXIT_OK;
}
