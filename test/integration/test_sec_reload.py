# SPDX-License-Identifier: GPL-2.0-or-later
# SIGHUP on a busy file server: a storm of reloads that replace the policy,
# the verdict cache, the detection reporter and the clamd pool while opens
# wait on a slow clamd or on a slow quarantine copy must free nothing still
# in use (the sanitizer build reports a use-after-free at teardown) and
# refuse nothing; every open still ends with its proper answer. A reload
# checks the new configuration by the rules startup applies: scan_mode=path
# on a backend mounted over itself, or a quarantine inside the backend, is
# refused with startup's message, and the mount keeps its configuration.
import os
import signal
import subprocess
import threading
import time

from clamfstest.mountinfo import mounted
from adminutil import ini, run_fail, wait_log
from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import let_time_pass
from fsutil import GID_A, UID_A, setpriv_prefix
from scanutil import (SlowClamd, detections, mount_scan, put, stats,
                      try_read, wait_for)

CLEAN = b"a clean file\n"

# Every scan of the lower mount takes this long. Before reference counts, a
# configuration replaced by SIGHUP was freed 5 s after the next reload, and
# a quarantine copy reading its policy afterwards touched freed memory.
LOWER_DELAY = 8


def hup(m):
    os.kill(m.pid, signal.SIGHUP)


def reload_lines(m):
    return [l for l in m.stderr_text().splitlines() if "SIGHUP:" in l]


def refused_reloads(m):
    return [l for l in reload_lines(m) if "reloaded" not in l]


def spawn_open_as(path, uid=UID_A, gid=GID_A):
    """A child (uid/gid) that opens and reads path, printing 'ok N' or the
    errno name."""
    code = ("import errno, os, sys\n"
            "try:\n"
            "    fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "    print('ok', len(os.read(fd, 1 << 20)), flush=True)\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno], flush=True)\n")
    return subprocess.Popen(setpriv_prefix(uid, gid) + [PYTHON, "-c", code,
                                                        path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


class Storm:
    """Rewrites the configuration (cycling through variants) and sends a
    SIGHUP every `interval` seconds in a thread until stopped; .sent counts
    the signals."""

    def __init__(self, m, write, variants, interval):
        self.m, self.write, self.variants = m, write, variants
        self.interval = interval
        self.sent = 0
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_ev.is_set():
            self.write(**self.variants[self.sent % len(self.variants)])
            hup(self.m)
            self.sent += 1
            self.stop_ev.wait(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.stop_ev.set()
        self.thread.join(10)


def test_reload_storm_during_slow_quarantine(mount_clamfs, admin, clamd):
    """Opens wait on quarantines whose copy takes seconds (the backend is a
    slow lower clamfs mount, the quarantine on another filesystem) while
    reloads replace policy, cache and reporter every 0.15 s: the infected
    file is quarantined and denied, the clean one read, and the daemon
    touches no freed configuration (caught by ASan; without a sanitizer the
    old build usually survives this by luck)."""
    slow = SlowClamd(hang=True, delay=LOWER_DELAY)
    try:
        # The lower mount scans every open by root (the upper daemon's scan
        # and quarantine copy), not those of UID_A (the test's opener).
        lower = mount_scan(mount_clamfs, slow, "cache_ttl=0",
                           f"exempt_uid={UID_A}",
                           f"scan_timeout={LOWER_DELAY * 4}")
        put(lower.b("e"), clamd.eicar)
        put(lower.b("c"), CLEAN)
        base, _, mnt = admin.dirs_bm()
        q = os.path.join(base, "quarantine")
        cfg = os.path.join(base, "share.ini")

        def write(deny="EACCES", ttl=600, rate=10):
            ini(cfg, [("fuse", [("backend", lower.mnt), ("mountpoint", mnt),
                                ("options", "allow_other")]),
                      ("clamd", [("clamd", clamd.socket),
                                 ("version_check", "1")]),
                      ("scan", [("scan_timeout", "60")]),
                      ("cache", [("cache_ttl", str(ttl))]),
                      ("action", [("on_infected", "quarantine"),
                                  ("quarantine_dir", q),
                                  ("deny_errno", deny),
                                  ("infected_cmd", "/bin/true"),
                                  ("infected_cmd_rate", str(rate))])])

        write()
        m = admin.start(["-f", "-o", f"config={cfg}"], mnt, lower.mnt)
        # the first configuration is main()'s; the storm retires reloaded ones
        write(deny="EPERM")
        hup(m)
        assert len(wait_log(m, "SIGHUP: configuration reloaded")) == 1, \
            m.stderr_text()
        variants = [dict(deny="EACCES", ttl=300, rate=20),
                    dict(deny="EPERM", ttl=600, rate=10)]
        infected = spawn_open_as(m.m("e"))
        clean = spawn_open_as(m.m("c"))
        with Storm(m, write, variants, 0.15) as storm:
            limit = (4 * LOWER_DELAY + 30) * SLOW
            out_e, err_e = infected.communicate(timeout=limit)
            out_c, err_c = clean.communicate(timeout=limit)
            # reloads after the quarantine too
            after = len(reload_lines(m)) + 3
            assert wait_for(lambda: len(reload_lines(m)) >= after, 10), \
                m.stderr_text()[-2000:]
        assert m.alive(), f"clamfs died:\n{m.stderr_text()[-4000:]}"
        assert storm.sent >= 50, storm.sent
        assert out_e.strip() in ("EACCES", "EPERM"), (out_e, err_e)
        assert out_c.strip() == f"ok {len(CLEAN)}", (out_c, err_c)
        assert not os.path.lexists(lower.b("e")), "not quarantined"
        dets = detections(m)
        assert len(dets) == 1 and dets[0]["action"] == "quarantine", dets
        assert "quarantined_as=" in dets[0]["_line"], dets[0]["_line"]
        # the record beside the file aside (test_admin_quarantine.py)
        qfiles = [n for n in os.listdir(q) if not n.endswith(".clamfs")]
        assert len(qfiles) == 1, qfiles
        with open(os.path.join(q, qfiles[0]), "rb") as f:
            assert f.read() == clamd.eicar
        wait_for(lambda: len(reload_lines(m)) >= 2, 5)
        assert refused_reloads(m) == [], refused_reloads(m)[:3]
    finally:
        slow.close()


def test_reload_storm_during_slow_scans(admin):
    """100 reloads, one at a time, each replacing the clamd pool (scan
    timeout, connections), the cache, the reporter or the policy, while
    opens wait about a second each on a slow clamd: every reload is applied
    (none refused for holding too many old configurations) and every open
    ends with its content."""
    slow = SlowClamd(hang=True, delay=1.0)
    try:
        base, b, mnt = admin.dirs_bm()
        cfg = os.path.join(base, "share.ini")
        names = [f"f{i}" for i in range(12)]
        for i, n in enumerate(names):
            put(os.path.join(b, n), CLEAN * (i + 1))

        def write(timeout=30, conns=4, ttl=600, rate=10, deny="EACCES"):
            ini(cfg, [("fuse", [("backend", b), ("mountpoint", mnt),
                                ("options", "allow_other")]),
                      ("clamd", [("clamd", slow.socket),
                                 ("clamd_connections", str(conns)),
                                 ("version_check", "1")]),
                      ("scan", [("scan_timeout", str(timeout)),
                                ("scan_threads", "4")]),
                      ("cache", [("cache_ttl", str(ttl))]),
                      ("action", [("deny_errno", deny),
                                  ("infected_cmd", "/bin/true"),
                                  ("infected_cmd_rate", str(rate))])])

        write()
        m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
        variants = [dict(timeout=31), dict(timeout=31, conns=5),
                    dict(timeout=31, conns=5, ttl=300),
                    dict(timeout=31, conns=5, ttl=300, rate=20),
                    dict(timeout=30, conns=5, ttl=300, rate=20,
                         deny="EPERM"),
                    dict()]
        results, stop = [], threading.Event()

        def reader(k):
            i = k
            while not stop.is_set():
                n = names[i % len(names)]
                i += 3
                # a new stamp each time: scanned, not answered by the cache
                os.utime(os.path.join(b, n))
                got = try_read(os.path.join(mnt, n))
                want = CLEAN * (names.index(n) + 1)
                results.append((n, got if got != ("ok", want) else "ok"))

        threads = [threading.Thread(target=reader, args=(k,), daemon=True)
                   for k in range(6)]
        for t in threads:
            t.start()
        n = 100
        # One reload every 0.1 s at the most, so that the storm lasts at
        # least 10 s on any machine: with 4 scan threads and 1 s per scan,
        # that is room for about 40 scans overlapping reloads. Paced only by
        # the reloads themselves, a fast machine ended the storm after 18.
        start = time.monotonic()
        try:
            for i in range(1, n + 1):
                write(**variants[i % len(variants)])
                hup(m)
                # one at a time: pending SIGHUPs would merge
                got = wait_log(m, "SIGHUP:", count=i, timeout=10)
                assert len(got) == i, \
                    f"reload {i}: {m.stderr_text()[-2000:]}"
                let_time_pass(max(0.03, start + i * 0.1 - time.monotonic()),
                              "one reload every 0.1 s at the most")
        finally:
            stop.set()
            for t in threads:
                t.join(60 * SLOW)
        assert m.alive(), f"clamfs died:\n{m.stderr_text()[-4000:]}"
        refused = refused_reloads(m)
        assert refused == [], refused[:3]
        bad = [r for r in results if r[1] != "ok"]
        assert results and bad == [], bad[:5]
        assert slow.scans > 20, slow.scans
        # still live: the last reload is applied and named
        write(timeout=45)
        hup(m)
        last = wait_log(m, "SIGHUP:", count=n + 1)[-1]
        assert "scan_timeout 30->45" in last, last
        assert try_read(os.path.join(mnt, names[0])) == ("ok", CLEAN)
    finally:
        slow.close()


def test_reload_while_abandoned_scan_runs(admin):
    """An opener killed while its scan is at clamd is answered at once and
    lets go of its configuration; the abandoned scan is cancelled, and a
    reload that replaces the clamd pool meanwhile frees nothing that scan
    still uses (the queue holds the pool's configuration until run_job
    returns; the window is short, so this is a smoke test, not a
    deterministic reproducer)."""
    slow = SlowClamd(hang=True, delay=3.0)
    other = SlowClamd(hang=False)
    try:
        base, b, mnt = admin.dirs_bm()
        cfg = os.path.join(base, "share.ini")
        put(os.path.join(b, "f"), CLEAN)

        def write(sock):
            ini(cfg, [("fuse", [("backend", b), ("mountpoint", mnt),
                                ("options", "allow_other")]),
                      ("clamd", [("clamd", sock)]),
                      ("scan", [("scan_timeout", "30")])])

        write(slow.socket)
        m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
        opener = spawn_open_as(os.path.join(mnt, "f"))
        assert slow.wait_scans(1)
        opener.kill()
        opener.wait(timeout=5 * SLOW)
        # answered at once, while its scan goes on at clamd
        assert wait_for(lambda: stats(mnt)["opens_interrupted"] == 1, 1)
        write(other.socket)
        hup(m)
        got = wait_log(m, "SIGHUP:", count=1, timeout=10)
        assert "reloaded" in got[0], got
        # the abandoned scan ended (it let go of the old pool before it
        # was counted): whatever it still used is freed by now
        assert wait_for(lambda: stats(mnt)["scans_cancelled"] == 1, 10), \
            stats(mnt)
        assert m.alive(), m.stderr_text()[-3000:]
        assert try_read(os.path.join(mnt, "f")) == ("ok", CLEAN)
        assert other.scans == 1
    finally:
        slow.close()
        other.close()


def _in_place_cfg(path, d, clamd, scan=(), action=()):
    return ini(path, [("fuse", [("backend", d), ("mountpoint", d),
                                ("options", "allow_other")]),
                      ("clamd", [("clamd", clamd.socket)]),
                      ("scan", list(scan)), ("action", list(action))])


def _startup_refusal(cfg, d, text):
    """The line (without "clamfs: ") a start with cfg fails with."""
    r = run_fail(["-f", "-o", f"config={cfg}"], mnt=d)
    lines = [l for l in r.stderr.splitlines() if text in l]
    assert r.returncode != 0 and lines, r.stderr
    return lines[0].split("clamfs: ", 1)[1]


def _reload_refused(m, msg):
    """The SIGHUP sent was refused with msg, logged; nothing reloaded."""
    hup(m)
    lines = wait_log(m, "configuration rejected")
    assert len(lines) == 1, m.stderr_text()
    assert msg in lines[0], (msg, lines)
    let_time_pass(0.2, "a refused reload must not end or remount the mount",
                  scaled=True)
    assert m.alive() and mounted(m.mnt)
    assert not [l for l in reload_lines(m) if "reloaded" in l], \
        m.stderr_text()


def _share(admin, clamd):
    base = admin.tempdir()
    d = os.path.join(base, "share")
    os.mkdir(d, 0o755)
    put(os.path.join(d, "c"), CLEAN)
    return base, d


def test_reload_refuses_path_scan_in_place(admin, clamd):
    """Startup refuses scan_mode=path on a backend mounted over itself
    (clamd's stat and open of the path would come through the mount); a
    SIGHUP into it is refused with the same message, and opens go on being
    scanned under the old configuration (before, every open failed EIO)."""
    base, d = _share(admin, clamd)
    put(os.path.join(d, "e"), clamd.eicar)
    cfg = os.path.join(base, "share.ini")
    _in_place_cfg(cfg, d, clamd, scan=[("scan_mode", "path")])
    msg = _startup_refusal(cfg, d, "scan_mode=path")

    _in_place_cfg(cfg, d, clamd)
    m = admin.start(["-f", "-o", f"config={cfg}"], d, d)
    assert try_read(os.path.join(d, "c")) == ("ok", CLEAN)
    assert try_read(os.path.join(d, "e")) == ("err", "EACCES")
    # a policy change in the same file must not be applied either
    _in_place_cfg(cfg, d, clamd, scan=[("scan_mode", "path")],
                  action=[("deny_errno", "EPERM")])
    _reload_refused(m, msg)
    os.utime(os.path.join(d, "c"))  # not answered from the cache
    assert try_read(os.path.join(d, "c")) == ("ok", CLEAN)
    assert try_read(os.path.join(d, "e")) == ("err", "EACCES")
    assert [x["action"] for x in detections(m)] == ["deny", "deny"]


def test_reload_refuses_quarantine_inside_backend(admin, clamd):
    """Startup refuses a quarantine_dir inside the backend (quarantined
    files would still be served); a SIGHUP naming one is refused the same
    way rather than accepted as a remount-only change the next start would
    fail on, and quarantines go on into the old directory."""
    base, d = _share(admin, clamd)
    cfg = os.path.join(base, "share.ini")
    outside = os.path.join(base, "q")
    inside = os.path.join(d, "q")
    quar = [("on_infected", "quarantine")]
    _in_place_cfg(cfg, d, clamd, action=quar + [("quarantine_dir", inside)])
    msg = _startup_refusal(cfg, d, "must be outside the backend")

    _in_place_cfg(cfg, d, clamd, action=quar + [("quarantine_dir", outside)])
    m = admin.start(["-f", "-o", f"config={cfg}"], d, d)
    _in_place_cfg(cfg, d, clamd, action=quar + [("quarantine_dir", inside),
                                                ("deny_errno", "EPERM")])
    _reload_refused(m, msg)
    put(os.path.join(d, "e"), clamd.eicar)
    assert try_read(os.path.join(d, "e")) == ("err", "EACCES")
    # (the kernel may show the name a moment longer: the daemon tells it
    # after the reply)
    assert wait_for(lambda: not os.path.lexists(os.path.join(d, "e")), 5)
    assert len([n for n in os.listdir(outside)
                if not n.endswith(".clamfs")]) == 1  # its record aside
    assert not os.path.lexists(inside)
    assert try_read(os.path.join(d, "c")) == ("ok", CLEAN)
