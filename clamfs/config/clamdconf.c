// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Reading clamd.conf limits, finding the clamd.conf of a listener, and who
 * may use a clamd socket (clamdconf.h).
 */
#include "clamdconf.h"

#include <ctype.h>
#include <stddef.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void clamdconf_defaults(struct clamd_limits *l)
{
	l->max_file_size = 100ULL << 20;
	l->max_scan_size = 400ULL << 20;
	l->stream_max_length = 100ULL << 20;
	l->alert_exceeds_max = false;
}

int clamdconf_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p == 'k' || *p == 'K')
		mult = 1024, p++;
	else if (*p == 'm' || *p == 'M')
		mult = 1024 * 1024, p++;
	if (*p != '\0' || v > UINT64_MAX / mult)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

static bool yes(const char *v)
{
	return strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0 ||
	       strcmp(v, "1") == 0;
}

int clamdconf_read(const char *path, struct clamd_limits *l,
		   unsigned int *bad_line)
{
	static const struct {
		const char *key;
		size_t off;
	} sizes[] = {
		{"MaxFileSize", offsetof(struct clamd_limits, max_file_size)},
		{"MaxScanSize", offsetof(struct clamd_limits, max_scan_size)},
		{"StreamMaxLength",
		 offsetof(struct clamd_limits, stream_max_length)},
	};
	char *line = NULL, *key, *val, *save;
	unsigned int n = 0;
	struct stat st;
	size_t cap = 0;
	int ret = 0, fd;
	FILE *f;

	/*
	 * The path may come from the command line of whatever listens on
	 * clamd's address: a FIFO must not hang --check, nor /dev/zero
	 * feed it forever
	 */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd == -1)
		return -errno;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_size > CLAMDCONF_MAX_SIZE) {
		close(fd);
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (ret == 0 && getline(&line, &cap, f) != -1) {
		n++;
		key = strtok_r(line, " \t\r\n", &save);
		if (!key || key[0] == '#')
			continue;
		val = strtok_r(NULL, " \t\r\n", &save);
		if (!val)
			continue;
		if (strcmp(key, "AlertExceedsMax") == 0)
			l->alert_exceeds_max = yes(val);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			if (strcmp(key, sizes[i].key) == 0 &&
			    clamdconf_parse_size(
				    val, (uint64_t *)((char *)l +
						      sizes[i].off)) != 0) {
				*bad_line = n;
				ret = -EINVAL;
			}
	}
	free(line);
	fclose(f);
	return ret;
}

/* The socket inode of a listener on a UNIX path, from /proc/net/unix. */
static unsigned long unix_listener_inode(const char *path)
{
	unsigned long inode = 0, ino, flags;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/net/unix", "re");

	if (!f)
		return 0;
	while (!inode && getline(&line, &cap, f) != -1) {
		char name[4096] = "";

		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %4095s", &flags,
			   &ino, name) == 3 &&
		    (flags & 0x10000) && strcmp(name, path) == 0)
			inode = ino; /* 0x10000: __SO_ACCEPTCON, listening */
	}
	free(line);
	fclose(f);
	return inode;
}

/* The inode of a loopback TCP listener on port, from /proc/net/tcp. */
static unsigned long tcp_listener_inode(unsigned int port)
{
	unsigned long inode = 0, ino;
	unsigned int lport, st;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/net/tcp", "re");

	if (!f)
		return 0;
	while (!inode && getline(&line, &cap, f) != -1)
		/* sl local:port rem:port st tx:rx tr:when retr uid tmo inode */
		if (sscanf(line,
			   " %*s %*x:%x %*x:%*x %x %*s %*s %*s %*s %*s %lu",
			   &lport, &st, &ino) == 3 &&
		    lport == port && st == 0x0A)
			inode = ino;
	free(line);
	fclose(f);
	return inode;
}

/* Whether process pid calls itself clamd. */
static bool is_clamd(const char *pid)
{
	char file[300], comm[32] = "";
	ssize_t n;
	int fd;

	snprintf(file, sizeof(file), "/proc/%s/comm", pid);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return false;
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	return n > 0 && strncmp(comm, "clamd\n", 6) == 0;
}

/*
 * The clamd process holding socket inode open, or 0. Others may hold it
 * too (systemd for a socket-activated clamd), and a listener that is not
 * clamd must not choose the file --check reads as root.
 */
static pid_t socket_owner(unsigned long inode)
{
	char want[64], link[128], dir[300];
	struct dirent *p, *fd;
	pid_t found = 0;
	DIR *procs, *fds;

	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	procs = opendir("/proc");
	if (!procs)
		return 0;
	while (!found && (p = readdir(procs))) {
		if (!isdigit((unsigned char)p->d_name[0]) ||
		    !is_clamd(p->d_name))
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
		fds = opendir(dir);
		if (!fds)
			continue;
		while (!found && (fd = readdir(fds))) {
			ssize_t n = readlinkat(dirfd(fds), fd->d_name, link,
					       sizeof(link) - 1);

			if (n > 0 && (link[n] = '\0', strcmp(link, want) == 0))
				found = (pid_t)atoi(p->d_name);
		}
		closedir(fds);
	}
	closedir(procs);
	return found;
}

/* -c FILE, -cFILE, --config-file=FILE or --config-file FILE of pid. */
static int config_of(pid_t pid, char *path, size_t len)
{
	char file[64], args[8192];
	ssize_t n;
	int fd;

	snprintf(file, sizeof(file), "/proc/%d/cmdline", (int)pid);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	n = read(fd, args, sizeof(args) - 1);
	close(fd);
	if (n <= 0)
		return -ENOENT;
	args[n] = '\0';
	for (char *a = args; a < args + n; a += strlen(a) + 1) {
		const char *next = a + strlen(a) + 1, *v = NULL;

		if (strcmp(a, "-c") == 0 || strcmp(a, "--config-file") == 0)
			v = next < args + n ? next : NULL;
		else if (strncmp(a, "--config-file=", 14) == 0)
			v = a + 14;
		else if (strncmp(a, "-c", 2) == 0 && a[2])
			v = a + 2;
		if (v) {
			snprintf(path, len, "%s", v);
			return 0;
		}
	}
	snprintf(path, len, "%s", CLAMDCONF_DEFAULT_PATH);
	return 0;
}

int clamdconf_find(const char *addr, char *path, size_t len)
{
	unsigned long inode = 0;
	unsigned int port;
	pid_t pid;

	if (strncmp(addr, "tcp://", 6) == 0) {
		const char *colon = strrchr(addr + 6, ':');

		if (!colon || sscanf(colon + 1, "%u", &port) != 1)
			return -EINVAL;
		if (strncmp(addr + 6, "127.", 4) != 0 &&
		    strncmp(addr + 6, "localhost:", 10) != 0)
			return -EREMOTE;
		inode = tcp_listener_inode(port);
	} else {
		inode = unix_listener_inode(
			strncmp(addr, "unix:", 5) == 0 ? addr + 5 : addr);
	}
	pid = inode ? socket_owner(inode) : 0;
	if (pid && config_of(pid, path, len) == 0)
		return 1;
	snprintf(path, len, "%s", CLAMDCONF_DEFAULT_PATH);
	return 0;
}

enum clamd_socket_access clamdconf_socket_access(mode_t mode)
{
	if (mode & S_IWOTH)
		return CLAMD_SOCKET_ANYONE;
	if (mode & S_IWGRP)
		return CLAMD_SOCKET_GROUP;
	return CLAMD_SOCKET_OWNER;
}

const char *clamdconf_unix_path(const char *addr)
{
	if (strncmp(addr, "unix:", 5) == 0)
		return addr + 5;
	return strstr(addr, "://") ? NULL : addr;
}
