# SPDX-License-Identifier: GPL-2.0-or-later
# Running under systemd: the template unit etc/clamfs@.service.in,
# configured for this build, passes `systemd-analyze verify` as an instance
# and fails closed (AssertPathExists, a synchronous `clamfs --reload`); the
# shipped drop-ins etc/systemd/{smbd,nfs-server}.service.d/clamfs.conf
# verify on the server units and bind them to clamfs@share; the in-place
# line of etc/fstab.example, run through systemd's own fstab generator,
# orders the mount before smbd and makes smbd require it;
# Type=notify readiness is real: READY=1 reaches NOTIFY_SOCKET from the
# daemon's pid only once the mount is in mountinfo, SIGHUP sends
# RELOADING=1 then READY=1, SIGTERM sends STOPPING=1, unmounts and exits 0;
# and clamd_wait holds the mount back until clamd answers (bounded): with a
# clamd that starts 2 s late the mount comes up after it and scans, with
# none at all it comes up after the wait and fails closed (EIO).
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from clamfstest.mountinfo import mounted
from adminutil import NotifyListener, wait_log
from clamfstest.env import SLOW, clamfs_bin
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
    # as a /usr (package) build configures it
    text = text.replace("@CLAMFS_CONFDIR@", "/etc/clamfs")
    assert not re.search(r"@[A-Z_]+@", text), "an unconfigured @VAR@ is left"
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
    wants, after = keys["Wants"][0].split(), keys["After"][0].split()
    for dep in ("clamav-daemon.service", "network-online.target"):
        assert dep in after, dep
    # a remote clamd's site gets no local clamd started for it
    assert wants == ["network-online.target"], wants
    # the share's server is ordered by its own drop-in, not by every mount
    assert "Before" not in keys, keys.get("Before")
    assert keys["Restart"] == ["on-failure"]
    assert "-f" in keys["ExecStart"][0].split()
    # only the file: an option here would override its keys silently
    assert keys["ExecStart"][0].split()[1:] == [
        "-f", "-o", "config=/etc/clamfs/%i.ini"], keys["ExecStart"]
    assert keys["OOMScoreAdjust"] == ["-500"]
    assert keys["DevicePolicy"] == ["closed"]
    assert "/dev/fuse rw" in keys["DeviceAllow"]
    assert keys["SystemCallErrorNumber"] == ["EPERM"]
    # a missing configuration fails the start instead of skipping it
    assert keys["AssertPathExists"] == ["/etc/clamfs/%i.ini"]
    assert "ConditionPathExists" not in keys
    # reload waits for the daemon's answer (no bare kill -HUP)
    assert keys["ExecReload"][0].split()[1:] == ["--reload", "$MAINPID"]
    assert keys["ExecReload"][0].split()[0].endswith("/clamfs")
    assert keys["LimitNOFILE"] == ["524288"]
    # the hardening a root FUSE daemon can have: 6.5 before the
    # device policy, system call filter, hostname and clock protection
    r = subprocess.run(["systemd-analyze", "security", "--offline=true",
                        "--no-pager", inst], capture_output=True, text=True,
                       timeout=120 * SLOW, cwd=d)
    level = re.search(r"Overall exposure level for clamfs@test\.service: "
                      r"(\d+\.\d)", r.stdout)
    assert level, r.stdout + r.stderr
    assert float(level.group(1)) <= 5.0, r.stdout
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
        # late: once the daemon waits for it
        wait_log(m, "waiting up to 5 s for clamd", timeout=10)
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


def unit_keys(path):
    keys = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                keys.setdefault((section, k.strip()), []).extend(v.split())
    return keys


def unit_file(name):
    for d in ("/etc/systemd/system", "/usr/lib/systemd/system",
              "/lib/systemd/system"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


def verify(directory, unit):
    """`systemd-analyze verify UNIT` with DIRECTORY searched before the
    system's unit directories (drop-ins there apply to system units);
    returns the lines that name a file of DIRECTORY."""
    env = dict(os.environ, SYSTEMD_UNIT_PATH=directory + ":")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", unit],
                       capture_output=True, text=True, env=env, cwd=directory,
                       timeout=120 * SLOW)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    return out, [l for l in out.splitlines() if directory in l]


@pytest.mark.parametrize("server", ["smbd", "nfs-server"])
def test_server_dropin_binds_to_mount(admin, server):
    """The shipped drop-in makes the file server need clamfs@share: the
    server is not started without the mount and is stopped with it. The
    real smbd.service is used when Samba is installed; nfs-kernel-server is
    not a dependency, so its unit may be a stand-in."""
    d = admin.tempdir()
    configured_unit(d)
    dropin = os.path.join(SRC, "etc", "systemd", f"{server}.service.d",
                          "clamfs.conf")
    os.mkdir(os.path.join(d, f"{server}.service.d"))
    shutil.copy(dropin, os.path.join(d, f"{server}.service.d"))
    if not unit_file(f"{server}.service"):
        with open(os.path.join(d, f"{server}.service"), "w") as f:
            f.write(f"[Unit]\nDescription=stand-in for {server}\n"
                    "[Service]\nExecStart=/bin/true\n")
    out, ours = verify(d, f"{server}.service")
    assert ours == [], out
    keys = unit_keys(dropin)
    assert keys[("Unit", "BindsTo")] == ["clamfs@share.service"]
    assert keys[("Unit", "After")] == ["clamfs@share.service"]
    assert set(k for k, _ in keys) == {"Unit"}
    # the drop-in is really read from there: a typo in it is reported
    bad = os.path.join(d, f"{server}.service.d", "typo.conf")
    with open(bad, "w") as f:
        f.write("[Unit]\nBindsTo_=clamfs@share.service\n")
    out, ours = verify(d, f"{server}.service")
    assert any("typo.conf" in l and "BindsTo_" in l for l in ours), out


def fstab_generator():
    for d in ("/usr/lib/systemd/system-generators",
              "/lib/systemd/system-generators"):
        g = os.path.join(d, "systemd-fstab-generator")
        if os.path.exists(g):
            return g
    pytest.fail("systemd-fstab-generator not found")


def test_fstab_example_orders_and_requires(admin):
    """systemd's fstab generator, fed the example's lines, makes the
    in-place mount come before smbd and smbd require it."""
    d = admin.tempdir()
    fstab = os.path.join(d, "fstab")
    with open(os.path.join(SRC, "etc", "fstab.example")) as f:
        lines = [l for l in f if l.strip() and not l.startswith("#")]
    assert lines
    with open(fstab, "w") as f:
        f.writelines(lines)
    out = os.path.join(d, "out")
    os.mkdir(out)
    r = subprocess.run([fstab_generator(), out, out, out], capture_output=True,
                       text=True, timeout=60 * SLOW,
                       env=dict(os.environ, SYSTEMD_FSTAB=fstab,
                                SYSTEMD_LOG_LEVEL="info"))
    assert r.returncode == 0, r.stdout + r.stderr
    keys = unit_keys(os.path.join(out, "srv-share.mount"))
    assert "smbd.service" in keys[("Unit", "Before")]
    assert "clamav-daemon.service" in keys[("Unit", "Requires")]
    assert keys[("Mount", "Type")] == ["fuse.clamfs"]
    link = os.path.join(out, "smbd.service.requires", "srv-share.mount")
    assert os.path.islink(link), sorted(os.listdir(out))
    # the generated units verify (their directory first on the unit path);
    # the example requires Debian's clamd unit, which a host that never
    # installed clamav-daemon lacks: an empty one stands in for it there
    if not unit_file("clamav-daemon.service"):
        with open(os.path.join(out, "clamav-daemon.service"), "w") as f:
            f.write("# stands in for Debian's clamav-daemon.service\n"
                    "[Service]\nExecStart=/bin/true\n")
    for unit in ("srv-share.mount", "mnt-uploads.mount"):
        text, _ = verify(out, unit)
        assert not [l for l in text.splitlines() if unit in l], text
