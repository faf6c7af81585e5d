# SPDX-License-Identifier: GPL-2.0-or-later
# What happens to an infected file: quarantine (moved out of the backend,
# relative path kept, timestamp suffix, never overwriting, no symlink
# followed), delete, log (audit mode), the infected_cmd hook and its rate
# limit, and scan_on_close catching an upload nobody has read yet.
import os
import re
import stat
import subprocess

import pytest

from clamfstest.procs import children
from scanutil import (EICAR_SIG, daemon_files, delta, mount_scan, put,
                      released, stats, try_read, wait_detections, wait_for)

STAMP = r"\d{8}T\d{6}Z"


def _qfiles(qdir):
    out = []
    for dirpath, dirnames, filenames in os.walk(qdir):
        for n in filenames:
            if n.endswith(".clamfs"):  # the record beside each file
                continue
            out.append(os.path.relpath(os.path.join(dirpath, n), qdir))
    return sorted(out)


def _content(p):
    with open(p, "rb") as f:
        return f.read()


def test_quarantine(mount_clamfs, clamd):
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "quarantine")
    # Entries are revalidated on every lookup here, so that files
    # re-created directly in the backend at the same path are seen at once
    # (the daemon's own invalidation after a quarantine is tested in
    # test_quarantined_name_gone_from_mount).
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q, "entry_timeout=0",
                   "attr_timeout=0")
    put(m.b("up", "dir", "x.txt"), clamd.eicar)
    put(m.b("up", "dir", "clean.txt"), b"clean")
    assert try_read(m.m("up", "dir", "x.txt")) == ("err", "EACCES")
    assert not os.path.lexists(m.b("up", "dir", "x.txt"))
    assert try_read(m.m("up", "dir", "clean.txt")) == ("ok", b"clean")
    files = _qfiles(q)
    assert len(files) == 1, files
    assert re.fullmatch(r"up/dir/x\.txt\." + STAMP, files[0]), files
    assert _content(os.path.join(q, files[0])) == clamd.eicar
    # the mount no longer shows it
    assert not os.path.lexists(m.m("up", "dir", "x.txt"))
    dets = wait_detections(m, 1)
    assert dets[0]["action"] == "quarantine", dets[0]["_line"]
    assert "quarantined_as=" in dets[0]["_line"], dets[0]["_line"]
    assert files[0] in dets[0]["_line"]
    # the same path infected again (same second or not): a second file,
    # never an overwrite
    for _ in range(2):
        put(m.b("up", "dir", "x.txt"), clamd.eicar)
        assert try_read(m.m("up", "dir", "x.txt")) == ("err", "EACCES")
        assert not os.path.lexists(m.b("up", "dir", "x.txt"))
    files = _qfiles(q)
    assert len(files) == 3, files
    assert all(re.fullmatch(r"up/dir/x\.txt\." + STAMP + r"(\.\d+)?", f)
               for f in files), files
    assert all(_content(os.path.join(q, f)) == clamd.eicar for f in files)
    assert stats(m.mnt)["quarantined"] == 3
    # quarantined files are private
    for f in files:
        assert stat.S_IMODE(os.stat(os.path.join(q, f)).st_mode) & 0o077 == 0 \
            or stat.S_IMODE(os.stat(os.path.dirname(
                os.path.join(q, f))).st_mode) & 0o077 == 0


@pytest.mark.parametrize("action", ["quarantine", "delete"])
def test_quarantined_name_gone_from_mount(mount_clamfs, clamd, action):
    """With default entry caching: once the daemon itself has moved the
    file away (or deleted it), the mount must stop presenting the old
    inode under that name at once. Otherwise, for up to entry_timeout, the
    name still resolves to the quarantined (or unlinked) inode, and an
    uploader retrying at the same path writes into the quarantined copy,
    destroying the evidence, while nothing arrives in the backend."""
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
    opts = ["on_infected=" + action]
    if action == "quarantine":
        opts.append("quarantine_dir=" + q)
    m = mount_scan(mount_clamfs, clamd, *opts)
    put(m.b("x.txt"), clamd.eicar)
    assert os.path.lexists(m.m("x.txt"))  # the entry is in the kernel
    assert try_read(m.m("x.txt")) == ("err", "EACCES")
    assert not os.path.lexists(m.b("x.txt"))
    assert not os.path.lexists(m.m("x.txt")), \
        "the mount still shows the file the daemon removed from the backend"
    with open(m.m("x.txt"), "wb") as f:
        f.write(b"the corrected upload")
    assert os.path.exists(m.b("x.txt")), \
        "a write at the same path through the mount did not reach the backend"
    with open(m.b("x.txt"), "rb") as f:
        assert f.read() == b"the corrected upload"
    if action == "quarantine":
        files = _qfiles(q)
        assert len(files) == 1
        assert _content(os.path.join(q, files[0])) == clamd.eicar, \
            "the quarantined copy was overwritten through the mount"


def test_quarantine_does_not_follow_symlinks(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-q")
    q = os.path.join(base, "quarantine")
    elsewhere = os.path.join(base, "elsewhere")
    os.mkdir(q, 0o700)
    os.mkdir(elsewhere)
    # an attacker-planted symlink inside the quarantine tree
    os.symlink(elsewhere, os.path.join(q, "sub"))
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q)
    put(m.b("sub", "x"), clamd.eicar)
    assert try_read(m.m("sub", "x")) == ("err", "EACCES")
    assert os.listdir(elsewhere) == []
    assert os.path.islink(os.path.join(q, "sub"))
    dets = wait_detections(m, 1)
    assert "quarantine_failed" in dets[0]["_line"], dets[0]["_line"]
    # still refused, never served
    assert try_read(m.m("sub", "x")) == ("err", "EACCES")
    assert stats(m.mnt)["quarantined"] == 0


def test_delete(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "on_infected=delete")
    put(m.b("d", "x"), clamd.eicar)
    put(m.b("d", "y"), b"fine")
    assert try_read(m.m("d", "x")) == ("err", "EACCES")
    assert not os.path.lexists(m.b("d", "x"))
    assert os.listdir(m.b("d")) == ["y"]
    assert try_read(m.m("d", "y")) == ("ok", b"fine")
    s = stats(m.mnt)
    assert s["deleted"] == 1 and s["infected"] == 1
    dets = wait_detections(m, 1)
    assert dets[0]["action"] == "delete" and dets[0]["path"] == "d/x"
    assert "deleted=yes" in dets[0]["_line"]


def test_log_audit_mode(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "on_infected=log")
    put(m.b("x"), clamd.eicar)
    s0 = stats(m.mnt)
    assert try_read(m.m("x")) == ("ok", clamd.eicar)
    assert try_read(m.m("x")) == ("ok", clamd.eicar)
    d = delta(s0, stats(m.mnt), "infected", "opens_denied", "scans")
    assert d == {"infected": 2, "opens_denied": 0, "scans": 1}, d
    dets = wait_detections(m, 2)
    assert len(dets) == 2
    assert all(x["action"] == "log" and x["path"] == "x" and
               x["signature"] == EICAR_SIG for x in dets)
    assert [x["cached"] for x in dets] == ["no", "yes"]
    assert os.path.exists(m.b("x"))


HOOK = """#!/bin/sh
# infected_cmd for the tests: no PATH is given, so absolute paths only
/usr/bin/env > "{out}/hook.$$.tmp" && /bin/mv "{out}/hook.$$.tmp" "{out}/hook.$$"
"""


def _hook(base, name="hook.sh"):
    out = os.path.join(base, "hookout")
    os.mkdir(out)
    h = os.path.join(base, name)
    with open(h, "w") as f:
        f.write(HOOK.format(out=out))
    os.chmod(h, 0o755)
    return h, out


def _hooks_done(m):
    """Waits until every infected_cmd the daemon started has ended (and
    was reaped). The daemon starts them before it answers the open that
    found the file, so after that open every run is counted here."""
    assert wait_for(lambda: not children(m.pid), 10), children(m.pid)


def _hook_runs(out):
    res = []
    for n in sorted(os.listdir(out)):
        if n.endswith(".tmp"):
            continue
        env = {}
        with open(os.path.join(out, n)) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                env[k] = v
        res.append(env)
    return res


def test_infected_cmd_env(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-h")
    # no shell: a name a shell would split or interpret is run as is
    h, out = _hook(base, "my hook;true &.sh")
    m = mount_scan(mount_clamfs, clamd, "infected_cmd=" + h)
    put(m.b("dir", "bad file"), clamd.eicar)
    p = subprocess.Popen(["cat", m.m("dir", "bad file")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    o, _ = p.communicate(timeout=30)
    assert p.returncode != 0 and o == b""
    assert wait_for(lambda: len(_hook_runs(out)) >= 1, 10)
    _hooks_done(m)
    runs = _hook_runs(out)
    assert len(runs) == 1, runs
    env = runs[0]
    want = {
        "CLAMFS_EVENT": "open",
        "CLAMFS_PATH": "dir/bad file",
        "CLAMFS_MOUNT": m.mnt,
        "CLAMFS_SIGNATURE": EICAR_SIG,
        "CLAMFS_ACTION": "deny",
        "CLAMFS_PID": str(p.pid),
        "CLAMFS_UID": "0",
        "CLAMFS_PROCESS": "cat",
    }
    assert {k: env.get(k) for k in want} == want, env
    s = stats(m.mnt)
    assert s["hook_runs"] == 1 and s["hook_suppressed"] == 0


def test_infected_cmd_rate_limit(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-h")
    h, out = _hook(base)
    m = mount_scan(mount_clamfs, clamd, "infected_cmd=" + h,
                   "infected_cmd_rate=2")
    for i in range(6):
        put(m.b(f"x{i}"), clamd.eicar)
    for i in range(6):
        assert try_read(m.m(f"x{i}")) == ("err", "EACCES")
    assert len(wait_detections(m, 6)) == 6
    wait_for(lambda: len(_hook_runs(out)) >= 2, 10)
    _hooks_done(m)
    assert len(_hook_runs(out)) == 2
    s = stats(m.mnt)
    assert (s["hook_runs"], s["hook_suppressed"]) == (2, 4), s
    assert m.stderr_text().count("infected_cmd suppressed") == 4


def test_scan_on_close_quarantines_upload(mount_clamfs, clamd):
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q, "scan_on_close")
    os.mkdir(m.m("inbox"))
    scans0 = clamd.scan_count()
    # an upload, written through the mount, never read by anyone
    fd = os.open(m.m("inbox", "up.bin"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, clamd.eicar)
    os.close(fd)
    assert wait_for(lambda: not os.path.lexists(m.b("inbox", "up.bin")), 5), \
        "not quarantined after close"
    files = _qfiles(q)
    assert len(files) == 1 and re.fullmatch(r"inbox/up\.bin\." + STAMP,
                                            files[0]), files
    assert _content(os.path.join(q, files[0])) == clamd.eicar
    s = stats(m.mnt)
    assert s["close_scans"] == 1 and s["quarantined"] == 1, s
    dets = wait_detections(m, 1)
    assert dets[0]["event"] == "close" and dets[0]["path"] == "inbox/up.bin"
    # a clean upload stays, and its verdict is cached by the close scan
    cached0 = stats(m.mnt)["cache_entries"]
    fd = os.open(m.m("inbox", "ok.bin"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"clean upload")
    os.close(fd)
    assert wait_for(lambda: stats(m.mnt)["close_scans"] == 2, 5)
    assert clamd.wait_scan_count(scans0 + 2) == scans0 + 2
    # clamd answers before the verdict reaches the cache
    assert wait_for(lambda: stats(m.mnt)["cache_entries"] == cached0 + 1,
                    5), " ".join(f"{k}={v}" for k, v in stats(m.mnt).items()
                                 if k in ("cache_entries", "close_scans",
                                          "scans", "scans_spared",
                                          "scans_cancelled"))
    s0 = stats(m.mnt)
    assert try_read(m.m("inbox", "ok.bin")) == ("ok", b"clean upload")
    d = delta(s0, stats(m.mnt), "scans", "opens_cache_hit")
    assert d == {"scans": 0, "opens_cache_hit": 1}, d
    assert os.path.exists(m.b("inbox", "ok.bin"))


def test_no_scan_on_close_without_option(mount_clamfs, clamd):
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q)
    with open(m.m("up"), "wb") as f:
        f.write(clamd.eicar)
    released(m)  # the release that would ask for the close scan came
    assert os.path.exists(m.b("up"))
    assert stats(m.mnt)["close_scans"] == 0
    # the next read catches it
    assert try_read(m.m("up")) == ("err", "EACCES")
    assert not os.path.exists(m.b("up"))


def test_infected_cmd_on_close_event(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-h")
    h, out = _hook(base)
    m = mount_scan(mount_clamfs, clamd, "infected_cmd=" + h, "scan_on_close")
    with open(m.m("upload"), "wb") as f:
        f.write(clamd.eicar)
    assert wait_for(lambda: len(_hook_runs(out)) >= 1, 10)
    env = _hook_runs(out)[0]
    assert (env.get("CLAMFS_EVENT"), env.get("CLAMFS_PATH"),
            env.get("CLAMFS_ACTION")) == ("close", "upload", "deny"), env
    # deny on close leaves the file in place; the next read is refused
    assert os.path.exists(m.b("upload"))
    assert try_read(m.m("upload")) == ("err", "EACCES")


def test_infected_cmd_missing_program(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-h")
    m = mount_scan(mount_clamfs, clamd,
                   "infected_cmd=" + os.path.join(base, "does-not-exist"))
    put(m.b("x"), clamd.eicar)
    assert try_read(m.m("x")) == ("err", "EACCES")
    assert try_read(m.m("x")) == ("err", "EACCES")
    assert len(wait_detections(m, 2)) == 2
    assert stats(m.mnt)["hook_runs"] == 0
    assert m.alive()


def test_scan_on_close_waits_for_last_writer(mount_clamfs, clamd):
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q, "scan_on_close")
    w1 = os.open(m.m("up"), os.O_WRONLY | os.O_CREAT, 0o644)
    w2 = os.open(m.m("up"), os.O_WRONLY)
    try:
        os.write(w1, clamd.eicar)
        os.close(w1)
        w1 = None
        # w1's release came: the daemon holds only w2's file open (a
        # close scan would hold one more until its verdict)
        assert wait_for(lambda: len(daemon_files(m)) == 1, 10), \
            daemon_files(m)
        assert stats(m.mnt)["close_scans"] == 0
        assert os.path.exists(m.b("up"))
    finally:
        if w1 is not None:
            os.close(w1)
        os.close(w2)
    assert wait_for(lambda: not os.path.lexists(m.b("up")), 5)
    s = stats(m.mnt)
    assert s["close_scans"] == 1 and s["quarantined"] == 1, s
