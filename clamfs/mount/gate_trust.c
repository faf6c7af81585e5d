// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * When a file's stamp vouches for its content, and so when a verdict may
 * be trusted: kept in the verdict cache and the store after a scan, taken
 * from them on an open, or confirmed right before a scan.
 */

#include "gate_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "fileid.h"
#include "tsgrain.h"
#include "writers.h"

/* How long a close scan waits for its writer to be quite gone. */
#define CLOSE_QUIET_WAIT_MS 50

/*
 * What names the file at dirfd/name beyond its device and inode numbers
 * (fileid.h), which the verdict cache and store compare with the stamp.
 * On the backend root's own device nothing more is needed (0): the mount
 * holds the root open, so that number stays its filesystem's, and an
 * inode number used again there comes with a ctime younger than any
 * settled stamp of the file it had before. Any other device's number may
 * have been another filesystem's or subvolume's: its files are known by
 * their handles, and a file without one matches nothing.
 */
uint64_t stamp_file_ident(struct clamfs_fs *fs, int dirfd, const char *name,
			  int flags, dev_t dev)
{
	uint64_t id;

	if (dev == inode_dev(itab_root(fs->itab)))
		return 0;
	id = fileid_at(dirfd, name, flags, NULL);
	return id ? id : fileid_unmatched();
}

int stamp_fd(struct clamfs_fs *fs, const struct policy *pol, int fd,
	     struct stamp *s)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	s->quiet = false; /* until asked */
	s->taken_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	if (fstat(fd, &s->st) == -1)
		return -errno;
	s->ident = stamp_file_ident(fs, fd, "", AT_EMPTY_PATH, s->st.st_dev);
	s->window_ns = (int64_t)pol->racy_window * 1000000000;
	if (pol->racy_learn)
		s->window_ns = tsgrain_window_ns(fd, &s->st, s->window_ns);
	return 0;
}

/* The verdict cache's and store's key and stamp for a stamp. */
void stamp_key(const struct stamp *s, struct vcache_file *f)
{
	vcache_file_from_stat(f, &s->st);
	f->ident = s->ident;
}

bool stamp_settled(const struct stamp *s)
{
	struct vcache_file f;

	stamp_key(s, &f);
	return vcache_stamp_settled(&f, s->taken_ns, s->window_ns);
}

/*
 * Whether a verdict, or the kernel's page cache, may be trusted or stored
 * for the file open read-only at fd on device dev: no writer through
 * the mount, nor on the backend (a descriptor or a shared writable
 * mapping that outlived one), on a filesystem where a writer that came
 * and went left its mark on the stamp (tsgrain.h).
 */
static enum quiet_state writes_now(struct inode *inode, int fd, dev_t dev)
{
	int probe;

	if (inode_writers(inode) != 0 || !tsgrain_sees_mapped_stores(fd, dev))
		return QUIET_NOT;
	probe = writers_probe(fd);
	if (probe == 0)
		return QUIET;
	return probe == -EBUSY ? QUIET_WRITER_OPEN : QUIET_NOT;
}

bool stamp_quiet(struct inode *inode, int fd, const struct stat *st)
{
	return writes_now(inode, fd, st->st_dev) == QUIET;
}

/* Whether the file open at fd is the one stamped in st, as stamped. */
bool stamp_unmoved(int fd, const struct stamp *st)
{
	struct vcache_file was, now;
	struct stat cur;

	if (fstat(fd, &cur) == -1)
		return false;
	stamp_key(st, &was);
	vcache_file_from_stat(&now, &cur);
	/* the same device and inode number: the same handle */
	now.ident = was.ident;
	return vcache_file_same(&now, &was);
}

/*
 * The instant from which a write must have moved the file's stamp for
 * the verdict to be kept: the stamp's (or a later confirmation's: the
 * file still so and nobody writing it), but never after clamd was asked,
 * since what a write made after that may not be in what clamd read. A
 * waiter that joined a scan under way stamped after the scan began.
 */
static int64_t verdict_stamp_ns(const struct pending *p,
				const struct scan_outcome *o)
{
	int64_t at = p->stamp.taken_ns;

	if (o->confirmed_ns > at)
		at = o->confirmed_ns;
	if (o->started_ns < at)
		at = o->started_ns;
	return at;
}

/*
 * Whether nobody could write the file when its stamp was taken. The
 * stamp of a scan at a writer's close (scan_on_close or ahead) may find
 * the writer not quite gone (with kernel passthrough the kernel drops
 * its own writable backing file after the release is answered): its
 * confirmation, made later before the scan, found the stamp unchanged
 * and nobody writing.
 */
static bool stamp_was_quiet(const struct pending *p,
			    const struct scan_outcome *o)
{
	return p->stamp.quiet || (p->kind != GATE_OPEN && o->confirmed_ns != 0);
}

/*
 * Whether the store may hold a verdict for this stamp (a local filesystem
 * whose ctime nobody can set back) and under which database (db, and in
 * *since when the watch first knew it).
 */
static bool store_label(struct clamfs_fs *fs, int fd, const struct stat *st,
			char db[VSTORE_DB_ID_MAX], int64_t *since)
{
	return fs->vstore && tsgrain_stamp_trusted(fd, st) &&
	       dbwatch_db_identity(fs->dbwatch, db, VSTORE_DB_ID_MAX, since) ==
		       0;
}

/*
 * A clean verdict the cache kept goes to the store too, labelled with the
 * database in force. A database change clears the cache (its generation
 * moves) before the store: a clear that came after the insert but before
 * the put is seen here and the put undone, one that comes later wipes it.
 */
static void maybe_store(struct pending *p, const struct scan_outcome *o,
			const struct vcache_file *f)
{
	struct clamfs_fs *fs = p->fs;
	char db[VSTORE_DB_ID_MAX];
	int64_t since;

	if (o->res.verdict != CDP_CLEAN ||
	    !config_store_ttl(gen_opts(p->pin)) ||
	    !store_label(fs, p->fd, &p->stamp.st, db, &since) ||
	    o->started_ns <= since)
		return;
	vstore_put_clean(fs->vstore, f, db, o->started_ns);
	if (vcache_generation(gen_vcache(p->pin)) != o->gen)
		vstore_forget(fs->vstore, f->dev, f->ino);
}

/*
 * The store's verdict for a stamp the cache had none for. It is not put
 * in the cache: there it would live a whole TTL from now, not from the
 * scan.
 */
bool stamp_store_hit(struct clamfs_fs *fs, struct generation *pin, int fd,
		     const struct vcache_file *f, const struct stamp *st)
{
	unsigned int ttl = config_store_ttl(gen_opts(pin));
	char db[VSTORE_DB_ID_MAX];
	struct timespec now;
	int64_t since;

	if (!ttl || !store_label(fs, fd, &st->st, db, &since) ||
	    !vcache_stamp_settled(f, st->taken_ns, st->window_ns))
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	return vstore_lookup_clean(fs->vstore, f, db, ttl,
				   (int64_t)now.tv_sec * 1000000000 +
					   now.tv_nsec);
}

bool stamp_keep_verdict(struct pending *p, const struct scan_outcome *o)
{
	struct vcache *vc = gen_vcache(p->pin);
	struct vcache_file f;

	/*
	 * Not cached: errors; a file anyone could write when it was stamped
	 * (stores into a mapping's dirty pages during the scan would leave
	 * the stamp as it was) or can write now; scans after a write through
	 * the mount; a stamp too young to tell a same-tick rewrite from the
	 * content scanned.
	 */
	stamp_key(&p->stamp, &f);
	if (o->res.verdict == CDP_ERROR || !stamp_was_quiet(p, o) ||
	    inode_write_seq(p->inode) != o->tag ||
	    !vcache_stamp_settled(&f, verdict_stamp_ns(p, o),
				  p->stamp.window_ns) ||
	    !stamp_quiet(p->inode, p->fd, &p->stamp.st))
		return false;
	vcache_insert(vc, &f,
		      o->res.verdict == CDP_CLEAN ? VCACHE_CLEAN
						  : VCACHE_INFECTED,
		      o->res.text, o->gen);
	/* a writer that came in meanwhile did not see the entry: drop it */
	if (inode_writers(p->inode) != 0 ||
	    inode_write_seq(p->inode) != o->tag) {
		vcache_invalidate(vc, f.dev, f.ino);
		return false;
	}
	if (o->res.verdict == CDP_CLEAN)
		maybe_store(p, o, &f);
	else
		vstore_forget(p->fs->vstore, f.dev, f.ino);
	return true;
}

/*
 * Whether the file open at fd is still as stamped in f, still has a name,
 * and nobody writes it; with tag, no write went through the mount since.
 * QUIET_NOT also for a file changed or unlinked.
 */
static enum quiet_state quiet_now(struct clamfs_fs *fs, int fd,
				  const struct vcache_file *f,
				  const uint64_t *tag)
{
	enum quiet_state state = QUIET_NOT;
	struct vcache_file now;
	struct inode *inode;
	struct stat st;

	/* a temporary file removed unread needs no verdict */
	if (fstat(fd, &st) == -1 || st.st_nlink == 0)
		return QUIET_NOT;
	vcache_file_from_stat(&now, &st);
	/* fd names the same inode as when f was taken, whoever it is */
	now.ident = f->ident;
	if (!vcache_file_same(&now, f))
		return QUIET_NOT;
	inode = itab_find_ref(fs->itab, f->dev, f->ino);
	if (!inode)
		return QUIET_NOT;
	if (!tag || inode_write_seq(inode) == *tag)
		state = writes_now(inode, fd, st.st_dev);
	itab_forget(fs->itab, inode, 1);
	return state;
}

static bool still_quiet(struct clamfs_fs *fs, int fd,
			const struct vcache_file *f, const uint64_t *tag)
{
	return quiet_now(fs, fd, f, tag) == QUIET;
}

/*
 * Scanner thread, right before a scan ahead: the file is still as
 * stamped at its writer's close and nobody writes it, so that stamp may
 * vouch for what the scan reads (scan_outcome.confirmed_ns).
 */
bool stamp_still_quiet(void *ctx, int fd, const struct vcache_file *f)
{
	return still_quiet(ctx, fd, f, NULL);
}

/*
 * Scanner thread, right before clamd is asked: the cache's verdict for
 * the stamp, if an open made now would take it (the file still so,
 * nobody writing it, no write through the mount since the submit). Not
 * an infected one whose action moves the file: as on open, that is done
 * after a fresh scan.
 */
bool stamp_verdict_known(void *ctx, void *held, int fd,
			 const struct vcache_file *f, uint64_t tag,
			 struct cdp_result *res)
{
	struct clamfs_fs *fs = ctx;
	/* the configuration the scan holds: in force right before clamd */
	struct generation *pin = held;
	const struct policy *pol = gen_policy(pin);
	struct vcache *vc = gen_vcache(pin);
	enum vcache_verdict v;
	char sig[CDP_TEXT_MAX];
	bool known = false;

	/*
	 * Most scans find nothing: the first look spares them the probe's
	 * syscalls. The second, after the probe, is the one an open would
	 * make (probe, then cache): an entry dropped meanwhile is not used.
	 */
	v = vcache_peek(vc, f, sig, sizeof(sig));
	if (v == VCACHE_MISS ||
	    (v == VCACHE_INFECTED && !act_is_limits(pol, sig) &&
	     act_removes_file(pol->on_infected)) ||
	    !still_quiet(fs, fd, f, &tag) || vcache_peek(vc, f, NULL, 0) != v)
		goto out;
	memset(res, 0, sizeof(*res));
	res->verdict = v == VCACHE_CLEAN ? CDP_CLEAN : CDP_INFECTED;
	if (v == VCACHE_INFECTED)
		strlcpy(res->text, sig, sizeof(res->text));
	known = true;
out:
	return known;
}

/*
 * Scanner thread, right before a scan_on_close: as stamp_still_quiet,
 * giving the kernel's passthrough backing file of the writer that just
 * closed a moment to go (it goes after the release is answered), so
 * that the verdict can be kept. Only that wait can help: a file changed,
 * unlinked or written through the mount since stays so, and without
 * passthrough there is no backing file. The scan is made either way.
 */
bool stamp_close_quiet(void *ctx, int fd, const struct vcache_file *f)
{
	const struct timespec nap = {.tv_nsec = 1000000};
	struct clamfs_fs *fs = ctx;
	enum quiet_state state;

	for (int i = 0;; i++) {
		state = quiet_now(fs, fd, f, NULL);
		if (state != QUIET_WRITER_OPEN || !fs->passthrough ||
		    i == CLOSE_QUIET_WAIT_MS)
			return state == QUIET;
		nanosleep(&nap, NULL);
	}
}
