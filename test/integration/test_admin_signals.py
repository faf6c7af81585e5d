# SPDX-License-Identifier: GPL-2.0-or-later
# Signals on a live mount: SIGHUP re-reads the configuration file and
# applies what needs no remount (a policy change deny -> log takes effect
# on the next open, the cache TTL change is logged), refuses a bad file
# without changing anything, names remount-only keys it leaves alone, and
# never unmounts (libfuse's own SIGHUP handler would), keeps the verdict
# cache across new timeouts or connection counts and empties it when the
# clamds change; SIGUSR1 drops the verdict cache so that the next open
# scans again.
import os
import signal
import time

from clamfstest.mountinfo import mounted
from adminutil import ini, wait_log
from clamfstest.env import SLOW
from clamfstest.wait import let_time_pass
from scanutil import (delta, detections, mount_scan, put, released, stats,
                      try_read, wait_detections)
from clamfstest.wait import wait_for

CLEAN = b"a clean file\n"


def write_cfg(path, b, mnt, clamd, on_infected="deny", cache_ttl=3600,
              threads=None, raw="", clamd_more=(), scan_more=()):
    fuse = [("backend", b), ("mountpoint", mnt), ("options", "allow_other")]
    if threads is not None:
        fuse.append(("threads", str(threads)))
    return ini(path, [("fuse", fuse),
                      ("clamd", [("clamd", clamd.socket), *clamd_more]),
                      # scans are counted: none beside a waited open
                      ("scan", [("scan_ahead_dirs", "no"), *scan_more]),
                      ("cache", [("cache_ttl", str(cache_ttl))]),
                      ("action", [("on_infected", on_infected)])],
               raw_tail=raw)


def hup(m):
    os.kill(m.pid, signal.SIGHUP)


def still_up(m):
    let_time_pass(0.2, "a SIGHUP-triggered unmount would come within this",
                  scaled=True)
    assert m.alive(), f"clamfs exited on SIGHUP:\n{m.stderr_text()}"
    assert mounted(m.mnt), "SIGHUP unmounted the filesystem"
    os.stat(m.mnt)  # and it still answers


def test_sighup_reload(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    write_cfg(cfg, b, mnt, clamd, on_infected="deny", cache_ttl=3600,
              threads=8)
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "clean"), CLEAN)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("clean")) == ("ok", CLEAN)

    # 1. a policy and cache change, applied live
    write_cfg(cfg, b, mnt, clamd, on_infected="log", cache_ttl=600,
              threads=8)
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1, m.stderr_text()
    assert "on_infected deny->log" in lines[0], lines
    assert "cache_ttl 3600->600" in lines[0], lines
    assert not wait_log(m, "needs a remount", timeout=0.3), \
        "nothing remount-only changed"
    still_up(m)
    assert try_read(m.m("e")) == ("ok", clamd.eicar), "audit mode not applied"
    dets = wait_detections(m, 2)
    assert [d["action"] for d in dets] == ["deny", "log"], dets
    assert try_read(m.m("clean")) == ("ok", CLEAN)

    # 2. a bad file: rejected, nothing changes (its on_infected=deny, on a
    # line before the bad one, must not be applied either)
    write_cfg(cfg, b, mnt, clamd, on_infected="deny", cache_ttl=600,
              threads=8, raw="[scan]\nscan_timeout = later\n")
    hup(m)
    lines = wait_log(m, "configuration rejected")
    assert len(lines) == 1, m.stderr_text()
    assert "scan_timeout" in lines[0] and cfg in lines[0], lines
    assert len(wait_log(m, "SIGHUP: configuration reloaded", timeout=0.3)) == 1
    still_up(m)
    assert try_read(m.m("e")) == ("ok", clamd.eicar), \
        "a rejected file changed the policy"
    assert detections(m)[-1]["action"] == "log"

    # 3. a remount-only key: named, not applied; the rest is applied
    write_cfg(cfg, b, mnt, clamd, on_infected="deny", cache_ttl=600,
              threads=4)
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded", count=2)
    assert len(lines) == 2, m.stderr_text()
    assert "on_infected log->deny" in lines[1], lines
    rem = wait_log(m, "needs a remount")
    assert len(rem) == 1 and "threads" in rem[0], m.stderr_text()
    still_up(m)
    assert try_read(m.m("e")) == ("err", "EACCES")

    # 4. a burst of SIGHUPs with no change (pending ones may merge):
    # still mounted, nothing changed
    for _ in range(5):
        hup(m)
        let_time_pass(0.02, "a burst of signals, not one")
    lines = wait_log(m, "SIGHUP: configuration reloaded", count=3)
    # how many of the burst merged is not known: no count to wait for
    let_time_pass(0.3, "the burst's last reloads are logged", scaled=True)
    lines = wait_log(m, "SIGHUP: configuration reloaded", count=3)
    assert 3 <= len(lines) <= 7, m.stderr_text()
    assert all("->" not in l for l in lines[2:]), lines
    still_up(m)
    assert try_read(m.m("clean")) == ("ok", CLEAN)


def test_sighup_command_line_still_wins(admin, clamd):
    """A reload re-reads the file under the command line's -o options:
    an -o on_infected=deny keeps winning over the file's log."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    write_cfg(cfg, b, mnt, clamd, on_infected="deny")
    put(os.path.join(b, "e"), clamd.eicar)
    m = admin.start(["-f", "-o", f"config={cfg},on_infected=deny"], mnt, b)
    write_cfg(cfg, b, mnt, clamd, on_infected="log", cache_ttl=10)
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1, m.stderr_text()
    assert "on_infected" not in lines[0], lines
    still_up(m)
    assert try_read(m.m("e")) == ("err", "EACCES")


def test_sigusr1_drops_cache(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("f"), CLEAN)
    put(m.b("g"), CLEAN * 2)
    s0 = stats(m.mnt)
    c0 = clamd.scan_count()
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("g")) == ("ok", CLEAN * 2)
    s1 = stats(m.mnt)
    assert delta(s0, s1, "scans", "opens_cache_hit", "cache_clears") == {
        "scans": 2, "opens_cache_hit": 1, "cache_clears": 0}
    assert s1["cache_entries"] == 2
    assert clamd.wait_scan_count(c0 + 2) == c0 + 2
    os.kill(m.pid, signal.SIGUSR1)
    lines = wait_log(m, "verdict cache dropped")
    assert len(lines) == 1, m.stderr_text()
    assert m.alive() and mounted(m.mnt)
    s2 = stats(m.mnt)
    assert s2["cache_clears"] - s0["cache_clears"] == 1
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s3 = stats(m.mnt)
    assert delta(s0, s3, "scans", "opens_cache_hit", "cache_clears",
                 "opens_scanned") == {
        "scans": 3, "opens_cache_hit": 2, "cache_clears": 1,
        "opens_scanned": 3}
    assert clamd.wait_scan_count(c0 + 3) == c0 + 3
    # the gauge shows what the cache holds: the dropped verdicts are gone,
    # f's new one is the only entry
    assert s2["cache_entries"] == 0, s2
    assert s3["cache_entries"] == 1, s3


def test_sighup_keeps_verdicts_unless_the_clamds_change(admin, clamd):
    """A reload that changes only how the same clamd is reached
    (scan_timeout, clamd_connections, clamd_connect_timeout) builds new
    connections and keeps the verdict cache: the next open of a scanned
    file is a cache hit, not a scan. One that changes how clamd scans
    (scan_mode) empties it, as another clamd= does: the next open
    scans."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    write_cfg(cfg, b, mnt, clamd)
    put(os.path.join(b, "f"), CLEAN)
    # a file just written is cached at once (test_sec_racy has the window)
    m = admin.start(["-f", "-o", f"config={cfg},racy_window=0"], mnt, b)
    s0 = stats(m.mnt)
    c0 = clamd.scan_count()
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s1 = stats(m.mnt)
    assert delta(s0, s1, "scans", "opens_cache_hit") == {
        "scans": 1, "opens_cache_hit": 1}

    write_cfg(cfg, b, mnt, clamd,
              clamd_more=[("clamd_connections", "3"),
                          ("clamd_connect_timeout", "2")],
              scan_more=[("scan_timeout", "30")])
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1, m.stderr_text()
    for change in ("scan_timeout 60->30", "clamd_connect_timeout 5->2",
                   "clamd_connections"):
        assert change in lines[0], lines
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s2 = stats(m.mnt)
    assert delta(s1, s2, "scans", "opens_cache_hit", "cache_clears") == {
        "scans": 0, "opens_cache_hit": 1, "cache_clears": 0}
    # the new connections scan
    put(os.path.join(b, "g"), CLEAN * 2)
    assert try_read(m.m("g")) == ("ok", CLEAN * 2)
    assert clamd.wait_scan_count(c0 + 2) == c0 + 2

    write_cfg(cfg, b, mnt, clamd,
              clamd_more=[("clamd_connections", "3"),
                          ("clamd_connect_timeout", "2")],
              scan_more=[("scan_timeout", "30"), ("scan_mode", "stream")])
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded", count=2)
    assert len(lines) == 2, m.stderr_text()
    assert "scan_mode auto->stream" in lines[1], lines
    s3 = stats(m.mnt)
    assert s3["cache_clears"] == s2["cache_clears"] + 1
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s4 = stats(m.mnt)
    assert delta(s3, s4, "scans", "opens_cache_hit") == {
        "scans": 1, "opens_cache_hit": 0}
    assert clamd.wait_scan_count(c0 + 3) == c0 + 3


def test_sighup_logs_every_policy_change(admin, clamd):
    """Policy settings that need no remount are applied by SIGHUP and the
    reload line names each one that changed (deny_errno, exclude,
    max_scan_size, oversize, exempt_uid), instead of claiming no change."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")

    def write(errno_name, extra_scan):
        ini(cfg, [("fuse", [("backend", b), ("mountpoint", mnt),
                            ("options", "allow_other")]),
                  ("clamd", [("clamd", clamd.socket)]),
                  ("scan", extra_scan),
                  ("action", [("deny_errno", errno_name)])])

    write("EACCES", [("max_scan_size", "100M")])
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "x.tmp"), clamd.eicar)
    put(os.path.join(b, "big"), b"B" * 4096)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("x.tmp")) == ("err", "EACCES")
    assert try_read(m.m("big")) == ("ok", b"B" * 4096)
    write("EPERM", [("max_scan_size", "1K"), ("oversize", "deny"),
                    ("exclude", "*.tmp"), ("exempt_uid", "60001")])
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1, m.stderr_text()
    still_up(m)
    # applied...
    assert try_read(m.m("e")) == ("err", "EPERM")
    assert try_read(m.m("x.tmp")) == ("ok", clamd.eicar)
    assert try_read(m.m("big")) == ("err", "EPERM")
    # ...and each change named in the reload line
    unnamed = [k for k in ("deny_errno", "exclude", "max_scan_size",
                           "oversize", "exempt_uid") if k not in lines[0]]
    assert unnamed == [], f"changed but not logged: {unnamed}: {lines[0]}"


def test_sighup_new_clamd_address(admin, clamd, clamd_factory):
    """A reload pointing at another clamd sends the next scans there."""
    other = clamd_factory()
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    write_cfg(cfg, b, mnt, clamd)
    put(os.path.join(b, "f1"), CLEAN)
    put(os.path.join(b, "f2"), CLEAN * 3)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    c0, o0 = clamd.scan_count(), other.scan_count()
    assert try_read(m.m("f1")) == ("ok", CLEAN)
    assert clamd.wait_scan_count(c0 + 1) == c0 + 1
    write_cfg(cfg, b, mnt, other)
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1, m.stderr_text()
    assert f"clamd {clamd.socket}->{other.socket}" in lines[0], lines
    still_up(m)
    assert try_read(m.m("f2")) == ("ok", CLEAN * 3)
    assert other.wait_scan_count(o0 + 1) == o0 + 1
    assert clamd.scan_count() == c0 + 1, "scanned by the old clamd"
    s = stats(m.mnt)
    assert s["clamd_up"] == 1, s


def test_sighup_daemonized_relative_config(admin, clamd):
    """In the background (cwd is / after daemonizing) a SIGHUP still finds
    the configuration given as a relative path at start."""
    base, b, mnt = admin.dirs_bm()
    name = f"hup-{os.path.basename(base)}.ini"
    cfg = os.path.join(base, name)
    write_cfg(cfg, b, mnt, clamd, on_infected="deny")
    put(os.path.join(b, "e"), clamd.eicar)
    m = admin.start_bg(["-o", f"config={name}"], mnt, b, token=name,
                       cwd=base)
    assert try_read(m.m("e")) == ("err", "EACCES")
    write_cfg(cfg, b, mnt, clamd, on_infected="log", cache_ttl=5)
    os.kill(m.pid, signal.SIGHUP)
    end = time.monotonic() + 5 * SLOW
    got = None
    while time.monotonic() < end:
        got = try_read(m.m("e"))
        if got[0] == "ok":
            break
        time.sleep(0.05)
    assert m.alive() and mounted(mnt)
    assert got == ("ok", clamd.eicar), \
        f"the reload did not apply on_infected=log: {got}"


def _upload(m, name, data):
    fd = os.open(m.m(name), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data)
    os.close(fd)


def test_sighup_switches_scan_on_close(admin, clamd):
    """scan_on_close is read from the configuration a writer's close finds
    in force: a reload turns it on for the next close, and off again."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    quiet = [("scan_ahead", "no")]  # no scan ahead at a close either
    write_cfg(cfg, b, mnt, clamd, scan_more=quiet)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    _upload(m, "before", clamd.eicar)
    released(m)
    assert stats(m.mnt)["close_scans"] == 0
    assert detections(m) == []

    write_cfg(cfg, b, mnt, clamd,
              scan_more=quiet + [("scan_on_close", "yes")])
    hup(m)
    lines = wait_log(m, "SIGHUP: configuration reloaded")
    assert len(lines) == 1 and "scan_on_close no->yes" in lines[0], lines
    _upload(m, "after", clamd.eicar)
    assert wait_for(lambda: stats(m.mnt)["close_scans"] == 1, 10), stats(m.mnt)
    dets = wait_detections(m, 1)
    assert [(d["event"], d["path"]) for d in dets] == [("close", "after")], \
        dets

    write_cfg(cfg, b, mnt, clamd, scan_more=quiet)
    hup(m)
    assert len(wait_log(m, "SIGHUP: configuration reloaded", count=2)) == 2
    _upload(m, "again", clamd.eicar)
    released(m)
    assert stats(m.mnt)["close_scans"] == 1
    assert len(detections(m)) == 1


def test_sighup_many_reloads(admin, clamd):
    """`systemctl reload` (e.g. after every freshclam or logrotate run) may
    come hundreds of times in a mount's life: after 70 reloads a changed
    policy is still applied."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    write_cfg(cfg, b, mnt, clamd, on_infected="deny")
    put(os.path.join(b, "e"), clamd.eicar)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    n = 70
    for i in range(1, n + 1):
        hup(m)
        # one at a time: pending SIGHUPs would merge
        got = wait_log(m, "SIGHUP:", count=i)
        assert len(got) == i, f"reload {i}: {m.stderr_text()[-2000:]}"
    refused = [l for l in m.stderr_text().splitlines()
               if "SIGHUP" in l and "reloaded" not in l]
    assert refused == [], refused[:3]
    write_cfg(cfg, b, mnt, clamd, on_infected="log")
    hup(m)
    last = wait_log(m, "SIGHUP:", count=n + 1)[-1]
    assert "on_infected deny->log" in last, last
    still_up(m)
    assert try_read(m.m("e")) == ("ok", clamd.eicar)
