// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ClamFS XML to clamfs INI: an expat parse that records what each element
 * asks for, then one INI printed section by section.
 */
#include "xmlimport.h"

#include <errno.h>
#include <expat.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "exitcode.h"
#include "escape.h"

enum setting {
	S_BACKEND,
	S_MOUNTPOINT,
	S_OPTIONS,
	S_CLAMD,
	S_SCAN_MODE,
	S_MAX_SCAN_SIZE,
	S_OVERSIZE,
	S_CACHE_ENTRIES,
	S_CACHE_TTL,
	S_LOG_LEVEL,
	S_COUNT
};

static const struct {
	const char *section, *key;
} settings[S_COUNT] = {
	[S_BACKEND] = {"fuse", "backend"},
	[S_MOUNTPOINT] = {"fuse", "mountpoint"},
	[S_OPTIONS] = {"fuse", "options"},
	[S_CLAMD] = {"clamd", "clamd"},
	[S_SCAN_MODE] = {"scan", "scan_mode"},
	[S_MAX_SCAN_SIZE] = {"scan", "max_scan_size"},
	[S_OVERSIZE] = {"scan", "oversize"},
	[S_CACHE_ENTRIES] = {"cache", "cache_entries"},
	[S_CACHE_TTL] = {"cache", "cache_ttl"},
	[S_LOG_LEVEL] = {"log", "log_level"},
};

static const char *const sections[] = {"fuse", "clamd", "scan", "cache", "log"};

struct import {
	XML_Parser parser;
	char *value[S_COUNT];
	bool readonly, public_;
	bool seen_root, seen_cache;
	int depth;
	char list[16];	/* "whitelist" or "blacklist" while inside one */
	FILE *excludes; /* exclude = lines */
	char *excludes_buf;
	size_t excludes_len;
	FILE *notes; /* "; not supported:" lines */
	char *notes_buf;
	size_t notes_len;
	FILE *blacklist; /* its extensions, for one note */
	char *blacklist_buf;
	size_t blacklist_len;
	int error;
	char *err;
	size_t errlen;
};

/*
 * inih reads 200 bytes of a line at most and takes the rest for a line of
 * its own: every line written stays below this.
 */
#define INI_LINE_MAX 190

/*
 * A "; not supported:" line, values escaped so it stays one line and
 * shortened so it stays below INI_LINE_MAX: the beginning of a long value
 * is enough to recognise it, and the why texts are short.
 */
static void note(struct import *im, const char *elem, const char *attr,
		 const char *val, const char *why)
{
	FILE *out = im->notes;
	bool cut;

	fputs("; not supported: <", out);
	escape_put(out, elem, 16, 0, NULL);
	if (attr) {
		fputc(' ', out);
		escape_put(out, attr, 16, 0, NULL);
		fputs("=\"", out);
		escape_put(out, val ? val : "", 40, ESCAPE_DQUOTE, &cut);
		fprintf(out, "%s\"", cut ? "..." : "");
	}
	fprintf(out, ">: %s\n", why);
}

/*
 * Whether inih gives val back unchanged from "key = val": one line, no
 * blanks it would strip, no inline comment it would cut off.
 */
static bool ini_safe(const char *val)
{
	size_t n = strlen(val);

	if (n == 0 || val[0] == ' ' || val[0] == '\t' || val[n - 1] == ' ' ||
	    val[n - 1] == '\t')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)val[i];

		if (c < 0x20 || c == 0x7f)
			return false;
		if ((c == ';' || c == '#') && i &&
		    (val[i - 1] == ' ' || val[i - 1] == '\t'))
			return false;
	}
	return true;
}

static void set(struct import *im, enum setting s, const char *elem,
		const char *attr, const char *val)
{
	char *copy;

	if (!ini_safe(val)) {
		note(im, elem, attr, val,
		     "the value cannot be written safely in an INI line");
		return;
	}
	if (strlen(settings[s].key) + 3 + strlen(val) > INI_LINE_MAX) {
		note(im, elem, attr, val, "too long for an INI line");
		return;
	}
	copy = strdup(val);
	if (!copy) {
		im->error = -ENOMEM;
		XML_StopParser(im->parser, XML_FALSE);
		return;
	}
	free(im->value[s]);
	im->value[s] = copy;
}

/* A decimal number small enough for every clamfs size and count. */
static bool digits(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 18)
		return false;
	return strspn(s, "0123456789") == n;
}

/* -1 when neither yes nor no (noted). */
static int yes_no(struct import *im, const char *elem, const char *attr,
		  const char *val)
{
	if (strcmp(val, "yes") == 0)
		return 1;
	if (strcmp(val, "no") == 0)
		return 0;
	note(im, elem, attr, val, "neither yes nor no");
	return -1;
}

static void number(struct import *im, enum setting s, const char *elem,
		   const char *attr, const char *val)
{
	if (digits(val))
		set(im, s, elem, attr, val);
	else
		note(im, elem, attr, val, "not a number");
}

static void on_clamd(struct import *im, const char *a, const char *v)
{
	if (strcmp(a, "socket") == 0) {
		set(im, S_CLAMD, "clamd", a, v);
	} else if (strcmp(a, "mode") == 0) {
		if (strcmp(v, "fdpass") == 0 || strcmp(v, "stream") == 0)
			set(im, S_SCAN_MODE, "clamd", a, v);
		else if (strcmp(v, "fname") == 0)
			set(im, S_SCAN_MODE, "clamd", a, "path");
		else
			note(im, "clamd", a, v, "unknown mode");
	} else if (strcmp(a, "check") == 0) {
		note(im, "clamd", a, v,
		     "clamfs does not refuse to mount without clamd (opens "
		     "fail until it answers); clamd_wait = SECONDS waits for "
		     "it at start");
	} else {
		note(im, "clamd", a, v, "unknown attribute");
	}
}

static void on_filesystem(struct import *im, const char *a, const char *v)
{
	int yn;

	if (strcmp(a, "root") == 0) {
		set(im, S_BACKEND, "filesystem", a, v);
	} else if (strcmp(a, "mountpoint") == 0) {
		set(im, S_MOUNTPOINT, "filesystem", a, v);
	} else if (strcmp(a, "readonly") == 0) {
		if ((yn = yes_no(im, "filesystem", a, v)) >= 0)
			im->readonly = yn;
	} else if (strcmp(a, "public") == 0) {
		if ((yn = yes_no(im, "filesystem", a, v)) >= 0)
			im->public_ = yn;
	} else if (strcmp(a, "nonempty") == 0) {
		note(im, "filesystem", a, v,
		     "libfuse 3 always mounts on a non-empty directory");
	} else {
		note(im, "filesystem", a, v, "unknown attribute");
	}
}

/* An extension usable in "*.EXT": no glob character, no slash. */
static bool plain_extension(const char *ext)
{
	return *ext && strlen(ext) <= 32 && !strpbrk(ext, "*?[]\\/") &&
	       ini_safe(ext);
}

static void on_list_entry(struct import *im, const char *elem, const char *a,
			  const char *v)
{
	bool white = strcmp(im->list, "whitelist") == 0;

	if (strcmp(a, "extension") != 0 ||
	    strcmp(elem, white ? "exclude" : "include") != 0) {
		note(im, elem, a, v, "unknown entry");
		return;
	}
	if (!plain_extension(v)) {
		note(im, elem, a, v, "not a plain extension");
		return;
	}
	if (white) {
		fprintf(im->excludes, "exclude = *.%s\n", v);
	} else {
		fprintf(im->blacklist, " .%s", v);
	}
}

static void on_element(struct import *im, const char *elem, const char *a,
		       const char *v)
{
	if (strcmp(elem, "clamd") == 0) {
		on_clamd(im, a, v);
	} else if (strcmp(elem, "filesystem") == 0) {
		on_filesystem(im, a, v);
	} else if (strcmp(elem, "file") == 0 &&
		   strcmp(a, "maximal-size") == 0) {
		number(im, S_MAX_SCAN_SIZE, elem, a, v);
		/* ClamFS let larger files through unscanned */
		if (im->value[S_MAX_SCAN_SIZE])
			set(im, S_OVERSIZE, elem, a, "allow");
	} else if (strcmp(elem, "cache") == 0 && strcmp(a, "entries") == 0) {
		number(im, S_CACHE_ENTRIES, elem, a, v);
	} else if (strcmp(elem, "cache") == 0 && strcmp(a, "expire") == 0) {
		char sec[24];

		if (!digits(v)) {
			note(im, elem, a, v, "not a number");
			return;
		}
		/* milliseconds, rounded up so a short expiry stays on */
		snprintf(sec, sizeof(sec), "%llu",
			 (strtoull(v, NULL, 10) + 999) / 1000);
		set(im, S_CACHE_TTL, elem, a, sec);
	} else if (strcmp(elem, "log") == 0 && strcmp(a, "method") == 0) {
		if (strcmp(v, "syslog") != 0)
			note(im, elem, a, v,
			     "clamfs logs to syslog, or to standard error "
			     "with -f (the journal under systemd)");
	} else if (strcmp(elem, "log") == 0 && strcmp(a, "verbose") == 0) {
		if (yes_no(im, elem, a, v) == 1)
			set(im, S_LOG_LEVEL, elem, a, "debug");
	} else if (strcmp(elem, "log") == 0 && strcmp(a, "filename") == 0) {
		note(im, elem, a, v, "no log file of its own");
	} else if (strcmp(elem, "stats") == 0) {
		note(im, elem, a, v,
		     "clamfs --stats MOUNTPOINT shows live counters");
	} else if (strcmp(elem, "mail") == 0) {
		note(im, elem, a, v,
		     "no mail; infected_cmd = PROGRAM runs a program on each "
		     "detection");
	} else if (strcmp(elem, "debug") == 0) {
		note(im, elem, a, v, "use -f and -o log_level=debug");
	} else {
		note(im, elem, a, v, "unknown setting");
	}
}

static void XMLCALL on_start(void *data, const XML_Char *name,
			     const XML_Char **attrs)
{
	struct import *im = data;

	im->depth++;
	if (im->depth == 1) {
		if (strcmp(name, "clamfs") != 0) {
			snprintf(im->err, im->errlen,
				 "the root element is <%.64s>, not <clamfs>: "
				 "not a ClamFS configuration",
				 name);
			im->error = -EINVAL;
			XML_StopParser(im->parser, XML_FALSE);
		}
		im->seen_root = true;
		return;
	}
	if (im->depth == 2 && (strcmp(name, "whitelist") == 0 ||
			       strcmp(name, "blacklist") == 0)) {
		strlcpy(im->list, name, sizeof(im->list));
		if (attrs[0])
			note(im, name, attrs[0], attrs[1], "unknown attribute");
		return;
	}
	if (strcmp(name, "cache") == 0)
		im->seen_cache = true;
	if (!attrs[0])
		note(im, name, NULL, NULL, "unknown setting");
	for (int i = 0; attrs[i]; i += 2) {
		if (im->depth == 3 && im->list[0])
			on_list_entry(im, name, attrs[i], attrs[i + 1]);
		else if (im->depth == 2)
			on_element(im, name, attrs[i], attrs[i + 1]);
		else
			note(im, name, attrs[i], attrs[i + 1],
			     "unknown setting");
	}
}

static void XMLCALL on_end(void *data, const XML_Char *name)
{
	struct import *im = data;

	if (im->depth == 2)
		im->list[0] = '\0';
	im->depth--;
}

/* Entities can expand without bound: a configuration needs no DTD. */
static void XMLCALL on_doctype(void *data, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal)
{
	struct import *im = data;

	snprintf(im->err, im->errlen, "a DOCTYPE is not accepted");
	im->error = -EINVAL;
	XML_StopParser(im->parser, XML_FALSE);
}

static unsigned long long line_now(XML_Parser parser)
{
#ifdef CLAMFS_HAVE_XML_LINE64
	return XML_GetCurrentLineNumber64(parser);
#else
	return XML_GetCurrentLineNumber(parser);
#endif
}

static int parse(struct import *im, FILE *in, const char *name)
{
	char buf[8192];
	size_t n;
	bool last;

	do {
		n = fread(buf, 1, sizeof(buf), in);
		if (ferror(in)) {
			snprintf(im->err, im->errlen, "%s: read error", name);
			return -EIO;
		}
		last = n < sizeof(buf);
		if (XML_Parse(im->parser, buf, (int)n, last) ==
		    XML_STATUS_ERROR) {
			if (im->error) {
				char why[256];

				snprintf(why, sizeof(why), "%s", im->err);
				snprintf(im->err, im->errlen, "%s:%llu: %s",
					 name, line_now(im->parser), why);
				return im->error;
			}
			snprintf(im->err, im->errlen,
				 "%s:%llu: malformed XML: %s", name,
				 line_now(im->parser),
				 XML_ErrorString(XML_GetErrorCode(im->parser)));
			return -EINVAL;
		}
	} while (!last);
	if (im->error)
		return im->error;
	if (!im->seen_root) {
		snprintf(im->err, im->errlen, "%s: no <clamfs> element", name);
		return -EINVAL;
	}
	return 0;
}

static void print_ini(struct import *im, const char *name, FILE *out)
{
	static const char head[] =
		"; clamfs configuration converted from ClamFS XML ";
	bool cut;

	fputs(head, out);
	escape_put(out, name, INI_LINE_MAX - sizeof(head) - 4, 0, &cut);
	fprintf(out, "%s\n", cut ? "..." : "");
	fputs("; by clamfs --import-clamfs-xml: check it, then "
	      "clamfs --check -o config=FILE\n",
	      out);
	if (im->readonly || im->public_) {
		const char *opts = im->readonly && im->public_
					   ? "ro,allow_other"
				   : im->readonly ? "ro"
						  : "allow_other";

		im->value[S_OPTIONS] = strdup(opts);
	}
	if (!im->seen_cache)
		/* ClamFS without <cache> caches nothing */
		im->value[S_CACHE_TTL] = strdup("0");
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
		bool header = false;

		for (int i = 0; i < S_COUNT; i++) {
			if (strcmp(settings[i].section, sections[s]) != 0 ||
			    !im->value[i])
				continue;
			if (!header)
				fprintf(out, "\n[%s]\n", sections[s]);
			header = true;
			fprintf(out, "%s = %s\n", settings[i].key,
				im->value[i]);
		}
		if (strcmp(sections[s], "scan") == 0 && im->excludes_len) {
			if (!header)
				fprintf(out, "\n[%s]\n", sections[s]);
			fputs(im->excludes_buf, out);
		}
	}
	if (im->blacklist_len) {
		const char *b = im->blacklist_buf;

		fputs("; not supported: <blacklist>, extensions scanned "
		      "whatever "
		      "their size: clamfs has no\n; size limit per extension, ",
		      im->notes);
		fputs(im->value[S_MAX_SCAN_SIZE]
			      ? "so above max_scan_size these are not scanned\n"
				"; (max_scan_size = 0 scans every file):\n"
			      : "and every file is scanned already:\n",
		      im->notes);
		/* the extensions, a few to a line */
		while (*b) {
			size_t n = 0;

			while (n < 64 && b[n])
				n += 1 + strcspn(b + n + 1, " ");
			fprintf(im->notes, ";  %.*s\n", (int)n, b);
			b += n;
		}
		fflush(im->notes);
	}
	if (im->notes_len) {
		fputc('\n', out);
		fputs(im->notes_buf, out);
	}
}

int xmlimport_convert(FILE *in, const char *name, FILE *out, char *err,
		      size_t errlen)
{
	struct import im = {.err = err, .errlen = errlen};
	int ret = -ENOMEM;

	err[0] = '\0';
	im.excludes = open_memstream(&im.excludes_buf, &im.excludes_len);
	im.notes = open_memstream(&im.notes_buf, &im.notes_len);
	im.blacklist = open_memstream(&im.blacklist_buf, &im.blacklist_len);
	/* the document's own encoding declaration holds; names come as UTF-8 */
	im.parser = XML_ParserCreate(NULL);
	if (!im.excludes || !im.notes || !im.blacklist || !im.parser) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	XML_SetUserData(im.parser, &im);
	XML_SetElementHandler(im.parser, on_start, on_end);
	XML_SetStartDoctypeDeclHandler(im.parser, on_doctype);
	ret = parse(&im, in, name);
	fflush(im.excludes);
	fflush(im.notes);
	fflush(im.blacklist);
	if (ret == 0)
		print_ini(&im, name, out);
	if (ret == 0 && (fflush(out) || ferror(out))) {
		snprintf(err, errlen, "write error");
		ret = -EIO;
	}
out:
	if (im.parser)
		XML_ParserFree(im.parser);
	if (im.excludes)
		fclose(im.excludes);
	if (im.notes)
		fclose(im.notes);
	if (im.blacklist)
		fclose(im.blacklist);
	free(im.excludes_buf);
	free(im.notes_buf);
	free(im.blacklist_buf);
	for (int i = 0; i < S_COUNT; i++)
		free(im.value[i]);
	return ret;
}

int xmlimport_main(int argc, char *argv[])
{
	char err[512];
	FILE *in;
	int ret;

	if (argc != 1) {
		fprintf(stderr, "usage: clamfs --import-clamfs-xml FILE (- for "
				"standard input)\n");
		return EXIT_CONFIG;
	}
	in = strcmp(argv[0], "-") == 0 ? stdin : fopen(argv[0], "re");
	if (!in) {
		fprintf(stderr, "clamfs: %s: %s\n", argv[0], strerror(errno));
		return EXIT_CONFIG;
	}
	ret = xmlimport_convert(in, argv[0], stdout, err, sizeof(err));
	if (in != stdin)
		fclose(in);
	if (ret) {
		fprintf(stderr, "clamfs: %s\n", err);
		/* a file clamfs cannot use, like a bad configuration */
		return ret == -EINVAL ? EXIT_CONFIG : EXIT_FAILED;
	}
	return EXIT_OK;
}
