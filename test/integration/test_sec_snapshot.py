# SPDX-License-Identifier: GPL-2.0-or-later
# A file's identity that a snapshot can fake (issue 36, item 1). On btrfs
# every subvolume has an anonymous device number, freed when the
# subvolume is removed and given to the next subvolume or snapshot, and a
# snapshot keeps inode numbers, sizes and every timestamp. An attacker
# who owns a directory on a btrfs backend makes two subvolumes A and B
# with a clean file in A and EICAR in B, of one size, inode number and
# stamp; once the victim has read A's file through the mount, the
# attacker removes A and snapshots B until a snapshot gets A's old device
# number. The victim's read of the snapshot's file must be scanned and
# refused, not served from the verdict A's file earned. Everything the
# attacker does is as an ordinary user on the backend (btrfs's ioctls do
# not pass through the mount).
import os
import shutil
import subprocess

import pytest

from clamfstest.wait import wait_for
from fsutil import GID_A, GID_B, UID_A, UID_B, run_as
from scanutil import mount_scan, stats
from test_verdict_store import mount_store, store_dir

# Makes subvolumes A and B in ROOT and, in each, files t0, t1, ... written
# back to back, until a pair has one inode number, size, mtime and ctime
# (both written within one timestamp tick, stat only afterwards); emits
# that pair's name and the stamp.
ATTACKER_SETUP = """
import subprocess
for v in ("A", "B"):
    subprocess.run(["btrfs", "subvolume", "create", P(v)], check=True,
                   capture_output=True)
clean = bytes.fromhex(ARGS["clean"])
eicar = bytes.fromhex(ARGS["eicar"])
found = None
for i in range(200):
    name = "t%d" % i
    fds = [os.open(P(v + "/" + name), os.O_WRONLY | os.O_CREAT, 0o644)
           for v in ("A", "B")]
    os.write(fds[0], clean)
    os.write(fds[1], eicar)
    for fd in fds:
        os.close(fd)
    a, b = os.stat(P("A/" + name)), os.stat(P("B/" + name))
    if (a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == \\
            (b.st_ino, b.st_size, b.st_mtime_ns, b.st_ctime_ns):
        found = name
        break
emit({"name": found, "dev_a": os.stat(P("A")).st_dev})
"""

# Empties A and removes it (its owner may: an empty subvolume goes with
# rmdir), keeping nothing open in it.
ATTACKER_REMOVE_A = """
for n in os.listdir(P("A")):
    os.unlink(P("A/" + n))
os.rmdir(P("A"))
emit(True)
"""

# One more snapshot of B; emits its name and device number.
ATTACKER_SNAPSHOT = """
name = "S%d" % ARGS["k"]
subprocess = __import__("subprocess")
subprocess.run(["btrfs", "subvolume", "snapshot", P("B"), P(name)],
               check=True, capture_output=True)
emit({"name": name, "dev": os.stat(P(name)).st_dev})
"""

VICTIM_READ = """
try:
    with open(P(ARGS["path"]), "rb") as f:
        emit({"ok": f.read().hex()})
except OSError as e:
    emit({"err": e.errno})
"""


@pytest.fixture
def btrfs_backend(mount_clamfs):
    """A btrfs filesystem on a loop image, its `share` the attacker's."""
    if not shutil.which("mkfs.btrfs") or not shutil.which("btrfs"):
        pytest.fail("btrfs-progs is missing: scripts/deps")
    base = mount_clamfs.tempdir("clamfs-btrfs")
    img, root = os.path.join(base, "img"), os.path.join(base, "b")
    os.mkdir(root)
    with open(img, "wb") as f:
        f.truncate(300 << 20)
    subprocess.run(["mkfs.btrfs", "-q", img], check=True,
                   capture_output=True)
    subprocess.run(["mount", "-o", "loop", img, root], check=True)
    try:
        os.chmod(root, 0o755)
        os.mkdir(os.path.join(root, "share"), 0o755)
        os.chown(os.path.join(root, "share"), UID_A, GID_A)
        yield root
    finally:
        subprocess.run(["umount", "-l", root], check=False)


def drop_kernel_caches():
    """The kernel's dentries and inodes go, and with the mount's the
    daemon's hold on the removed subvolume's files (FORGET)."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def snapshot_onto(share, dev):
    """Snapshots B until a snapshot gets device number dev; its name."""
    for k in range(60):
        drop_kernel_caches()
        s = run_as(UID_A, GID_A, [], ATTACKER_SNAPSHOT, share,
                   args={"k": k})
        if s["dev"] == dev:
            return s["name"]
    return None


@pytest.mark.parametrize("kept_in", ["cache", "store"])
def test_snapshot_taking_a_removed_subvolumes_device(mount_clamfs, clamd,
                                                       btrfs_backend,
                                                       kept_in):
    """kept_in: the clean verdict the snapshot's file would be taken for
    is in the verdict cache of the running mount, or in the verdict store
    of a mount restarted after the swap."""
    share = os.path.join(btrfs_backend, "share")
    if kept_in == "store":
        store = store_dir(mount_clamfs)
        m = mount_store(mount_clamfs, clamd, store, backend=btrfs_backend)
    else:
        m = mount_scan(mount_clamfs, clamd, backend=btrfs_backend)
    clean = b"C" * len(clamd.eicar)
    made = run_as(UID_A, GID_A, [], ATTACKER_SETUP, share,
                  args={"clean": clean.hex(), "eicar": clamd.eicar.hex()},
                  timeout=120)
    name = made["name"]
    assert name, "no pair of files with one stamp: the test proves nothing"
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt,
               args={"path": "share/A/" + name})
    assert r == {"ok": clean.hex()}
    # A's verdict is kept: the attack has something to impersonate
    hits = stats(m.mnt)["cache_hits"]
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt,
               args={"path": "share/A/" + name})
    assert r == {"ok": clean.hex()}
    assert stats(m.mnt)["cache_hits"] == hits + 1, stats(m.mnt)
    if kept_in == "store":
        assert wait_for(lambda: stats(m.mnt)["store_writes"] >= 1, 10), \
            stats(m.mnt)
        problems = m.teardown()
        assert not problems, problems
    run_as(UID_A, GID_A, [], ATTACKER_REMOVE_A, share)
    snap = snapshot_onto(share, made["dev_a"])
    assert snap, "no snapshot got the removed subvolume's device number: " \
        "the test proves nothing"
    st = os.stat(os.path.join(share, snap, name))
    assert st.st_dev == made["dev_a"]
    if kept_in == "store":
        m = mount_store(mount_clamfs, clamd, store, backend=btrfs_backend,
                        mnt=m.mnt)
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt,
               args={"path": "share/%s/%s" % (snap, name)})
    assert r == {"err": 13}, \
        "EICAR served from the verdict of the file the snapshot impersonates"
