# SPDX-License-Identifier: GPL-2.0-or-later
# On-access scanning against a real private clamd through real FUSE mounts:
# EICAR and clean files in each scan mode (fdpass, stream over TCP, path),
# the errno, no byte leaking through read, mmap or exec, which opens are
# gated (read, read-write, create of an existing file) and which are not
# (write-only, empty files), the detection log line, awkward file names,
# a uid without a passwd entry, startup errors and failing closed.
import mmap
import os
import pwd
import re
import socket
import subprocess

import pytest

from clamfstest.clamd import UNPRIVILEGED
from clamfstest.env import clamfs_bin
from fsutil import UID_B, GID_B, run_as
from scanutil import (EICAR_SIG, MARKER, MARKER_SIG, delta,
                      ensure_marker_signature, mount_scan, put,
                      run_clamfs_expect_fail, stats, try_open, try_read,
                      wait_detections)

CLEAN = b"just an ordinary clean file\n" * 10

# Clean files named like clamd replies, and infected ones with awkward names.
CLEAN_NAMES = ["clean.txt", "x: Eicar-Test.UNOFFICIAL FOUND",
               "y: OK FOUND ERROR", "sp ace.txt"]
INFECTED_NAMES = ["eicar.com", "a b.txt", "new\nline", "q\"uote\\d: OK"]


def _addr(clamd, mode):
    if mode == "stream":
        return clamd.tcp_addr  # default mode over TCP is stream
    return clamd.socket


def _mode_opts(mode):
    # fdpass is the default on a UNIX socket, stream the default over TCP:
    # both defaults are exercised; path mode must be asked for.
    return ["scan_mode=path"] if mode == "path" else []


@pytest.mark.parametrize("mode", ["fdpass", "stream", "path"])
def test_eicar_and_clean_each_mode(mount_clamfs, clamd, mode):
    m = mount_scan(mount_clamfs, _addr(clamd, mode), *_mode_opts(mode))
    for n in CLEAN_NAMES:
        put(m.b("d", n), CLEAN + n.encode())
    for n in INFECTED_NAMES:
        put(m.b("d", n), clamd.eicar)
    s0 = stats(m.mnt)
    scans0 = clamd.scan_count()
    for n in CLEAN_NAMES:
        assert try_read(m.m("d", n)) == ("ok", CLEAN + n.encode()), n
    for n in INFECTED_NAMES:
        assert try_read(m.m("d", n)) == ("err", "EACCES"), n
    k = len(CLEAN_NAMES) + len(INFECTED_NAMES)
    s1 = stats(m.mnt)
    assert delta(s0, s1, "opens_checked", "scans", "infected",
                 "opens_denied") == {
        "opens_checked": k, "scans": k, "infected": len(INFECTED_NAMES),
        "opens_denied": len(INFECTED_NAMES)}
    assert clamd.wait_scan_count(scans0 + k) == scans0 + k
    dets = wait_detections(m, len(INFECTED_NAMES))
    assert sorted(d["path"] for d in dets) == sorted(
        "d/" + n for n in INFECTED_NAMES)
    for d in dets:
        assert d["signature"] == EICAR_SIG, d["_line"]
        assert d["action"] == "deny" and d["event"] == "open", d["_line"]
    # the newline is escaped: one detection is one log line
    assert any('path="d/new\\x0aline"' in d["_line"] for d in dets)
    # backend untouched
    for n in INFECTED_NAMES:
        with open(m.b("d", n), "rb") as f:
            assert f.read() == clamd.eicar


def test_detection_log_line(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("sub", "eicar.txt"), clamd.eicar)
    p = subprocess.Popen(["cat", m.m("sub", "eicar.txt")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and out == b""
    assert b"Permission denied" in err
    dets = wait_detections(m, 1)
    assert len(dets) == 1
    line = dets[0]["_line"]
    rx = (r'^clamfs: infected path="sub/eicar\.txt" '
          r'signature="Eicar-Test\.UNOFFICIAL" action=deny event=open '
          r'pid=(\d+) process="cat" uid=0 user="root" cached=no '
          r'mount="([^"]+)": (.+): Eicar-Test\.UNOFFICIAL FOUND$')
    mt = re.match(rx, line)
    assert mt, line
    assert int(mt.group(1)) == p.pid
    # the tail is clamd's own `PATH: SIG FOUND`, for alerting that knows it
    assert mt.group(3) == mt.group(2) + "/sub/eicar.txt", line
    # second open: cached infected verdict, logged again as cached
    scans0 = clamd.scan_count()
    c = subprocess.Popen(["cat", m.m("sub", "eicar.txt")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, _ = c.communicate(timeout=30)
    assert c.returncode != 0 and out == b""
    dets = wait_detections(m, 2)
    assert len(dets) == 2
    assert dets[1]["pid"] == str(c.pid), dets[1]["_line"]
    assert dets[1]["cached"] == "yes", dets[1]["_line"]
    assert clamd.wait_scan_count(scans0) == scans0  # not rescanned


def test_uid_without_passwd_entry(mount_clamfs, clamd):
    try:
        pwd.getpwuid(UID_B)
        pytest.skip(f"uid {UID_B} has a passwd entry here")
    except KeyError:
        pass
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("pub", "eicar.txt"), clamd.eicar, 0o644)
    r = run_as(UID_B, GID_B, [], """
        def rd(p):
            with open(p, 'rb') as f:
                return f.read().decode('latin-1')
        emit([outcome(rd, P('pub/eicar.txt')), os.getpid()])
        """, m.mnt)
    assert r[0] == ["err", "EACCES"]
    dets = wait_detections(m, 1)
    assert len(dets) == 1
    assert dets[0]["uid"] == str(UID_B) and dets[0]["user"] == str(UID_B), \
        dets[0]["_line"]
    assert dets[0]["pid"] == str(r[1])
    assert m.alive()


def test_deny_errno_eperm(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "deny_errno=EPERM")
    put(m.b("e"), clamd.eicar)
    assert try_read(m.m("e")) == ("err", "EPERM")
    assert try_read(m.m("e")) == ("err", "EPERM")  # cached verdict too


def test_open_flags_gated(mount_clamfs, clamd):
    """Read, read-write and create-of-existing are gated; write-only is not
    (an infected file can be overwritten or truncated); empty files are
    not scanned. Counts the scans opens ask for: without the background
    scans of what the write-only opens wrote (test_scan_ahead.py)."""
    m = mount_scan(mount_clamfs, clamd, "scan_ahead=no")
    for n in ("ro", "rw", "creat_rw", "creat_ro", "wo", "trunc", "append"):
        put(m.b(n), clamd.eicar)
    put(m.b("empty"), b"")
    s0 = stats(m.mnt)
    scans0 = clamd.scan_count()
    assert try_open(m.m("ro"), os.O_RDONLY) == ("err", "EACCES")
    assert try_open(m.m("rw"), os.O_RDWR) == ("err", "EACCES")
    assert try_open(m.m("creat_rw"), os.O_RDWR | os.O_CREAT) == \
        ("err", "EACCES")
    assert try_open(m.m("creat_ro"), os.O_RDONLY | os.O_CREAT) == \
        ("err", "EACCES")
    # write-only: allowed, nothing can be read
    assert try_open(m.m("wo"), os.O_WRONLY) == ("ok", None)
    assert try_open(m.m("append"), os.O_WRONLY | os.O_APPEND) == ("ok", None)
    assert try_open(m.m("wo"), os.O_WRONLY | os.O_CREAT) == ("ok", None)
    fd = os.open(m.m("trunc"), os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.path.getsize(m.b("trunc")) == 0
    assert try_read(m.m("trunc")) == ("ok", b"")
    # overwriting the infected content makes the file readable again
    fd = os.open(m.m("wo"), os.O_WRONLY | os.O_TRUNC)
    os.write(fd, CLEAN)
    os.close(fd)
    assert try_read(m.m("wo")) == ("ok", CLEAN)
    # an empty file is neither scanned nor refused
    assert try_read(m.m("empty")) == ("ok", b"")
    s1 = stats(m.mnt)
    d = delta(s0, s1, "opens_denied", "scans", "opens_empty")
    # ro, rw, creat_rw, creat_ro (four files: no cache hit among them) and
    # wo after its rewrite; the emptied trunc and empty are not scanned
    assert d == {"opens_denied": 4, "scans": 5, "opens_empty": 2}, d
    assert clamd.wait_scan_count(scans0 + d["scans"]) == scans0 + d["scans"]


def test_create_of_existing_infected_file(mount_clamfs, clamd):
    """open(O_CREAT|O_RDWR) reaching the daemon as FUSE_CREATE for a name
    the kernel believes absent (a cached negative entry) while the backend
    meanwhile holds an infected file: the create opens the existing file,
    which must go through the gate."""
    m = mount_scan(mount_clamfs, clamd, "negative_timeout=60")
    assert not os.path.lexists(m.m("late"))  # negative entry cached
    put(m.b("late"), clamd.eicar)
    assert try_open(m.m("late"), os.O_RDWR | os.O_CREAT) == ("err", "EACCES")
    with open(m.b("late"), "rb") as f:
        assert f.read() == clamd.eicar
    assert len(wait_detections(m, 1)) == 1
    # the same with a clean file: opened, nothing truncated
    assert not os.path.lexists(m.m("late2"))
    put(m.b("late2"), CLEAN)
    fd = os.open(m.m("late2"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.read(fd, 4096) == CLEAN
    finally:
        os.close(fd)


def test_no_leak_through_mmap(mount_clamfs, clamd):
    """A file read clean (its pages cached) and then overwritten with EICAR
    through the mount cannot be opened for mmap; nothing is mapped."""
    m = mount_scan(mount_clamfs, clamd)
    clean = b"C" * len(clamd.eicar)
    put(m.b("f"), clean)
    fd = os.open(m.m("f"), os.O_RDONLY)
    mp = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    assert mp[:] == clean
    mp.close()
    os.close(fd)
    wfd = os.open(m.m("f"), os.O_WRONLY)
    os.pwrite(wfd, clamd.eicar, 0)
    os.close(wfd)
    with pytest.raises(PermissionError):
        os.open(m.m("f"), os.O_RDONLY)
    with pytest.raises(PermissionError):
        with open(m.m("f"), "rb") as f:
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    # the bytes did reach the backend
    with open(m.b("f"), "rb") as f:
        assert f.read() == clamd.eicar


def test_no_leak_through_exec(mount_clamfs, clamd):
    """Executables detected by an .ndb body signature: a copy of /bin/true
    with the marker appended, and a shell script carrying it. exec is
    refused with EACCES and nothing runs; the clean copy runs."""
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd)
    with open("/bin/true", "rb") as f:
        true = f.read()
    put(m.b("bin", "true-clean"), true, 0o755)
    put(m.b("bin", "true-bad"), true + MARKER, 0o755)
    flag = os.path.join(m.backend, "..", "ran")
    put(m.b("bin", "script.sh"),
        b"#!/bin/sh\n# " + MARKER + b"\n: > '" + os.fsencode(flag) + b"'\n",
        0o755)
    assert subprocess.run([m.m("bin", "true-clean")]).returncode == 0
    with pytest.raises(PermissionError):
        subprocess.run([m.m("bin", "true-bad")])
    with pytest.raises(PermissionError):
        subprocess.run([m.m("bin", "script.sh")])
    # through an interpreter: it cannot read the script either
    r = subprocess.run(["/bin/sh", m.m("bin", "script.sh")],
                       capture_output=True)
    assert r.returncode != 0
    assert not os.path.exists(flag)
    # mmap-execution path of the dynamic loader as well
    r = subprocess.run(["/lib64/ld-linux-x86-64.so.2", m.m("bin", "true-bad")],
                       capture_output=True)
    assert r.returncode != 0
    dets = wait_detections(m, 3)
    assert {d["path"] for d in dets} == {"bin/true-bad", "bin/script.sh"}
    assert all(d["signature"] == MARKER_SIG + ".UNOFFICIAL" for d in dets)


@pytest.mark.parametrize("dead", ["missing", "refusing"])
def test_fail_closed_without_clamd(mount_clamfs, dead):
    """clamd= a socket path nobody listens at (no file, or a socket file
    left by a dead clamd): every read-open of a non-empty file fails with
    EIO; empty files and writes work. Never the host's clamd."""
    base = mount_clamfs.tempdir("clamfs-dead")
    sock = os.path.join(base, "clamd.sock")
    if dead == "refusing":
        s = socket.socket(socket.AF_UNIX)
        s.bind(sock)
        s.close()
    m = mount_clamfs(opts=["clamd=" + sock])
    put(m.b("f"), CLEAN)
    put(m.b("empty"), b"")
    assert try_read(m.m("f")) == ("err", "EIO")
    assert try_read(m.m("f")) == ("err", "EIO")  # errors are not cached
    assert try_read(m.m("empty")) == ("ok", b"")
    with open(m.m("new"), "wb") as f:
        f.write(b"x")
    assert try_read(m.m("new")) == ("err", "EIO")
    s = stats(m.mnt)
    assert s["opens_error_denied"] == 3
    fails = [l for l in m.stderr_text().splitlines() if "scan failed" in l]
    assert len(fails) == 3, fails
    assert all("open=denied-EIO" in l and 'reason="' in l and "error=" in l
               for l in fails), fails


def test_startup_errors(mount_clamfs, clamd):
    base = mount_clamfs.tempdir()
    b = os.path.join(base, "b")
    mnt = os.path.join(base, "m")
    os.mkdir(b)
    os.mkdir(mnt)
    binary = clamfs_bin()
    cases = [
        ["clamd=" + clamd.tcp_addr, "scan_mode=fdpass"],
        ["clamd=" + clamd.socket, "on_infected=quarantine"],
        ["clamd=" + clamd.socket, "on_infected=quarantine",
         "quarantine_dir=" + os.path.join(b, "q")],
    ]
    for opts in cases:
        r = run_clamfs_expect_fail(binary, b, mnt, opts)
        assert r.returncode == 2, (opts, r.returncode, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("clamfs: "), \
            (opts, r.stderr)
    assert not os.path.exists(os.path.join(b, "q")) or \
        os.listdir(os.path.join(b, "q")) == []


STAT_NAMES = """opens_checked opens_cache_hit opens_scanned infected opens_denied
opens_excluded opens_oversize_allowed opens_oversize_denied opens_error_denied
opens_error_allowed opens_interrupted close_scans quarantined deleted
hook_runs hook_suppressed cache_clears cache_hits cache_misses cache_entries
scans scans_joined scan_retries scans_cancelled scans_spared""".split()


def test_stats_xattr(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    s = stats(m.mnt)
    missing = [n for n in STAT_NAMES if n not in s]
    assert not missing, missing
    assert any(k.startswith("errors_") for k in s)
    # the counters are numbers (other lines, e.g. clamd's engine, may not)
    assert all(isinstance(s[n], int) for n in STAT_NAMES), s
    assert all(isinstance(v, int) for k, v in s.items()
               if k.startswith("errors_")), s
    # root only
    r = run_as(UID_B, GID_B, [], """
        emit(outcome(lambda: os.getxattr(ROOT, "trusted.clamfs.stats").hex()))
        """, m.mnt)
    assert r[0] == "err", r


def test_links_and_fdpass_needs_no_rights(mount_clamfs, clamd_factory):
    """A clamd running as an unprivileged user: fdpass and stream scan what
    clamfs opened (clamd needs no rights on the backend), and so does path
    mode, which sends the opened file too (test_sec_pathswap.py).
    Symlinks and hard links reach the same gate; the cache is keyed by
    inode, so a hard link hits the verdict cached for the other name."""
    c = clamd_factory(user=UNPRIVILEGED)
    for mode in ("fdpass", "stream", "path"):
        addr = c.tcp_addr if mode == "stream" else c.socket
        m = mount_scan(mount_clamfs, addr, "scan_mode=" + mode)
        os.chmod(m.backend, 0o700)
        put(m.b("priv", "eicar"), c.eicar, 0o600)
        put(m.b("priv", "clean"), CLEAN, 0o600)
        os.chmod(m.b("priv"), 0o700)
        # (a new hard link changes the ctime: made before the first scan)
        os.symlink("priv/eicar", m.b("sym"))
        os.link(m.b("priv", "eicar"), m.b("hard"))
        assert try_read(m.m("priv", "clean")) == ("ok", CLEAN), mode
        assert try_read(m.m("priv", "eicar")) == ("err", "EACCES"), mode
        s0 = stats(m.mnt)
        assert try_read(m.m("sym")) == ("err", "EACCES")
        assert try_read(m.m("hard")) == ("err", "EACCES")
        d = delta(s0, stats(m.mnt), "scans", "opens_cache_hit")
        assert d == {"scans": 0, "opens_cache_hit": 2}, (mode, d)
