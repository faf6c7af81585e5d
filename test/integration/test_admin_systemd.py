# SPDX-License-Identifier: GPL-2.0-or-later
# Running under systemd: the template unit etc/clamfs@.service.in,
# configured for this build, passes `systemd-analyze verify` as an instance;
# Type=notify readiness is real: READY=1 reaches NOTIFY_SOCKET from the
# daemon's pid only once the mount is in mountinfo, SIGHUP sends
# RELOADING=1 then READY=1, SIGTERM sends STOPPING=1, unmounts and exits 0;
# and clamd_wait holds the mount back until clamd answers (bounded): with a
# clamd that starts 2 s late the mount comes up after it and scans, with
# none at all it comes up after the wait and fails closed (EIO).
import os
import re
import signal
import subprocess
import threading
import time

from adminutil import NotifyListener, admin, mounted, wait_log  # noqa: F401
from fsutil import SLOW
from mount_fixture import clamfs_bin
from scanutil import put, scan_failures, try_read

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UNIT_IN = os.path.join(SRC, "etc", "clamfs@.service.in")
CLEAN = b"clean\n"


def configured_unit(directory):
    sbindir = os.path.dirname(os.path.realpath(clamfs_bin()))
    with open(UNIT_IN) as f:
        text = f.read()
    assert "@CMAKE_INSTALL_FULL_SBINDIR@" in text
    text = text.replace("@CMAKE_INSTALL_FULL_SBINDIR@", sbindir)
    assert "@" not in re.sub(r"clamfs@|%i|\S+@\S+\.\w+", "", text), \
        "an unconfigured @VAR@ is left"
    path = os.path.join(directory, "clamfs@.service")
    with open(path, "w") as f:
        f.write(text)
    return path, text


def test_unit_verifies(admin):
    d = admin.tempdir()
    path, text = configured_unit(d)
    inst = os.path.join(d, "clamfs@test.service")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", inst],
                       capture_output=True, text=True, timeout=120 * SLOW,
                       cwd=d)
    ours = [l for l in (r.stdout + r.stderr).splitlines() if "clamfs@" in l]
    assert r.returncode == 0, r.stdout + r.stderr
    assert ours == [], "\n".join(ours)
    # what the issue asks of it
    keys = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
    assert keys["Type"] == ["notify"]
    assert "clamav-daemon.service" in keys["Wants"][0]
    assert "clamav-daemon.service" in keys["After"][0]
    assert keys["Restart"] == ["on-failure"]
    assert "-f" in keys["ExecStart"][0].split()
    assert "config=/etc/clamfs/%i.ini" in keys["ExecStart"][0]
    assert "clamd_wait=" in keys["ExecStart"][0]
    assert keys["ExecReload"][0].endswith("-HUP $MAINPID")
    # hardening that would hide the mount in a private namespace is absent
    for bad in ("PrivateTmp", "ProtectSystem", "ProtectHome", "PrivateDevices",
                "PrivateMounts", "ProtectKernelModules", "TemporaryFileSystem"):
        assert bad not in keys, bad


def test_notify_ready_reload_stopping(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), CLEAN)
    with NotifyListener(base, watch_mnt=mnt) as n:
        m = admin.start(["-f", b, mnt, "-o",
                         f"allow_other,clamd={clamd.socket}"], mnt, b,
                        env_extra={"NOTIFY_SOCKET": n.path})
        ready = n.wait_field("READY=1")
        assert ready, ("no READY=1 datagram; is libsystemd linked? "
                       + subprocess.run(["ldd", clamfs_bin()],
                                        capture_output=True,
                                        text=True).stdout)
        assert len(ready) == 1, n.messages
        assert ready[0]["up"] is True, "READY=1 before the mount was up"
        assert ready[0]["pid"] == m.pid, "not sent by the main pid"
        assert try_read(m.m("f")) == ("ok", CLEAN)
        # reload: RELOADING=1, then READY=1 again
        os.kill(m.pid, signal.SIGHUP)
        assert n.wait_field("RELOADING=1"), n.messages
        assert len(n.wait_field("READY=1", count=2)) == 2, n.messages
        texts = [x["text"] for x in n.messages]
        i_rel = next(i for i, t in enumerate(texts) if "RELOADING=1" in t)
        assert any("READY=1" in t for t in texts[i_rel:]), texts
        assert not n.with_field("STOPPING=1")
        # SIGTERM: STOPPING=1, unmounted, exit 0
        os.kill(m.pid, signal.SIGTERM)
        rc = m.proc.wait(20 * SLOW)
        stopping = n.wait_field("STOPPING=1", timeout=2)
        assert rc == 0, m.stderr_text()
        assert len(stopping) == 1, n.messages
        assert stopping[0]["pid"] == m.pid
        assert not mounted(mnt)
        assert n.messages[-1] is stopping[0], "a datagram after STOPPING=1"


def test_no_notify_socket_is_fine(admin, clamd):
    """Without NOTIFY_SOCKET (and with a dead one) the daemon runs as
    before."""
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), CLEAN)
    m = admin.start(["-f", b, mnt, "-o", f"clamd={clamd.socket}"], mnt, b,
                    env_extra={"NOTIFY_SOCKET": os.path.join(base, "gone")})
    assert try_read(m.m("f")) == ("ok", CLEAN)


def test_clamd_wait_for_late_clamd(admin, clamd_factory):
    c = clamd_factory(start=False)
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), CLEAN)
    put(os.path.join(b, "e"), c.eicar)
    started = {}

    def late_start():
        time.sleep(2)
        started["begin"] = time.monotonic()
        c.start()
        started["up"] = time.monotonic()

    t = threading.Thread(target=late_start)
    with NotifyListener(base, watch_mnt=mnt) as n:
        m = admin.start(["-f", b, mnt, "-o",
                         f"allow_other,clamd={c.socket},clamd_wait=5"],
                        mnt, b, wait=False,
                        env_extra={"NOTIFY_SOCKET": n.path})
        t.start()
        admin.wait_mounted(m, timeout=15)
        t.join(60)
        assert "up" in started, "clamd did not start"
        assert m.t_mounted >= started["begin"], \
            f"mounted {started['begin'] - m.t_mounted:.2f}s before clamd " \
            f"was even started:\n{m.stderr_text()}"
        assert m.t_mounted - m.t_launch < 5 + 1 * SLOW, \
            "the wait did not end when clamd answered"
        ready = n.wait_field("READY=1")
        assert len(ready) == 1 and ready[0]["up"], n.messages
        assert ready[0]["t"] >= started["begin"]
    assert wait_log(m, "waiting up to 5 s for clamd"), m.stderr_text()
    assert wait_log(m, "clamd answers"), m.stderr_text()
    assert not wait_log(m, "still not answering", timeout=0), m.stderr_text()
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("e")) == ("err", "EACCES")


def test_clamd_wait_gives_up_and_fails_closed(admin):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), CLEAN)
    dead = os.path.join(base, "clamd.sock")  # nothing ever listens
    with NotifyListener(base, watch_mnt=mnt) as n:
        m = admin.start(["-f", b, mnt, "-o", f"clamd={dead},clamd_wait=2"],
                        mnt, b, wait=False,
                        env_extra={"NOTIFY_SOCKET": n.path})
        admin.wait_mounted(m, timeout=15)
        waited = m.t_mounted - m.t_launch
        assert waited >= 1.9, f"mounted after {waited:.2f}s, before the wait"
        assert waited < 2 + 3 * SLOW, f"mounted only after {waited:.2f}s"
        ready = n.wait_field("READY=1")
        assert len(ready) == 1 and ready[0]["up"], n.messages
    assert try_read(m.m("f")) == ("err", "EIO")
    assert scan_failures(m), m.stderr_text()
    said = wait_log(m, "waiting up to 2 s for clamd")
    assert len(said) == 1, m.stderr_text()
    gave_up = wait_log(m, "still not answering after 2 s")
    assert len(gave_up) == 1, m.stderr_text()


def test_sigterm_during_clamd_wait(admin):
    """`systemctl stop` while clamfs waits for clamd (the unit waits up to
    120 s, TimeoutStopSec is 30): SIGTERM ends the wait at once, nothing is
    mounted, and the stop is clean."""
    base, b, mnt = admin.dirs_bm()
    dead = os.path.join(base, "clamd.sock")
    m = admin.start(["-f", b, mnt, "-o", f"clamd={dead},clamd_wait=5"],
                    mnt, b, wait=False)
    assert wait_log(m, "waiting up to 5 s for clamd"), m.stderr_text()
    t0 = time.monotonic()
    os.kill(m.pid, signal.SIGTERM)
    try:
        rc = m.proc.wait(2 * SLOW)
    except subprocess.TimeoutExpired:
        rc = m.proc.wait(30)
        raise AssertionError(
            f"SIGTERM during clamd_wait took {time.monotonic() - t0:.1f}s "
            f"(exit {rc}):\n{m.stderr_text()}")
    assert rc in (0, -signal.SIGTERM), (rc, m.stderr_text())
    assert not mounted(mnt)
    assert not [l for l in m.stderr_text().splitlines() if "mounted " in l], \
        f"mounted after SIGTERM:\n{m.stderr_text()}"
