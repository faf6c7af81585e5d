# SPDX-License-Identifier: GPL-2.0-or-later
# clamd's own thread limit (issue 22, item 9). With a clamd of MaxThreads 4
# and the default scan_threads=8, clamfs kept up to seven big scans in
# flight there: clamd queued the small-file lane's scan behind them and a
# 6-byte file opened by another user took seconds. clamfs learns each
# backend's limit (zSTATS: "THREADS: live N  idle N max N"), never keeps
# more scans in flight there than it has threads, keeps one of them for
# small files, warns at start and in --check when scan_threads or conns
# exceed it, and shows it in --stats and --prometheus.
import os
import subprocess

from clamfstest.env import SLOW, clamfs_bin
from promutil import parse_exposition, run_stats
from scanutil import (mount_scan, opener_result, put, reap, spawn_opener,
                      stats, wait_for)

FLOODER = 65534  # nobody
VICTIM = 4242    # any other unprivileged uid
TINY = b"tiny!\n"  # the 6-byte file
BIG = 64 * 1024 * 1024


def as_uid(uid):
    return (f"os.setgroups([])\n"
            f"os.setresgid({uid}, {uid}, {uid})\n"
            f"os.setresuid({uid}, {uid}, {uid})\n")


def _big_files(m, n):
    chunk = os.urandom(BIG)
    names = [f"big{i:02d}" for i in range(n)]
    for name in names:
        # distinct files, each a fresh scan
        put(m.b(name), chunk + name.encode())
    return names


def test_tiny_file_does_not_wait_in_clamds_queue(mount_clamfs,
                                                 clamd_factory):
    c = clamd_factory(options={"MaxThreads": "4"})
    m = mount_scan(mount_clamfs, c.socket, "scan_timeout=60")
    names = _big_files(m, 16)
    put(m.b("tiny"), TINY)
    procs = [spawn_opener(m.m(n), as_uid(FLOODER)) for n in names]
    try:
        # the big scans fill what clamfs lets them have of clamd
        assert wait_for(lambda: stats(m.mnt)["backend_0_inflight"] >= 3,
                        30 * SLOW)
        assert sum(p.poll() is None for p in procs) >= 12
        tiny = spawn_opener(m.m("tiny"), as_uid(VICTIM))
        r = opener_result(tiny, 60 * SLOW)
        print("tiny open took", r)
        assert r[0] == "ok" and r[1] < 0.75 * SLOW, r
        # and the flood is still being scanned
        assert sum(p.poll() is None for p in procs) >= 8
        st = stats(m.mnt)
        assert st["backend_0_threads"] == 4, st
        # never more in flight than clamd has threads
        assert st["backend_0_inflight"] <= 4, st
    finally:
        reap(procs)
    # warned at start: scan_threads (8, and conns with it) exceed it
    warned = [line for line in m.stderr_text().splitlines()
              if c.socket in line and "MaxThreads 4" in line]
    assert len(warned) == 1, m.stderr_text()[-2000:]
    assert "scan_threads=8" in warned[0], warned

    r = run_stats("--prometheus", m.mnt)
    assert r.returncode == 0, r
    fams = parse_exposition(r.stdout)
    assert fams["clamfs_backend_clamd_threads"].value(
        backend=c.socket) == 4


def test_no_warning_within_the_limit(mount_clamfs, clamd_factory):
    c = clamd_factory(options={"MaxThreads": "4"})
    m = mount_scan(mount_clamfs, c.socket, "scan_threads=4")
    put(m.b("f"), b"data\n")
    with open(m.m("f"), "rb") as f:
        assert f.read() == b"data\n"
    assert wait_for(lambda: stats(m.mnt)["backend_0_threads"] == 4,
                    10 * SLOW)
    text = m.stderr_text()
    assert "is below scan_threads" not in text, text[-2000:]
    # the limit is said once, as information
    assert text.count(f"clamd {c.socket}: MaxThreads 4: at most 4 scans") \
        == 1, text[-2000:]


def test_check_warns_when_scan_threads_exceed_clamds(clamd_factory):
    c = clamd_factory(options={"MaxThreads": "4"})
    r = subprocess.run([clamfs_bin(), "--check", "-o", "clamd=" + c.socket],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r
    lines = [line for line in r.stdout.splitlines()
             if c.socket in line and "MaxThreads 4" in line]
    assert len(lines) == 1 and "warning" in lines[0], r.stdout
    assert "scan_threads=8" in lines[0], r.stdout
    r = subprocess.run([clamfs_bin(), "--check", "-o", "clamd=" + c.socket,
                        "-o", "scan_threads=3"],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r
    # (the socket's mode has a warning of its own: test_admin_check)
    assert not [line for line in r.stdout.splitlines()
                if "MaxThreads" in line and "warning" in line], r.stdout
    assert f"clamd {c.socket}: MaxThreads 4, enough" in r.stdout, r.stdout
