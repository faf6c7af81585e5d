// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan gate (gate.c) without FUSE: opens of real files in a directory
 * of the build tree, judged by the real policy, verdict cache and scan
 * queue, with a scanner that calls a file infected when it starts with
 * "INFECTED". The opener, its groups, its answer and the kernel's cache
 * notifications are this test's (struct gate_open_ops), so what the gate
 * asks of the FUSE layer and in which order is what is checked: whether
 * it waits, what it answers, what it reopens, when a removed name is
 * forgotten. Root: the gate's writer probe takes a lease (writers.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate.h"
#include "procfd.h"
#include "tsgrain.h"

#define EVENTS_MAX 32

/* What the gate did through the test's ops, in order. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char events[EVENTS_MAX][NAME_MAX + 32];
	int n_events;
	int answers;
	int err;
	bool keep_cache;
	int keeps;
	int groups_asked;
	int reopens;
	int asked;	  /* open_asked calls */
	const char *name; /* the file an open as asked opens */
	/* before the open as asked: text written over the file; or errno */
	const char *write_before_asked;
	int asked_err;
	gid_t groups[2];
	int n_groups;
} seen = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static atomic_int scans;

static struct clamfs_fs fs;
static struct clamfs_opts opts;
static struct vcache *vc;
static struct detect *det;
static char dir[PATH_MAX];
static int dir_fd = -1;

static void note(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&seen.lock);
	/* more than a test expects: the last slot says so */
	if (seen.n_events == EVENTS_MAX)
		seen.n_events--;
	va_start(ap, fmt);
	vsnprintf(seen.events[seen.n_events++], sizeof(seen.events[0]), fmt,
		  ap);
	va_end(ap);
	pthread_cond_broadcast(&seen.cond);
	pthread_mutex_unlock(&seen.lock);
}

static void forget_seen(void)
{
	pthread_mutex_lock(&seen.lock);
	seen.n_events = 0;
	seen.answers = 0;
	seen.err = -1;
	seen.keep_cache = false;
	seen.keeps = 0;
	seen.groups_asked = 0;
	seen.reopens = 0;
	seen.asked = 0;
	seen.write_before_asked = NULL;
	seen.asked_err = 0;
	pthread_mutex_unlock(&seen.lock);
	atomic_store(&scans, 0);
}

/* The scanner: infected is what starts with "INFECTED". */
/* While set, scans wait in the scanner until it is cleared. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool held;
} scan_gate = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void hold_scans(bool held)
{
	pthread_mutex_lock(&scan_gate.lock);
	scan_gate.held = held;
	pthread_cond_broadcast(&scan_gate.cond);
	pthread_mutex_unlock(&scan_gate.lock);
}

static void fake_scan(const struct scanq_scan *s, struct cdp_result *res)
{
	char head[8];
	ssize_t n = pread(s->fd, head, sizeof(head), 0);

	atomic_fetch_add(&scans, 1);
	pthread_mutex_lock(&scan_gate.lock);
	while (scan_gate.held)
		pthread_cond_wait(&scan_gate.cond, &scan_gate.lock);
	pthread_mutex_unlock(&scan_gate.lock);
	memset(res, 0, sizeof(*res));
	if (n == (ssize_t)sizeof(head) && memcmp(head, "INFECTED", 8) == 0) {
		res->verdict = CDP_INFECTED;
		strcpy(res->text, "Clamfs.Test.Sig");
	} else {
		res->verdict = CDP_CLEAN;
	}
}

static int fake_inval_inode(struct clamfs_fs *f, uint64_t nodeid)
{
	(void)f;
	note("inval_inode:%llu", (unsigned long long)nodeid);
	return 0;
}

static int fake_inval_entry(struct clamfs_fs *f, uint64_t parent,
			    const char *name, size_t len)
{
	(void)f, (void)parent;
	note("inval_entry:%.*s", (int)len, name);
	return 0;
}

static const struct fs_kernel_ops fake_kernel = {
	.inval_inode = fake_inval_inode,
	.inval_entry = fake_inval_entry,
};

/* An opener; kept is a heap copy, as the FUSE layer's would be. */
struct fake_open {
	struct gate_open o;
	bool kept;
};

static int fake_groups(struct gate_open *o, gid_t *buf, size_t cap)
{
	(void)o;
	pthread_mutex_lock(&seen.lock);
	seen.groups_asked++;
	for (int i = 0; i < seen.n_groups && (size_t)i < cap; i++)
		buf[i] = seen.groups[i];
	pthread_mutex_unlock(&seen.lock);
	return seen.n_groups;
}

static int fake_reopen(struct gate_open *o, int fd)
{
	(void)o;
	pthread_mutex_lock(&seen.lock);
	seen.reopens++;
	pthread_mutex_unlock(&seen.lock);
	return proc_fd_reopen_readonly(fd, 0);
}

static void write_file(const char *name, const char *text);

/*
 * The open as asked, from whichever thread: what the test says comes
 * first (a writer, or a lease), then the read-write open.
 */
static int fake_open_asked(struct gate_open *o)
{
	const char *text;
	int fd, err;

	(void)o;
	pthread_mutex_lock(&seen.lock);
	seen.asked++;
	text = seen.write_before_asked;
	err = seen.asked_err;
	pthread_mutex_unlock(&seen.lock);
	if (err)
		return -err;
	if (text) {
		fd = openat(dir_fd, seen.name, O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (fd < 0 || write(fd, text, strlen(text)) < 0)
			note("writer-failed:%d", errno);
		close(fd);
	}
	fd = openat(dir_fd, seen.name, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static struct gate_open *fake_keep(struct gate_open *o)
{
	struct fake_open *k;

	if (((struct fake_open *)o)->kept)
		return o;
	k = malloc(sizeof(*k));
	if (!k)
		return NULL;
	*k = *(struct fake_open *)o;
	k->kept = true;
	pthread_mutex_lock(&seen.lock);
	seen.keeps++;
	pthread_mutex_unlock(&seen.lock);
	return &k->o;
}

static void fake_on_interrupt(struct gate_open *o, struct scan_waiter *w)
{
	(void)o;
	note(w ? "interrupt:on" : "interrupt:off");
}

static void fake_answer(struct gate_open *o, struct inode *inode, int fd,
			int err, bool keep_cache)
{
	struct fake_open *fo = (struct fake_open *)o;

	(void)inode;
	/*
	 * The FUSE layer keeps an allowed fd as the file handle: done here.
	 * No cmocka assertion on a scanner thread: an event says it.
	 */
	if (close(fd) != 0)
		note("close-failed:%d", errno);
	note("answer:%d", err);
	pthread_mutex_lock(&seen.lock);
	seen.answers++;
	seen.err = err;
	seen.keep_cache = keep_cache;
	pthread_cond_broadcast(&seen.cond);
	pthread_mutex_unlock(&seen.lock);
	if (fo->kept)
		free(fo);
}

/* What wait_answer returns for an open sent back to be made again. */
#define OPEN_LATER (-2)

static void fake_open_later(struct gate_open *o, int fd)
{
	struct fake_open *fo = (struct fake_open *)o;

	if (close(fd) != 0)
		note("close-failed:%d", errno);
	note("open-later");
	pthread_mutex_lock(&seen.lock);
	seen.answers++;
	seen.err = OPEN_LATER;
	pthread_cond_broadcast(&seen.cond);
	pthread_mutex_unlock(&seen.lock);
	if (fo->kept)
		free(fo);
}

static const struct gate_open_ops fake_ops = {
	.groups = fake_groups,
	.reopen_readonly = fake_reopen,
	.open_asked = fake_open_asked,
	.keep = fake_keep,
	.on_interrupt = fake_on_interrupt,
	.answer = fake_answer,
	.open_later = fake_open_later,
};

static void write_file(const char *name, const char *text)
{
	/* (the writer before an open as asked writes in a scanner thread) */
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(close(fd), 0);
}

/*
 * Opens name as uid 1000 through the gate, asking for flags, with the
 * backend fd opened with fd_flags, and returns the inode (with one
 * reference, the kernel's in the daemon) for the caller to forget.
 */
static struct inode *gate_open_with(const char *name, int flags, int fd_flags,
				    bool create, bool as_reader)
{
	struct fake_open fo = {
		.o = {.ops = &fake_ops,
		      .pid = getpid(),
		      .uid = 1000,
		      .gid = 1000,
		      .flags = flags,
		      .is_create = create,
		      .as_reader = as_reader},
	};
	struct inode *inode = NULL;
	struct stat st;
	int pfd, fd;

	seen.name = name;
	pfd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	assert_true(pfd >= 0);
	assert_int_equal(fstat(pfd, &st), 0);
	assert_int_equal(itab_insert_ref(fs.itab, pfd, &st, &inode), 0);
	fd = openat(dir_fd, name, fd_flags | O_CLOEXEC);
	assert_true(fd >= 0);
	gate_open(&fs, &fo.o, inode, fd);
	return inode;
}

static struct inode *gate_open_as(const char *name, int flags, bool create)
{
	return gate_open_with(name, flags, flags, create, false);
}

/*
 * A read-write open of name, decided as a reader: handed to the gate with
 * a read-only fd, as the FUSE layer does.
 */
static struct inode *gate_open_rw_as_reader(const char *name)
{
	return gate_open_with(name, O_RDWR, O_RDONLY, false, true);
}

/* The answer, from whichever thread it comes: its errno. */
static int wait_answer(void)
{
	struct timespec until;
	int err;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	int answers;

	pthread_mutex_lock(&seen.lock);
	while (seen.answers == 0)
		if (pthread_cond_timedwait(&seen.cond, &seen.lock, &until) ==
		    ETIMEDOUT)
			break;
	answers = seen.answers;
	err = seen.err;
	pthread_mutex_unlock(&seen.lock);
	/* asserted unlocked: a failure leaves the test by longjmp */
	assert_int_equal(answers, 1);
	return err;
}

/*
 * Until n events were seen, from whichever thread: what a scanner thread
 * does after its answer (a create's name forgotten) comes later.
 */
static void wait_events(int n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	int got;

	pthread_mutex_lock(&seen.lock);
	while (seen.n_events < n)
		if (pthread_cond_timedwait(&seen.cond, &seen.lock, &until) ==
		    ETIMEDOUT)
			break;
	got = seen.n_events;
	pthread_mutex_unlock(&seen.lock);
	assert_true(got >= n);
}

/* Answered during gate_open itself, without waiting for a scan. */
static void assert_answered_at_once(int err)
{
	int answers, got, keeps;

	pthread_mutex_lock(&seen.lock);
	answers = seen.answers;
	got = seen.err;
	keeps = seen.keeps;
	pthread_mutex_unlock(&seen.lock);
	assert_int_equal(answers, 1);
	assert_int_equal(got, err);
	assert_int_equal(keeps, 0);
}

static void assert_event(int i, const char *what)
{
	char event[sizeof(seen.events[0])] = "";

	pthread_mutex_lock(&seen.lock);
	if (i < seen.n_events)
		memcpy(event, seen.events[i], sizeof(event));
	pthread_mutex_unlock(&seen.lock);
	assert_string_equal(event, what);
}

static int setup(void **state)
{
	static struct scanq_config qcfg = {
		.threads = 2,
		.hooks.scan = fake_scan,
		.ctx = &fs,
	};
	struct generation *g;
	struct stat st;
	int root;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_gate: needs root (the writer probe)\n");
		exit(77);
	}
	/* the build tree's filesystem, as a backend's: not tmpfs, usually */
	if (!getcwd(dir, sizeof(dir) - 16))
		return -1;
	strcat(dir, "/gate.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0 || root < 0 || fstat(root, &st) != 0)
		return -1;
	fs.itab = itab_create(root, &st);
	fs.backend_path = dir;
	fs.fd_root = dir;
	fs.fd_root_len = strlen(dir);
	fs.quarantine_fd = -1;
	fs.kernel = &fake_kernel;
	policy_init(&opts.policy);
	opts.scan_timeout = 10; /* each request's deadline, seconds */
	opts.policy.racy_window =
		0; /* a stamp vouches at once: no waiting here */
	opts.policy.racy_learn = false;
	vc = vcache_new(64, 600, NULL, NULL);
	det = detect_new(NULL, 0, "/mnt/test", &fs.stats);
	g = generation_new();
	if (!fs.itab || !vc || !det || !g)
		return -1;
	/* the test frees them (NULL: not the generation's to free) */
	g->opts = shared_new(&opts, NULL);
	g->vcache = shared_new(vc, NULL);
	g->detect = shared_new(det, NULL);
	if (generations_new(g, &fs.gens) != 0)
		return -1;
	/* the gate's own hooks, as the daemon's queue has them (its hold
	 * pins the test's generation, whose fleet is none) */
	gate_scanq_hooks(&qcfg.hooks);
	return scanq_new(&qcfg, &fs.scanq);
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	scanq_free(fs.scanq);
	generations_free(fs.gens);
	vcache_free(vc);
	detect_free(det);
	itab_destroy(fs.itab);
	policy_free(&opts.policy);
	close(dir_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int each(void **state)
{
	(void)state;
	forget_seen();
	opts.policy.on_infected = INFECTED_DENY;
	vcache_clear(vc);
	return 0;
}

/* Not a regular file: nothing to scan, nothing cached by the kernel. */
static void test_directory_allowed_at_once(void **state)
{
	struct inode *in;

	(void)state;
	assert_int_equal(mkdirat(dir_fd, "sub", 0755), 0);
	in = gate_open_as("sub", O_RDONLY | O_DIRECTORY, false);
	assert_answered_at_once(0);
	assert_false(seen.keep_cache);
	assert_int_equal(atomic_load(&scans), 0);
	itab_forget(fs.itab, in, 1);
}

static void test_empty_file_allowed_unscanned(void **state)
{
	uint64_t empty = stats_get(&fs.stats, STAT_EMPTY);
	struct inode *in;

	(void)state;
	write_file("empty", "");
	in = gate_open_as("empty", O_RDONLY, false);
	assert_answered_at_once(0);
	assert_int_equal(atomic_load(&scans), 0);
	assert_int_equal(stats_get(&fs.stats, STAT_EMPTY), empty + 1);
	itab_forget(fs.itab, in, 1);
}

/* Whether the file's stamp shows stores through a mapping (tsgrain.h). */
static bool sees_mapped_stores(struct inode *in)
{
	bool sees;

	assert_int_equal(inode_pin(fs.itab, in), 0);
	sees = tsgrain_sees_mapped_stores(inode_fd(in), inode_dev(in));
	inode_unpin(in);
	return sees;
}

/*
 * A miss waits for the scanner: the open is kept, the interrupt hook set
 * and cleared before the answer. The next open takes the cached verdict
 * at once, and the kernel may keep the pages the first one cached; where
 * the filesystem would not show a mapping's stores in the stamp (tmpfs),
 * nothing is cached and it is scanned again.
 */
static void test_clean_scanned_then_cached(void **state)
{
	struct inode *in, *again;
	int events;

	(void)state;
	write_file("clean", "nothing to see here\n");
	in = gate_open_as("clean", O_RDONLY, false);
	assert_int_equal(wait_answer(), 0);
	assert_int_equal(atomic_load(&scans), 1);
	assert_int_equal(seen.keeps, 1);
	assert_event(0, "interrupt:on");
	assert_event(1, "interrupt:off");
	assert_event(2, "answer:0");
	events = seen.n_events;
	assert_int_equal(events, 3);
	forget_seen();
	again = gate_open_as("clean", O_RDONLY, false);
	assert_ptr_equal(again, in);
	if (sees_mapped_stores(in)) {
		assert_answered_at_once(0);
		assert_true(seen.keep_cache);
		assert_int_equal(atomic_load(&scans), 0);
	} else {
		assert_int_equal(wait_answer(), 0);
		assert_int_equal(atomic_load(&scans), 1);
	}
	itab_forget(fs.itab, in, 2);
}

/* Refused after its scan, and at once from the cache afterwards. */
static void test_infected_refused_then_from_cache(void **state)
{
	uint64_t denied = stats_get(&fs.stats, STAT_DENIED);
	struct inode *in;

	(void)state;
	write_file("eicar", "INFECTED, as the scanner here says\n");
	in = gate_open_as("eicar", O_RDONLY, false);
	assert_int_equal(wait_answer(), EACCES);
	assert_int_equal(atomic_load(&scans), 1);
	forget_seen();
	gate_open_as("eicar", O_RDONLY, false);
	if (sees_mapped_stores(in)) {
		assert_answered_at_once(EACCES);
		assert_int_equal(atomic_load(&scans), 0);
	} else {
		assert_int_equal(wait_answer(), EACCES);
	}
	assert_int_equal(stats_get(&fs.stats, STAT_DENIED), denied + 2);
	itab_forget(fs.itab, in, 2);
}

/* Overwriting an infected file reads nothing: allowed, never scanned. */
static void test_write_only_allowed_unscanned(void **state)
{
	struct inode *in;

	(void)state;
	write_file("wo", "INFECTED, but only written\n");
	in = gate_open_as("wo", O_WRONLY, false);
	assert_answered_at_once(0);
	assert_int_equal(atomic_load(&scans), 0);
	itab_forget(fs.itab, in, 1);
}

/* A read-write opener's fd never goes to clamd: a read-only reopening. */
static void test_read_write_scanned_through_reopen(void **state)
{
	struct inode *in;

	(void)state;
	write_file("rw", "INFECTED, and opened read-write\n");
	in = gate_open_as("rw", O_RDWR, false);
	assert_int_equal(wait_answer(), EACCES);
	assert_int_equal(seen.reopens, 1);
	assert_int_equal(atomic_load(&scans), 1);
	itab_forget(fs.itab, in, 1);
}

/*
 * Decided as a reader: scanned on the read-only fd itself (no reopening),
 * then opened as asked; the verdict is kept, so the next read-write open
 * is answered at once, and opened as asked too.
 */
static void test_read_write_decided_as_reader_then_cached(void **state)
{
	struct inode *in;

	(void)state;
	write_file("doc", "a document opened read-write\n");
	in = gate_open_rw_as_reader("doc");
	assert_int_equal(wait_answer(), 0);
	assert_int_equal(seen.reopens, 0);
	assert_int_equal(seen.asked, 1);
	assert_int_equal(atomic_load(&scans), 1);
	if (!sees_mapped_stores(in)) {
		itab_forget(fs.itab, in, 1); /* tmpfs: nothing is kept */
		return;
	}
	forget_seen();
	gate_open_rw_as_reader("doc");
	assert_answered_at_once(0);
	assert_int_equal(seen.asked, 1);
	assert_int_equal(atomic_load(&scans), 0);
	itab_forget(fs.itab, in, 2);
}

/*
 * A writer between the decision and the open as asked: the stamp moved,
 * so the open is decided again on the fd opened as asked, which finds
 * what the writer put there. From the cache (answered in gate_open) and
 * after a scan (answered from a scanner thread) alike.
 */
static void test_writer_between_decision_and_open_is_caught(void **state)
{
	uint64_t again = stats_get(&fs.stats, STAT_REDECIDED);
	struct timespec tick = {.tv_nsec = 20000000};
	struct inode *in;

	(void)state;
	write_file("swap", "clean at first\n");
	for (int cached = 0; cached < 2; cached++) {
		forget_seen();
		seen.write_before_asked = "INFECTED by the writer between\n";
		/* the writer's ctime must differ from the one decided on */
		nanosleep(&tick, NULL);
		in = gate_open_rw_as_reader("swap");
		assert_int_equal(wait_answer(), EACCES);
		assert_int_equal(seen.asked, 1);
		/* decided again: scanned through a read-only reopening */
		assert_int_equal(seen.reopens, 1);
		itab_forget(fs.itab, in, 1);
		write_file("swap", "clean again\n");
		nanosleep(&tick, NULL);
		/* scanned (and cached) without a writer, for the next round */
		forget_seen();
		in = gate_open_as("swap", O_RDONLY, false);
		assert_int_equal(wait_answer(), 0);
		itab_forget(fs.itab, in, 1);
	}
	assert_int_equal(stats_get(&fs.stats, STAT_REDECIDED), again + 2);
}

/*
 * A lease met at the open as asked: the FUSE layer is told to open again
 * later (not answered EWOULDBLOCK, which is also EAGAIN, a full queue's
 * refusal); any other error of that open is the answer.
 */
static void test_lease_at_the_open_as_asked(void **state)
{
	struct inode *in;

	(void)state;
	write_file("leased", "clean, and leased by somebody\n");
	seen.asked_err = EWOULDBLOCK;
	in = gate_open_rw_as_reader("leased");
	assert_int_equal(wait_answer(), OPEN_LATER);
	assert_int_equal(seen.asked, 1);
	forget_seen();
	seen.asked_err = ETXTBSY;
	gate_open_rw_as_reader("leased");
	assert_int_equal(wait_answer(), ETXTBSY);
	itab_forget(fs.itab, in, 2);
}

/* Too big to scan, refused by policy: at once, with its errno. */
static void test_oversize_refused_at_once(void **state)
{
	struct inode *in;

	(void)state;
	write_file("big", "more than eight bytes\n");
	opts.policy.max_scan_size = 8;
	opts.policy.oversize_allow = false;
	opts.policy.deny_errno = EPERM;
	in = gate_open_as("big", O_RDONLY, false);
	opts.policy.max_scan_size = 100ULL << 20;
	opts.policy.oversize_allow = true;
	opts.policy.deny_errno = EACCES;
	assert_answered_at_once(EPERM);
	assert_int_equal(atomic_load(&scans), 0);
	itab_forget(fs.itab, in, 1);
}

/*
 * The opener's groups cost a read of its /proc status: asked only when an
 * exempt group could apply, and then they decide.
 */
static void test_groups_asked_only_for_exempt_gid(void **state)
{
	struct inode *in;

	(void)state;
	write_file("grp", "INFECTED, for the exempt group only\n");
	in = gate_open_as("grp", O_RDONLY, false);
	assert_int_equal(wait_answer(), EACCES);
	assert_int_equal(seen.groups_asked, 0);
	itab_forget(fs.itab, in, 1);

	assert_int_equal(policy_add_exempt_gid(&opts.policy, 4242), 0);
	forget_seen();
	vcache_clear(vc);
	seen.groups[0] = 4242;
	seen.n_groups = 1;
	in = gate_open_as("grp", O_RDONLY, false);
	assert_answered_at_once(0);
	assert_int_equal(seen.groups_asked, 1);
	assert_int_equal(atomic_load(&scans), 0);
	itab_forget(fs.itab, in, 1);

	forget_seen();
	seen.groups[0] = 7;
	in = gate_open_as("grp", O_RDONLY, false);
	assert_int_equal(wait_answer(), EACCES);
	assert_int_equal(seen.groups_asked, 1);
	seen.n_groups = 0;
	itab_forget(fs.itab, in, 1);
	policy_free(&opts.policy);
	policy_init(&opts.policy);
	opts.policy.racy_window = 0;
	opts.policy.racy_learn = false;
}

/*
 * on_infected=delete removes the file; the kernel must forget its name.
 * An open has it forgotten before its answer, so the name is gone once
 * the open fails; a create holds its directory's lock until answered,
 * which the notification takes: answered first, then forgotten.
 */
static void test_delete_forgets_the_name_around_the_answer(void **state)
{
	struct inode *in;

	(void)state;
	opts.policy.on_infected = INFECTED_DELETE;
	write_file("del-open", "INFECTED, deleted when opened\n");
	in = gate_open_as("del-open", O_RDONLY, false);
	assert_int_equal(wait_answer(), EACCES);
	assert_int_equal(
		faccessat(dir_fd, "del-open", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
	assert_event(1, "interrupt:off");
	assert_event(2, "inval_entry:del-open");
	/* and the directory's listing, which the kernel may keep */
	assert_event(3, "inval_inode:1");
	assert_event(4, "answer:13");
	itab_forget(fs.itab, in, 1);

	forget_seen();
	write_file("del-create", "INFECTED, deleted when created over\n");
	in = gate_open_as("del-create", O_RDONLY, true);
	assert_int_equal(wait_answer(), EACCES);
	wait_events(5);
	assert_event(1, "interrupt:off");
	assert_event(2, "answer:13");
	assert_event(3, "inval_entry:del-create");
	assert_event(4, "inval_inode:1");
	itab_forget(fs.itab, in, 1);
}

/*
 * A write through the mount must reach every cache a request may still
 * read: one pinned before a reload that replaced the cache reads the old
 * one until it unpins.
 */
static void test_write_reaches_a_retired_cache(void **state)
{
	struct vcache *newer = vcache_new(64, 600, NULL, NULL);
	struct generation *g2 = generation_new(), *old;
	struct vcache_file f;
	struct inode *in;
	struct stat st;

	(void)state;
	assert_non_null(newer);
	assert_non_null(g2);
	write_file("w", "cached, then written\n");
	in = gate_open_as("w", O_RDONLY, false);
	assert_int_equal(wait_answer(), 0);
	assert_int_equal(fstatat(dir_fd, "w", &st, 0), 0);
	vcache_file_from_stat(&f, &st);
	if (!vcache_knows(vc, &f)) {
		/* tmpfs: nothing was cached to be reached */
		itab_forget(fs.itab, in, 1);
		generation_free(g2);
		vcache_free(newer);
		return;
	}
	old = gen_pin(fs.gens); /* a request still in flight */
	g2->opts = shared_new(&opts, NULL);
	g2->vcache = gen_share_vcache(newer);
	g2->detect = shared_new(det, NULL);
	generations_publish(fs.gens, g2);
	gate_note_write(&fs, in);
	assert_false(vcache_knows(vc, &f));
	gen_unpin(old);
	itab_forget(fs.itab, in, 1);
	/* the fixture's objects in force again; g2 goes with its cache */
	old = generation_new();
	assert_non_null(old);
	old->opts = shared_new(&opts, NULL);
	old->vcache = shared_new(vc, NULL);
	old->detect = shared_new(det, NULL);
	generations_publish(fs.gens, old);
}

/* Until the scanner has begun n scans in all (bounded). */
static void wait_scans(int n)
{
	int64_t end = (int64_t)time(NULL) + 10;
	const struct timespec slice = {.tv_nsec = 1000000};

	while (atomic_load(&scans) < n && (int64_t)time(NULL) < end)
		nanosleep(&slice, NULL);
	assert_true(atomic_load(&scans) >= n);
}

/*
 * A reload that tightens the policy while a scan runs applies to that
 * open's answer: the verdict is acted on as the configuration in force
 * then says, not as when the open began.
 */
static void test_reload_during_scan_applies_to_the_answer(void **state)
{
	static struct clamfs_opts tighter;
	struct generation *g2 = generation_new(), *g3;
	struct inode *in;

	(void)state;
	assert_non_null(g2);
	opts.policy.on_infected = INFECTED_LOG;
	tighter = opts; /* the same, but for on_infected */
	tighter.policy.on_infected = INFECTED_DENY;
	write_file("tighten", "INFECTED, and the policy tightens meanwhile\n");
	hold_scans(true);
	in = gate_open_as("tighten", O_RDONLY, false);
	wait_scans(1);
	g2->opts = shared_new(&tighter, NULL);
	g2->vcache = shared_new(vc, NULL);
	g2->detect = shared_new(det, NULL);
	generations_publish(fs.gens, g2);
	hold_scans(false);
	assert_int_equal(wait_answer(), EACCES);
	itab_forget(fs.itab, in, 1);
	/* the fixture's objects in force again */
	g3 = generation_new();
	assert_non_null(g3);
	g3->opts = shared_new(&opts, NULL);
	g3->vcache = shared_new(vc, NULL);
	g3->detect = shared_new(det, NULL);
	generations_publish(fs.gens, g3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_directory_allowed_at_once, each),
		cmocka_unit_test_setup(test_empty_file_allowed_unscanned, each),
		cmocka_unit_test_setup(test_clean_scanned_then_cached, each),
		cmocka_unit_test_setup(test_infected_refused_then_from_cache,
				       each),
		cmocka_unit_test_setup(test_write_only_allowed_unscanned, each),
		cmocka_unit_test_setup(test_read_write_scanned_through_reopen,
				       each),
		cmocka_unit_test_setup(
			test_read_write_decided_as_reader_then_cached, each),
		cmocka_unit_test_setup(
			test_writer_between_decision_and_open_is_caught, each),
		cmocka_unit_test_setup(test_lease_at_the_open_as_asked, each),
		cmocka_unit_test_setup(test_oversize_refused_at_once, each),
		cmocka_unit_test_setup(test_groups_asked_only_for_exempt_gid,
				       each),
		cmocka_unit_test_setup(
			test_delete_forgets_the_name_around_the_answer, each),
		cmocka_unit_test_setup(test_write_reaches_a_retired_cache,
				       each),
		cmocka_unit_test_setup(
			test_reload_during_scan_applies_to_the_answer, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
