# SPDX-License-Identifier: GPL-2.0-or-later
# A fleet of clamd backends (several clamd= lines): scans spread over
# them, a killed clamd's share moves to the others with no failed open and
# it takes scans again once restarted; a backend that accepts and never
# answers is ejected within one deadline (its STATS at start fails, or a
# scan times out and then its probe) and no open waits longer than
# scan_timeout; with every backend down opens fail closed (EIO) as with one
# clamd, and they work again, without a remount, once one is back.
# `clamfs --stats` and its Prometheus form give each backend's address,
# state and counters: the scan attempts of the backends add up to the
# scans plus their retries, each clamd did the scans its backend counts,
# and a killed backend shows as ejected (clamfs_backend_up 0). The
# database watch asks every backend: with backend 0 dead, a database
# update on another one still drops the verdict cache. The clamd list:
# several clamd= lines in the INI make a fleet, -o clamd= replaces the
# file's whole list (across a SIGHUP too), and a SIGHUP that adds a
# backend sends scans to it, one that removes a backend sends it none.
import os
import signal
import socket
import threading
import time

from adminutil import ini, wait_log
from clamfstest.env import SLOW
from clamfstest.wait import let_time_pass
from promutil import (parse_exposition, promtool, promtool_check,
                      run_stats)
from fakeclamd import FakeClamd, versioned
from scanutil import mount_scan, put, read_all, stats, try_read, wait_for


def _fleet_opts(clamds, *more):
    return ["clamd=" + c.tcp_addr for c in clamds[1:]] + list(more)


def settled_scan_counts(clamds):
    """Each clamd's scan count once the run before has left no straggler:
    clamd logs a scan just after its reply, so a reader that got every
    answer may still see the last lines land (one did, on a Debian 13 ASan
    run, and counted in the next share)."""
    last = None
    for _ in range(50):
        now = [c.scan_count() for c in clamds]
        if now == last:
            return now
        last = now
        let_time_pass(0.1, "a straggler's log line would land within this",
                      scaled=True)
    raise AssertionError(f"scan counts still moving: {last}")


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
        target=lambda: result.setdefault("f", read_all(m.mnt, names)))
    t.start()
    # every backend takes a share, then one dies mid-run
    assert wait_for(lambda: all(c.scan_count() > b + 20
                                for c, b in zip(cs, before)), 30 * SLOW)
    cs[1].kill()
    t.join()
    assert result["f"] == []  # not one open failed
    assert "ejected" in m.stderr_text()
    # its share moved to the others. Read one file at a time: every pick
    # then finds the backends equally idle and the fleet takes them in
    # turn, so the shares are exact; with concurrent readers the quickest
    # clamd takes the most (least in flight wins), which on two busy cores
    # can starve either of them
    moved = [f"h{i:04d}" for i in range(200)]
    for n in moved:
        put(m.b(n), b"file %s\n" % n.encode())
    at_moved = settled_scan_counts(cs)
    assert read_all(m.mnt, moved, threads=1) == []
    cs[0].wait_scan_count(at_moved[0] + 100)
    cs[2].wait_scan_count(at_moved[2] + 100)
    shares = [c.scan_count() - a for c, a in zip(cs, at_moved)]
    assert shares == [100, 0, 100], shares
    # back: the prober readmits it and it takes scans again. A PING the
    # dying clamd still answered may have readmitted it once already (and
    # its next scan ejected it again): wait for a new readmission, not for
    # the line
    def readmissions():
        return sum(1 for l in m.stderr_text().splitlines()
                   if cs[1].tcp_addr in l and "back in the fleet" in l)
    seen = readmissions()
    cs[1].start()
    assert wait_for(lambda: readmissions() > seen, 10 * SLOW), \
        m.stderr_text()[-2000:]
    # in turn again: a third each, less the few picks made while the
    # prober still asks the readmitted clamd for its MaxThreads
    back_at = [c.scan_count() for c in cs]
    assert read_all(m.mnt, later, threads=1) == []
    got = cs[1].wait_scan_count(back_at[1] + 90) - back_at[1]
    assert got >= 90, ([c.scan_count() - b for c, b in zip(cs, back_at)],
                       m.stderr_text()[-2000:])


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
        # the prober asks each backend for its MaxThreads at start (STATS,
        # with a PING's deadline): the silent one does not answer and is
        # ejected by it, all within one deadline (a scan that times out
        # there is test_scan_fleet_stall.py's case)
        ejected = ("clamd %s: STATS failed (timeout: reading clamd's reply: "
                   "deadline passed), ejected from the fleet" % addr)
        assert wait_for(lambda: ejected in m.stderr_text(), timeout + 1), \
            m.stderr_text()[-2000:]
        assert time.monotonic() - start < (timeout + 1) * SLOW
        assert read_all(m.mnt, names[4:]) == []
        assert max(slowest) < timeout, slowest
        # after the ejection nothing waits for the silent one
        t = time.monotonic()
        assert read_all(m.mnt, [n for n in names[4:]]) == []
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


def _backend_scans(st):
    return [st[f"backend_{i}_scans"] for i in range(st["backends"])]


def test_per_backend_stats_and_prometheus(mount_clamfs, clamd_factory):
    cs = [clamd_factory() for _ in range(2)]
    m = mount_scan(mount_clamfs, cs[0].tcp_addr, *_fleet_opts(cs),
                   "scan_threads=4", "scan_timeout=10")
    names = [f"p{i:03d}" for i in range(60)]
    later = [f"q{i:03d}" for i in range(40)]
    for n in names + later:
        put(m.b(n), b"file %s\n" % n.encode())
    before = [c.scan_count() for c in cs]
    assert read_all(m.mnt, names, threads=4) == []
    st = stats(m.mnt)
    assert st["backends"] == 2
    for i, c in enumerate(cs):
        assert st[f"backend_{i}_addr"] == c.tcp_addr
        assert st[f"backend_{i}_state"] == "healthy"
        assert st[f"backend_{i}_healthy"] == 1
        assert st[f"backend_{i}_errors"] == 0
        assert st[f"backend_{i}_inflight"] == 0
        # both took a share, and each clamd did what its backend counts
        assert st[f"backend_{i}_scans"] > 0, st
        assert c.wait_scan_count(before[i] + st[f"backend_{i}_scans"]) \
            == before[i] + st[f"backend_{i}_scans"]
        assert st[f"backend_{i}_latency_max_ms"] >= \
            st[f"backend_{i}_latency_avg_ms"]
        # nothing cancelled: every attempt timed, the mean from the sum
        n = st[f"backend_{i}_scan_time_count"]
        assert n == st[f"backend_{i}_scans"], st
        assert st[f"backend_{i}_latency_avg_ms"] == \
            st[f"backend_{i}_scan_time_sum_us"] // n // 1000, st
    assert sum(_backend_scans(st)) == st["scans"] + st["scan_retries"]
    assert st["scans"] == len(names)

    cs[1].kill()
    # scans on it fail and eject it (or the prober's PING does)
    assert read_all(m.mnt, later, threads=4) == []
    assert wait_for(lambda: stats(m.mnt)["backend_1_state"] == "ejected",
                    10 * SLOW)
    st = stats(m.mnt)
    assert st["backend_0_state"] == "healthy"
    assert st["backend_1_healthy"] == 0 and st["backend_1_ejections"] >= 1
    assert sum(_backend_scans(st)) == st["scans"] + st["scan_retries"]
    assert st["scans"] == len(names) + len(later)
    # every failed attempt on the dead one was retried on the other
    assert st["backend_1_errors"] == st["scan_retries"]

    r = run_stats("--prometheus", m.mnt)
    assert r.returncode == 0 and r.stderr == "", r
    promtool_check(promtool(), r.stdout)
    fams = parse_exposition(r.stdout)
    up = fams["clamfs_backend_up"]
    assert up.value(backend=cs[0].tcp_addr) == 1
    assert up.value(backend=cs[1].tcp_addr) == 0
    scans = fams["clamfs_backend_scans_total"]
    assert [scans.value(backend=c.tcp_addr) for c in cs] == \
        _backend_scans(st)
    assert fams["clamfs_backend_ejections_total"].value(
        backend=cs[1].tcp_addr) >= 1
    assert fams["clamfs_backends"].value() == 2
    # sums and counts, which add up over backends; no means
    took = fams["clamfs_backend_scan_duration_seconds"]
    assert took.type == "summary"
    for i, c in enumerate(cs):
        assert took.value("_count", backend=c.tcp_addr) == \
            st[f"backend_{i}_scan_time_count"], took.samples
        assert took.value("_sum", backend=c.tcp_addr) == \
            st[f"backend_{i}_scan_time_sum_us"] / 1e6, took.samples
    assert st["backend_0_scan_time_count"] > 0
    assert "clamfs_backend_mean_scan_seconds" not in fams


def test_db_update_behind_a_dead_first_backend(mount_clamfs, tmp_path):
    """Custom signatures give no database version, so a fake clamd says
    one; the first backend's socket has no clamd at all."""
    db = {"version": 27000}
    dead = str(tmp_path / "none.sock")
    with FakeClamd(versioned(db)) as fk:
        m = mount_scan(mount_clamfs, dead, "clamd=" + fk.socket,
                       "version_check=1", "cache_ttl=3600")
        put(m.b("f"), b"some data\n")
        assert try_read(m.m("f"))[0] == "ok"
        assert wait_for(lambda: stats(m.mnt)["clamd_db_version"] == 27000,
                        5 * SLOW)
        s0 = stats(m.mnt)
        assert try_read(m.m("f"))[0] == "ok"
        s1 = stats(m.mnt)
        assert s1["opens_cache_hit"] == s0["opens_cache_hit"] + 1
        db["version"] = 27001
        assert wait_for(lambda: stats(m.mnt)["cache_clears"] >
                        s1["cache_clears"], 5 * SLOW), m.stderr_text()
        assert stats(m.mnt)["clamd_db_version"] == 27001
        assert "verdict cache dropped" in m.stderr_text()
        # scanned again, not served from the cache
        assert try_read(m.m("f"))[0] == "ok"
        s2 = stats(m.mnt)
        assert s2["scans"] == s1["scans"] + 1
        assert s2["opens_cache_hit"] == s1["opens_cache_hit"]


# --- the clamd list from the INI file, -o and SIGHUP ------------------------

def _fleet_ini(cfg, b, mnt, clamds):
    ini(cfg, [("fuse", [("backend", b), ("mountpoint", mnt),
                        ("options", "allow_other")]),
              ("clamd", [("clamd", c.tcp_addr) for c in clamds]),
              ("scan", [("scan_threads", "4")]),
              ("cache", [("racy_window", "0")])])


def _addrs(st):
    return [st[f"backend_{i}_addr"] for i in range(st["backends"])]


def _fresh_files(b, prefix, n):
    names = [f"{prefix}{i:03d}" for i in range(n)]
    for name in names:
        put(os.path.join(b, name), b"file %s\n" % name.encode())
    return names


def test_sighup_adds_and_removes_a_backend(admin, clamd_factory):
    """One clamd in the INI, then two (SIGHUP): scans reach the second;
    then only the second (SIGHUP): the first gets no scan any more."""
    cs = [clamd_factory() for _ in range(2)]
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    _fleet_ini(cfg, b, mnt, cs[:1])
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    names = _fresh_files(b, "a", 20)
    assert read_all(mnt, names, threads=4) == []
    assert _addrs(stats(mnt)) == [cs[0].tcp_addr]
    assert cs[0].wait_scan_count(20) == 20 and cs[1].scan_count() == 0

    _fleet_ini(cfg, b, mnt, cs)
    os.kill(m.pid, signal.SIGHUP)
    assert len(wait_log(m, "SIGHUP: configuration reloaded")) == 1, \
        m.stderr_text()
    st = stats(mnt)
    assert _addrs(st) == [c.tcp_addr for c in cs]
    assert all(st[f"backend_{i}_scans"] == 0 for i in range(2))
    at = [c.scan_count() for c in cs]
    names = _fresh_files(b, "b", 40)
    assert read_all(mnt, names, threads=4) == []
    st = stats(mnt)
    per = [st[f"backend_{i}_scans"] for i in range(2)]
    assert sum(per) == 40 and min(per) > 0, per
    for c, a, p in zip(cs, at, per):
        assert c.wait_scan_count(a + p) == a + p

    _fleet_ini(cfg, b, mnt, cs[1:])
    os.kill(m.pid, signal.SIGHUP)
    assert len(wait_log(m, "SIGHUP: configuration reloaded", count=2)) \
        == 2, m.stderr_text()
    assert _addrs(stats(mnt)) == [cs[1].tcp_addr]
    at = [c.scan_count() for c in cs]
    names = _fresh_files(b, "c", 20)
    assert read_all(mnt, names, threads=4) == []
    assert cs[1].wait_scan_count(at[1] + 20) == at[1] + 20
    assert cs[0].scan_count() == at[0]
    # the removed one is not needed at all
    cs[0].kill()
    names = _fresh_files(b, "d", 5)
    assert read_all(mnt, names, threads=4) == []
    assert "ejected" not in m.stderr_text()


def test_o_clamd_replaces_the_files_list(admin, clamd_factory):
    """Several clamd= lines in the INI make a fleet; -o clamd= (one or
    more) replaces that whole list, also across a SIGHUP that rewrites
    the file's list."""
    cs = [clamd_factory() for _ in range(4)]
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    _fleet_ini(cfg, b, mnt, cs[:2])
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert _addrs(stats(mnt)) == [cs[0].tcp_addr, cs[1].tcp_addr]

    base2, b2, mnt2 = admin.dirs_bm()
    cfg2 = os.path.join(base2, "share.ini")
    _fleet_ini(cfg2, b2, mnt2, cs[:2])
    m = admin.start(["-f", "-o", f"config={cfg2}",
                     "-o", "clamd=" + cs[2].tcp_addr,
                     "-o", "clamd=" + cs[3].tcp_addr], mnt2, b2)
    assert _addrs(stats(mnt2)) == [cs[2].tcp_addr, cs[3].tcp_addr]
    at = [c.scan_count() for c in cs]
    names = _fresh_files(b2, "a", 30)
    assert read_all(mnt2, names, threads=4) == []
    assert wait_for(lambda: sum(c.scan_count() for c in cs[2:]) ==
                    sum(at[2:]) + 30, 10 * SLOW)
    assert [c.scan_count() for c in cs[:2]] == at[:2]

    _fleet_ini(cfg2, b2, mnt2, cs[1:2])
    os.kill(m.pid, signal.SIGHUP)
    assert wait_log(m, "SIGHUP: configuration"), m.stderr_text()
    assert _addrs(stats(mnt2)) == [cs[2].tcp_addr, cs[3].tcp_addr]
    names = _fresh_files(b2, "b", 10)
    assert read_all(mnt2, names, threads=4) == []
    assert [c.scan_count() for c in cs[:2]] == at[:2]
