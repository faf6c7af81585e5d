// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cdp-stress: a test driver for what the CLI cannot show: many threads on
 * one pool, sessions reused across sleeps, cancellation from another thread,
 * per-call deadlines.  Prints machine-readable key=value lines for pytest.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clamdproto.h"

enum mode { MODE_FDPASS, MODE_STREAM, MODE_BUF, MODE_PATH };

struct opts {
	enum mode mode;
	int threads, iterations, timeout_ms, cancel_after_ms, sleep_ms;
	const char *file;
	char *data;
	size_t dlen;
};

struct shared {
	struct opts *o;
	struct cdp_pool *pool;
	struct cdp_cancel *cancel;
	pthread_mutex_t lock;
	/* workers start together: else, where starting a thread is slower
	 * than a scan, early threads finish before late ones compete */
	pthread_cond_t go_cond;
	bool go;
	unsigned long n[3];
	unsigned long cats[CDP_ERR_LOCAL + 1];
	int64_t max_ms;
	char first_sig[CDP_TEXT_MAX];
	char first_err[CDP_TEXT_MAX + 32];
	int printed;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void one_scan(struct shared *sh, struct cdp_result *res)
{
	struct opts *o = sh->o;
	int fd;

	if (o->mode == MODE_PATH) {
		cdp_scan_path(sh->pool, o->file, o->timeout_ms, sh->cancel,
			      res);
		return;
	}
	if (o->mode == MODE_BUF) {
		cdp_scan_buf(sh->pool, o->data, o->dlen, o->timeout_ms,
			     sh->cancel, res);
		return;
	}
	fd = open(o->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(res->text, sizeof(res->text), "open: %s",
			 strerror(errno));
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_LOCAL;
		return;
	}
	if (o->mode == MODE_FDPASS)
		cdp_scan_fildes(sh->pool, fd, o->timeout_ms, sh->cancel, res);
	else
		cdp_scan_stream_fd(sh->pool, fd, o->timeout_ms, sh->cancel,
				   res);
	/* The library promises not to move the file offset. */
	if (lseek(fd, 0, SEEK_CUR) != 0) {
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_LOCAL;
		snprintf(res->text, sizeof(res->text), "file offset moved");
	}
	close(fd);
}

static void *worker(void *arg)
{
	struct shared *sh = arg;
	struct cdp_result *res = malloc(sizeof(*res));
	int i;

	if (!res)
		return NULL;
	pthread_mutex_lock(&sh->lock);
	while (!sh->go)
		pthread_cond_wait(&sh->go_cond, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
	for (i = 0; i < sh->o->iterations; i++) {
		int64_t t0 = now_ms(), dt;

		if (i && sh->o->sleep_ms)
			usleep((useconds_t)sh->o->sleep_ms * 1000);
		t0 = now_ms();
		one_scan(sh, res);
		dt = now_ms() - t0;
		pthread_mutex_lock(&sh->lock);
		sh->n[res->verdict]++;
		sh->cats[res->cat]++;
		if (dt > sh->max_ms)
			sh->max_ms = dt;
		if (res->verdict == CDP_INFECTED && !sh->first_sig[0])
			snprintf(sh->first_sig, sizeof(sh->first_sig), "%s",
				 res->text);
		if (res->verdict == CDP_ERROR && !sh->first_err[0])
			snprintf(sh->first_err, sizeof(sh->first_err), "%s: %s",
				 cdp_errcat_name(res->cat), res->text);
		if (sh->printed < 20) {
			sh->printed++;
			printf("scan verdict=%s cat=%s ms=%lld text=%s\n",
			       cdp_verdict_name(res->verdict),
			       cdp_errcat_name(res->cat), (long long)dt,
			       res->text);
		}
		pthread_mutex_unlock(&sh->lock);
	}
	free(res);
	return NULL;
}

static char *slurp(const char *file, size_t *len)
{
	FILE *f = fopen(file, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"clamd", required_argument, NULL, 'c'},
		{"mode", required_argument, NULL, 'm'},
		{"threads", required_argument, NULL, 'T'},
		{"iterations", required_argument, NULL, 'n'},
		{"max-conns", required_argument, NULL, 'C'},
		{"timeout-ms", required_argument, NULL, 't'},
		{"io-timeout-ms", required_argument, NULL, 'i'},
		{"connect-timeout-ms", required_argument, NULL, 'k'},
		{"cancel-after-ms", required_argument, NULL, 'x'},
		{"sleep-ms", required_argument, NULL, 's'},
		{"no-session", no_argument, NULL, 'N'},
		{NULL, 0, NULL, 0},
	};
	struct opts o = {.threads = 1, .iterations = 1};
	struct cdp_config cfg;
	struct cdp_pool_counters ctr;
	struct shared sh;
	pthread_t *tids;
	int64_t t0, elapsed;
	int c, i, rc, started = 0;

	cdp_config_init(&cfg);
	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			cfg.addr = optarg;
			break;
		case 'm':
			if (!strcmp(optarg, "fdpass"))
				o.mode = MODE_FDPASS;
			else if (!strcmp(optarg, "stream"))
				o.mode = MODE_STREAM;
			else if (!strcmp(optarg, "buf"))
				o.mode = MODE_BUF;
			else if (!strcmp(optarg, "path"))
				o.mode = MODE_PATH;
			else
				return 2;
			break;
		case 'T':
			o.threads = atoi(optarg);
			break;
		case 'n':
			o.iterations = atoi(optarg);
			break;
		case 'C':
			cfg.max_conns = (unsigned)atoi(optarg);
			break;
		case 't':
			o.timeout_ms = atoi(optarg);
			break;
		case 'i':
			cfg.io_timeout_ms = atoi(optarg);
			break;
		case 'k':
			cfg.connect_timeout_ms = atoi(optarg);
			break;
		case 'x':
			o.cancel_after_ms = atoi(optarg);
			break;
		case 's':
			o.sleep_ms = atoi(optarg);
			break;
		case 'N':
			cfg.no_session = 1;
			break;
		default:
			fprintf(stderr,
				"usage: cdp-stress [--clamd A] [--mode "
				"fdpass|stream|buf|path] [--threads N] "
				"[--iterations N] [--max-conns N] "
				"[--timeout-ms N] [--cancel-after-ms N] "
				"[--sleep-ms N] [--no-session] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || o.threads < 1 || o.iterations < 1)
		return 2;
	o.file = argv[optind];
	if (o.mode == MODE_BUF) {
		o.data = slurp(o.file, &o.dlen);
		if (!o.data) {
			perror(o.file);
			return 2;
		}
	}

	memset(&sh, 0, sizeof(sh));
	sh.o = &o;
	pthread_mutex_init(&sh.lock, NULL);
	pthread_cond_init(&sh.go_cond, NULL);
	rc = cdp_pool_new(&cfg, &sh.pool);
	if (rc) {
		fprintf(stderr, "cdp_pool_new: %s\n", strerror(-rc));
		return 2;
	}
	if (o.cancel_after_ms)
		sh.cancel = cdp_cancel_new();

	tids = calloc((size_t)o.threads, sizeof(*tids));
	if (!tids) {
		perror("cdp-stress");
		cdp_cancel_free(sh.cancel);
		cdp_pool_free(sh.pool);
		free(o.data);
		return 2;
	}
	t0 = now_ms();
	for (i = 0; i < o.threads; i++) {
		if (pthread_create(&tids[i], NULL, worker, &sh) != 0)
			break;
		started++;
	}
	pthread_mutex_lock(&sh.lock);
	sh.go = true;
	pthread_cond_broadcast(&sh.go_cond);
	pthread_mutex_unlock(&sh.lock);
	if (sh.cancel) {
		usleep((useconds_t)o.cancel_after_ms * 1000);
		cdp_cancel_trigger(sh.cancel);
		printf("cancel_triggered_ms=%lld\n",
		       (long long)(now_ms() - t0));
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	elapsed = now_ms() - t0;

	cdp_pool_counters(sh.pool, &ctr);
	printf("threads=%d scans=%d\n", started, started * o.iterations);
	printf("clean=%lu infected=%lu error=%lu\n", sh.n[CDP_CLEAN],
	       sh.n[CDP_INFECTED], sh.n[CDP_ERROR]);
	for (i = 1; i <= CDP_ERR_LOCAL; i++)
		if (sh.cats[i])
			printf("cat_%s=%lu\n",
			       cdp_errcat_name((enum cdp_errcat)i), sh.cats[i]);
	printf("first_sig=%s\n", sh.first_sig);
	printf("first_error=%s\n", sh.first_err);
	printf("elapsed_ms=%lld max_scan_ms=%lld\n", (long long)elapsed,
	       (long long)sh.max_ms);
	printf("connects=%lu reuses=%lu dead_sessions=%lu discards=%lu "
	       "waits=%lu open=%u idle=%u\n",
	       ctr.connects, ctr.reuses, ctr.dead_sessions, ctr.discards,
	       ctr.waits, ctr.open, ctr.idle);

	free(tids);
	cdp_cancel_free(sh.cancel);
	cdp_pool_free(sh.pool);
	free(o.data);
	pthread_cond_destroy(&sh.go_cond);
	pthread_mutex_destroy(&sh.lock);
	return started == o.threads ? 0 : 2;
}
