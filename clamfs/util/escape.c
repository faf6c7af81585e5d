// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Escaping of untrusted text for display (escape.h).
 */
#include "escape.h"

#include <errno.h>
#include <string.h>

static bool continues(unsigned char c, unsigned char lo, unsigned char hi)
{
	return c >= lo && c <= hi;
}

/*
 * The length of the well-formed UTF-8 character s starts with, or 0: not
 * overlong, no surrogate, at most U+10FFFF, and no C1 control (U+0080 to
 * U+009F). Any other byte of 0x80 and above is escaped on its own, so an
 * 8-bit terminal never meets a stray 0x9b (CSI).
 */
static size_t utf8_length(const unsigned char *s)
{
	unsigned char c = s[0];

	if (c >= 0xc2 && c <= 0xdf)
		return continues(s[1], c == 0xc2 ? 0xa0 : 0x80, 0xbf) ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef)
		return continues(s[1], c == 0xe0 ? 0xa0 : 0x80,
				 c == 0xed ? 0x9f : 0xbf) &&
				       continues(s[2], 0x80, 0xbf)
			       ? 3
			       : 0;
	if (c >= 0xf0 && c <= 0xf4)
		return continues(s[1], c == 0xf0 ? 0x90 : 0x80,
				 c == 0xf4 ? 0x8f : 0xbf) &&
				       continues(s[2], 0x80, 0xbf) &&
				       continues(s[3], 0x80, 0xbf)
			       ? 4
			       : 0;
	return 0;
}

int escape_put(FILE *out, const char *s, size_t max, unsigned int flags,
	       bool *cut)
{
	size_t used = 0;

	if (cut)
		*cut = false;
	while (*s) {
		unsigned char c = (unsigned char)*s;
		size_t n, taken = 1; /* bytes written, bytes of s used */
		char esc[5];

		if (c == '\\' || (c == '"' && (flags & ESCAPE_DQUOTE))) {
			esc[0] = '\\';
			esc[1] = (char)c;
			n = 2;
		} else if (c >= 0x80 && (n = utf8_length((const void *)s))) {
			memcpy(esc, s, n);
			taken = n;
		} else if (c < 0x20 || c >= 0x7f) {
			/* C0 controls, DEL, bytes of no valid character */
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			n = 4;
		} else {
			esc[0] = (char)c;
			n = 1;
		}
		if (used + n > max) {
			if (cut)
				*cut = true;
			break;
		}
		if (fwrite(esc, 1, n, out) != n)
			return -EIO;
		used += n;
		s += taken;
	}
	return 0;
}
