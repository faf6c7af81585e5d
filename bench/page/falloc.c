// SPDX-License-Identifier: GPL-2.0-or-later
// Creates one file of SIZE bytes in one of four ways and prints the seconds
// it took, from open() to the return of close() (no fsync: what a program
// waits for). Compiled at run time by bench/page/run.
//
//   falloc fallocate|mmap|write4k|write8k|write1m PATH SIZE
//
// fallocate: posix_fallocate(fd, 0, SIZE)
// mmap:      ftruncate to SIZE, one MAP_SHARED mapping, every byte written
//            (memset per 1 MiB), munmap
// writeNk:   write() of N KiB chunks until SIZE (write1m: 1 MiB chunks)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "falloc: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_chunks(int fd, long long size, size_t chunk)
{
	char *buf = malloc(chunk);
	if (buf == NULL)
		die("malloc");
	memset(buf, 0x5a, chunk);
	for (long long done = 0; done < size;) {
		size_t n = chunk;
		if ((long long)n > size - done)
			n = (size_t)(size - done);
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		done += w;
	}
	free(buf);
}

static void mmap_writes(int fd, long long size)
{
	if (ftruncate(fd, size) != 0)
		die("ftruncate");
	char *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	const long long step = 1 << 20;
	for (long long off = 0; off < size; off += step)
		memset(p + off, 0x5a,
		       (size_t)(size - off < step ? size - off : step));
	if (munmap(p, (size_t)size) != 0)
		die("munmap");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr,
			"usage: falloc fallocate|mmap|write4k|write8k|write1m "
			"PATH SIZE\n");
		return 2;
	}
	const char *mode = argv[1];
	long long size = atoll(argv[3]);
	double t0 = now();
	int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open");
	if (strcmp(mode, "fallocate") == 0) {
		int e = posix_fallocate(fd, 0, size);
		if (e != 0) {
			errno = e;
			die("posix_fallocate");
		}
	} else if (strcmp(mode, "mmap") == 0) {
		mmap_writes(fd, size);
	} else if (strcmp(mode, "write4k") == 0) {
		write_chunks(fd, size, 4096);
	} else if (strcmp(mode, "write8k") == 0) {
		write_chunks(fd, size, 8192);
	} else if (strcmp(mode, "write1m") == 0) {
		write_chunks(fd, size, 1 << 20);
	} else {
		fprintf(stderr, "falloc: unknown mode %s\n", mode);
		return 2;
	}
	if (close(fd) != 0)
		die("close");
	printf("%.6f\n", now() - t0);
	return 0;
}
