# SPDX-License-Identifier: GPL-2.0-or-later
# `clamfs --check`: validates the configuration, asks clamd for PING and
# VERSION and prints the engine and database version; exit 0 against the
# running private clamd (from a file or -o clamd=, UNIX socket or TCP),
# exit 1 with a reason against a stopped clamd, a fdpass over TCP, a bad
# path or a bad configuration; it warns when every local user can connect
# to (and so stop) a UNIX clamd. It never mounts anything, except to show
# that a mount scans through a clamd socket only root can reach (660).
import os
import re
import signal
import subprocess
import threading

from clamfstest.mountinfo import mounted
from adminutil import ini, run_fail
from clamfstest.env import SLOW, clamfs_bin


def check(*args, timeout=30):
    return subprocess.run([clamfs_bin(), "--check"] + list(args),
                          capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout * SLOW)


def engine_of(clamd):
    """The engine version clamd itself reports ("1.4.6")."""
    reply = clamd.command(b"zVERSION\0").rstrip(b"\0").decode()
    m = re.match(r"ClamAV (\S+?)(?:/|$)", reply)
    assert m, reply
    return m.group(1)


def config(admin, clamd_addr):
    """A file naming fresh backend and mountpoint directories and clamd."""
    base, b, mnt = admin.dirs_bm()
    sections = [("fuse", [("backend", b), ("mountpoint", mnt)]),
                ("clamd", [("clamd", clamd_addr)])]
    return ini(os.path.join(base, "c.ini"), sections), b, mnt


def test_check_running_clamd_from_file(admin, clamd):
    cfg, b, mnt = config(admin, clamd.socket)
    r = check("-o", f"config={cfg}")
    assert r.returncode == 0, r
    out = r.stdout
    engine = engine_of(clamd)
    assert re.search(rf"ClamAV {re.escape(engine)}\b", out), out
    assert engine == "1.4.6", engine
    assert "no database version" in out, out
    assert f"config {cfg}: ok" in out
    assert f"backend {b}: ok" in out and f"mountpoint {mnt}: ok" in out
    assert out.rstrip().endswith("check passed"), out
    assert not mounted(mnt), "--check mounted something"


def test_check_clamd_option(admin, clamd):
    r = check("-o", f"clamd={clamd.socket}")
    assert r.returncode == 0, r
    assert "ClamAV 1.4.6" in r.stdout and "no database version" in r.stdout
    # over TCP (stream is the default there)
    r = check("-o", f"clamd={clamd.tcp_addr}")
    assert r.returncode == 0, r
    assert "ClamAV 1.4.6" in r.stdout
    # fdpass cannot work over TCP
    r = check("-o", f"clamd={clamd.tcp_addr},scan_mode=fdpass")
    assert r.returncode == 2, r
    assert "fdpass" in r.stdout + r.stderr and "FAILED" in r.stdout


def test_check_option_wins_over_file(admin, clamd):
    dead = os.path.join(admin.tempdir(), "nobody.sock")
    cfg, _, _ = config(admin, dead)
    r = check("-o", f"config={cfg}")
    assert r.returncode == 3, r
    assert dead in r.stdout
    r = check("-o", f"config={cfg},clamd={clamd.socket}")
    assert r.returncode == 0, r
    assert f"clamd {clamd.socket}: ok" in r.stdout
    cfg2, _, _ = config(admin, clamd.socket)
    r = check("-o", f"clamd={dead}", "-o", f"config={cfg2}")
    assert r.returncode == 3, r


def test_check_stopped_clamd(admin, clamd_factory):
    c = clamd_factory()
    c.stop()
    cfg, _, mnt = config(admin, c.socket)
    for args in (["-o", f"config={cfg}"], ["-o", f"clamd={c.socket}"],
                 ["-o", f"clamd={c.tcp_addr}"]):
        r = check(*args)
        assert r.returncode == 3, (args, r)
        lines = [l for l in r.stdout.splitlines() if l.startswith("clamd ")]
        assert len(lines) == 1, r.stdout
        # a reason, not just "failed"
        assert "not answering" in lines[0], lines
        reason = lines[0].split("not answering", 1)[1].strip(": ")
        assert len(reason) > 3, lines
        assert r.stdout.rstrip().endswith("check FAILED"), r.stdout
    assert not mounted(mnt)


def test_check_bad_paths_and_config(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    missing = os.path.join(base, "gone")
    cfg = ini(os.path.join(base, "c.ini"),
              [("fuse", [("backend", missing), ("mountpoint", mnt)]),
               ("clamd", [("clamd", clamd.socket)])])
    r = check("-o", f"config={cfg}")
    assert r.returncode == 4, r
    assert f"backend {missing}: No such file or directory" in r.stdout
    assert "check FAILED" in r.stdout
    # a bad value in the file: the one-line error, nothing else
    bad = os.path.join(base, "bad.ini")
    with open(bad, "w") as f:
        f.write(f"[clamd]\nclamd = {clamd.socket}\n[scan]\nscan_mode = fax\n")
    r = run_fail(["--check", "-o", f"config={bad}"])
    assert r.returncode == 2, r
    assert r.stdout == "", r.stdout
    assert r.stderr.splitlines() == [r.stderr.strip()] and \
        f"{bad}:4:" in r.stderr and "scan_mode" in r.stderr, r.stderr


def limits_lines(r):
    return [l for l in r.stdout.splitlines() if l.startswith("clamd.conf ")]


def test_check_warns_about_clamd_limits(admin, clamd_factory):
    """Debian's clamd.conf limits (25M) below max_scan_size (100M): files in
    between would be refused (stream) or skipped and called clean."""
    c = clamd_factory(stream_max="25M", options={"MaxFileSize": "25M",
                                                 "MaxScanSize": "100M"})
    # fdpass over the socket: MaxFileSize matters, StreamMaxLength not
    r = check("-o", f"clamd={c.socket},max_scan_size=100M")
    assert r.returncode == 0, r
    lines = limits_lines(r)
    assert all(c.conf in l for l in lines), lines
    assert any("MaxFileSize 25M is below max_scan_size 100M" in l and
               "AlertExceedsMax" in l for l in lines), lines
    assert not any("StreamMaxLength" in l for l in lines), lines
    assert not any("MaxScanSize" in l for l in lines), lines
    # INSTREAM over TCP: StreamMaxLength matters too
    r = check("-o", f"clamd={c.tcp_addr},max_scan_size=100M")
    assert r.returncode == 0, r
    lines = limits_lines(r)
    assert any("StreamMaxLength 25M is below" in l for l in lines), lines
    # within clamd's limits: no warning
    r = check("-o", f"clamd={c.socket},max_scan_size=20M")
    assert r.returncode == 0, r
    assert [l for l in limits_lines(r) if "warning" in l] == [], r.stdout
    assert any("limits ok" in l for l in limits_lines(r)), r.stdout


def test_check_alert_exceeds_max_silences_skip_warning(admin, clamd_factory):
    c = clamd_factory(options={"MaxFileSize": "25M",
                               "AlertExceedsMax": "yes"})
    r = check("-o", f"clamd={c.socket},max_scan_size=100M")
    assert r.returncode == 0, r
    assert not any("MaxFileSize" in l for l in limits_lines(r)), r.stdout


def test_check_and_mount_judge_clamd_alike(admin, clamd):
    """--check and the mount take clamd's address by one rule: the
    documented unix:/abs/path form works for both; a relative socket path,
    which would change meaning once the daemon runs from "/", fails both,
    even from the directory where it would resolve."""
    from scanutil import put, try_read
    sock_dir, sock = os.path.split(clamd.socket)
    r = check("-o", f"clamd=unix:{clamd.socket}")
    assert r.returncode == 0, r
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), b"clean\n")
    m = admin.start(["-f", b, mnt, "-o", f"clamd=unix:{clamd.socket}"],
                    mnt, b)
    assert try_read(m.m("f")) == ("ok", b"clean\n")

    r = subprocess.run([clamfs_bin(), "--check", "-o", f"clamd={sock}"],
                       capture_output=True, text=True, cwd=sock_dir,
                       stdin=subprocess.DEVNULL, timeout=30 * SLOW)
    assert r.returncode == 2, r
    assert "want an absolute socket path" in r.stdout, r
    _, b2, mnt2 = admin.dirs_bm()
    r = run_fail(["-f", b2, mnt2, "-o", f"clamd={sock}"], mnt2)
    assert r.returncode == 2, r
    assert "want an absolute socket path" in r.stderr, r


# clamd drops a command whose sender has already hung up (seen on a busy
# machine: the close reached clamd with the command), so the attacker stays
# connected until clamd closes its end, as a real one would.
SHUTDOWN_AS_USER = """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(ARGS["sock"])
    s.sendall(b"nSHUTDOWN\\n")
    s.settimeout(30)
    while s.recv(256):
        pass
    emit("sent")
except OSError as e:
    emit(errno.errorcode[e.errno] if e.errno else type(e).__name__)
"""


def socket_lines(r, c):
    return [l for l in r.stdout.splitlines()
            if l.startswith(f"clamd {c.socket}: ") and "socket" in l]


def test_check_warns_when_any_user_can_stop_clamd(admin, clamd_factory):
    """Debian's LocalSocketMode 666: any local user can connect and send
    SHUTDOWN, and every open then fails. --check warns about such a socket
    and names who can connect to a 660 one (no warning then)."""
    from fsutil import UID_A, GID_A, run_as
    from clamfstest.wait import wait_for
    open_c = clamd_factory()  # the fixture's 666, as Debian ships it
    assert os.stat(open_c.socket).st_mode & 0o777 == 0o666
    r = check("-o", f"clamd={open_c.socket}")
    assert r.returncode == 0, r
    lines = socket_lines(r, open_c)
    assert len(lines) == 1 and "warning" in lines[0], r.stdout
    assert "every local user (mode 0666)" in lines[0], lines
    assert "LocalSocketMode 660" in lines[0], lines
    # the threat is real: a user stops it, even when clamd is too busy to
    # read the command before the user's whole message has arrived
    pid = open_c.proc.pid
    os.kill(pid, signal.SIGSTOP)
    wake = threading.Timer(1.0, os.kill, (pid, signal.SIGCONT))
    wake.start()
    try:
        sent = run_as(UID_A, GID_A, None, SHUTDOWN_AS_USER, "/",
                      args={"sock": open_c.socket})
    finally:
        wake.cancel()
        os.kill(pid, signal.SIGCONT)
    assert sent == "sent"
    assert wait_for(lambda: open_c.proc.poll() is not None, 30), \
        "clamd ignored a user's SHUTDOWN"

    closed = clamd_factory(options={"LocalSocketMode": "660"})
    assert os.stat(closed.socket).st_mode & 0o777 == 0o660
    r = check("-o", f"clamd={closed.socket}")
    assert r.returncode == 0, r
    lines = socket_lines(r, closed)
    assert len(lines) == 1 and "warning" not in r.stdout, r.stdout
    assert "socket mode 0660, owner root, group root: the owner and the " \
        "group's members can connect" in lines[0], lines
    assert run_as(UID_A, GID_A, None, SHUTDOWN_AS_USER, "/",
                  args={"sock": closed.socket}) == "EACCES"
    assert closed.ping()
    # TCP: no socket mode to judge
    r = check("-o", f"clamd={closed.tcp_addr}")
    assert r.returncode == 0, r
    assert not [l for l in r.stdout.splitlines() if "socket" in l], r.stdout


READ_AS_USER = """
out = {}
for name in ("clean", "e"):
    try:
        with open(P(name), "rb") as f:
            out[name] = "bytes:" + str(len(f.read()))
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
emit(out)
"""


def test_mount_scans_through_a_660_socket_for_every_user(admin,
                                                         clamd_factory):
    """deploy.md's LocalSocketMode 660: clamfs (root) still reaches clamd
    when a user who may not connect opens files through the mount."""
    from fsutil import UID_A, GID_A, run_as
    from scanutil import put
    closed = clamd_factory(options={"LocalSocketMode": "660"})
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "clean"), b"clean\n")
    put(os.path.join(b, "e"), closed.eicar)
    for n in ("clean", "e"):
        os.chmod(os.path.join(b, n), 0o644)
    admin.start(["-f", b, mnt, "-o",
                 f"allow_other,clamd={closed.socket},racy_window=0"], mnt, b)
    assert run_as(UID_A, GID_A, None, READ_AS_USER, mnt) == \
        {"clean": "bytes:6", "e": "EACCES"}


def test_check_warns_when_a_fuse_mount_is_there_already(admin, clamd):
    """--check said "mountpoint ok" over a running clamfs: a second mount
    would have stacked on it. It warns instead (exit 0: a restart onto a
    dead mount does mount there)."""
    from scanutil import put
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), b"clean\n")
    r = check("-o", f"backend={b},mountpoint={mnt},clamd={clamd.socket}")
    assert r.returncode == 0, r
    assert f"mountpoint {mnt}: ok" in r.stdout, r.stdout
    admin.start(["-f", b, mnt, "-o", f"clamd={clamd.socket}"], mnt, b)
    r = check("-o", f"backend={b},mountpoint={mnt},clamd={clamd.socket}")
    assert r.returncode == 0, r
    lines = [l for l in r.stdout.splitlines() if l.startswith("mountpoint")]
    assert lines == [f"mountpoint {mnt}: warning: fuse.clamfs is mounted "
                     f"there already; a second mount would cover it "
                     f"(clamfs --stats {mnt} tells whether it is a clamfs)"
                     ], r.stdout
