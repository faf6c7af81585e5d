# SPDX-License-Identifier: GPL-2.0-or-later
# scan_on_close follows the same rules as the open-time gate: include and
# exclude globs (on the file's proven only name) and exempt users and
# groups (judged by the file's owner: a release carries no caller), so
# on_infected=delete|quarantine never removes a file the policy exempts.
# The close scan reads the file as its owner, not as root.
import os

from fsutil import GID_A, GID_B, UID_A, UID_B, run_as
from scanutil import mount_scan, released, stats, try_read, wait_for


WRITE_AS = """
fd = os.open(P(ARGS["name"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
             ARGS["mode"])
os.write(fd, bytes.fromhex(ARGS["data"]))
os.close(fd)
emit("written")
"""


def upload(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.close(fd)


def settle(m, n):
    """Waits until n close scans were made and every release has come
    (each one that asks for a close scan asks before its file is let go),
    so that any more would be counted."""
    assert wait_for(lambda: stats(m.mnt)["close_scans"] >= n, 5)
    released(m)
    return stats(m.mnt)["close_scans"]


def test_close_scan_respects_exclude(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "scan_on_close", "on_infected=delete",
                   "exclude=keep/**")
    os.mkdir(m.m("keep"))
    upload(m.m("keep", "x"), clamd.eicar)
    upload(m.m("scanned"), clamd.eicar)
    assert wait_for(lambda: not os.path.lexists(m.b("scanned")), 5)
    assert settle(m, 1) == 1
    # the excluded file stays, and is still served (excluded at open too)
    assert os.path.exists(m.b("keep", "x"))
    assert try_read(m.m("keep", "x")) == ("ok", clamd.eicar)
    s = stats(m.mnt)
    assert s["deleted"] == 1, s


def test_close_scan_respects_include(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "scan_on_close", "on_infected=delete",
                   "include=*.exe")
    upload(m.m("a.txt"), clamd.eicar)
    upload(m.m("b.EXE"), clamd.eicar)
    assert wait_for(lambda: not os.path.lexists(m.b("b.EXE")), 5)
    assert settle(m, 1) == 1
    assert os.path.exists(m.b("a.txt"))


def test_close_scan_unprovable_name_is_scanned(mount_clamfs, clamd):
    # written under an excluded name, given a second name, the first one
    # removed before the close: the close scan may not trust the stale name
    m = mount_scan(mount_clamfs, clamd, "scan_on_close", "exclude=keep/**")
    os.mkdir(m.m("keep"))
    fd = os.open(m.m("keep", "y"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, clamd.eicar)
    os.link(m.m("keep", "y"), m.m("y"))
    os.unlink(m.m("keep", "y"))
    os.close(fd)
    assert settle(m, 1) == 1
    assert try_read(m.m("y")) == ("err", "EACCES")


def test_close_scan_respects_exempt_owner(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "scan_on_close", "on_infected=delete",
                   f"exempt_uid={UID_A}")
    os.chmod(m.b(), 0o1777)
    for uid, gid, name in ((UID_A, GID_A, "by_a"), (UID_B, GID_B, "by_b")):
        r = run_as(uid, gid, [], WRITE_AS, m.mnt,
                   args={"name": name, "mode": 0o644,
                         "data": clamd.eicar.hex()})
        assert r == "written"
    assert wait_for(lambda: not os.path.lexists(m.b("by_b")), 5)
    assert settle(m, 1) == 1
    assert os.path.exists(m.b("by_a"))


def test_close_scan_reads_as_owner(mount_clamfs, clamd):
    # an upload its owner cannot read is not read by the daemon as root
    # either; the open-time gate still scans it for any reader
    m = mount_scan(mount_clamfs, clamd, "scan_on_close", "on_infected=delete")
    os.chmod(m.b(), 0o1777)
    r = run_as(UID_A, GID_A, [], WRITE_AS, m.mnt,
               args={"name": "wo", "mode": 0o200, "data": clamd.eicar.hex()})
    assert r == "written"
    r = run_as(UID_A, GID_A, [], WRITE_AS, m.mnt,
               args={"name": "rw", "mode": 0o600, "data": clamd.eicar.hex()})
    assert r == "written"
    assert wait_for(lambda: not os.path.lexists(m.b("rw")), 5)
    released(m)  # wo's release, which would ask for a scan, came too
    assert stats(m.mnt)["close_scans"] == 1
    assert os.path.exists(m.b("wo"))
    assert try_read(m.m("wo")) == ("err", "EACCES")
