# SPDX-License-Identifier: GPL-2.0-or-later
# Acting as the requester must never hand the requester power over the
# daemon: the kernel lets a process signal any thread whose real uid is its
# own, so a worker thread that took a caller's real uid, even for one
# syscall, could be stopped (mount hangs) or killed (mount dies) by that
# caller. An unprivileged user drives every code path that switches
# identity while probing every daemon thread with tgkill(sig 0), which the
# kernel permits exactly when a real SIGSTOP would be delivered.
#
# Also: a request whose supplementary groups cannot be read is refused,
# not judged without them (mode 0604 grants others what it denies the
# group).
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from clamfstest.env import SLOW, clamfs_bin
from fsutil import GID_A, GID_SHARED, UID_A, run_as, setpriv_prefix
from clamfstest.mountinfo import fuse_mounts_at
from scanutil import SlowClamd, mount_scan

PROBE = """
import ctypes, json, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_tgkill = 234
pid = ARGS["pid"]
stop = time.monotonic() + ARGS["seconds"]

def drive():
    import subprocess
    ops = {"access": 0, "exec": 0, "setid": 0}
    while time.monotonic() < stop:
        for _ in range(20):
            os.access(P("f"), os.R_OK)
            os.access(P("f"), os.W_OK | os.X_OK)
            ops["access"] += 1
        subprocess.run([P("xonly")], check=True)
        ops["exec"] += 1
        # a write by a non-owner makes the kernel clear set-id bits
        fd = os.open(P("setid"), os.O_WRONLY)
        os.write(fd, b"x")
        os.close(fd)
        ops["setid"] += 1
    return ops

drivers = []
for _ in range(2):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.write(w, json.dumps(drive()).encode())
        os._exit(0)
    os.close(w)
    drivers.append((child, r))
hits = 0
probes = 0
while time.monotonic() < stop:
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        break
    for tid in tids:
        probes += 1
        if libc.syscall(SYS_tgkill, pid, tid, 0) == 0:
            hits += 1
total = {"hits": hits, "probes": probes, "access": 0, "exec": 0, "setid": 0}
for child, r in drivers:
    _, status = os.waitpid(child, 0)
    out = os.read(r, 4096)
    assert status == 0 and out, status
    for k, v in json.loads(out).items():
        total[k] += v
emit(total)
"""


def arm(m):
    """Files for each identity-switching path, as root, in the backend."""
    with open(m.b("f"), "wb") as f:
        f.write(b"data")
    os.chmod(m.b("f"), 0o644)
    shutil.copy("/bin/true", m.b("xonly"))
    os.chmod(m.b("xonly"), 0o711)
    with open(m.b("setid"), "wb") as f:
        f.write(b"")


@pytest.mark.parametrize("perm", ["default_permissions",
                                  "no_default_permissions"])
def test_caller_cannot_signal_daemon_threads(mount_clamfs, clamd, perm):
    opts = ["no_default_permissions"] if perm != "default_permissions" else []
    m = mount_scan(mount_clamfs, clamd, *opts)
    arm(m)
    seconds = 10
    r = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # the set-id bits come back for each round of writes
        os.chmod(m.b("setid"), 0o6666)
        r = run_as(UID_A, GID_A, [], PROBE, m.mnt,
                   args={"pid": m.pid, "seconds": 2},
                   timeout=60)
        assert r["hits"] == 0, r
        assert r["access"] > 0 and r["exec"] > 0 and r["setid"] > 0, r
    assert m.alive()
    assert os.path.ismount(m.mnt)


GROUP_READ = """
def rd(p):
    with open(p, "rb") as f:
        return f.read().decode()
emit({"read": outcome(rd, P("g")), "stat": outcome(lambda: os.stat(P("g")).st_mode)})
"""


def test_unknown_groups_refuse_not_widen(mount_clamfs, clamd):
    # A daemon in its own PID namespace sees every outside caller as pid 0:
    # it cannot read the caller's supplementary groups. The file is 0604
    # with the caller's supplementary group: natively the group bits deny.
    tmp_path = pathlib.Path(mount_clamfs.tempdir("clamfs-g"))
    backend = tmp_path / "b"
    mnt = tmp_path / "m"
    backend.mkdir()
    mnt.mkdir()
    g = backend / "g"
    g.write_bytes(b"secret")
    os.chown(g, 0, GID_SHARED)
    os.chmod(g, 0o604)
    err = open(tmp_path / "stderr", "wb")
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", clamfs_bin(), "-f",
         str(backend), str(mnt), "-o",
         "allow_other,no_default_permissions,clamd=" + clamd.socket],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 10 * SLOW
        while not fuse_mounts_at(str(mnt)):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        r = run_as(UID_A, GID_A, [GID_SHARED], GROUP_READ, str(mnt))
        assert r["read"][0] == "err" and r["read"][1] == "EACCES", r
        text = (tmp_path / "stderr").read_text()
        assert "supplementary groups of pid=0" in text, text
        # natively, the same caller is refused by the group bits too
        r = run_as(UID_A, GID_A, [GID_SHARED], GROUP_READ, str(backend))
        assert r["read"][0] == "err" and r["read"][1] == "EACCES", r
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)],
                       stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.close()


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_RDWR])
def test_clamd_gets_a_read_only_descriptor(mount_clamfs, flags):
    # clamd is handed the file to read: never a descriptor it could write
    # through, even for an O_RDWR opener
    with SlowClamd(hang=False) as fake:
        m = mount_scan(mount_clamfs, fake.socket, "scan_mode=fdpass")
        with open(m.b("f"), "wb") as f:
            f.write(b"some content")
        fd = os.open(m.m("f"), flags)
        os.close(fd)
        got = [fl & os.O_ACCMODE for fl in fake.fake.fildes_flags]
        assert got == [os.O_RDONLY], got


def test_non_root_shared_mount_warns(mount_clamfs):
    # run by a user, clamfs cannot act as each caller: it says so (whether
    # or not the mount then succeeds; here /dev/fuse refuses the user)
    base = mount_clamfs.tempdir("clamfs-nr")
    b, mnt = os.path.join(base, "b"), os.path.join(base, "m")
    for d in (b, mnt):
        os.mkdir(d)
        os.chown(d, UID_A, GID_A)
    r = subprocess.run(setpriv_prefix(UID_A, GID_A) + [
        clamfs_bin(), "-f", b, mnt, "-o",
        "allow_other,clamd=" + os.path.join(base, "none.sock")],
        capture_output=True, text=True, timeout=20 * SLOW)
    subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    assert f"not running as root: every request through this " \
           f"allow_other mount is carried out with uid {UID_A}'s rights" \
        in r.stderr, r.stderr
