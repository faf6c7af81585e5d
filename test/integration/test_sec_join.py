# SPDX-License-Identifier: GPL-2.0-or-later
# Single flight across users (issue 22, items 4 and 6): an open that joins
# another user's scan of the same file keeps its own place in its own queue
# and its own deadline, so user A's full queue cannot make user B's open of
# a shared file fail; and opens that join a scan count against their user's
# bound like scans of their own, so one user opening one file thousands of
# times cannot take the daemon's file descriptors.
import os
import subprocess

from clamfstest.env import PYTHON, SLOW
from scanutil import (mount_scan, opener_result, put, reap, spawn_opener,
                      stats, wait_for)
from test_sec_queue import SizeClamd, as_uid

USER_A = 65534  # nobody
USER_B = 4242   # any other unprivileged uid
FIVE_MB = 5 * 1000 * 1000  # the files; big for the small lane
SCAN_S = 0.5    # how long the fake clamd takes for one of them


def test_joiner_keeps_its_own_queue_and_deadline(mount_clamfs):
    """scan_threads=2, scan_timeout=5, cache_ttl=0. A opens 40 of their
    own unscanned 5 MB files (each scan takes 0.5 s: A's queue holds 20 s
    of work), then the shared 0644 file F; then B opens F. B joins A's scan
    of F, but is served from B's own (empty) queue: B's open succeeds as
    if B had asked alone (after the scan running when it came, at most one
    more of A's on the round-robin, and F's own), not at A's deadline with
    EIO."""
    with SizeClamd(big_delay=SCAN_S) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=stream",
                       "scan_threads=2", "scan_timeout=5", "cache_ttl=0")
        data = os.urandom(FIVE_MB)
        names = [f"a{i:02}" for i in range(40)]
        for n in names:
            put(m.b(n), data + n.encode(), mode=0o600)
            os.chown(m.b(n), USER_A, USER_A)
        put(m.b("F"), data + b"shared", mode=0o644)
        c0 = stats(m.mnt)["opens_checked"]

        def arrived(k):
            return lambda: stats(m.mnt)["opens_checked"] - c0 >= k

        procs = [spawn_opener(m.m(n), as_uid(USER_A)) for n in names]
        try:
            assert wait_for(arrived(40), 10 * SLOW), stats(m.mnt)
            a_f = spawn_opener(m.m("F"), as_uid(USER_A))
            procs.append(a_f)
            assert wait_for(arrived(41), 10 * SLOW), stats(m.mnt)
            # A's F waits behind at least 15 s of A's own scans (more
            # than its 5 s): it is on B's turn or never
            assert stats(m.mnt)["scans_queued"] >= 31, stats(m.mnt)
            j0 = stats(m.mnt)["scans_joined"]
            b_f = spawn_opener(m.m("F"), as_uid(USER_B))
            procs.append(b_f)
            rb = opener_result(b_f, 20 * SLOW)
            ra = opener_result(a_f, 20 * SLOW)
        finally:
            fake.stop.set()
            reap(procs)
        assert stats(m.mnt)["scans_joined"] - j0 == 1
        # B: three scans at most, well inside its 5 s (before the fix: EIO
        # at A's deadline, about 4.9 s)
        assert rb[0] == "ok" and rb[1] < 3 * SCAN_S + 1.5 * SLOW, rb
        # A's open of F got the verdict of the scan B's turn started
        assert ra[0] == "ok", ra


def daemon_fds(m):
    return len(os.listdir(f"/proc/{m.pid}/fd"))


# One process of USER_A opening argv[1] from argv[2] threads at once; prints
# "EAGAIN" as each open is refused, and at the end one line of counts.
MANY_OPENS = r"""
import collections, errno, os, resource, sys, threading
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
threading.stack_size(128 * 1024)
path, n = sys.argv[1], int(sys.argv[2])
lock = threading.Lock()
got = collections.Counter()
def one():
    try:
        fd = os.open(path, os.O_RDONLY)
        what = "ok"
    except OSError as e:
        what = errno.errorcode[e.errno]
        fd = -1
    with lock:
        got[what] += 1
        if what == "EAGAIN":
            print("EAGAIN", flush=True)
ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("counts", " ".join(f"{k}={v}" for k, v in sorted(got.items())),
      flush=True)
"""


def test_joined_opens_count_against_the_users_bound(mount_clamfs):
    """One user opens one file from 1,400 threads while its scan hangs:
    every open joins that one scan. At most 1024 + scan_threads of them
    may wait (what the per-uid bound lets one user hold with distinct
    files); the rest fail at once with EAGAIN and are counted, and the
    daemon's descriptors grow by no more than the waiting opens."""
    n, threads = 1400, 2
    bound = 1024 + threads
    with SizeClamd(big_delay=0, delay_all=120) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=stream",
                       f"scan_threads={threads}", "scan_timeout=60")
        put(m.b("G"), b"one file, many opens", mode=0o644)
        s0 = stats(m.mnt)
        fd0 = daemon_fds(m)
        code = "import os\n" + as_uid(USER_A) + MANY_OPENS
        p = subprocess.Popen([PYTHON, "-c", code, m.m("G"), str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            def arrived():
                s = stats(m.mnt)
                return (s["scans_joined"] - s0["scans_joined"] +
                        s.get("scans_rejected_waiters", 0) >= n - 1)

            # every open reached the daemon: it joined or was refused
            assert wait_for(arrived, 60 * SLOW), (
                {k: v for k, v in stats(m.mnt).items()
                 if k.startswith(("scans", "opens"))}, daemon_fds(m) - fd0)
            fds = daemon_fds(m) - fd0
            s1 = stats(m.mnt)
        finally:
            fake.stop.set()
        out, err = p.communicate(timeout=60 * SLOW)
        assert p.returncode == 0, err
        # before the fix: all 1,400 joined, ~1,400 more descriptors
        assert fds <= bound + 16, (fds, s1)
        assert s1["scans_rejected_waiters"] == n - bound, s1
        assert s1["scans_rejected"] == s0["scans_rejected"], s1
        counts = out.splitlines()[-1]
        assert counts == f"counts EAGAIN={n - bound} ok={bound}", counts
        assert fake.scans == 1, fake.scans
