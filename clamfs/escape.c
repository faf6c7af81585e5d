// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Escaping of untrusted text for display (escape.h).
 */
#include "escape.h"

#include <errno.h>
#include <string.h>

/* Bytes of the UTF-8 sequence that lead starts (1 for anything else). */
static size_t sequence_length(unsigned char lead)
{
	if (lead >= 0xf0 && lead < 0xf8)
		return 4;
	if (lead >= 0xe0)
		return lead < 0xf0 ? 3 : 1;
	if (lead >= 0xc0)
		return 2;
	return 1;
}

int escape_put(FILE *out, const char *s, size_t max, unsigned int flags,
	       bool *cut)
{
	size_t used = 0;

	if (cut)
		*cut = false;
	while (*s) {
		unsigned char c = (unsigned char)*s;
		char esc[5];
		size_t n;

		if (c == '\\' || (c == '"' && (flags & ESCAPE_DQUOTE))) {
			esc[0] = '\\';
			esc[1] = (char)c;
			n = 2;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			n = 4;
		} else {
			/*
			 * A character's bytes go together; a sequence broken
			 * off early ends at the first byte that does not
			 * continue it, which is then looked at on its own.
			 */
			size_t want = sequence_length(c);

			for (n = 1;
			     n < want && ((unsigned char)s[n] & 0xc0) == 0x80;
			     n++)
				;
			memcpy(esc, s, n);
		}
		if (used + n > max) {
			if (cut)
				*cut = true;
			break;
		}
		if (fwrite(esc, 1, n, out) != n)
			return -EIO;
		used += n;
		s += c >= 0x80 ? n : 1; /* n is the escape's length */
	}
	return 0;
}
