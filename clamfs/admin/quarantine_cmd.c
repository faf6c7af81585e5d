// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamfs-quarantine: lists, restores and purges what on_infected=quarantine
 * moved out of a backend, using the record beside each file (qrecord.h).
 * Every path from a record or the command line is opened beneath its root
 * without following symlinks: a hostile record cannot make restore write
 * outside the share it names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "pathwalk.h"
#include "qrecord.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

static void usage(FILE *out)
{
	fprintf(out,
		"usage: clamfs-quarantine list DIR\n"
		"       clamfs-quarantine restore DIR ID [--to PATH]\n"
		"       clamfs-quarantine purge DIR --older-than DAYS\n"
		"DIR is a quarantine_dir; ID is a file's path in it, as list "
		"prints it.\n");
}

/* Opens the directory holding rel's last component beneath root. */
static int open_parent(int root, const char *rel, char *buf, size_t len,
		       const char **base)
{
	if (!qrecord_safe_relpath(rel))
		return -EINVAL;
	return pathwalk_parent(root, rel, 0, buf, len, base);
}

static void print_escaped(const char *s)
{
	/* a tab inside a field would shift the columns: escape it too */
	qrecord_escape(stdout, s);
}

static void owner_text(uid_t uid, gid_t gid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	struct group *gr = getgrgid(gid);
	char u[32], g[32];

	snprintf(u, sizeof(u), "%u", (unsigned)uid);
	snprintf(g, sizeof(g), "%u", (unsigned)gid);
	snprintf(buf, len, "%s:%s", pw ? pw->pw_name : u, gr ? gr->gr_name : g);
}

struct entry {
	char *id;
	bool has_record;
	struct qrecord rec;
	struct stat st; /* of the quarantined file */
};

struct entries {
	struct entry *v;
	size_t n, cap;
};

static void entries_free(struct entries *e)
{
	for (size_t i = 0; i < e->n; i++) {
		free(e->v[i].id);
		qrecord_free(&e->v[i].rec);
	}
	free(e->v);
}

static int add_entry(struct entries *e, int dirfd, const char *name,
		     const char *id, const struct stat *st)
{
	struct entry *x;
	int ret;

	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 64;
		struct entry *v = reallocarray(e->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		e->v = v;
		e->cap = cap;
	}
	x = &e->v[e->n];
	memset(x, 0, sizeof(*x));
	x->id = strdup(id);
	if (!x->id)
		return -ENOMEM;
	x->st = *st;
	ret = qrecord_read_at(dirfd, name, &x->rec);
	x->has_record = ret == 0;
	if (ret && ret != -ENOENT)
		fprintf(stderr,
			"clamfs-quarantine: %s: unreadable record: %s\n", id,
			strerror(-ret));
	e->n++;
	return 0;
}

/* Collects every quarantined file below dirfd; symlinks are skipped. */
static int collect(int dirfd, const char *prefix, struct entries *e)
{
	char id[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int fd, ret = 0;

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(id, sizeof(id), "%s%s%s", prefix,
				     *prefix ? "/" : "",
				     de->d_name) >= sizeof(id))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, de->d_name,
					 O_PATH | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);

			if (sub == -1)
				continue;
			ret = collect(sub, id, e);
			close(sub);
		} else if (S_ISREG(st.st_mode) &&
			   /* a share's directory may end in the suffix too */
			   !qrecord_is_record_name(de->d_name)) {
			ret = add_entry(e, dirfd, de->d_name, id, &st);
		}
		if (ret)
			break;
	}
	closedir(d);
	return ret;
}

static int by_time(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	time_t tx = x->has_record ? x->rec.when : x->st.st_ctime;
	time_t ty = y->has_record ? y->rec.when : y->st.st_ctime;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int open_qdir(const char *dir)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd == -1)
		fprintf(stderr, "clamfs-quarantine: %s: %s\n", dir,
			strerror(errno));
	return fd;
}

static int load(const char *dir, struct entries *e)
{
	int qfd = open_qdir(dir), ret;

	if (qfd < 0)
		return -1;
	ret = collect(qfd, "", e);
	close(qfd);
	if (ret) {
		fprintf(stderr, "clamfs-quarantine: %s: %s\n", dir,
			strerror(-ret));
		return -1;
	}
	if (e->n) /* an empty quarantine has no array */
		qsort(e->v, e->n, sizeof(*e->v), by_time);
	return 0;
}

/* One line a file: time, ID, signature, original path, owner, opener. */
static int cmd_list(const char *dir)
{
	struct entries e = {0};
	char when[32], owner[160];

	if (load(dir, &e)) {
		entries_free(&e);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < e.n; i++) {
		const struct entry *x = &e.v[i];
		time_t t = x->has_record ? x->rec.when : x->st.st_ctime;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fputs(when, stdout);
		putchar('\t');
		print_escaped(x->id);
		putchar('\t');
		if (!x->has_record) {
			owner_text(x->st.st_uid, x->st.st_gid, owner,
				   sizeof(owner));
			printf("?\t?\t%s\t?\n", owner);
			continue;
		}
		print_escaped(x->rec.signature);
		putchar('\t');
		print_escaped(x->rec.path);
		owner_text(x->rec.uid, x->rec.gid, owner, sizeof(owner));
		printf("\t%s\t", owner);
		if (x->rec.opener_name)
			print_escaped(x->rec.opener_name);
		else if (x->rec.has_opener)
			printf("%u", (unsigned)x->rec.opener_uid);
		else
			putchar('?');
		putchar('\n');
	}
	entries_free(&e);
	return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

/* Gives the restored file its recorded owner, mode and times. */
static int set_original(int fd, const struct qrecord *r)
{
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, r->mtime};

	if (fchown(fd, r->uid, r->gid) == -1 || fchmod(fd, r->mode) == -1 ||
	    futimens(fd, times) == -1)
		return -errno;
	return 0;
}

/*
 * Moves qparent/qbase to tparent/tbase, never replacing anything, and gives
 * it the recorded owner, mode and times once it is out of the quarantine:
 * a restore that fails leaves the quarantined file as it was.
 */
static int move_back(int qparent, const char *qbase, int src,
		     const struct qrecord *rec, int tparent, const char *tbase)
{
	struct stat st;
	char tmp[64];
	int ret;

	if (renameat2(qparent, qbase, tparent, tbase, RENAME_NOREPLACE) == 0) {
		ret = set_original(src, rec);
		/* e.g. a share that refuses chown: back, as it was */
		if (ret && renameat2(tparent, tbase, qparent, qbase,
				     RENAME_NOREPLACE) == -1)
			fprintf(stderr,
				"clamfs-quarantine: the file stays in the "
				"share without its owner and mode, and could "
				"not be moved back: %s\n",
				strerror(errno));
		return ret;
	}
	if (errno != EXDEV)
		return -errno;
	/* another filesystem: copied under a hidden name, then renamed */
	if (fstat(src, &st) == -1)
		return -errno;
	st.st_uid = rec->uid;
	st.st_gid = rec->gid;
	st.st_mode = (st.st_mode & S_IFMT) | (rec->mode & 07777);
	st.st_mtim = rec->mtime;
	snprintf(tmp, sizeof(tmp), ".clamfs-restore.%d", (int)getpid());
	ret = action_copy_file(src, &st, tparent, tmp);
	if (ret)
		return ret;
	if (renameat2(tparent, tmp, tparent, tbase, RENAME_NOREPLACE) == -1) {
		ret = -errno;
		unlinkat(tparent, tmp, 0);
		return ret;
	}
	if (unlinkat(qparent, qbase, 0) == -1)
		fprintf(stderr,
			"clamfs-quarantine: restored, but the quarantined "
			"copy stays: %s\n",
			strerror(errno));
	return 0;
}

static int cmd_restore(const char *dir, const char *id, const char *to)
{
	char qbuf[PATH_MAX], tbuf[PATH_MAX], rname[NAME_MAX + 1];
	const char *qbase = NULL, *tbase, *target;
	int qfd = -1, qparent = -1, src = -1, share = -1, tparent = -1;
	int status = EXIT_FAIL, ret;
	struct qrecord rec = {0};
	struct stat st, rst;

	if (!qrecord_safe_relpath(id) || qrecord_is_record_name(id)) {
		fprintf(stderr, "clamfs-quarantine: %s: not a quarantine ID\n",
			id);
		return EXIT_USAGE;
	}
	qfd = open_qdir(dir);
	if (qfd < 0)
		goto out;
	/*
	 * A record names the owner and mode the restored file gets (set-id
	 * bits too): only what root alone could have written is trusted.
	 */
	qparent = pathwalk_parent(qfd, id, PATHWALK_ROOT_ONLY, qbuf,
				  sizeof(qbuf), &qbase);
	if (qparent == -EPERM) {
		fprintf(stderr,
			"clamfs-quarantine: %s: refusing: the quarantine or a "
			"directory in it is not root's alone (owned by another "
			"user, or group or world writable)\n",
			id);
		goto out;
	}
	if (qparent < 0) {
		ret = qparent;
		goto fail_id;
	}
	src = openat(qparent, qbase, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src == -1 || fstat(src, &st) == -1) {
		ret = -errno;
		goto fail_id;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto fail_id;
	}
	snprintf(rname, sizeof(rname), "%s%s", qbase, QRECORD_SUFFIX);
	if (fstatat(qparent, rname, &rst, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !pathwalk_root_only(&rst)) {
		fprintf(stderr,
			"clamfs-quarantine: %s: refusing: its record is not "
			"root's alone\n",
			id);
		goto out;
	}
	ret = qrecord_read_at(qparent, qbase, &rec);
	if (ret) {
		fprintf(stderr,
			"clamfs-quarantine: %s: no usable record (%s): where "
			"it came from is unknown\n",
			id, strerror(-ret));
		goto out;
	}
	target = to ? to : rec.path;
	if (!rec.share || rec.share[0] != '/' ||
	    !qrecord_safe_relpath(target)) {
		fprintf(stderr,
			"clamfs-quarantine: %s: refusing: the share or the "
			"path is not a plain path below it\n",
			id);
		goto out;
	}
	share = open(rec.share, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (share == -1) {
		fprintf(stderr, "clamfs-quarantine: share %s: %s\n", rec.share,
			strerror(errno));
		goto out;
	}
	tparent = open_parent(share, target, tbuf, sizeof(tbuf), &tbase);
	if (tparent < 0) {
		fprintf(stderr,
			"clamfs-quarantine: %s/%s: the directory cannot be "
			"opened without leaving the share or following a "
			"symlink: %s\n",
			rec.share, target, strerror(-tparent));
		goto out;
	}
	if (faccessat(tparent, tbase, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		fprintf(stderr,
			"clamfs-quarantine: %s/%s exists: not replaced\n",
			rec.share, target);
		goto out;
	}
	ret = move_back(qparent, qbase, src, &rec, tparent, tbase);
	if (ret) {
		fprintf(stderr,
			"clamfs-quarantine: restoring %s to %s/%s: %s\n", id,
			rec.share, target,
			ret == -EEXIST ? "it exists: not replaced"
				       : strerror(-ret));
		goto out;
	}
	unlinkat(qparent, rname, 0);
	printf("restored %s to %s/%s\n", id, rec.share, target);
	status = 0;
	goto out;
fail_id:
	fprintf(stderr, "clamfs-quarantine: %s: %s\n", id, strerror(-ret));
out:
	qrecord_free(&rec);
	if (tparent >= 0)
		close(tparent);
	if (share >= 0)
		close(share);
	if (src >= 0)
		close(src);
	if (qparent >= 0)
		close(qparent);
	if (qfd >= 0)
		close(qfd);
	return status;
}

static int parse_number(const char *s, long long max, long long *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || *end || *out > max ? -EINVAL : 0;
}

static int cmd_purge(const char *dir, long long days, time_t now)
{
	struct entries e = {0};
	char qbuf[PATH_MAX], rname[NAME_MAX + 1];
	int qfd, status = 0;

	if (load(dir, &e)) {
		entries_free(&e);
		return EXIT_FAIL;
	}
	qfd = open_qdir(dir);
	for (size_t i = 0; qfd >= 0 && i < e.n; i++) {
		const struct entry *x = &e.v[i];
		time_t t = x->has_record ? x->rec.when : x->st.st_ctime;
		const char *base;
		int parent;

		if (now - t < days * 86400)
			continue;
		parent = open_parent(qfd, x->id, qbuf, sizeof(qbuf), &base);
		if (parent < 0 || unlinkat(parent, base, 0) == -1) {
			fprintf(stderr, "clamfs-quarantine: purging %s: %s\n",
				x->id, strerror(parent < 0 ? -parent : errno));
			status = EXIT_FAIL;
		} else {
			snprintf(rname, sizeof(rname), "%s%s", base,
				 QRECORD_SUFFIX);
			unlinkat(parent, rname, 0);
			printf("purged ");
			print_escaped(x->id);
			putchar('\n');
		}
		if (parent >= 0)
			close(parent);
	}
	if (qfd < 0)
		status = EXIT_FAIL;
	else
		close(qfd);
	entries_free(&e);
	return status;
}

int main(int argc, char **argv)
{
	const char *to = NULL;
	long long days = -1, now = (long long)time(NULL);

	if (argc >= 2 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "list") == 0)
		return cmd_list(argv[2]);
	if ((argc == 4 || argc == 6) && strcmp(argv[1], "restore") == 0) {
		if (argc == 6) {
			if (strcmp(argv[4], "--to") != 0)
				goto bad;
			to = argv[5];
		}
		return cmd_restore(argv[2], argv[3], to);
	}
	if (argc >= 5 && strcmp(argv[1], "purge") == 0) {
		for (int i = 3; i + 1 < argc; i += 2) {
			/* --now: a clock for tests, not documented */
			if (strcmp(argv[i], "--older-than") == 0 &&
			    parse_number(argv[i + 1], 1LL << 40, &days) == 0)
				continue;
			if (strcmp(argv[i], "--now") == 0 &&
			    parse_number(argv[i + 1], 1LL << 40, &now) == 0)
				continue;
			goto bad;
		}
		if (days < 0 || argc % 2 == 0)
			goto bad;
		return cmd_purge(argv[2], days, (time_t)now);
	}
bad:
	usage(stderr);
	return EXIT_USAGE;
}
