# SPDX-License-Identifier: GPL-2.0-or-later
"""The one reader of clamfs's counters: the trusted.clamfs.stats xattr of
a mountpoint and the plain `clamfs --stats` output share the format, one
name=value per line."""
import os

STATS_XATTR = "trusted.clamfs.stats"


def parse_stats(text, strict=False):
    """{name: int} (a value that is not a number stays a string). strict:
    every line must be name=value and no name may repeat."""
    out = {}
    for line in text.splitlines():
        if "=" not in line:
            assert not strict, f"not name=value: {line!r}"
            continue
        k, v = (x.strip() for x in line.split("=", 1))
        assert not (strict and k in out), f"{k} twice"
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def read_stats(mnt):
    """The mount's counters (raises OSError when the mount is gone)."""
    return parse_stats(os.getxattr(mnt, STATS_XATTR).decode())
