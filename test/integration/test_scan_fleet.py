# SPDX-License-Identifier: GPL-2.0-or-later
# A fleet of clamd backends (several clamd= lines): scans spread over
# them, a killed clamd's share moves to the others with no failed open and
# it takes scans again once restarted; a backend that accepts and never
# answers is ejected within one deadline (its scan times out, then its
# PING) and no open waits longer than scan_timeout; with every backend down
# opens fail closed (EIO) as with one clamd, and they work again, without a
# remount, once one is back.
import os
import socket
import threading
import time

from clamfstest.env import SLOW
from scanutil import mount_scan, put, try_read, wait_for


def _read_all(mnt, names, threads=8):
    """Reads every file through the mount with `threads` readers; returns
    the failures as (name, error)."""
    failures = []
    lock = threading.Lock()
    it = iter(names)

    def reader():
        while True:
            with lock:
                name = next(it, None)
            if name is None:
                return
            r = try_read(os.path.join(mnt, name))
            if r[0] != "ok":
                with lock:
                    failures.append((name, r[1]))

    ts = [threading.Thread(target=reader) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return failures


def _fleet_opts(clamds, *more):
    return ["clamd=" + c.tcp_addr for c in clamds[1:]] + list(more)


def test_kill_one_of_three_mid_run(mount_clamfs, clamd_factory):
    cs = [clamd_factory() for _ in range(3)]
    # mount_scan gives the first clamd=; the others are more lines
    m = mount_scan(mount_clamfs, cs[0].tcp_addr,
                   *_fleet_opts(cs, "scan_threads=8", "scan_timeout=20"))
    names = [f"f{i:04d}" for i in range(2000)]
    later = [f"g{i:04d}" for i in range(300)]
    for n in names + later:
        put(m.b(n), b"file %s\n" % n.encode())
    before = [c.scan_count() for c in cs]
    result = {}
    t = threading.Thread(
        target=lambda: result.setdefault("f", _read_all(m.mnt, names)))
    t.start()
    # every backend takes a share, then one dies mid-run
    assert wait_for(lambda: all(c.scan_count() > b + 20
                                for c, b in zip(cs, before)), 30 * SLOW)
    cs[1].kill()
    at_kill = [c.scan_count() for c in cs]
    t.join()
    assert result["f"] == []  # not one open failed
    after = [c.scan_count() for c in cs]
    assert after[0] > at_kill[0] + 100 and after[2] > at_kill[2] + 100, \
        (at_kill, after)
    assert "ejected" in m.stderr_text()
    # back: the prober readmits it and it takes scans again
    cs[1].start()
    assert wait_for(lambda: "back in the fleet" in m.stderr_text(),
                    10 * SLOW), m.stderr_text()[-2000:]
    back_at = cs[1].scan_count()
    assert _read_all(m.mnt, later) == []
    assert cs[1].wait_scan_count(back_at + 30) > back_at + 30


def test_silent_backend_is_ejected_within_a_deadline(mount_clamfs,
                                                     clamd_factory):
    real = clamd_factory()
    # accepts (the kernel's backlog) and never answers
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(128)
    addr = "tcp://127.0.0.1:%d" % silent.getsockname()[1]
    timeout = 4
    try:
        m = mount_scan(mount_clamfs, addr, "clamd=" + real.tcp_addr,
                       f"scan_timeout={timeout}")
        names = [f"s{i:03d}" for i in range(40)]
        for n in names:
            put(m.b(n), b"x")
        start = time.monotonic()
        slowest = []

        def one(name):
            t = time.monotonic()
            r = try_read(m.m(name))
            slowest.append(time.monotonic() - t)
            return r

        assert [one(n)[0] for n in names[:4]] == ["ok"] * 4
        # a timeout only makes it suspect; the PING that follows at once
        # fails too and ejects it, all within one deadline
        ejected = "clamd %s: PING failed (timeout" % addr
        assert wait_for(lambda: ejected in m.stderr_text(), timeout + 1), \
            m.stderr_text()[-2000:]
        assert "after a scan timed out, ejected" in m.stderr_text()
        assert time.monotonic() - start < timeout + 1
        assert _read_all(m.mnt, names[4:]) == []
        assert max(slowest) < timeout, slowest
        # after the ejection nothing waits for the silent one
        t = time.monotonic()
        assert _read_all(m.mnt, [n for n in names[4:]]) == []
        assert time.monotonic() - t < timeout / 2
    finally:
        silent.close()


def test_all_down_fails_closed_then_recovers(mount_clamfs, clamd_factory):
    cs = [clamd_factory() for _ in range(2)]
    m = mount_scan(mount_clamfs, cs[0].tcp_addr, *_fleet_opts(cs),
                   "scan_timeout=5")
    for n in ("a", "b", "c"):
        put(m.b(n), b"data " + n.encode())
    assert try_read(m.m("a"))[0] == "ok"
    for c in cs:
        c.kill()
    assert try_read(m.m("b")) == ("err", "EIO")
    cs[1].start()
    # without a remount: the next opens find the one that is back
    assert wait_for(lambda: try_read(m.m("b"))[0] == "ok", 10 * SLOW)
    assert try_read(m.m("c"))[0] == "ok"
