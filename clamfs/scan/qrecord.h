/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The record kept beside each quarantined file ("NAME.clamfs"): what was
 * found, where it came from and whose it was, as key=value lines. Values
 * are escaped so that no file name or signature can start a line of its
 * own: a record's fields are the ones clamfs wrote. No FUSE here; the
 * daemon writes records, clamfs-quarantine reads them.
 */
#ifndef CLAMFS_QRECORD_H
#define CLAMFS_QRECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

/* A record is named after its file plus this suffix. */
#define QRECORD_SUFFIX ".clamfs"
/* What a record is written as before it is renamed into place. */
#define QRECORD_TMP_SUFFIX ".clamfs~"
/* Room a quarantined name leaves for its record's temporary name. */
#define QRECORD_NAME_RESERVE (sizeof(QRECORD_TMP_SUFFIX) - 1)

struct qrecord {
	char *path;	 /* original path relative to the backend */
	char *share;	 /* the backend's absolute path */
	char *signature; /* as clamd named it */
	time_t when;	 /* quarantined at (epoch seconds) */
	uid_t uid;	 /* the file's owner, mode, size and mtime */
	gid_t gid;
	mode_t mode;
	uint64_t size;
	struct timespec mtime;
	bool has_opener;
	uid_t opener_uid;  /* whose open found it */
	char *opener_name; /* NULL when the uid had no passwd entry */
};

/*
 * Writes s with backslash, control characters and DEL escaped
 * ("\\", "\xHH"), the form record values take. 0 or -EIO.
 */
int qrecord_escape(FILE *out, const char *s);

/* The text of a record, key=value lines. 0 or negative errno. */
int qrecord_format(const struct qrecord *r, FILE *out);

/*
 * Parses a record's text (len bytes, NUL not needed). Unknown keys are
 * skipped; a repeated key, an undecodable value or a line without "=" is
 * -EINVAL. path, signature and the time are required. On success r holds
 * allocated strings: qrecord_free().
 */
int qrecord_parse(const char *text, size_t len, struct qrecord *r);
void qrecord_free(struct qrecord *r);

/* Whether a directory entry is a record (or a record being written). */
bool qrecord_is_record_name(const char *name);

/*
 * Writes the record of dirfd/name as dirfd/name.clamfs, atomically (a
 * temporary file, fsync, rename), mode 0600, symlinks never followed.
 */
int qrecord_write_at(int dirfd, const char *name, const struct qrecord *r);

/* Reads dirfd/name.clamfs. 0, -ENOENT (no record) or negative errno. */
int qrecord_read_at(int dirfd, const char *name, struct qrecord *r);

/*
 * Whether rel is a safe relative path: not empty, not absolute, no empty,
 * "." or ".." component. For paths read from a record or a command line
 * before anything is opened under them (symlinks are refused as they are
 * walked).
 */
bool qrecord_safe_relpath(const char *rel);

#endif
