# SPDX-License-Identifier: GPL-2.0-or-later
# Scans that hang, time out or fail: a deliberately silent fake clamd must
# not pin the FUSE workers (stat, readdir, reads of open files and writes
# stay fast), a caller interrupted in open() returns promptly (EINTR, or
# dies on SIGTERM), scan_timeout bounds every scan, and a real clamd killed
# and restarted gives EIO (on_error=deny) or a counted fail-open
# (on_error=allow) and then works again without a remount.
import os
import signal
import subprocess
import time

import pytest

from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import let_time_pass
from scanutil import (RAW_OPEN_CHILD, SlowClamd, delta, detections,
                      mount_scan, proc_state, put, scan_failures,
                      spawn_opener, stats, try_read, wait_for)

FAST = 0.5 * SLOW  # "answers in milliseconds", with room for a noisy box


def _timed(fn, *a):
    t = time.monotonic()
    r = fn(*a)
    return r, time.monotonic() - t


def _blocked(pid):
    """The child is sleeping in the kernel (in open on the FUSE mount)."""
    return proc_state(pid) in ("S", "D")


def _reap(procs, timeout=10):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            pass


def test_hanging_scans_do_not_pin_workers(mount_clamfs):
    n_open = 14  # more than the FUSE worker threads (10) and scan threads
    with SlowClamd(hang=False) as slow:
        m = mount_scan(mount_clamfs, slow.socket, "scan_timeout=60")
        held_data = os.urandom(1024 * 1024)
        put(m.b("held"), held_data)
        for i in range(n_open):
            put(m.b("hang", f"f{i}"), b"content %d\n" % i)
        put(m.b("dir", "a"), b"a")
        # opened while clamd still answers
        held = os.open(m.m("held"), os.O_RDONLY)
        procs = []
        try:
            assert os.pread(held, 4096, 0) == held_data[:4096]
            slow.hang.set()
            procs = [spawn_opener(m.m("hang", f"f{i}"))
                     for i in range(n_open)]
            assert slow.wait_scans(1 + 8, 20), slow.scans  # 8 scan threads
            # every open has reached the scan queue (held's was the first)
            assert wait_for(lambda: stats(m.mnt)["opens_scanned"] ==
                            1 + n_open, 10), stats(m.mnt)
            let_time_pass(0.3, "no opener may be answered while clamd hangs",
                          scaled=True)
            assert all(p.poll() is None and _blocked(p.pid) for p in procs)
            # the mount stays responsive
            st, dt = _timed(os.stat, m.m("dir", "a"))
            assert st.st_size == 1 and dt < FAST, dt
            names, dt = _timed(os.listdir, m.m("dir"))
            assert names == ["a"] and dt < FAST, dt
            names, dt = _timed(os.listdir, m.m("hang"))
            assert len(names) == n_open and dt < FAST, dt
            # uncached pages of the already-open file
            for off in (512 * 1024, 900 * 1024):
                data, dt = _timed(os.pread, held, 4096, off)
                assert data == held_data[off:off + 4096] and dt < FAST, dt
            # write-only opens are not scanned: creating a file works
            t = time.monotonic()
            fd = os.open(m.m("new"), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"x")
            os.close(fd)
            assert time.monotonic() - t < FAST
            # an empty file needs no scan
            put(m.b("empty"), b"")
            r, dt = _timed(try_read, m.m("empty"))
            assert r == ("ok", b"") and dt < FAST, dt
            # the openers are all still waiting for their verdicts
            assert all(p.poll() is None for p in procs)
            # and all of them can be killed (SIGTERM) promptly
            t = time.monotonic()
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                left = max(0.1, t + 2 * SLOW - time.monotonic())
                try:
                    p.wait(left)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"opener {p.pid} still blocked "
                                f"{time.monotonic() - t:.1f}s after SIGTERM"
                                f" (state {proc_state(p.pid)})")
                assert p.returncode == -signal.SIGTERM
            s = stats(m.mnt)
            # every opener was waiting in the daemon: each one's open
            # was interrupted and answered EINTR
            assert s["opens_interrupted"] == n_open, s
        finally:
            os.close(held)
            slow.hang.clear()
            _reap(procs)
        # the mount still works for new scans
        put(m.b("after"), b"after")
        assert try_read(m.m("after")) == ("ok", b"after")


def test_sigint_in_open_returns_eintr(mount_clamfs):
    with SlowClamd() as slow:
        m = mount_scan(mount_clamfs, slow.socket, "scan_timeout=60")
        put(m.b("f"), b"some content")
        p = subprocess.Popen([PYTHON, "-c", RAW_OPEN_CHILD, m.m("f")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            assert p.stdout.readline().strip() == "ready"
            # the open asked for its scan after it could be interrupted
            assert slow.wait_scans(1, 20)
            assert wait_for(lambda: _blocked(p.pid), 5), proc_state(p.pid)
            assert p.poll() is None and _blocked(p.pid)
            s0 = stats(m.mnt)
            t = time.monotonic()
            p.send_signal(signal.SIGINT)
            try:
                out, err = p.communicate(timeout=2 * SLOW)
            except subprocess.TimeoutExpired:
                pytest.fail(f"open() still blocked 2s after SIGINT "
                            f"(state {proc_state(p.pid)})")
            dt = time.monotonic() - t
            assert out.split()[0] == "EINTR", (out, err)
            assert dt < 2 * SLOW
            s1 = stats(m.mnt)
            assert delta(s0, s1, "opens_interrupted")["opens_interrupted"] == 1
            # the interrupted scan is cancelled, not left running
            assert wait_for(lambda: stats(m.mnt)["scans_cancelled"] -
                            s0["scans_cancelled"] == 1, 5), stats(m.mnt)
            # no verdict and no detection came out of it
            assert detections(m) == []
        finally:
            slow.hang.clear()
            _reap([p])
        # a later open of the same file gets a fresh scan and succeeds
        assert try_read(m.m("f")) == ("ok", b"some content")


def test_scan_timeout(mount_clamfs):
    with SlowClamd() as slow:
        m = mount_scan(mount_clamfs, slow.socket, "scan_timeout=2")
        put(m.b("f"), b"never answered")
        r, dt = _timed(try_read, m.m("f"))
        assert r == ("err", "EIO")
        assert 1.5 <= dt <= 4 * SLOW, dt
        s = stats(m.mnt)
        assert s["opens_error_denied"] == 1 and s["errors_timeout"] == 1, s
        fails = scan_failures(m)
        assert len(fails) == 1 and fails[0]["error"] == "timeout", \
            m.stderr_text()
        assert fails[0]["open"] == "denied-EIO" and fails[0]["path"] == "f"


def test_scan_timeout_on_error_allow(mount_clamfs):
    with SlowClamd() as slow:
        m = mount_scan(mount_clamfs, slow.socket, "scan_timeout=2",
                       "on_error=allow")
        put(m.b("f"), b"never answered")
        r, dt = _timed(try_read, m.m("f"))
        assert r == ("ok", b"never answered")
        assert 1.5 <= dt <= 4 * SLOW, dt
        s = stats(m.mnt)
        assert s["opens_error_allowed"] == 1, s
        fails = scan_failures(m)
        assert len(fails) == 1 and fails[0]["open"] == "allowed-unscanned"
        # a fail-open is never cached: the next open scans again
        slow.hang.clear()
        s0 = stats(m.mnt)
        assert try_read(m.m("f")) == ("ok", b"never answered")
        assert delta(s0, stats(m.mnt), "scans")["scans"] == 1


def test_clamd_killed_and_restarted(mount_clamfs, clamd_factory):
    c = clamd_factory()
    deny = mount_scan(mount_clamfs, c)
    allow = mount_scan(mount_clamfs, c, "on_error=allow")
    for m in (deny, allow):
        for i in range(4):
            put(m.b(f"f{i}"), b"clean %d\n" % i)
        put(m.b("eicar"), c.eicar)
    # live connections in the pools
    assert try_read(deny.m("f0"))[0] == "ok"
    assert try_read(allow.m("f0"))[0] == "ok"

    # a quick restart: the pooled connections are dead, one retry fixes it
    c.restart()
    assert try_read(deny.m("f1")) == ("ok", b"clean 1\n")
    assert try_read(deny.m("eicar")) == ("err", "EACCES")

    # clamd killed
    c.kill()
    assert try_read(deny.m("f2")) == ("err", "EIO")
    assert try_read(deny.m("f2")) == ("err", "EIO")
    # on_error=allow: opened unscanned, counted and logged per file
    s0 = stats(allow.mnt)
    assert try_read(allow.m("f2")) == ("ok", b"clean 2\n")
    assert try_read(allow.m("eicar")) == ("ok", c.eicar)
    d = delta(s0, stats(allow.mnt), "opens_error_allowed", "opens_denied")
    assert d == {"opens_error_allowed": 2, "opens_denied": 0}, d
    fails = scan_failures(allow)
    assert sorted(f["path"] for f in fails) == ["eicar", "f2"]
    assert all(f["open"] == "allowed-unscanned" for f in fails)
    sd = stats(deny.mnt)
    assert sd["opens_error_denied"] == 2, sd
    fails = scan_failures(deny)
    assert len(fails) == 2 and all(f["open"] == "denied-EIO" and
                                   f["path"] == "f2" for f in fails)
    assert all(f["error"] and f["reason"] for f in fails)

    # clamd back: both mounts work again, nothing remounted, the
    # fail-open of the infected file was not cached
    c.start()
    assert try_read(deny.m("f2")) == ("ok", b"clean 2\n")
    assert try_read(deny.m("f3")) == ("ok", b"clean 3\n")
    assert try_read(allow.m("eicar")) == ("err", "EACCES")
    assert try_read(allow.m("f3")) == ("ok", b"clean 3\n")
    assert deny.alive() and allow.alive()


def test_interrupted_opener_does_not_cancel_joined_scan(mount_clamfs):
    """Single flight and cancellation together: A's open starts the scan,
    B's open of the same file joins it, A is interrupted. A returns EINTR;
    B must still get the real verdict when clamd answers, not an error."""
    with SlowClamd(hang=True, delay=2.0) as slow:
        m = mount_scan(mount_clamfs, slow.socket, "scan_timeout=30")
        put(m.b("f"), b"shared scan")
        a = subprocess.Popen([PYTHON, "-c", RAW_OPEN_CHILD, m.m("f")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        b = None
        try:
            assert a.stdout.readline().strip() == "ready"
            assert slow.wait_scans(1, 20)
            s0 = stats(m.mnt)
            b = spawn_opener(m.m("f"))
            assert wait_for(lambda: stats(m.mnt)["scans_joined"] >
                            s0["scans_joined"], 5), stats(m.mnt)
            a.send_signal(signal.SIGINT)
            out, err = a.communicate(timeout=2 * SLOW)
            assert out.split()[0] == "EINTR", (out, err)
            out, err = b.communicate(timeout=20 * SLOW)
            assert out.split()[:2] == ["ok", "11"], (out, err)
            # one scan for both
            assert slow.scans == 1
        finally:
            slow.hang.clear()
            _reap([a] + ([b] if b else []))
