// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * clamfs-scan: scan files through clamd with the clamdproto library, one
 * verdict line per file.  For admins checking a clamd setup, and for the
 * tests and the benchmark.  Exit 0 all clean, 1 infected, 2 any error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clamdproto.h"

enum mode { MODE_DEFAULT, MODE_FDPASS, MODE_STREAM, MODE_PATH };

struct job {
	struct cdp_pool *pool;
	enum mode mode;
	int timeout_ms;
	char **files;
	struct cdp_result *res; /* one per file when jobs > 1 */
	int nfiles;
	atomic_int next;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: clamfs-scan [OPTIONS] FILE...\n"
		"       clamfs-scan [--clamd ADDR] --ping|--version|--stats\n"
		"Scan files with clamd; prints 'FILE: OK', 'FILE: SIG FOUND' "
		"or\n'FILE: ERROR category: message' per file.\n"
		"Exit status: 0 all clean, 1 something infected, 2 an "
		"error.\n\n"
		"  -m, --mode MODE     fdpass (pass the open file, UNIX "
		"socket only),\n"
		"                      stream (send the contents), path (clamd "
		"opens it);\n"
		"                      default fdpass on a UNIX socket, else "
		"stream\n"
		"  -c, --clamd ADDR    socket path or tcp://host:port "
		"(default\n"
		"                      /var/run/clamav/clamd.ctl)\n"
		"  -t, --timeout SEC   deadline per file (default 120)\n"
		"  -j, --jobs N        scan N files at once (default 1)\n"
		"      --max-conns N   connections to clamd (default 8)\n"
		"      --no-session    a new connection per file instead of "
		"IDSESSION\n"
		"      --chunk-size B  INSTREAM chunk bytes (default 262144)\n"
		"      --ping          ask clamd for PONG\n"
		"      --version       print clamd's version\n"
		"      --stats         print clamd's STATS\n"
		"  -h, --help          this text\n");
}

static void scan_one(struct job *job, const char *file, struct cdp_result *res)
{
	char real[PATH_MAX];
	int fd;

	if (job->mode == MODE_PATH) {
		if (!realpath(file, real)) {
			int e = errno;

			snprintf(res->text, sizeof(res->text), "%s: %s",
				 "cannot resolve path", strerror(e));
			res->verdict = CDP_ERROR;
			res->cat = CDP_ERR_LOCAL;
			res->err = e;
			return;
		}
		cdp_scan_path(job->pool, real, job->timeout_ms, NULL, res);
		return;
	}
	/* O_NONBLOCK: a FIFO must not hang us; clamd refuses it anyway. */
	fd = open(file, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		snprintf(res->text, sizeof(res->text), "cannot open: %s",
			 strerror(e));
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_LOCAL;
		res->err = e;
		return;
	}
	if (job->mode == MODE_FDPASS)
		cdp_scan_fildes(job->pool, fd, job->timeout_ms, NULL, res);
	else
		cdp_scan_stream_fd(job->pool, fd, job->timeout_ms, NULL, res);
	close(fd);
}

static int report(const char *file, const struct cdp_result *res)
{
	switch (res->verdict) {
	case CDP_CLEAN:
		printf("%s: OK\n", file);
		return 0;
	case CDP_INFECTED:
		printf("%s: %s FOUND\n", file, res->text);
		return 1;
	case CDP_ERROR:
		break;
	}
	printf("%s: ERROR %s: %s\n", file, cdp_errcat_name(res->cat),
	       res->text);
	return 2;
}

static void *worker(void *arg)
{
	struct job *job = arg;
	int i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->nfiles)
		scan_one(job, job->files[i], &job->res[i]);
	return NULL;
}

static int merge(int status, int r)
{
	return r > status ? r : status;
}

static int scan_files(struct job *job, int jobs)
{
	pthread_t *tids = NULL;
	int status = 0, i, started = 0;

	if (jobs <= 1) {
		struct cdp_result *res = malloc(sizeof(*res));

		if (!res) {
			perror("clamfs-scan");
			return 2;
		}
		for (i = 0; i < job->nfiles; i++) {
			scan_one(job, job->files[i], res);
			status = merge(status, report(job->files[i], res));
		}
		free(res);
		return status;
	}
	job->res = calloc((size_t)job->nfiles, sizeof(*job->res));
	tids = calloc((size_t)jobs, sizeof(*tids));
	if (!job->res || !tids) {
		perror("clamfs-scan");
		status = 2;
		goto out;
	}
	for (i = 0; i < jobs; i++) {
		if (pthread_create(&tids[i], NULL, worker, job) != 0)
			break;
		started++;
	}
	if (!started) {
		fprintf(stderr, "clamfs-scan: cannot start threads\n");
		status = 2;
		goto out;
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < job->nfiles; i++)
		status = merge(status, report(job->files[i], &job->res[i]));
out:
	free(tids);
	free(job->res);
	return status;
}

static int parse_int(const char *s, const char *what, long min, long max,
		     long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "clamfs-scan: bad %s '%s'\n", what, s);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_PING = 256,
		OPT_VERSION,
		OPT_STATS,
		OPT_NOSESSION,
		OPT_MAXCONNS,
		OPT_CHUNK
	};
	static const struct option opts[] = {
		{"mode", required_argument, NULL, 'm'},
		{"clamd", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'},
		{"jobs", required_argument, NULL, 'j'},
		{"max-conns", required_argument, NULL, OPT_MAXCONNS},
		{"no-session", no_argument, NULL, OPT_NOSESSION},
		{"chunk-size", required_argument, NULL, OPT_CHUNK},
		{"ping", no_argument, NULL, OPT_PING},
		{"version", no_argument, NULL, OPT_VERSION},
		{"stats", no_argument, NULL, OPT_STATS},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct cdp_config cfg;
	struct job job;
	struct cdp_result *res = NULL;
	int c, rc, status = 2, action = 0;
	long jobs = 1, v;

	memset(&job, 0, sizeof(job));
	cdp_config_init(&cfg);
	while ((c = getopt_long(argc, argv, "m:c:t:j:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "fdpass") == 0)
				job.mode = MODE_FDPASS;
			else if (strcmp(optarg, "stream") == 0)
				job.mode = MODE_STREAM;
			else if (strcmp(optarg, "path") == 0)
				job.mode = MODE_PATH;
			else {
				fprintf(stderr,
					"clamfs-scan: bad mode '%s' (fdpass, "
					"stream or path)\n",
					optarg);
				return 2;
			}
			break;
		case 'c':
			cfg.addr = optarg;
			break;
		case 't':
			if (parse_int(optarg, "timeout", 1, 86400, &v))
				return 2;
			cfg.scan_timeout_ms = (int)(v * 1000);
			break;
		case 'j':
			if (parse_int(optarg, "job count", 1, 1024, &jobs))
				return 2;
			break;
		case OPT_MAXCONNS:
			if (parse_int(optarg, "connection count", 1, 1024, &v))
				return 2;
			cfg.max_conns = (unsigned)v;
			break;
		case OPT_NOSESSION:
			cfg.no_session = 1;
			break;
		case OPT_CHUNK:
			if (parse_int(optarg, "chunk size", 4096, 8 << 20, &v))
				return 2;
			cfg.chunk_size = (size_t)v;
			break;
		case OPT_PING:
		case OPT_VERSION:
		case OPT_STATS:
			action = c;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!action && optind >= argc) {
		usage(stderr);
		return 2;
	}

	rc = cdp_pool_new(&cfg, &job.pool);
	if (rc) {
		fprintf(stderr, "clamfs-scan: bad clamd address '%s': %s\n",
			cfg.addr, strerror(-rc));
		return 2;
	}
	res = malloc(sizeof(*res));
	if (!res) {
		perror("clamfs-scan");
		goto out;
	}
	if (job.mode == MODE_DEFAULT)
		job.mode =
			cdp_addr_kind(cdp_pool_addr(job.pool)) == CDP_ADDR_UNIX
				? MODE_FDPASS
				: MODE_STREAM;

	if (action == OPT_PING) {
		rc = cdp_ping(job.pool, res);
		if (rc == 0) {
			printf("PONG\n");
			status = 0;
		}
	} else if (action == OPT_VERSION) {
		struct cdp_version ver;

		rc = cdp_version(job.pool, &ver, res);
		if (rc == 0) {
			printf("%s\nengine: %s\n", res->text, ver.engine);
			if (ver.db_version)
				printf("database: %lu\ndatabase date: %s\n",
				       ver.db_version, ver.db_date);
			status = 0;
		}
	} else if (action == OPT_STATS) {
		char *text = NULL;

		rc = cdp_stats(job.pool, &text, res);
		if (rc == 0) {
			fputs(text, stdout);
			if (*text && text[strlen(text) - 1] != '\n')
				putchar('\n');
			status = 0;
		}
		free(text);
	} else {
		job.timeout_ms = cfg.scan_timeout_ms;
		job.files = argv + optind;
		job.nfiles = argc - optind;
		status = scan_files(&job, (int)jobs);
		rc = 0;
	}
	if (rc)
		fprintf(stderr, "clamfs-scan: ERROR %s: %s\n",
			cdp_errcat_name(res->cat), res->text);
out:
	free(res);
	cdp_pool_free(job.pool);
	if (fflush(stdout) != 0)
		status = 2;
	return status;
}
