// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan policy decisions: glob rules on mount-relative paths, exempt ids,
 * and size limits.
 */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void policy_init(struct policy *p)
{
	memset(p, 0, sizeof(*p));
	p->max_scan_size = 100ULL << 20;
	p->oversize_allow = true;
	p->on_infected = INFECTED_DENY;
	p->deny_errno = EACCES;
	p->racy_window = 2; /* FAT, many NFS and CIFS servers tick in 1-2 s */
	p->racy_learn = true;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void policy_free(struct policy *p)
{
	free_strv(p->include, p->n_include);
	free_strv(p->exclude, p->n_exclude);
	free(p->exempt_uids);
	free(p->exempt_gids);
	memset(p, 0, sizeof(*p));
}

static int push(void **arr, size_t *n, size_t elem, const void *val)
{
	char *grown = realloc(*arr, (*n + 1) * elem);

	if (!grown)
		return -ENOMEM;
	memcpy(grown + *n * elem, val, elem);
	*arr = grown;
	(*n)++;
	return 0;
}

int policy_add_glob(struct policy *p, bool include, const char *glob)
{
	char *copy;
	int ret;

	/* a leading slash is natural to write; paths are relative */
	while (*glob == '/')
		glob++;
	copy = strdup(glob);
	if (!copy)
		return -ENOMEM;
	ret = include ? push((void **)&p->include, &p->n_include,
			     sizeof(char *), &copy)
		      : push((void **)&p->exclude, &p->n_exclude,
			     sizeof(char *), &copy);
	if (ret)
		free(copy);
	return ret;
}

int policy_add_exempt_uid(struct policy *p, uid_t uid)
{
	return push((void **)&p->exempt_uids, &p->n_exempt_uids, sizeof(uid),
		    &uid);
}

int policy_add_exempt_gid(struct policy *p, gid_t gid)
{
	return push((void **)&p->exempt_gids, &p->n_exempt_gids, sizeof(gid),
		    &gid);
}

bool policy_needs_path(const struct policy *p)
{
	return p->n_include || p->n_exclude;
}

/* "*.ext" with no other wildcard: an extension rule. */
static bool is_extension_glob(const char *g)
{
	return g[0] == '*' && g[1] == '.' && !strpbrk(g + 2, "*?[/\\");
}

static bool glob_matches(const char *glob, const char *path, bool nocase)
{
	if (is_extension_glob(glob)) {
		size_t lp = strlen(path), lg = strlen(glob + 1);

		return lp >= lg && strcasecmp(path + lp - lg, glob + 1) == 0;
	}
	return fnmatch(glob, path, nocase ? FNM_CASEFOLD : 0) == 0;
}

static bool any_glob(char *const *globs, size_t n, const char *path,
		     bool nocase)
{
	for (size_t i = 0; i < n; i++)
		if (glob_matches(globs[i], path, nocase))
			return true;
	return false;
}

static bool exempt_ids(const struct policy *p, uid_t uid, gid_t gid)
{
	for (size_t i = 0; i < p->n_exempt_uids; i++)
		if (p->exempt_uids[i] == uid)
			return true;
	for (size_t i = 0; i < p->n_exempt_gids; i++)
		if (p->exempt_gids[i] == gid)
			return true;
	return false;
}

bool policy_wants_groups(const struct policy *p, uid_t uid, gid_t gid)
{
	return p->n_exempt_gids && !exempt_ids(p, uid, gid);
}

enum policy_decision policy_decide(const struct policy *p, const char *relpath,
				   uid_t uid, gid_t gid, uint64_t size)
{
	return policy_decide_groups(p, relpath, uid, gid, NULL, 0, size);
}

enum policy_decision policy_decide_groups(const struct policy *p,
					  const char *relpath, uid_t uid,
					  gid_t gid, const gid_t *groups,
					  size_t ngroups, uint64_t size)
{
	if (exempt_ids(p, uid, gid))
		return POLICY_SKIP_EXCLUDED;
	for (size_t i = 0; i < p->n_exempt_gids; i++)
		for (size_t j = 0; j < ngroups; j++)
			if (p->exempt_gids[i] == groups[j])
				return POLICY_SKIP_EXCLUDED;
	return policy_decide_file(p, relpath, size);
}

enum policy_decision policy_decide_file(const struct policy *p,
					const char *relpath, uint64_t size)
{
	if (relpath) {
		if (p->n_include && !any_glob(p->include, p->n_include, relpath,
					      p->glob_nocase))
			return POLICY_SKIP_EXCLUDED;
		if (any_glob(p->exclude, p->n_exclude, relpath, p->glob_nocase))
			return POLICY_SKIP_EXCLUDED;
	}
	if (p->max_scan_size && size > p->max_scan_size)
		return p->oversize_allow ? POLICY_SKIP_OVERSIZE
					 : POLICY_DENY_OVERSIZE;
	return POLICY_SCAN;
}

const char *infected_action_name(enum infected_action a)
{
	static const char *const names[] = {"deny", "log", "quarantine",
					    "delete"};

	return (unsigned)a < 4 ? names[a] : "?";
}

int infected_action_parse(const char *s, enum infected_action *out)
{
	for (int a = INFECTED_DENY; a <= INFECTED_DELETE; a++) {
		if (strcmp(s, infected_action_name(a)) == 0) {
			*out = a;
			return 0;
		}
	}
	return -EINVAL;
}

bool policy_is_limits_verdict(const char *signature)
{
	static const char prefix[] = "Heuristics.Limits.Exceeded";

	return signature &&
	       strncmp(signature, prefix, sizeof(prefix) - 1) == 0 &&
	       (signature[sizeof(prefix) - 1] == '\0' ||
		signature[sizeof(prefix) - 1] == '.');
}

const char *limits_action_name(enum limits_action a)
{
	static const char *const names[] = {"deny", "allow", "infected"};

	return (unsigned)a < 3 ? names[a] : "?";
}

int policy_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] != '\0' && strcasecmp(end + 1, "iB") != 0 &&
	    strcasecmp(end + 1, "B") != 0)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}
