/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What gets scanned and what happens to the verdict: include/exclude path
 * rules, exempt users and groups, the size limit, and the action taken on
 * infected files and on scan errors. Pure decisions, no I/O, no FUSE.
 */
#ifndef CLAMFS_POLICY_H
#define CLAMFS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum infected_action {
	INFECTED_DENY,	     /* refuse the open (default) */
	INFECTED_LOG,	     /* audit mode: allow, but log */
	INFECTED_QUARANTINE, /* move out of the backend, refuse the open */
	INFECTED_DELETE,     /* unlink, refuse the open */
};

/*
 * What to do when clamd gave up on a file (a scan limit such as MaxFiles
 * or MaxRecursion was reached and AlertExceedsMax is on): clamd reports
 * that as a "Heuristics.Limits.Exceeded..." signature, which is not a
 * detection.
 */
enum limits_action {
	LIMITS_DENY,  /* refuse the open, move and delete nothing (default) */
	LIMITS_ALLOW, /* serve it unscanned past the limit, logged */
	LIMITS_INFECTED, /* treat it as a detection (on_infected applies) */
};

struct policy {
	char **include; /* globs; when any, only matching paths are scanned */
	size_t n_include;
	char **exclude; /* globs of paths never scanned */
	size_t n_exclude;
	bool glob_nocase; /* globs ignore case (Samba's view of names) */
	uid_t *exempt_uids;
	size_t n_exempt_uids;
	gid_t *exempt_gids;
	size_t n_exempt_gids;
	uint64_t max_scan_size; /* bytes; 0: no limit */
	bool oversize_allow;	/* beyond max_scan_size: allow, else deny */
	bool on_error_allow;	/* scan failed: allow (fail open), else EIO */
	enum infected_action on_infected;
	enum limits_action on_limits;
	int deny_errno; /* EACCES or EPERM */
	/*
	 * Seconds: a verdict (and the page cache) is trusted only for a
	 * file whose ctime is older than this when its stamp was taken, so a
	 * rewrite within the same timestamp tick cannot keep the stamp.
	 */
	unsigned int racy_window;
	/*
	 * On local filesystems whose stamps keep nanoseconds the window is
	 * a few clock ticks instead (tsgrain.h).
	 */
	bool racy_learn;
};

enum policy_decision {
	POLICY_SCAN,
	POLICY_SKIP_EXCLUDED, /* path rule or exempt user: open unscanned */
	POLICY_SKIP_OVERSIZE, /* too large, allowed unscanned */
	POLICY_DENY_OVERSIZE, /* too large, refused */
};

void policy_init(struct policy *p);
void policy_free(struct policy *p);

/* Adds a glob to include (include true) or exclude. 0 or -ENOMEM. */
int policy_add_glob(struct policy *p, bool include, const char *glob);
int policy_add_exempt_uid(struct policy *p, uid_t uid);
int policy_add_exempt_gid(struct policy *p, gid_t gid);

/* Whether any rule needs the file's path (else no path lookup is made). */
bool policy_needs_path(const struct policy *p);

/*
 * Decides for a non-empty regular file of the given size opened by uid/gid.
 * relpath is relative to the mount root without a leading slash, or NULL
 * when unknown (then path rules cannot exclude: it is scanned).
 * Globs: `*` and `?` match across `/` (so `*.iso` matches at any depth
 * and "backups/" followed by two stars everything below backups); a glob
 * "*.EXT" matches the extension case-insensitively, any other glob only
 * with glob_nocase.
 */
enum policy_decision policy_decide(const struct policy *p, const char *relpath,
				   uid_t uid, gid_t gid, uint64_t size);

/*
 * The same, for a caller with supplementary groups: a member of an exempt
 * group is exempt whether the group is its primary one or not.
 */
enum policy_decision policy_decide_groups(const struct policy *p,
					  const char *relpath, uid_t uid,
					  gid_t gid, const gid_t *groups,
					  size_t ngroups, uint64_t size);

/*
 * The same, by the path and size rules alone: for a scan nobody asked
 * for (a scan ahead of whoever reads next), which no exemption of a user
 * or group can apply to.
 */
enum policy_decision policy_decide_file(const struct policy *p,
					const char *relpath, uint64_t size);

/*
 * Whether the caller's supplementary groups could change the decision
 * (exempt groups are set and uid/gid alone do not exempt): only then are
 * they worth fetching.
 */
bool policy_wants_groups(const struct policy *p, uid_t uid, gid_t gid);

const char *infected_action_name(enum infected_action a);
/* Parses deny|log|quarantine|delete. 0 or -EINVAL. */
int infected_action_parse(const char *s, enum infected_action *out);

/* Whether clamd's answer names a scan limit it hit, not a detection. */
bool policy_is_limits_verdict(const char *signature);
const char *limits_action_name(enum limits_action a);

/* Parses a size with an optional K, M, G or T suffix (powers of 1024). */
int policy_parse_size(const char *s, uint64_t *out);

#endif
