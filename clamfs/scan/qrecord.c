// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Quarantine records: escaping, formatting, parsing, and writing them
 * atomically beside the quarantined file.
 */
#include "qrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"

/* Far more than any record; a bigger file is not one of ours. */
#define QRECORD_MAX (64 * 1024)

int qrecord_escape(FILE *out, const char *s)
{
	return escape_put(out, s, SIZE_MAX, 0, NULL);
}

static int put_str(FILE *out, const char *key, const char *val)
{
	if (fprintf(out, "%s=", key) < 0 || qrecord_escape(out, val) ||
	    fputc('\n', out) == EOF)
		return -EIO;
	return 0;
}

int qrecord_format(const struct qrecord *r, FILE *out)
{
	char iso[32];
	struct tm tm;
	int ret;

	if (!gmtime_r(&r->when, &tm) ||
	    !strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -EINVAL;
	if (fprintf(out, "version=1\n") < 0)
		return -EIO;
	ret = put_str(out, "path", r->path ? r->path : "");
	if (!ret)
		ret = put_str(out, "share", r->share ? r->share : "");
	if (!ret)
		ret = put_str(out, "signature",
			      r->signature ? r->signature : "");
	if (ret)
		return ret;
	if (fprintf(out,
		    "time=%s\nepoch=%lld\nuid=%u\ngid=%u\nmode=%04o\n"
		    "size=%" PRIu64 "\nmtime=%lld.%09ld\n",
		    iso, (long long)r->when, (unsigned)r->uid, (unsigned)r->gid,
		    (unsigned)(r->mode & 07777), r->size,
		    (long long)r->mtime.tv_sec, r->mtime.tv_nsec) < 0)
		return -EIO;
	if (r->has_opener) {
		if (fprintf(out, "opener_uid=%u\n", (unsigned)r->opener_uid) <
		    0)
			return -EIO;
		if (r->opener_name)
			ret = put_str(out, "opener_user", r->opener_name);
	}
	return ret;
}

/* Undoes qrecord_escape in place; a NUL or unknown escape is -EINVAL. */
static int unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (*s != '\\') {
			*o++ = *s;
			continue;
		}
		if (s[1] == '\\') {
			*o++ = '\\';
			s++;
		} else if (s[1] == 'x' && s[2] && s[3]) {
			char hex[3] = {s[2], s[3], '\0'}, *end;
			unsigned long v = strtoul(hex, &end, 16);

			if (*end || v == 0 || hex[0] == '+' || hex[0] == '-' ||
			    hex[0] == ' ')
				return -EINVAL;
			*o++ = (char)v;
			s += 3;
		} else {
			return -EINVAL;
		}
	}
	*o = '\0';
	return 0;
}

static int parse_u64(const char *s, unsigned base, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, (int)base);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_mtime(const char *s, struct timespec *ts)
{
	char buf[64], *dot;
	uint64_t sec, nsec = 0;

	if (strlcpy(buf, s, sizeof(buf)) >= sizeof(buf))
		return -EINVAL;
	dot = strchr(buf, '.');
	if (dot) {
		*dot = '\0';
		if (strlen(dot + 1) != 9 ||
		    parse_u64(dot + 1, 10, 999999999, &nsec))
			return -EINVAL;
	}
	if (parse_u64(buf, 10, INT64_MAX, &sec))
		return -EINVAL;
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
	return 0;
}

enum {
	F_VERSION,
	F_PATH,
	F_SHARE,
	F_SIGNATURE,
	F_TIME,
	F_EPOCH,
	F_UID,
	F_GID,
	F_MODE,
	F_SIZE,
	F_MTIME,
	F_OPENER_UID,
	F_OPENER_USER,
	F_COUNT
};

static const char *const field_names[F_COUNT] = {
	"version", "path",	 "share",	"signature", "time",
	"epoch",   "uid",	 "gid",		"mode",	     "size",
	"mtime",   "opener_uid", "opener_user",
};

static int set_field(struct qrecord *r, int f, char *val)
{
	uint64_t v;
	char **str = NULL;

	switch (f) {
	case F_VERSION:
		return strcmp(val, "1") == 0 ? 0 : -EINVAL;
	case F_PATH:
		str = &r->path;
		break;
	case F_SHARE:
		str = &r->share;
		break;
	case F_SIGNATURE:
		str = &r->signature;
		break;
	case F_OPENER_USER:
		str = &r->opener_name;
		break;
	case F_TIME:
		return 0; /* for people; epoch is what counts */
	case F_EPOCH:
		if (parse_u64(val, 10, INT64_MAX, &v))
			return -EINVAL;
		r->when = (time_t)v;
		return 0;
	case F_UID:
	case F_GID:
	case F_OPENER_UID:
		if (parse_u64(val, 10, UINT32_MAX - 1, &v))
			return -EINVAL;
		if (f == F_UID)
			r->uid = (uid_t)v;
		else if (f == F_GID)
			r->gid = (gid_t)v;
		else {
			r->opener_uid = (uid_t)v;
			r->has_opener = true;
		}
		return 0;
	case F_MODE:
		if (parse_u64(val, 8, 07777, &v))
			return -EINVAL;
		r->mode = (mode_t)v;
		return 0;
	case F_SIZE:
		return parse_u64(val, 10, UINT64_MAX, &r->size);
	case F_MTIME:
		return parse_mtime(val, &r->mtime);
	}
	*str = strdup(val);
	return *str ? 0 : -ENOMEM;
}

int qrecord_parse(const char *text, size_t len, struct qrecord *r)
{
	bool seen[F_COUNT] = {false};
	char *buf, *line, *next, *eq;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	if (memchr(text, '\0', len))
		return -EINVAL;
	buf = strndup(text, len);
	if (!buf)
		return -ENOMEM;
	for (line = buf; *line; line = next) {
		int f;

		next = strchr(line, '\n');
		if (!next) {
			ret = -EINVAL; /* a record ends with a newline */
			goto out;
		}
		*next++ = '\0';
		eq = strchr(line, '=');
		if (!eq) {
			ret = -EINVAL;
			goto out;
		}
		*eq = '\0';
		for (f = 0; f < F_COUNT; f++)
			if (strcmp(line, field_names[f]) == 0)
				break;
		if (f == F_COUNT)
			continue;
		if (seen[f] || unescape(eq + 1)) {
			ret = -EINVAL;
			goto out;
		}
		seen[f] = true;
		ret = set_field(r, f, eq + 1);
		if (ret)
			goto out;
	}
	if (!seen[F_VERSION] || !seen[F_PATH] || !seen[F_SIGNATURE] ||
	    !seen[F_EPOCH])
		ret = -EINVAL;
out:
	free(buf);
	if (ret)
		qrecord_free(r);
	return ret;
}

void qrecord_free(struct qrecord *r)
{
	free(r->path);
	free(r->share);
	free(r->signature);
	free(r->opener_name);
	memset(r, 0, sizeof(*r));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool qrecord_is_record_name(const char *name)
{
	return ends_with(name, QRECORD_SUFFIX) ||
	       ends_with(name, QRECORD_TMP_SUFFIX);
}

int qrecord_write_at(int dirfd, const char *name, const struct qrecord *r)
{
	char final[NAME_MAX + 1], tmp[NAME_MAX + 1], *text = NULL;
	size_t len = 0;
	FILE *mem;
	int fd = -1, ret;

	if ((size_t)snprintf(final, sizeof(final), "%s%s", name,
			     QRECORD_SUFFIX) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s%s", name,
			     QRECORD_TMP_SUFFIX) >= sizeof(tmp))
		return -ENAMETOOLONG;
	mem = open_memstream(&text, &len);
	if (!mem)
		return -errno;
	ret = qrecord_format(r, mem);
	if (fclose(mem) && !ret)
		ret = -EIO;
	if (ret)
		goto out;
	/* a leftover of a crash is ours to replace, never to write through */
	if (unlinkat(dirfd, tmp, 0) == -1 && errno != ENOENT) {
		ret = -errno;
		goto out;
	}
	fd = openat(dirfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		ret = -errno;
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, text + off, len - off);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) == -1 || renameat(dirfd, tmp, dirfd, final) == -1)
		ret = -errno;
out:
	if (fd >= 0) {
		close(fd);
		if (ret)
			unlinkat(dirfd, tmp, 0);
	}
	free(text);
	return ret;
}

int qrecord_read_at(int dirfd, const char *name, struct qrecord *r)
{
	char path[NAME_MAX + 1], *buf = NULL;
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, ret;

	if ((size_t)snprintf(path, sizeof(path), "%s%s", name,
			     QRECORD_SUFFIX) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	if (fstat(fd, &st) == -1) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > QRECORD_MAX) {
		ret = -EINVAL;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	ret = qrecord_parse(buf, got, r);
out:
	free(buf);
	close(fd);
	return ret;
}

bool qrecord_safe_relpath(const char *rel)
{
	const char *c = rel;

	if (!*rel || *rel == '/')
		return false;
	for (;;) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.') || n > NAME_MAX)
			return false;
		if (!c[n])
			return true;
		c += n + 1;
	}
}
