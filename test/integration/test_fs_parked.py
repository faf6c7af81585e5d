# SPDX-License-Identifier: GPL-2.0-or-later
# Files the kernel knows beyond the descriptor limit (issue 38, part 2): the
# daemon closes the O_PATH fd of a file nobody uses ("parks" it) and reopens
# it by file handle when a request comes for it. Each mount here runs with a
# file limit of 512, so that the table is always short of fds and every
# file looked up parks another: whatever a request does to a file, it does
# to a parked one. The checks compare with the backend, as root and as a
# user, and try what an attacker on the backend would: the file deleted or
# replaced (inode number reused) while parked, an infected file put in its
# place, a file on another filesystem mounted inside the backend.
import os
import resource
import stat
import subprocess

import pytest

from clamfstest.env import SLOW
from fsutil import GID_A, UID_A, run_as
from scanutil import mount_scan, put, stats, try_open

J = os.path.join
NOFILE = 512
FILES = 1500  # three times what the table may hold open


def nofile():
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    return pre


@pytest.fixture
def parked(mount_clamfs, clamd):
    # names cached for long, attributes never: a request then comes for
    # the inode the kernel holds, parked or not, where a fresh lookup by
    # name would not touch it
    m = mount_scan(mount_clamfs, clamd, "entry_timeout=3600",
                   "attr_timeout=0", preexec_fn=nofile())
    os.mkdir(m.b("d"))
    for i in range(FILES):
        put(m.b("d", "f%04d" % i), b"%d\n" % i)
    os.symlink("f0001", m.b("d", "link"))
    return m


def look_up_all(m):
    """Every file looked up through the mount, in order: the first ones
    (those the tests work on) parked by the time the last ones are known."""
    for name in sorted(os.listdir(m.m("d"))):
        os.lstat(m.m("d", name))


def assert_parked(m):
    s = stats(m.mnt)
    assert s["inodes"] >= FILES, s
    assert s["inode_fds"] < s["inodes"] // 4, s


def repark(m):
    """Requests on other files until those just used are parked again:
    each stat of a parked file reopens it, which parks the least recently
    used one (the file a test just worked on, after its second chance)."""
    for i in range(1400, 1460):
        os.lstat(m.m("d", "f%04d" % i))


def reopened_by(m, request):
    """Whether request() met its file parked: repark first, then count."""
    repark(m)
    before = stats(m.mnt)["inode_reopens"]
    request()
    return stats(m.mnt)["inode_reopens"] > before


def test_the_kernel_knows_more_files_than_the_daemon_holds_fds(parked):
    m = parked
    for _ in range(2):
        r = subprocess.run(["find", m.m("d"), "-printf", "%s %p\n"],
                           capture_output=True, text=True,
                           timeout=120 * SLOW)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert len(lines) == FILES + 2
        sizes = dict(reversed(l.split(" ", 1)) for l in lines)
        assert sizes[m.m("d", "f0999")] == "4"
    assert_parked(m)
    # nothing was evicted: the kernel holds every inode, so the counts
    # only went up, and reopening the early ones is what the daemon does
    before = stats(m.mnt)["inode_reopens"]
    for i in range(20):
        with open(m.m("d", "f%04d" % i), "rb") as f:
            assert f.read() == b"%d\n" % i
    assert stats(m.mnt)["inode_reopens"] > before


def test_every_kind_of_request_on_a_parked_file(parked):
    """Each request kind, each on a file parked just before it."""
    m = parked
    look_up_all(m)
    assert_parked(m)
    M = lambda n: m.m("d", n)
    B = lambda n: m.b("d", n)

    def write_more():
        with open(M("f0007"), "ab") as w:
            w.write(b"more\n")
    requests = {
        "stat": lambda: os.stat(M("f0000")),
        "chmod": lambda: os.chmod(M("f0001"), 0o640),
        "chown": lambda: os.chown(M("f0002"), UID_A, GID_A),
        "utime": lambda: os.utime(M("f0003"), (1000000, 2000000)),
        "truncate": lambda: os.truncate(M("f0004"), 1),
        "readlink": lambda: os.readlink(M("link")),
        "setxattr": lambda: os.setxattr(M("f0005"), "user.k", b"v"),
        "getxattr": lambda: os.getxattr(M("f0005"), "user.k"),
        "listxattr": lambda: os.listxattr(M("f0005")),
        "removexattr": lambda: os.removexattr(M("f0005"), "user.k"),
        "access": lambda: os.access(M("f0006"), os.R_OK | os.W_OK),
        "link": lambda: os.link(M("f0006"), M("hard")),
        "open": write_more,
        "statvfs": lambda: os.statvfs(M("f0008")),
    }
    met = {name: reopened_by(m, r) for name, r in requests.items()}
    assert met == {name: True for name in requests}
    # and each did what it does on the backend
    assert stat.S_IMODE(os.stat(B("f0001")).st_mode) == 0o640
    assert (os.stat(B("f0002")).st_uid, os.stat(B("f0002")).st_gid) == \
        (UID_A, GID_A)
    assert os.stat(B("f0003")).st_mtime == 2000000
    assert os.stat(B("f0004")).st_size == 1
    assert os.listxattr(B("f0005")) == []
    assert os.stat(B("hard")).st_ino == os.stat(B("f0006")).st_ino
    with open(B("f0007"), "rb") as r:
        assert r.read() == b"7\nmore\n"


def test_a_user_works_on_parked_files(parked):
    """Reopening needs the daemon's capability: done before the request
    takes the caller's identity, which then judges as natively."""
    m = parked
    for name, mode in (("f0010", 0o644), ("f0011", 0o600), ("f0012", 0o666)):
        os.chmod(m.b("d", name), mode)
    os.chown(m.b("d", "f0012"), UID_A, GID_A)
    look_up_all(m)
    assert_parked(m)
    got = run_as(UID_A, GID_A, [], """
        out = {}
        for name in ("f0010", "f0011", "f0012"):
            p = P(name)
            try:
                with open(p, "rb") as f:
                    out[name] = f.read().decode()
            except OSError as e:
                out[name] = errno.errorcode[e.errno]
        os.chmod(P("f0012"), 0o640)
        out["chmod"] = oct(os.stat(P("f0012")).st_mode)
        try:
            os.chmod(P("f0010"), 0o777)
        except OSError as e:
            out["chmod-other"] = errno.errorcode[e.errno]
        emit(out)
        """, m.m("d"))
    assert got == {"f0010": "10\n", "f0011": "EACCES", "f0012": "12\n",
                   "chmod": "0o100640", "chmod-other": "EPERM"}


def test_a_parked_file_deleted_or_replaced_behind_the_mount(parked,
                                                           eicar_bytes):
    """Its handle no longer opens (deleted), or opens nothing (the inode
    number reused by a new file has another generation): the daemon says
    ESTALE, the VFS looks the name up again and sees the backend as it is.
    An infected file put in its place is scanned, never taken for the
    parked one."""
    m = parked
    look_up_all(m)
    assert_parked(m)
    os.unlink(m.b("d", "f0020"))
    with pytest.raises(FileNotFoundError):
        os.stat(m.m("d", "f0020"))
    with pytest.raises(FileNotFoundError):
        open(m.m("d", "f0020"), "rb")
    for i in range(21, 41):
        os.unlink(m.b("d", "f%04d" % i))
        put(m.b("d", "f%04d" % i), eicar_bytes)
    for i in range(21, 41):
        assert try_open(m.m("d", "f%04d" % i), os.O_RDONLY) == \
            ("err", "EACCES"), i


def test_a_parked_files_number_given_to_a_new_file(parked):
    """A parked file deleted behind the mount frees its inode number,
    which the filesystem gives to a later file: looked up by its own name,
    that file is a new inode, never the parked one's (whose handle would
    not open it: ESTALE for good)."""
    m = parked
    look_up_all(m)
    assert_parked(m)
    old = os.stat(m.b("d", "f0060")).st_ino
    os.unlink(m.b("d", "f0060"))
    # ext4 hands a freed number out again soon: new files until one has it
    for i in range(500):
        p = m.b("d", "n%03d" % i)
        put(p, b"new %d\n" % i)
        if os.stat(p).st_ino == old:
            break
    else:
        pytest.skip("no new file got the freed inode number")
    with open(m.m("d", "n%03d" % i), "rb") as f:
        assert f.read() == b"new %d\n" % i
    assert os.stat(m.m("d", "n%03d" % i)).st_ino == old
    # and the old name is gone, not served the new file's content
    with pytest.raises(FileNotFoundError):
        os.stat(m.m("d", "f0060"))


def test_an_open_file_is_not_parked(parked):
    """Unlinked behind the mount while open, a file can only be reached
    through its descriptor (some filesystems open no handle of it): its
    fd stays held, however many files are looked up meanwhile, and fstat
    and reads go on without reopening anything."""
    m = parked
    with open(m.m("d", "f0050"), "rb") as f:
        os.unlink(m.b("d", "f0050"))
        look_up_all(m)
        assert_parked(m)
        before = stats(m.mnt)["inode_reopens"]
        assert os.fstat(f.fileno()).st_nlink == 0
        assert f.read() == b"50\n"
        assert stats(m.mnt)["inode_reopens"] == before


def test_a_filesystem_mounted_inside_keeps_its_fds(parked):
    """Handles are taken and opened on the backend's own filesystem only:
    a tmpfs mounted inside is served from held fds, evicted as before when
    they run short, and nothing of it is ever opened by handle."""
    m = parked
    sub = m.b("sub")
    os.mkdir(sub)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", sub],
                   check=True)
    try:
        # below the cap of held fds: these are never parked, and eviction
        # in one directory is outrun by a find (doc/security.md)
        for i in range(300):
            put(J(sub, "s%03d" % i), b"%d" % i)
        look_up_all(m)
        before = stats(m.mnt)["inode_reopens"]
        r = subprocess.run(["find", m.m("sub"), "-printf", "%s %p\n"],
                           capture_output=True, text=True,
                           timeout=120 * SLOW)
        assert r.returncode == 0, r.stderr[-2000:]
        assert len(r.stdout.splitlines()) == 301
        for i in range(0, 300, 25):
            with open(m.m("sub", "s%03d" % i), "rb") as f:
                assert f.read() == b"%d" % i
        assert stats(m.mnt)["inode_reopens"] == before
    finally:
        subprocess.run(["umount", "-l", sub], check=False)
