// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamfs daemon entry point: parses the command line, opens the backend
 * before mounting (so a mount over the backend itself works), mounts, and
 * runs the FUSE loop until unmounted or signalled.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_exec.h"
#include "check_cmd.h"
#include "creds.h"
#include "drain.h"
#include "evict.h"
#include "watch.h"
#include "exitcode.h"
#include "fdlimit.h"
#include "fs.h"
#include "gate_reply.h"
#include "holders.h"
#include "log.h"
#include "mountpoint.h"
#include "sdnotify.h"
#include "ops.h"
#include "cmdline.h"
#include "opts.h"
#include "runtime.h"
#include "service.h"
#include "procfd.h"
#include "tsgrain.h"

#if !defined(__SANITIZE_ADDRESS__)
static char crash_msg[PATH_MAX + 128];

static void crash_handler(int sig)
{
	log_crash(crash_msg);
	signal(sig, SIG_DFL);
	raise(sig);
}
#endif

/*
 * A crashed daemon leaves a mount that answers ENOTCONN: say so where an
 * administrator will look. Sanitizer builds keep their own reports.
 */
static void install_crash_handlers(const char *mountpoint)
{
#if !defined(__SANITIZE_ADDRESS__)
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

	snprintf(crash_msg, sizeof(crash_msg),
		 "clamfs: fatal signal: the mount at %s is dead; "
		 "unmount it with 'fusermount3 -u %s'\n",
		 mountpoint, mountpoint);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], crash_handler);
#else
	(void)mountpoint;
#endif
}

/*
 * Opens the backend root; a one-line reason on failure. dead names the
 * dead clamfs mount on the mountpoint ("" when none): in place it hides
 * the backend, which is then opened beneath it.
 */
static int open_backend(const char *given, const char *dead, char **real,
			struct stat *st)
{
	char dir[PATH_MAX];
	int fd;

	if (dead[0] &&
	    mountpoint_find_dead(MOUNTINFO_SELF, given, "fuse.clamfs", dir,
				 sizeof(dir)) == 1 &&
	    strcmp(dir, dead) == 0) {
		int err = 0;

		*real = strdup(dead);
		fd = mountpoint_open_beneath(dead);
		if (!*real)
			err = ENOMEM;
		else if (fd < 0)
			err = -fd;
		else if (fstat(fd, st) == -1)
			err = errno;
		else if (!S_ISDIR(st->st_mode))
			err = ENOTDIR;
		if (err) {
			fprintf(stderr,
				"clamfs: backend %s: cannot open it beneath "
				"the dead mount there: %s\n",
				given, strerror(err));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		return fd;
	}
	*real = realpath(given, NULL);
	if (!*real) {
		fprintf(stderr, "clamfs: backend %s: %s\n", given,
			strerror(errno));
		return -1;
	}
	fd = open(*real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1 || fstat(fd, st) == -1) {
		fprintf(stderr, "clamfs: backend %s: %s\n", given,
			strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/* What /proc/self/fd calls the directory open at fd; NULL if unknown. */
static char *fd_link_name(int fd)
{
	char link[PROC_FD_PATH_MAX], buf[PATH_MAX];
	ssize_t n;

	proc_fd_path(link, fd);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/*
 * A clamfs that was killed left its mount, answering ENOTCONN. It stays
 * there until the new mount takes its place (mount_session), so that in
 * place the raw backend it hides is never shown, not even while clamd_wait
 * waits. Its absolute name in dir, or "", and its mount id (0 unknown:
 * then it is never taken off).
 */
static void find_dead_mount(const char *given, char *dir, size_t len,
			    unsigned long long *id)
{
	int ret;

	*id = 0;
	ret = mountpoint_find_dead(MOUNTINFO_SELF, given, "fuse.clamfs", dir,
				   len);
	if (ret < 0)
		log_err("mountpoint %s: cannot tell whether a dead clamfs "
			"mount is there: %s",
			given, strerror(-ret));
	if (ret != 1)
		dir[0] = '\0';
	else if (mountpoint_top_id(MOUNTINFO_SELF, dir, id) != 1)
		*id = 0;
}

static int check_mountpoint(const char *given, const char *dead, char **real)
{
	char fstype[64];
	struct stat st;
	int ret;

	if (dead[0]) { /* ours, and dead: a directory it was mounted on */
		*real = strdup(dead);
		if (!*real)
			fprintf(stderr, "clamfs: out of memory\n");
		return *real ? 0 : -1;
	}
	*real = realpath(given, NULL);
	if (!*real || stat(*real, &st) == -1) {
		fprintf(stderr, "clamfs: mountpoint %s: %s\n", given,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "clamfs: mountpoint %s: %s\n", given,
			strerror(ENOTDIR));
		return -1;
	}
	ret = mountpoint_fstype(MOUNTINFO_SELF, *real, fstype, sizeof(fstype));
	if (ret == 1 && strcmp(fstype, "fuse.clamfs") == 0) {
		fprintf(stderr,
			"clamfs: mountpoint %s: already mounted by clamfs\n",
			given);
		return -1;
	}
	return 0;
}

/*
 * Mounts se on mnt. Over a dead mount of ours (dead set), libfuse cannot
 * mount directly (it stats the mountpoint: ENOTCONN), and taking the dead
 * mount away first would uncover the directory beneath, which in place is
 * the raw backend: mount on a private stage, then move the mount in place
 * of the dead one. *moved_id is then the mount's id (0 otherwise): libfuse
 * knows it by the stage's name, mount_unmount takes it off mnt.
 */
static int mount_session(struct fuse_session *se, const char *mnt, bool dead,
			 unsigned long long dead_id,
			 unsigned long long *moved_id)
{
	char stage[64];
	int ret;

	*moved_id = 0;
	if (!dead)
		return fuse_session_mount(se, mnt);
	ret = mountpoint_stage(stage, sizeof(stage));
	if (ret) {
		log_err("mountpoint %s: cannot make a private directory to "
			"mount on before replacing the dead mount: %s",
			mnt, strerror(-ret));
		return -1;
	}
	if (fuse_session_mount(se, stage) != 0) {
		mountpoint_unstage(stage);
		return -1;
	}
	ret = mountpoint_replace(stage, mnt, dead_id);
	if (ret < 0) {
		log_err("mountpoint %s: cannot move the new mount in place of "
			"the dead one: %s",
			mnt, strerror(-ret));
		fuse_session_unmount(se);
		mountpoint_unstage(stage);
		return -1;
	}
	mountpoint_unstage(stage);
	if (mountpoint_top_id(MOUNTINFO_SELF, mnt, moved_id) != 1)
		*moved_id = 0;
	if (ret == 2) {
		*moved_id = 0; /* the top one is not ours */
		log_warn("mountpoint %s: the mount on top is no longer the "
			 "dead one found at start: left in place, this mount "
			 "beneath it",
			 mnt);
	} else if (ret == 1)
		log_warn("mountpoint %s: removed the dead mount a clamfs that "
			 "did not exit cleanly left there, once the new mount "
			 "covered it",
			 mnt);
	else
		log_warn("mountpoint %s: mounted over the dead mount a clamfs "
			 "that did not exit cleanly left there (this kernel "
			 "cannot mount beneath it); it refuses every access "
			 "again once this mount goes",
			 mnt);
	return 0;
}

/*
 * Unmounts what mount_session mounted. A moved mount is taken off mnt
 * here, only when the connection still stands (it is still mounted
 * somewhere) and mnt's top mount is still the one moved there; libfuse
 * then finds the connection gone, or (files still open on the lazily
 * detached mount) fails to unmount the stage's name, which is gone.
 */
static void mount_unmount(struct fuse_session *se, const char *mnt,
			  unsigned long long moved_id)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se)};
	unsigned long long top;

	if (moved_id && poll(&pfd, 1, 0) == 0 &&
	    mountpoint_top_id(MOUNTINFO_SELF, mnt, &top) == 1 &&
	    top == moved_id && umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == -1)
		log_warn("cannot unmount %s: %s", mnt, strerror(errno));
	fuse_session_unmount(se);
}

static int run_loop(struct fuse_session *se, const struct clamfs_opts *opts)
{
	struct fuse_loop_config *cfg;
	int ret;

	if (opts->singlethread)
		return fuse_session_loop(se);
	/* the 3.12+ config object is the only path that applies the cap */
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_max_threads(cfg, opts->threads);
	fuse_loop_cfg_set_clone_fd(cfg, opts->clone_fd);
	ret = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret;
}

/* Says what the fd limit came to; the table's cap follows from it. */
static void log_fdlimit(const struct fdlimit *lim, size_t budget, size_t cap)
{
	if (lim->err)
		log_warn("fd limit: cannot raise the soft limit %llu to the "
			 "hard limit %llu: %s; up to %zu inodes held open "
			 "(evicted from %zu)",
			 (unsigned long long)lim->soft,
			 (unsigned long long)lim->hard, strerror(lim->err), cap,
			 budget);
	else
		log_info("fd limit: soft %llu (was %llu), hard %llu; up to "
			 "%zu inodes held open (evicted from %zu)",
			 (unsigned long long)lim->soft,
			 (unsigned long long)lim->before,
			 (unsigned long long)lim->hard, cap, budget);
}

static int note_allow_other(void *data, const char *arg, int key,
			    struct fuse_args *outargs)
{
	*(bool *)data = true;
	return 1; /* keep it for libfuse */
}

/*
 * Identity switching needs root: a daemon run by a user serves every
 * caller of an allow_other mount with that user's own rights.
 */
static void warn_shared_without_root(struct fuse_args *args)
{
	static const struct fuse_opt spec[] = {
		FUSE_OPT_KEY("allow_other", 0),
		FUSE_OPT_END,
	};
	bool shared = false;

	if (geteuid() == 0 ||
	    fuse_opt_parse(args, &shared, spec, note_allow_other) != 0 ||
	    !shared)
		return;
	fprintf(stderr,
		"clamfs: warning: not running as root: every request through "
		"this allow_other mount is carried out with uid %u's rights, "
		"not the caller's\n",
		(unsigned)geteuid());
}

static void print_version(void)
{
	printf("clamfs version %s\n", CLAMFS_VERSION);
	printf("FUSE library version %s\n", fuse_pkgversion());
	fuse_lowlevel_version();
}

/* clamd='s lines (one per backend) as one log line: "a; b weight=2". */
static const char *one_line(const char *lines, char *buf, size_t len)
{
	size_t used = 0;

	for (const char *c = lines; c && *c && used + 3 < len; c++) {
		if (*c == '\n') {
			buf[used++] = ';';
			buf[used++] = ' ';
		} else {
			buf[used++] = *c;
		}
	}
	buf[used] = '\0';
	return buf;
}

/*
 * The backend watch, and with it the kernel's caches kept for long; where
 * it cannot be had the mount keeps its short timeouts, and says why.
 * Before the session loop: nothing reads the timeouts yet.
 */
static struct backwatch *start_watch(struct clamfs_fs *fs, int root_fd,
				     dev_t root_dev, const char *mnt)
{
	struct backwatch *bw;
	const char *why;

	if (!watch_kernel_ready(&why)) {
		log_warn("watch_backend: off: %s; timeouts stay as set", why);
		return NULL;
	}
	bw = watch_start(fs, root_fd, mnt);
	if (!bw) {
		log_warn("watch_backend: off: cannot watch the backend's "
			 "filesystem (%s); timeouts stay as set",
			 strerror(errno));
		return NULL;
	}
	fs->watched_dev = root_dev;
	atomic_store(&fs->watched, true);
	stats_set_backend_watch(&fs->stats, true);
	log_info("watch_backend: on: names and attributes cached for %.0f s, "
		 "directory contents until they change (on the backend's own "
		 "filesystem)",
		 watch_attr_timeout(fs, root_dev));
	return bw;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct clamfs_fs fs = {.quarantine_fd = -1};
	struct runtime *rt = NULL;
	struct evictor *ev = NULL;
	struct backwatch *bw = NULL;
	struct generation *pin;
	struct fuse_session *se = NULL;
	struct clamfs_opts opts;
	struct fdlimit fdlim;
	size_t inode_budget, inode_cap;
	char *backend = NULL, *mnt = NULL, *fd_root = NULL;
	char err[512], clamd[1024], dead[PATH_MAX];
	unsigned long long moved_id = 0, dead_id = 0, mnt_id = 0;
	struct stat root_st;
	int root_fd, creds_err, ret = 1;

	if (argc >= 2 && admin_exec_wanted(argv[1]))
		return admin_exec(argv);
	if (cmdline_parse(argc, argv, &opts, &args, err, sizeof(err)) != 0) {
		fprintf(stderr, "clamfs: %s\n", err);
		return EXIT_CONFIG;
	}
	if (opts.show_help) {
		cmdline_print_help(stdout, argv[0]);
		printf("FUSE options:\n");
		fflush(stdout);
		fuse_lowlevel_help();
		ret = 0;
		goto out_opts;
	}
	if (opts.show_version) {
		print_version();
		ret = 0;
		goto out_opts;
	}
	if (opts.check) {
		ret = check_cmd_run(&opts, stdout);
		goto out_opts;
	}

	/* one fd per inode the kernel knows: 1024 is not enough for that */
	fdlimit_raise(&fdlim);
	inode_budget = fdlimit_inode_budget(fdlim.soft);
	inode_cap = fdlimit_inode_cap(fdlim.soft);
	ret = EXIT_MOUNT;
	/* before the backend: in place, the dead mount hides it */
	find_dead_mount(opts.mountpoint, dead, sizeof(dead), &dead_id);
	root_fd = open_backend(opts.backend, dead, &backend, &root_st);
	if (root_fd == -1)
		goto out_opts;
	if (check_mountpoint(opts.mountpoint, dead, &mnt) == -1) {
		close(root_fd);
		goto out_opts;
	}
	log_set_mount(mnt);
	ret = EXIT_FAILED;
	fd_root = fd_link_name(root_fd);
	/* held open for the mount's life: its device number stays its own */
	tsgrain_hold_device(root_st.st_dev);
	fs.itab = itab_create(root_fd, &root_st);
	if (!fs.itab || cmdline_add_mount_names(&args, backend) != 0) {
		fprintf(stderr, "clamfs: out of memory\n");
		goto out_fs;
	}
	/* ret stays 1 (failure) until the mount has run */
	creds_err = creds_init();
	if (creds_err) {
		fprintf(stderr,
			"clamfs: cannot set up identity switching: %s\n",
			strerror(-creds_err));
		goto out_fs;
	}
	warn_shared_without_root(&args);
	itab_set_max(fs.itab, inode_budget, inode_cap);
	fs.attr_timeout = opts.attr_timeout;
	/*
	 * Without default_permissions only the backend checks rights, and
	 * it sees a lookup only when the kernel revalidates the name: a
	 * cached name would let a user past a directory they cannot search.
	 */
	fs.entry_timeout = opts.default_permissions ? opts.entry_timeout : 0;
	fs.negative_timeout = opts.negative_timeout;
	fs.default_permissions = opts.default_permissions;
	fs.passthrough_wanted = opts.passthrough;
	fs.writeback_wanted = opts.writeback_cache;
	clock_gettime(CLOCK_MONOTONIC, &fs.started);
	fs.started_wall = time(NULL);
	fs.backend_path = backend;
	fs.fd_root = fd_root ? fd_root : backend;
	fs.fd_root_len = strlen(fs.fd_root);
	ret = EXIT_CONFIG; /* both say why */
	rt = runtime_prepare(&fs, &opts, mnt);
	if (!rt)
		goto out_fs;
	se = fuse_session_new(&args, &clamfs_ops, sizeof(clamfs_ops), &fs);
	if (!se)
		goto out_scan;
	ret = EXIT_FAILED;
	fs.se = se;
	fs.kernel = &gate_reply_kernel;
	if (service_block_signals() != 0 || fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (opts.clamd_wait &&
	    runtime_wait_clamd(rt, opts.clamd_wait, se) == -EINTR) {
		ret = 0; /* stopped before mounting: a clean stop */
		goto out_signals;
	}
	if (mount_session(se, mnt, dead[0] != '\0', dead_id, &moved_id) != 0) {
		ret = EXIT_MOUNT;
		goto out_signals;
	}
	/* to tell, at stop, whether mnt is still this mount */
	if (moved_id)
		mnt_id = moved_id;
	else if (mountpoint_top_id(MOUNTINFO_SELF, mnt, &mnt_id) != 1)
		mnt_id = 0;
	log_init(!opts.foreground,
		 opts.debug ? LOG_LEVEL_DEBUG : (enum log_level)opts.log_level);
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;
	if (runtime_start(rt, argc, argv) != 0) {
		log_err("cannot start the scanner threads");
		goto out_unmount;
	}
	ev = evict_start(&fs, mnt);
	if (!ev) {
		log_err("cannot start the evictor thread: %s", strerror(errno));
		goto out_unmount;
	}
	if (opts.watch_backend)
		bw = start_watch(&fs, root_fd, root_st.st_dev, mnt);
	install_crash_handlers(mnt);
	/* the mode in force: a SIGHUP may have replaced the generation */
	pin = fs_pin(&fs);
	log_info("mounted %s on %s, clamd=%s scan_mode=%s on_infected=%s "
		 "on_error=%s",
		 backend, mnt, one_line(opts.clamd, clamd, sizeof(clamd)),
		 scan_mode_name(pin->mode),
		 infected_action_name(opts.policy.on_infected),
		 opts.policy.on_error_allow ? "allow" : "deny");
	gen_unpin(pin);
	log_fdlimit(&fdlim, inode_budget, inode_cap);
	if (strcmp(backend, mnt) == 0)
		holders_warn(backend, root_st.st_dev, 2000);
	/* ready after the holders are named: a server started now is none */
	sdnotify_ready("mounted");

	/* a loop ended by SIGTERM/SIGINT returns the signal: a clean stop */
	ret = run_loop(se, &opts);
	ret = ret == 0 || ret == SIGTERM || ret == SIGINT ? EXIT_OK
							  : EXIT_FAILED;
	sdnotify_stopping();
	drain_after_loop(&fs, mnt, mnt_id);
	watch_stop(bw, mnt_id);
	bw = NULL;
	evict_stop(ev, mnt_id);
	ev = NULL;
	log_info("unmounting %s", mnt);
	/*
	 * Scanner threads reply to opens: stop them while the session fd is
	 * still open (unmounting closes it, and the number may be reused).
	 */
	runtime_free(rt);
	rt = NULL;

out_unmount:
	mount_unmount(se, mnt, moved_id);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	runtime_free(rt);
	rt = NULL;
	fuse_session_destroy(se);
out_scan:
	runtime_free(rt);
out_fs:
	ops_dir_close_all();
	itab_destroy(fs.itab);
out_opts:
	fuse_opt_free_args(&args);
	opts_free(&opts);
	free(backend);
	free(fd_root);
	free(mnt);
	return ret;
}
