# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the clamdproto integration tests: locate and run clamfs-scan
and cdp-stress, fail on sanitizer reports, parse cdp-stress's key=value
output."""
import os
import subprocess

import pytest

from mount_fixture import built_binary

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:",
                     "LeakSanitizer", "ERROR: UndefinedBehaviorSanitizer",
                     "WARNING: ThreadSanitizer")
SANITIZE = os.environ.get("CLAMFS_SANITIZE", "0").lower() in ("1", "on",
                                                               "true")


def scan_bin():
    return built_binary("CLAMFS_SCAN_BIN", "clamdproto", "clamfs-scan")


def stress_bin():
    b = os.path.join(os.path.dirname(scan_bin()), "cdp-stress")
    if not os.access(b, os.X_OK):
        pytest.fail(f"cdp-stress not built next to clamfs-scan: {b!r}")
    return b


def _check(p):
    bad = [l for l in p.stderr.splitlines()
           if any(m in l for m in SANITIZER_MARKERS)]
    assert not bad, "sanitizer report:\n" + p.stderr


def run_scan(*args, timeout=120):
    """Run clamfs-scan; returns CompletedProcess (text)."""
    p = subprocess.run([scan_bin(), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    _check(p)
    return p


def run_stress(*args, timeout=300):
    """Run cdp-stress; returns (CompletedProcess, dict of key=value)."""
    p = subprocess.run([stress_bin(), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    _check(p)
    assert p.returncode == 0, p.stdout + p.stderr
    kv = {}
    scans = []
    for line in p.stdout.splitlines():
        if line.startswith("scan "):
            d = {}
            head, _, text = line[5:].partition(" text=")
            for tok in head.split():
                k, _, v = tok.partition("=")
                d[k] = v
            d["text"] = text
            scans.append(d)
            continue
        if line.startswith(("first_sig=", "first_error=")):
            k, _, v = line.partition("=")
            kv[k] = v
            continue
        for tok in line.split():
            k, _, v = tok.partition("=")
            kv[k] = v
    kv["scans_list"] = scans
    return p, kv


def verdict_lines(p):
    return p.stdout.splitlines()
