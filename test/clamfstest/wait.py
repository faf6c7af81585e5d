# SPDX-License-Identifier: GPL-2.0-or-later
"""The one polling loop: wait for a condition instead of sleeping; and
the one sleep, for the waits where time itself is what must pass."""
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


def let_time_pass(seconds, why, scaled=False):
    """Sleeps for the waits no condition can end: where time itself must
    pass (a TTL, the kernel's entry cache, a racy window, a debounce: real
    time, so not scaled), or where a test checks that something does NOT
    happen within a while (scaled=True: a sanitizer build's daemon gets
    SLOW times as long to do it). why says which, in a few words, so that
    every such wait states its reason where it is made."""
    if not isinstance(why, str) or not why.strip():
        raise ValueError("let_time_pass: say why time must pass")
    time.sleep(seconds * (SLOW if scaled else 1))


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
