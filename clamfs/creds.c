// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Identity switching with setfsuid/setfsgid and the raw setgroups syscall:
 * glibc's setgroups() would broadcast the change to every thread of the
 * daemon, the raw syscall changes only the calling thread.
 */
#include "creds.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CREDS_MAX_GROUPS 65536

static bool creds_enabled;
static uid_t daemon_uid;
static gid_t daemon_gid;
static int daemon_ngroups;
static gid_t daemon_groups[256];

/* set once per worker thread: umask then stays private to the thread */
static __thread bool thread_fs_unshared;

int creds_init(void)
{
	int n;

	daemon_uid = geteuid();
	daemon_gid = getegid();
	creds_enabled = daemon_uid == 0;
	n = getgroups(sizeof(daemon_groups) / sizeof(daemon_groups[0]),
		      daemon_groups);
	if (n < 0)
		return -errno;
	daemon_ngroups = n;
	return 0;
}

bool creds_need_switch(uid_t uid, gid_t gid)
{
	return creds_enabled && (uid != daemon_uid || gid != daemon_gid);
}

static int thread_setgroups(int n, const gid_t *groups)
{
	if (syscall(SYS_setgroups, (size_t)n, groups) == -1)
		return -errno;
	return 0;
}

int creds_assume(const struct creds *who)
{
	int ret;

	if (!creds_need_switch(who->uid, who->gid))
		return 0;
	if (who->ngroups >= 0) {
		ret = thread_setgroups(who->ngroups, who->groups);
		if (ret)
			return ret;
	}
	/*
	 * setfsuid/setfsgid report the previous value, not failure; read
	 * back to be sure the switch happened before touching the backend.
	 */
	setfsgid(who->gid);
	setfsuid(who->uid);
	if ((uid_t)setfsuid((uid_t)-1) != who->uid ||
	    (gid_t)setfsgid((gid_t)-1) != who->gid) {
		creds_restore();
		return -EPERM;
	}
	return 0;
}

void creds_restore(void)
{
	if (!creds_enabled)
		return;
	setfsuid(daemon_uid);
	setfsgid(daemon_gid);
	thread_setgroups(daemon_ngroups, daemon_groups);
}

int creds_set_umask(mode_t mask)
{
	if (!thread_fs_unshared) {
		if (unshare(CLONE_FS) == -1)
			return -errno;
		thread_fs_unshared = true;
	}
	umask(mask & 07777);
	return 0;
}

int creds_access(int fd, int mode, const struct creds *who)
{
	int ret = 0;

	if (!creds_need_switch(who->uid, who->gid)) {
		if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH) == -1)
			return -errno;
		return 0;
	}
	/*
	 * Only groups and real ids change, never the fsuid: setresuid()
	 * resets the fsuid to the euid without giving back the capabilities
	 * a switched fsuid dropped, which would leave this worker thread
	 * without CAP_DAC_OVERRIDE for good.
	 */
	if (who->ngroups >= 0) {
		ret = thread_setgroups(who->ngroups, who->groups);
		if (ret)
			return ret;
	}
	/* raw syscalls: glibc's wrappers would change every thread */
	if (syscall(SYS_setresgid, who->gid, (gid_t)-1, (gid_t)-1) == -1 ||
	    syscall(SYS_setresuid, who->uid, (uid_t)-1, (uid_t)-1) == -1)
		ret = -errno;
	else if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH) == -1)
		ret = -errno;
	syscall(SYS_setresuid, daemon_uid, (uid_t)-1, (uid_t)-1);
	syscall(SYS_setresgid, daemon_gid, (gid_t)-1, (gid_t)-1);
	thread_setgroups(daemon_ngroups, daemon_groups);
	return ret;
}
