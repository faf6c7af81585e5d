# SPDX-License-Identifier: GPL-2.0-or-later
"""The one polling loop: wait for a condition instead of sleeping."""
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
