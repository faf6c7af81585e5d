# SPDX-License-Identifier: GPL-2.0-or-later
# The scan queue on a shared file server (issue 9, items 10 and 5): one user
# flooding the queue with big unscanned files neither delays another user's
# small file nor starves that user's own big one; a scan's deadline counts
# from the open, so a job that waited in the queue fails closed on time;
# and a CREATE of an existing infected name waiting on the same scan as
# several OPENs does not deadlock the quarantine/delete notification.
import os
import subprocess
import threading

import pytest

from clamfstest.mountinfo import UNSHARE_MOUNT, fuse_mounts_at
from fakeclamd import FakeClamd
from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import let_time_pass
from scanutil import (mount_scan, opener_result, put, reap, spawn_opener,
                      stats, wait_for)

FLOODER = 65534  # nobody
VICTIM = 4242    # any other unprivileged uid
SMALL = b"seven b"  # the 7-byte file
BIG = 2 * 1024 * 1024  # above the queue's small-file limit (1 MiB)


def as_uid(uid):
    """Code run in spawn_opener's child before its open(): become uid."""
    return (f"os.setgroups([])\n"
            f"os.setresgid({uid}, {uid}, {uid})\n"
            f"os.setresuid({uid}, {uid}, {uid})\n")


class SizeClamd:
    """A fake clamd for INSTREAM: streams above BIG // 2 bytes take
    `big_delay` seconds, smaller ones are answered at once. `verdict` is
    the reply text after "stream: ". .scans counts scan commands."""

    def __init__(self, big_delay, verdict="OK", delay_all=0.0):
        self.big_delay = big_delay
        self.delay_all = delay_all
        self.verdict = verdict
        self.lock = threading.Lock()
        self.scans = 0
        self.stop = threading.Event()
        self.fake = FakeClamd(self._behaviour)
        self.socket = self.fake.socket

    def _behaviour(self, ctx):
        if ctx.command.endswith(b"PING"):
            return ("reply", "PONG")
        if ctx.command.endswith(b"VERSION"):
            return ("reply", "ClamAV 1.4.6")
        with self.lock:
            self.scans += 1
        delay = self.delay_all
        if ctx.stream_len > BIG // 2:
            delay = self.big_delay
        self.stop.wait(delay)
        what = "stream" if ctx.command.endswith(b"INSTREAM") else "fd[1]"
        return ("reply", f"{what}: {self.verdict}")

    def close(self):
        self.stop.set()
        self.fake.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def abort_connection(m):
    """Aborts the mount's FUSE connection (through fusectl, mounted in a
    private mount namespace): the way out when the daemon is deadlocked
    and its callers sleep uninterruptibly."""
    for entry in fuse_mounts_at(m.mnt):
        subprocess.run(
            [*UNSHARE_MOUNT, "sh", "-c",
             "mount -t fusectl none /sys/fs/fuse/connections && "
             f"echo 1 > /sys/fs/fuse/connections/{entry.minor}/abort"],
            capture_output=True, timeout=30)


def flood(m, names, uid=FLOODER):
    return [spawn_opener(m.m(n), as_uid(uid)) for n in names]


def in_queue(m, n):
    """Whether n scans were started or are queued (every open counted in
    opens_scanned is one of them once it is submitted)."""
    s = stats(m.mnt)
    return s["scans"] + s["scans_queued"] >= n


def release_flood(fake, procs):
    """Lets the fake answer the flood's scans, and its openers end with
    their answers before any is killed: a kill that races its open's
    answer makes the kernel send an INTERRUPT after the reply, which
    libfuse keeps for good (an unmatched interrupt stays queued in its
    session) and LeakSanitizer then reports at the daemon's exit."""
    fake.stop.set()
    wait_for(lambda: all(p.poll() is not None for p in procs), 10 * SLOW)
    reap(procs)


def test_small_file_does_not_wait_behind_big_scans(mount_clamfs):
    """16 big unscanned files opened at once by one user (each scan takes
    several seconds) fill the scanner threads and the queue; another
    user's 7-byte file opens in well under a second."""
    with SizeClamd(big_delay=6) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=stream",
                       "scan_threads=4", "scan_timeout=30")
        big = os.urandom(BIG)
        names = [f"big{i}" for i in range(16)]
        for n in names:
            put(m.b(n), big + n.encode())
        put(m.b("small"), SMALL)
        procs = flood(m, names)
        try:
            assert wait_for(lambda: fake.scans >= 3, 10), fake.scans
            # the rest are queued
            assert wait_for(lambda: in_queue(m, len(names)), 10), stats(m.mnt)
            assert all(p.poll() is None for p in procs)
            small = spawn_opener(m.m("small"), as_uid(VICTIM))
            r = opener_result(small, 10 * SLOW)
            assert r[0] == "ok" and r[1] < 1.0 * SLOW, r
            # and the flooder's opens are still waiting
            assert sum(p.poll() is None for p in procs) >= 12
        finally:
            release_flood(fake, procs)


def test_big_file_of_another_user_is_not_starved(mount_clamfs):
    """The flooder's 16 big files queue ahead of another user's big file:
    served round-robin per user, the other user's scan starts after at
    most one more of the flooder's, not after all of them."""
    with SizeClamd(big_delay=1) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=stream",
                       "scan_threads=2", "scan_timeout=60")
        big = os.urandom(BIG)
        names = [f"big{i}" for i in range(16)]
        for n in names + ["mine"]:
            put(m.b(n), big + n.encode())
        procs = flood(m, names)
        try:
            assert wait_for(lambda: fake.scans >= 1, 10), fake.scans
            # the flood is queued ahead of mine
            assert wait_for(lambda: in_queue(m, len(names)), 10), stats(m.mnt)
            mine = spawn_opener(m.m("mine"), as_uid(VICTIM))
            r = opener_result(mine, 30 * SLOW)
            # FIFO would take 16 s; round-robin two scans of 1 s at most
            assert r[0] == "ok" and r[1] < 3.0 * SLOW, r
            assert sum(p.poll() is None for p in procs) >= 10
        finally:
            release_flood(fake, procs)


def test_deadline_counts_from_the_open(mount_clamfs):
    """One scanner thread, a clamd that never answers, scan_timeout=3: an
    open that waited 1.5 s in the queue fails closed (EIO) 3 s after it
    began, not 3 s after its scan started."""
    with SizeClamd(big_delay=0, delay_all=120) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=stream",
                       "scan_threads=1", "scan_timeout=3")
        put(m.b("a"), b"first file")
        put(m.b("b"), b"second file")
        s0 = stats(m.mnt)
        first = spawn_opener(m.m("a"))
        try:
            assert wait_for(lambda: fake.scans >= 1, 10), fake.scans
            let_time_pass(1.5, "the second open comes 1.5 s after the "
                          "first took the only scanner thread")
            second = spawn_opener(m.m("b"))
            ra = opener_result(first, 10 * SLOW)
            rb = opener_result(second, 10 * SLOW)
        finally:
            fake.stop.set()
            reap([first])
        assert ra[0] == "EIO" and 2.5 < ra[1] < 3 + 0.8 * SLOW, ra
        assert rb[0] == "EIO" and 2.5 < rb[1] < 3 + 0.8 * SLOW, rb
        s1 = stats(m.mnt)
        assert s1["opens_error_denied"] - s0["opens_error_denied"] == 2


@pytest.mark.parametrize("action", ["quarantine", "delete"])
def test_create_and_opens_share_an_infected_scan(mount_clamfs, eicar_bytes,
                                                 action):
    """open(O_CREAT|O_RDWR) of a name the kernel believes absent (a CREATE,
    holding the directory lock until answered) and O_RDONLY opens of a hard
    link to the same infected file join one scan. Every one is refused
    with EACCES within seconds, and both names are gone from the backend."""
    with SizeClamd(big_delay=0, delay_all=1.5,
                   verdict="Eicar-Test.UNOFFICIAL FOUND") as fake:
        opts = ["on_infected=" + action, "negative_timeout=60",
                "entry_timeout=60", "scan_threads=4"]
        if action == "quarantine":
            q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
            opts.append("quarantine_dir=" + q)
        m = mount_scan(mount_clamfs, fake.socket, *opts)
        put(m.b("d", "keep"), b"x")
        assert not os.path.lexists(m.m("d", "late"))  # negative entry
        put(m.b("d", "f"), eicar_bytes)
        os.link(m.b("d", "f"), m.b("d", "late"))
        os.stat(m.m("d", "f"))  # a cached entry: opens need no dir lock
        code = ("import errno, os, sys, time\n"
                "t = time.monotonic()\n"
                "try:\n"
                "    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_RDWR,"
                " 0o644))\n"
                "    print('ok', 0, time.monotonic() - t, flush=True)\n"
                "except OSError as e:\n"
                "    print(errno.errorcode[e.errno], time.monotonic() - t,"
                " flush=True)\n")
        create = subprocess.Popen([PYTHON, "-c", code, m.m("d", "late")],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        procs = [create]
        try:
            assert wait_for(lambda: fake.scans >= 1, 10), fake.scans
            procs += [spawn_opener(m.m("d", "f")) for _ in range(4)]
            results = [opener_result(p, 8 * SLOW) for p in procs]
        finally:
            fake.stop.set()
            if any(p.poll() is None for p in procs):
                abort_connection(m)
            reap(procs)
        assert all(r[0] == "EACCES" for r in results), results
        # one scan: the create made it, the four opens joined it
        assert fake.scans == 1, fake.scans
        assert stats(m.mnt)["scans_joined"] == 4
        assert sorted(os.listdir(m.b("d"))) == ["keep"]
        assert not os.path.lexists(m.m("d", "f"))
        assert not os.path.lexists(m.m("d", "late"))
