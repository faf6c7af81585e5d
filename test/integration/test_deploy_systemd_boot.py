# SPDX-License-Identifier: GPL-2.0-or-later
# The fail-closed deployment under a real systemd: the host's own root is
# booted as a container (systemd-nspawn) on a throw-away overlay, with the
# configured clamfs@.service, /etc/clamfs/share.ini protecting /srv/share
# in place against the test's clamd, and the shipped smbd drop-in
# (BindsTo=clamfs@share.service). Inside, a oneshot unit records:
#   - `systemctl start smbd` starts clamfs@share first: both active, the
#     mount in place and scanning (EICAR refused at /srv/share);
#   - `systemctl stop clamfs@share` stops smbd too, and a restart of it
#     (deploy.md's upgrade) restarts smbd after the new mount;
#   - a SIGKILLed clamfs (a crash) stops smbd too, and systemd's restart
#     takes its dead mount away and serves the share again;
#   - `systemctl start clamfs@missing` (no /etc/clamfs/missing.ini) fails
#     ("Assertion failed") instead of succeeding as a skipped condition.
# The container boots only basic.target and the recording unit, has no
# network, masks Debian's clamd and freshclam (the mount uses the test's
# clamd, bound in), and everything it writes is dropped with the overlay.
import json
import os
import shutil
import subprocess

import pytest


from clamfstest.env import SANITIZE, SLOW, clamfs_bin, SANITIZER_MARKERS
from clamfstest.mountinfo import UNSHARE_MOUNT
from test_admin_systemd import configured_unit

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NSPAWN = "/usr/bin/systemd-nspawn"

# Runs as a oneshot unit inside the container; writes /root/result.json
# and powers the container off.
SCRIPT = r"""#!/usr/bin/python3
import json, os, signal, subprocess, time
res = {}

def sh(*argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return {"rc": r.returncode, "out": (r.stdout + r.stderr)[-2000:]}

def state(*units):
    return {u: subprocess.run(["systemctl", "is-active", u],
                              capture_output=True, text=True).stdout.strip()
            for u in units}

def settle(unit, want, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end and state(unit)[unit] != want:
        time.sleep(0.1)

def main_pid(unit):
    r = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value",
                        unit], capture_output=True, text=True)
    return int(r.stdout.strip() or 0)

def fstype(path):
    r = subprocess.run(["findmnt", "-no", "FSTYPE", "--mountpoint", path],
                       capture_output=True, text=True)
    return r.stdout.strip()

def read(path):
    try:
        with open(path, "rb") as f:
            return "ok:" + f.read().decode(errors="replace")
    except OSError as e:
        return "err:%d" % e.errno

U = ("clamfs@share.service", "smbd.service")
try:
    res["start_smbd"] = sh("systemctl", "start", "smbd.service")
    res["after_start"] = state(*U)
    res["fstype"] = fstype("/srv/share")
    res["clean"] = read("/srv/share/clean.txt")
    res["eicar"] = read("/srv/share/eicar.com")
    res["stop_clamfs"] = sh("systemctl", "stop", "clamfs@share.service")
    res["after_stop"] = state(*U)
    res["fstype_after_stop"] = fstype("/srv/share")
    res["restart_smbd"] = sh("systemctl", "start", "smbd.service")
    res["after_restart"] = state(*U)
    # deploy.md's upgrade: restarting the mount restarts the server with it
    res["smbd_pid"] = main_pid("smbd.service")
    res["restart_clamfs"] = sh("systemctl", "restart", "clamfs@share.service")
    settle("smbd.service", "active")  # Type=notify: it may be on its way
    res["after_restart_clamfs"] = state(*U)
    res["smbd_pid_after"] = main_pid("smbd.service")
    res["fstype_after_restart_clamfs"] = fstype("/srv/share")
    pid = int(subprocess.run(["systemctl", "show", "-p", "MainPID", "--value",
                              "clamfs@share.service"], capture_output=True,
                             text=True).stdout.strip() or 0)
    res["pid"] = pid
    if pid:
        os.kill(pid, signal.SIGKILL)
        settle("smbd.service", "inactive")
    res["after_kill"] = state("smbd.service")
    # Restart=on-failure brings the mount back over its own dead one
    settle("clamfs@share.service", "active", timeout=60)
    time.sleep(1)
    res["after_restart_kill"] = state("clamfs@share.service")
    res["fstype_after_restart_kill"] = fstype("/srv/share")
    res["clean_after_restart_kill"] = read("/srv/share/clean.txt")
    res["eicar_after_restart_kill"] = read("/srv/share/eicar.com")
    res["start_missing"] = sh("systemctl", "start", "clamfs@missing.service")
    res["missing_state"] = state("clamfs@missing.service")
    res["clamfs_log"] = subprocess.run(
        ["journalctl", "-b", "--no-pager", "-o", "cat", "-u",
         "clamfs@share.service"], capture_output=True, text=True).stdout
except Exception as e:
    res["error"] = repr(e)
with open("/root/result.json", "w") as f:
    json.dump(res, f)
subprocess.run(["systemctl", "--no-block", "poweroff"])
"""

RUNNER = r"""set -eu
B=$1; shift
mkdir -p "$B/up" "$B/wk" "$B/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$B/up,workdir=$B/wk" "$B/root"
cp -a "$B/files/." "$B/root/"
exec timeout "$TIMEOUT" systemd-nspawn -q -D "$B/root" --register=no \
	--keep-unit --private-network --bind=/dev/fuse "$@" \
	-b systemd.unit=clamfs-test.target
"""


@pytest.fixture
def nspawn():
    if not os.access(NSPAWN, os.X_OK):
        pytest.skip("systemd-nspawn is not installed (Debian package "
                    "systemd-container, in scripts/deps)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")


def files_tree(d, clamd):
    """What the container gets on top of the host's root."""
    f = os.path.join(d, "files")
    etc = os.path.join(f, "etc")
    units = os.path.join(etc, "systemd", "system")
    os.makedirs(os.path.join(units, "smbd.service.d"))
    os.makedirs(os.path.join(etc, "clamfs"))
    configured_unit(units)
    if SANITIZE:
        # LeakSanitizer stops the threads by ptrace at exit: the unit's
        # system call filter would fail it (clamfs itself needs none)
        os.makedirs(os.path.join(units, "clamfs@.service.d"))
        with open(os.path.join(units, "clamfs@.service.d",
                               "sanitizer.conf"), "w") as u:
            u.write("[Service]\nSystemCallFilter=@debug\n")
    for unit in ("clamav-daemon.service", "clamav-freshclam.service"):
        os.symlink("/dev/null", os.path.join(units, unit))
    shutil.copy(os.path.join(SRC, "etc", "systemd", "smbd.service.d",
                             "clamfs.conf"),
                os.path.join(units, "smbd.service.d"))
    if not any(os.path.exists(os.path.join(p, "smbd.service"))
               for p in ("/lib/systemd/system", "/usr/lib/systemd/system",
                         "/etc/systemd/system")):
        with open(os.path.join(units, "smbd.service"), "w") as u:
            u.write("[Unit]\nDescription=stand-in for smbd\n"
                    "[Service]\nExecStart=/bin/sleep infinity\n")
    with open(os.path.join(etc, "clamfs", "share.ini"), "w") as u:
        u.write("[fuse]\nbackend = /srv/share\nmountpoint = /srv/share\n"
                "options = allow_other\n"
                f"[clamd]\nclamd = {clamd.socket}\n")
    share = os.path.join(f, "srv", "share")
    os.makedirs(share)
    with open(os.path.join(share, "clean.txt"), "w") as u:
        u.write("clean\n")
    with open(os.path.join(share, "eicar.com"), "wb") as u:
        u.write(clamd.eicar)
    script = os.path.join(f, "usr", "local", "libexec", "clamfs-test")
    os.makedirs(os.path.dirname(script))
    with open(script, "w") as u:
        u.write(SCRIPT)
    os.chmod(script, 0o755)
    # boot nothing but basic.target and the recording unit
    with open(os.path.join(units, "clamfs-test.target"), "w") as u:
        u.write("[Unit]\nRequires=basic.target clamfs-test.service\n"
                "After=basic.target\nAllowIsolate=yes\n")
    with open(os.path.join(units, "clamfs-test.service"), "w") as u:
        u.write("[Unit]\nAfter=basic.target\n[Service]\nType=oneshot\n"
                "ExecStart=/usr/local/libexec/clamfs-test\n")


def test_share_is_never_served_unprotected(admin, clamd, nspawn):
    d = admin.tempdir("clamfs-boot")
    files_tree(d, clamd)
    build = os.path.dirname(os.path.realpath(clamfs_bin()))
    binds = [f"--bind={clamd.workdir}", f"--bind-ro={build}"]
    r = subprocess.run([*UNSHARE_MOUNT,
                        "sh", "-c", RUNNER, "runner", d] + binds,
                       capture_output=True, text=True,
                       env=dict(os.environ, TIMEOUT=str(int(240 * SLOW))),
                       timeout=300 * SLOW)
    boot = r.stdout[-4000:] + r.stderr[-4000:]
    result = os.path.join(d, "up", "root", "result.json")
    assert os.path.exists(result), f"nothing recorded:\n{boot}"
    with open(result) as f:
        res = json.load(f)
    assert "error" not in res, res
    why = json.dumps(res, indent=1)
    # smbd pulls the mount in, and the mount scans
    assert res["start_smbd"]["rc"] == 0, why
    assert res["after_start"] == {"clamfs@share.service": "active",
                                  "smbd.service": "active"}, why
    assert res["fstype"] == "fuse.clamfs", why
    assert res["clean"] == "ok:clean\n", why
    assert res["eicar"] == "err:13", why  # EACCES
    # stopping the mount stops the server
    assert res["stop_clamfs"]["rc"] == 0, why
    assert res["after_stop"]["smbd.service"] == "inactive", why
    assert res["fstype_after_stop"] == "", why
    assert res["restart_smbd"]["rc"] == 0, why
    assert res["after_restart"] == res["after_start"], why
    # restarting the mount (an upgrade) restarts the server bound to it
    assert res["restart_clamfs"]["rc"] == 0, why
    assert res["after_restart_clamfs"] == res["after_start"], why
    assert res["fstype_after_restart_clamfs"] == "fuse.clamfs", why
    assert 0 < res["smbd_pid"] != res["smbd_pid_after"] > 0, why
    # a crash of the daemon stops the server
    assert res["pid"] > 0, why
    assert res["after_kill"] == {"smbd.service": "inactive"}, why
    # and the restart takes the dead mount away and serves again
    assert res["after_restart_kill"] == {"clamfs@share.service": "active"}, \
        why
    assert res["fstype_after_restart_kill"] == "fuse.clamfs", why
    assert res["clean_after_restart_kill"] == "ok:clean\n", why
    assert res["eicar_after_restart_kill"] == "err:13", why
    assert "removed the dead mount" in res["clamfs_log"], why
    # a missing configuration is a failed start, not a skipped one (a
    # Condition would let `systemctl start` succeed with nothing mounted)
    assert res["start_missing"]["rc"] != 0, why
    assert "Assertion failed" in res["start_missing"]["out"], why
    assert res["missing_state"] != {"clamfs@missing.service": "active"}, why
    # the daemon logged its mount and the detection, and no sanitizer report
    log = res["clamfs_log"]
    assert 'infected path="eicar.com"' in log, log
    assert not [m for m in SANITIZER_MARKERS if m in log], log
