# SPDX-License-Identifier: GPL-2.0-or-later
"""The one polling loop: wait for a condition instead of sleeping."""
import errno
import time

from .env import SLOW


def wait_for(pred, timeout, interval=0.05):
    """Polls pred() until it returns something true or timeout seconds
    (scaled by SLOW for sanitizer builds) have passed; returns pred()'s
    last value."""
    end = time.monotonic() + timeout * SLOW
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


def past_the_fd_cap(fn, *args):
    """fn(*args) (a stat or lstat through a mount), waiting out EMFILE: at
    the daemon's fd cap a lookup gets EMFILE until the evictor's
    invalidations come back as FORGETs (README, limits worth knowing). The
    evictor cannot invalidate names of a directory while a lookup in it
    holds the directory, so a tight loop of lookups in one directory can
    outrun it on a loaded machine; a later try finds room. Any other error,
    or no room for 10 s (scaled by SLOW), fails."""
    end = time.monotonic() + 10 * SLOW
    while True:
        try:
            return fn(*args)
        except OSError as e:
            if e.errno != errno.EMFILE or time.monotonic() >= end:
                raise
        time.sleep(0.05)
