// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Identity switching with setfsuid/setfsgid and the raw setgroups syscall:
 * glibc's setgroups() would broadcast the change to every thread of the
 * daemon, the raw syscall changes only the calling thread.
 */
#include "creds.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
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

/*
 * Whether this thread's supplementary groups may differ from the daemon's.
 * While they do not, a switch to the same set (writers get the empty set,
 * and a daemon started by systemd has no groups) skips setgroups both ways:
 * two of the eight syscalls a write as another user cost. A new thread
 * starts with the process's groups, the daemon's: threads are only created
 * outside a switch.
 */
static __thread bool thread_groups_changed;

/*
 * CAP_SYS_RESOURCE lets writes use the blocks a filesystem reserves for
 * root and ignore quota hard limits: requests are carried out for users,
 * who must hit ENOSPC and EDQUOT where they would natively. Dropped from
 * every set, so no thread, and no program the daemon runs, has it.
 */
static int drop_sys_resource(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int word = CAP_TO_INDEX(CAP_SYS_RESOURCE);
	uint32_t bit = CAP_TO_MASK(CAP_SYS_RESOURCE);

	/* best effort: a container may deny CAP_SETPCAP; the sets suffice */
	prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0);
	if (syscall(SYS_capget, &hdr, data) == -1)
		return -errno;
	data[word].effective &= ~bit;
	data[word].permitted &= ~bit;
	data[word].inheritable &= ~bit;
	if (syscall(SYS_capset, &hdr, data) == -1)
		return -errno;
	return 0;
}

int creds_init(void)
{
	int n, ret;

	daemon_uid = geteuid();
	daemon_gid = getegid();
	creds_enabled = daemon_uid == 0;
	n = getgroups(sizeof(daemon_groups) / sizeof(daemon_groups[0]),
		      daemon_groups);
	if (n < 0)
		return -errno;
	daemon_ngroups = n;
	if (creds_enabled) {
		ret = drop_sys_resource();
		if (ret)
			return ret;
	}
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

static bool daemon_groups_are(int n, const gid_t *groups)
{
	return n == daemon_ngroups &&
	       (n == 0 ||
		memcmp(groups, daemon_groups, (size_t)n * sizeof(gid_t)) == 0);
}

/* The thread takes on who's groups (unless ngroups < 0: keep them). */
static int assume_groups(const struct creds *who)
{
	bool daemons;
	int ret;

	if (who->ngroups < 0)
		return 0;
	daemons = daemon_groups_are(who->ngroups, who->groups);
	if (daemons && !thread_groups_changed)
		return 0;
	ret = thread_setgroups(who->ngroups, who->groups);
	if (ret)
		return ret;
	thread_groups_changed = !daemons;
	return 0;
}

int creds_assume(const struct creds *who)
{
	int ret;

	if (!creds_need_switch(who->uid, who->gid))
		return 0;
	ret = assume_groups(who);
	if (ret)
		return ret;
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
	/* on failure the flag stays: the next restore tries again */
	if (thread_groups_changed &&
	    thread_setgroups(daemon_ngroups, daemon_groups) == 0)
		thread_groups_changed = false;
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

	/*
	 * Judged by the switched fsuid, fsgid and groups (AT_EACCESS), never
	 * by real ids: the kernel lets a process signal any thread whose real
	 * uid is its own, so a thread that took the caller's real uid, even
	 * for one syscall, could be stopped or killed by that caller.
	 */
	ret = creds_assume(who);
	if (ret)
		return ret;
	if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) ==
	    -1)
		ret = -errno;
	if (creds_need_switch(who->uid, who->gid))
		creds_restore();
	return ret;
}
