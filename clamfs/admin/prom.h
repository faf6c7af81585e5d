/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Prometheus text exposition (format 0.0.4) of the stats text of one or
 * more mounts (stats_render's "key=value" lines). One table says, for each
 * stats key, which metric family and series it becomes; nothing here reads
 * a mount or writes a file.
 */
#ifndef CLAMFS_PROM_H
#define CLAMFS_PROM_H

#include <stddef.h>
#include <stdio.h>

enum prom_type {
	PROM_NONE,    /* a known key that is no series (its row says why) */
	PROM_COUNTER, /* the family name ends in _total */
	PROM_GAUGE,
	PROM_HISTOGRAM, /* rows with suffix _bucket (label le), _sum, _count */
	PROM_SUMMARY,	/* rows with suffix _sum and _count, no quantiles */
	PROM_INFO,	/* a gauge of value 1; the stats value is a label */
};

/*
 * One row of the table. Rows of one family are adjacent and agree on type
 * and help; the family's series for a mount come out in row order.
 */
struct prom_row {
	/*
	 * The stats key. A '*' at its end: a prefix, the rest is the
	 * label's value; a '*' inside: a number there (a backend's index),
	 * the rest of the key after it fixed.
	 */
	const char *key;
	const char *family; /* metric family name, NULL for PROM_NONE */
	enum prom_type type;
	const char *help;
	const char *suffix; /* of the sample name ("_bucket"...), or NULL */
	const char *label;  /* the label this key sets, or NULL */
	const char *value;  /* the label's value; NULL: the rest of a prefix
			     * key, or (PROM_INFO) the stats value */
	/*
	 * Or the label's value is the value of this other stats key, its
	 * '*' replaced by the number the row's key matched (a backend's
	 * address, "backend_*_addr"): no series when the mount has none.
	 */
	const char *label_key;
	unsigned int decimals; /* the value counts 10^-decimals base units
				* (6: microseconds to seconds) */
};

/* The table and its number of rows. */
const struct prom_row *prom_table(size_t *nrows);

/* The row for stats key key (len bytes, no '='), or NULL. */
const struct prom_row *prom_find(const char *key, size_t len);

/* One mount's stats, as read from its trusted.clamfs.stats. */
struct prom_mount {
	const char
		*mountpoint; /* the value of every series' mountpoint label */
	const char *stats;   /* "key=value\n" lines */
};

/*
 * Writes one exposition of n mounts to out: each family once (# HELP,
 * # TYPE, then its series of every mount, labelled mountpoint="..."), in
 * table order; families no mount has a value for are left out. A key
 * without a row, or a numeric row whose value is not a number (clamd_up
 * before clamd was asked), gives no series. Returns 0, or -errno when out
 * fails.
 */
int prom_render(const struct prom_mount *mounts, size_t n, FILE *out);

#endif
