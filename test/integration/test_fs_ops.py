# SPDX-License-Identifier: GPL-2.0-or-later
# Every filesystem operation, done once directly in the backend and once
# through the mount (as root): same return values, same errno, same
# resulting tree, and the mount shows exactly the backend's stat fields.
import fcntl
import mmap
import os
import socket
import stat
import subprocess
import threading
import time

import pytest

from clamfstest.acl import setfacl
from clamfstest.env import SLOW
from clamfstest.wait import let_time_pass, past_the_fd_cap
from fsutil import (Approx, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
                    RENAME_EXCHANGE, RENAME_NOREPLACE, UTIME_NOW, UTIME_OMIT,
                    fallocate, getxattr_buf, getxattr_size, listxattr_buf,
                    listxattr_size, lstat_dict, outcome, renameat2, utimensat)

# Mirror tests run with scanning on, against the private clamd.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")


def J(root, *p):
    return os.path.join(root, *p)


def write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# --- lookup / getattr --------------------------------------------------------

def test_root_mirrors_backend(fs):
    sm, sb = os.stat(fs.mnt), os.stat(fs.backend)
    for k in ("st_ino", "st_mode", "st_uid", "st_gid", "st_nlink", "st_mtime_ns",
              "st_ctime_ns"):
        assert getattr(sm, k) == getattr(sb, k), k
    assert os.listdir(fs.mnt) == []
    assert os.stat(fs.mnt).st_dev != os.stat(fs.backend).st_dev


def test_backend_objects_visible_with_same_stat(mount_clamfs):
    """A backend populated before mounting shows every stat field as is."""
    b = mount_clamfs.tempdir()
    write(J(b, "file"), b"hello\n", 0o640)
    os.mkdir(J(b, "dir"), 0o751)
    write(J(b, "dir", "inner"), b"x" * 10000)
    os.symlink("file", J(b, "link"))
    os.symlink("/nonexistent/target", J(b, "dangling"))
    os.mkfifo(J(b, "fifo"), 0o620)
    os.link(J(b, "file"), J(b, "hard"))
    os.chown(J(b, "file"), 60001, 60002)
    os.utime(J(b, "file"), ns=(1_000_000_123, 2_000_000_456))
    os.mknod(J(b, "chr"), stat.S_IFCHR | 0o600, os.makedev(1, 7))
    os.setxattr(J(b, "dir"), "user.k", b"v")
    mnt = mount_clamfs.tempdir()
    fs = mount_clamfs(backend=b, mnt=mnt)
    for name in ("file", "dir", "dir/inner", "link", "dangling", "fifo", "hard",
                 "chr", "."):
        assert lstat_dict(fs.m(name)) == lstat_dict(fs.b(name)), name
    assert os.getxattr(fs.m("dir"), "user.k") == b"v"
    # Following symlinks.
    assert os.stat(fs.m("link")).st_ino == os.stat(fs.b("file")).st_ino
    assert read(fs.m("link")) == b"hello\n"
    assert os.stat(fs.m("hard")).st_ino == os.stat(fs.m("file")).st_ino
    assert os.stat(fs.m("file")).st_nlink == 2
    assert outcome(os.stat, fs.m("dangling")) == outcome(os.stat, fs.b("dangling"))
    assert sorted(os.listdir(fs.mnt)) == sorted(os.listdir(fs.backend))


def test_lookup_errors(tw):
    def setup(r):
        write(J(r, "f"), b"data")
        os.mkdir(J(r, "d"))
        os.symlink("f", J(r, "lf"))
        os.symlink("loop2", J(r, "loop1"))
        os.symlink("loop1", J(r, "loop2"))
    for r in tw.roots():
        setup(r)
    long = "n" * 256
    ok255 = "m" * 255
    cases = [
        ("stat missing", lambda r: os.stat(J(r, "missing"))),
        ("stat missing/x", lambda r: os.stat(J(r, "missing", "x"))),
        ("stat f/x", lambda r: os.stat(J(r, "f", "x"))),
        ("stat f/", lambda r: os.stat(J(r, "f") + "/")),
        ("stat long", lambda r: os.stat(J(r, long))),
        ("stat 255", lambda r: os.stat(J(r, ok255))),
        ("open long O_CREAT", lambda r: os.close(os.open(J(r, long), os.O_CREAT | os.O_WRONLY, 0o644))),
        ("mkdir long", lambda r: os.mkdir(J(r, long))),
        ("create 255", lambda r: os.close(os.open(J(r, ok255), os.O_CREAT | os.O_WRONLY, 0o644))),
        ("stat loop", lambda r: os.stat(J(r, "loop1"))),
        ("open O_NOFOLLOW symlink", lambda r: os.open(J(r, "lf"), os.O_RDONLY | os.O_NOFOLLOW)),
        ("open O_DIRECTORY file", lambda r: os.open(J(r, "f"), os.O_RDONLY | os.O_DIRECTORY)),
        ("open dir O_WRONLY", lambda r: os.open(J(r, "d"), os.O_WRONLY)),
        ("open dir O_RDWR", lambda r: os.open(J(r, "d"), os.O_RDWR)),
        ("open missing", lambda r: os.open(J(r, "missing"), os.O_RDONLY)),
        ("open excl existing", lambda r: os.open(J(r, "f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)),
        ("open excl dangling-loop symlink", lambda r: os.open(J(r, "loop1"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)),
        ("open creat through loop", lambda r: os.open(J(r, "loop1"), os.O_CREAT | os.O_WRONLY, 0o644)),
        ("readlink file", lambda r: os.readlink(J(r, "f"))),
        ("readlink missing", lambda r: os.readlink(J(r, "missing"))),
        ("listdir file", lambda r: os.listdir(J(r, "f"))),
        ("chdir file", lambda r: os.chdir(J(r, "f"))),
    ]
    for label, fn in cases:
        n = outcome(lambda: _close_if_fd(fn(tw.nat)))
        v = outcome(lambda: _close_if_fd(fn(tw.via)))
        assert v == n, f"{label}: mount {v} backend {n}"
    os.chdir("/")
    tw.check()


def _close_if_fd(r):
    if isinstance(r, int):
        os.close(r)
        return "fd"
    if isinstance(r, list):
        return sorted(r)
    return r


# --- create / open -----------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000, 0o027])
def test_create_modes_and_umask(tw, umask):
    old = os.umask(umask)
    try:
        for r in tw.roots():
            for mode in (0o777, 0o666, 0o600, 0o4755, 0o2755, 0o1777, 0o000):
                os.close(os.open(J(r, f"f{mode:o}"), os.O_CREAT | os.O_WRONLY, mode))
                os.mkdir(J(r, f"d{mode:o}"), mode)
            os.mkfifo(J(r, "fifo"), 0o666)
            os.mknod(J(r, "node"), stat.S_IFREG | 0o666)
            os.symlink("x", J(r, "sym"))
    finally:
        os.umask(old)
    tw.check()


def test_open_flags(tw):
    def body(r):
        p = J(r, "f")
        write(p, b"0123456789")
        out = []
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        out.append(os.fstat(fd).st_size)
        os.write(fd, b"abc")
        os.close(fd)
        out.append(read(p))
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"def")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"ghi")  # O_APPEND ignores the offset
        os.close(fd)
        out.append(read(p))
        fd = os.open(p, os.O_RDONLY)
        out.append(outcome(os.write, fd, b"x"))
        out.append(os.pread(fd, 4, 2))
        out.append(os.pread(fd, 100, 1000))
        os.close(fd)
        fd = os.open(p, os.O_WRONLY)
        out.append(outcome(os.read, fd, 1))
        os.close(fd)
        fd = os.open(p, os.O_RDWR)
        os.pwrite(fd, b"Z", 20)  # beyond EOF: a hole
        out.append(os.fstat(fd).st_size)
        os.close(fd)
        out.append(read(p))
        fd = os.open(J(r, "new"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)
        out.append(oct(stat.S_IMODE(os.fstat(fd).st_mode)))
        os.write(fd, b"created")
        os.close(fd)
        fd = os.open(J(r, "new"), os.O_RDWR | os.O_CREAT, 0o600)  # exists: mode unchanged
        out.append(oct(stat.S_IMODE(os.fstat(fd).st_mode)))
        os.close(fd)
        fd = os.open(J(r, "tmpf"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        return out
    tw.both(body)
    tw.check()


def test_open_unlinked_file(tw):
    def body(r):
        p = J(r, "f")
        write(p, b"before")
        fd = os.open(p, os.O_RDWR)
        os.unlink(p)
        os.pwrite(fd, b"-after-unlink", 6)
        st = os.fstat(fd)
        os.ftruncate(fd, 10)
        data = os.pread(fd, 100, 0)
        st2 = os.fstat(fd)
        os.fchmod(fd, 0o600)
        st3 = os.fstat(fd)
        os.close(fd)
        return [st.st_nlink, st.st_size, data, st2.st_size,
                oct(stat.S_IMODE(st3.st_mode)), os.path.exists(p)]
    tw.both(body)
    tw.check()


def test_rename_open_file_keeps_writing(tw):
    def body(r):
        fd = os.open(J(r, "a"), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"one ")
        os.rename(J(r, "a"), J(r, "b"))
        os.write(fd, b"two ")
        os.mkdir(J(r, "d"))
        os.rename(J(r, "b"), J(r, "d", "c"))
        os.write(fd, b"three")
        os.fsync(fd)
        os.close(fd)
        return [read(J(r, "d", "c")), os.path.exists(J(r, "a"))]
    tw.both(body)
    tw.check()


# --- mkdir / rmdir / unlink --------------------------------------------------

def test_mkdir_rmdir_unlink(tw):
    def body(r):
        out = []
        os.mkdir(J(r, "d"), 0o750)
        os.mkdir(J(r, "d", "sub"))
        write(J(r, "d", "f"), b"x")
        os.mkdir(J(r, "e"))
        out.append(os.stat(J(r, "d")).st_nlink)
        out.append(outcome(os.mkdir, J(r, "d")))
        out.append(outcome(os.mkdir, J(r, "d", "f")))
        out.append(outcome(os.mkdir, J(r, "nope", "x")))
        out.append(outcome(os.mkdir, J(r, "d", "f", "x")))
        out.append(outcome(os.rmdir, J(r, "d")))
        out.append(outcome(os.rmdir, J(r, "d", "f")))
        out.append(outcome(os.rmdir, J(r, "missing")))
        out.append(outcome(os.rmdir, J(r, "d", ".")))
        out.append(outcome(os.rmdir, J(r, "d", "sub", "..")))
        out.append(outcome(os.unlink, J(r, "d")))
        out.append(outcome(os.unlink, J(r, "missing")))
        out.append(outcome(os.unlink, J(r, "d", "f", "x")))
        out.append(outcome(os.rmdir, J(r, "e")))
        out.append(outcome(os.rmdir, J(r, "d", "sub")))
        out.append(os.stat(J(r, "d")).st_nlink)
        out.append(outcome(os.unlink, J(r, "d", "f")))
        out.append(outcome(os.stat, J(r, "d", "f")))
        out.append(outcome(os.rmdir, J(r, "d")))
        out.append(outcome(os.stat, J(r, "d")))
        os.mkdir(J(r, "d"))  # again, same name
        write(J(r, "target"), b"t")
        os.symlink("target", J(r, "sl"))
        out.append(outcome(os.unlink, J(r, "sl")))
        out.append(os.path.exists(J(r, "target")))
        os.symlink("d", J(r, "sd"))
        out.append(outcome(os.rmdir, J(r, "sd")))
        return out
    tw.both(body)
    tw.check()


def test_directory_nlink_and_times_mirror(tw):
    """Directory stat fields (nlink, mtime, ctime, size) change as the
    backend's do, and the mount reports them at once."""
    d = J(tw.via, "d")
    os.mkdir(d)
    for i in range(5):
        os.mkdir(J(d, f"s{i}"))
        tw.check_mirror()
    for i in range(40):
        write(J(d, f"file-with-a-long-name-{i:04d}"), b"")
    tw.check_mirror()
    for i in range(0, 40, 2):
        os.unlink(J(d, f"file-with-a-long-name-{i:04d}"))
    os.rmdir(J(d, "s0"))
    tw.check_mirror()


# --- symlink / readlink / link ----------------------------------------------

def test_symlink_readlink(tw):
    targets = ["plain", "../up/and/down", "/absolute/path", "dir/", "",
               "with space\nand newline", "ü-ñ-日本", "t" * 1000, "a/" * 2000 + "x"]

    def body(r):
        out = []
        for i, t in enumerate(targets):
            out.append(outcome(os.symlink, t, J(r, f"l{i}")))
            out.append(outcome(os.readlink, J(r, f"l{i}")))
        out.append(outcome(os.symlink, "x", J(r, "l0")))
        out.append(outcome(os.symlink, "y" * 5000, J(r, "toolong")))
        os.symlink(b"\xff\xfebytes", os.fsencode(J(r, "lbytes")))
        out.append(os.readlink(os.fsencode(J(r, "lbytes"))))
        os.mkdir(J(r, "dir"))
        os.symlink("dir", J(r, "ldir"))
        write(J(r, "ldir", "through"), b"via symlink")
        out.append(read(J(r, "dir", "through")))
        out.append(sorted(os.listdir(J(r, "ldir"))))
        return out
    tw.both(body)
    tw.check()


def test_hard_links(tw):
    def body(r):
        out = []
        write(J(r, "a"), b"shared content")
        os.mkdir(J(r, "d"))
        os.link(J(r, "a"), J(r, "b"))
        os.link(J(r, "a"), J(r, "d", "c"))
        out.append([os.stat(J(r, n)).st_nlink for n in ("a", "b", "d/c")])
        out.append(os.stat(J(r, "a")).st_ino == os.stat(J(r, "d", "c")).st_ino)
        with open(J(r, "b"), "ab") as f:
            f.write(b" appended")
        out.append(read(J(r, "d", "c")))
        out.append(outcome(os.link, J(r, "a"), J(r, "b")))
        out.append(outcome(os.link, J(r, "d"), J(r, "dlink")))
        out.append(outcome(os.link, J(r, "missing"), J(r, "x")))
        out.append(outcome(os.link, J(r, "a"), J(r, "nodir", "x")))
        os.symlink("a", J(r, "sym"))
        os.link(J(r, "sym"), J(r, "symhard"), follow_symlinks=False)
        out.append(stat.S_ISLNK(os.lstat(J(r, "symhard")).st_mode))
        out.append(os.lstat(J(r, "sym")).st_nlink)
        os.unlink(J(r, "a"))
        out.append(os.stat(J(r, "b")).st_nlink)
        os.rename(J(r, "b"), J(r, "d", "c"))  # same inode: no-op
        out.append(sorted(os.listdir(r)))
        out.append(os.stat(J(r, "d", "c")).st_nlink)
        return out
    tw.both(body)
    tw.check()
    # One inode through the mount: every name reports the backend's ino.
    assert os.stat(J(tw.via, "d", "c")).st_ino == os.stat(J(tw.bvia, "d", "c")).st_ino


# --- rename ------------------------------------------------------------------

def _rename_setup(r):
    write(J(r, "f1"), b"file one")
    write(J(r, "f2"), b"file two")
    os.mkdir(J(r, "d1"))
    write(J(r, "d1", "in"), b"in d1")
    os.mkdir(J(r, "d2"))
    os.mkdir(J(r, "empty"))
    os.mkdir(J(r, "d1", "sub"))
    os.symlink("f1", J(r, "s1"))


def test_rename(tw):
    for r in tw.roots():
        _rename_setup(r)

    def body(r):
        out = []
        R = lambda a, b: outcome(os.rename, J(r, a), J(r, b))
        out.append(R("f1", "f1new"))
        out.append(R("f1new", "f2"))  # replaces
        out.append(read(J(r, "f2")))
        out.append(R("missing", "x"))
        out.append(R("f2", "d2"))  # file over dir
        out.append(R("d2", "f2"))  # dir over file
        out.append(R("d1", "empty"))  # dir over empty dir
        os.mkdir(J(r, "ne"))
        write(J(r, "ne", "x"), b"")
        out.append(R("d2", "ne"))  # over non-empty dir
        out.append(R("empty", "empty/sub/deeper"))  # into own subtree
        out.append(R("empty", "empty/sub"))
        out.append(R("f2", "f2"))
        out.append(R("f2", "nodir/f"))
        out.append(R("f2", "empty/in/f"))  # empty/in is a file: ENOTDIR
        out.append(R("f2", "d2/moved"))
        out.append(R("s1", "d2/s1"))  # symlink moved, target text kept
        out.append(os.readlink(J(r, "d2", "s1")))
        out.append(R("d2", "empty/sub/d2"))
        out.append(R(".", "x"))
        out.append(R("empty/sub/d2/..", "x"))
        return out
    tw.both(body)
    tw.check()


def test_renameat2_noreplace_exchange(tw):
    for r in tw.roots():
        _rename_setup(r)

    def body(r):
        out = []
        R2 = lambda a, b, fl: outcome(renameat2, J(r, a), J(r, b), fl)
        out.append(R2("f1", "f2", RENAME_NOREPLACE))
        out.append(R2("f1", "f3", RENAME_NOREPLACE))
        out.append(R2("d1", "empty", RENAME_NOREPLACE))
        ino_f3, ino_d1 = os.lstat(J(r, "f3")).st_ino, os.lstat(J(r, "d1")).st_ino
        out.append(R2("f3", "d1", RENAME_EXCHANGE))
        out.append([stat.S_ISDIR(os.lstat(J(r, "f3")).st_mode), sorted(os.listdir(J(r, "f3")))])
        out.append(read(J(r, "d1")))
        out.append([os.lstat(J(r, "f3")).st_ino == ino_d1,
                    os.lstat(J(r, "d1")).st_ino == ino_f3])
        out.append(R2("f2", "missing", RENAME_EXCHANGE))
        out.append(R2("f2", "f3/in", RENAME_EXCHANGE))
        out.append(read(J(r, "f2")))
        out.append(R2("f2", "f3", RENAME_NOREPLACE | RENAME_EXCHANGE))
        out.append(R2("f3", "f3/sub", RENAME_EXCHANGE))
        return out
    tw.both(body)
    tw.check()


# --- setattr -------------------------------------------------------------------

def test_chmod(tw):
    def body(r):
        out = []
        write(J(r, "f"), b"x")
        os.mkdir(J(r, "d"))
        os.symlink("f", J(r, "l"))
        for mode in (0o7777, 0o4755, 0o2711, 0o1700, 0o000, 0o644):
            os.chmod(J(r, "f"), mode)
            out.append(oct(stat.S_IMODE(os.stat(J(r, "f")).st_mode)))
            os.chmod(J(r, "d"), mode)
            out.append(oct(stat.S_IMODE(os.stat(J(r, "d")).st_mode)))
        os.chmod(J(r, "l"), 0o600)  # follows the link
        out.append(oct(stat.S_IMODE(os.stat(J(r, "f")).st_mode)))
        out.append(outcome(os.chmod, J(r, "missing"), 0o600))
        fd = os.open(J(r, "f"), os.O_RDONLY)
        os.fchmod(fd, 0o4711)
        out.append(oct(stat.S_IMODE(os.fstat(fd).st_mode)))
        os.close(fd)
        os.chmod(J(r, "d"), 0o755)
        return out
    tw.both(body)
    tw.check()


def test_chown_as_root(tw):
    def body(r):
        out = []
        write(J(r, "f"), b"x", 0o6755)
        os.chmod(J(r, "f"), 0o6755)
        os.mkdir(J(r, "d"))
        os.chmod(J(r, "d"), 0o2775)
        os.symlink("f", J(r, "l"))
        os.chown(J(r, "f"), 60001, 60002)
        st = os.stat(J(r, "f"))
        out.append([st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode))])
        os.chown(J(r, "f"), -1, 60010)
        st = os.stat(J(r, "f"))
        out.append([st.st_uid, st.st_gid])
        os.chown(J(r, "d"), 60002, -1)
        st = os.stat(J(r, "d"))
        out.append([st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode))])
        os.lchown(J(r, "l"), 60002, 60001)
        out.append([os.lstat(J(r, "l")).st_uid, os.lstat(J(r, "l")).st_gid,
                    os.stat(J(r, "l")).st_uid])
        fd = os.open(J(r, "f"), os.O_RDONLY)
        os.fchown(fd, 0, 0)
        out.append([os.fstat(fd).st_uid, os.fstat(fd).st_gid])
        os.close(fd)
        out.append(outcome(os.chown, J(r, "missing"), 1, 1))
        return out
    tw.both(body)
    tw.check()


def test_truncate(tw):
    def body(r):
        out = []
        p = J(r, "f")
        data = bytes(range(256)) * 64  # 16 KiB
        write(p, data)
        for size in (20000, 16384, 5000, 4096, 4095, 1, 0, 1 << 20, 70000):
            os.truncate(p, size)
            st = os.stat(p)
            out.append([st.st_size, Approx(st.st_blocks)])
            out.append(read(p))
        fd = os.open(p, os.O_RDWR)
        os.ftruncate(fd, 3)
        os.pwrite(fd, b"abc", 0)
        os.ftruncate(fd, 10)
        out.append(os.pread(fd, 100, 0))
        out.append(outcome(os.ftruncate, fd, -1))
        os.close(fd)
        fd = os.open(p, os.O_RDONLY)
        out.append(outcome(os.ftruncate, fd, 0))
        os.close(fd)
        os.mkdir(J(r, "d"))
        out.append(outcome(os.truncate, J(r, "d"), 0))
        out.append(outcome(os.truncate, J(r, "missing"), 0))
        return out
    tw.both(body)
    tw.check()


def test_utimens(tw):
    for r in tw.roots():
        write(J(r, "f"), b"x")
        os.mkdir(J(r, "d"))
        os.symlink("f", J(r, "l"))

    def body(r):
        out = []
        os.utime(J(r, "f"), ns=(1_234_567_890_123_456_789, 987_654_321_987_654_321))
        st = os.stat(J(r, "f"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        utimensat(J(r, "f"), (1000, 5), UTIME_OMIT)
        st = os.stat(J(r, "f"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        utimensat(J(r, "f"), UTIME_OMIT, (2000, 999_999_999))
        st = os.stat(J(r, "f"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        utimensat(J(r, "f"), UTIME_OMIT, UTIME_OMIT)
        st = os.stat(J(r, "f"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        os.utime(J(r, "d"), ns=(0, 1))
        st = os.stat(J(r, "d"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        utimensat(J(r, "l"), (3000, 0), (4000, 0), follow=False)
        st = os.lstat(J(r, "l"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        out.append(os.stat(J(r, "f")).st_mtime_ns)
        os.utime(J(r, "f"), ns=(-1_000_000_000, 16_000_000_000 * 10**9))  # pre-1970, past ext4's range
        st = os.stat(J(r, "f"))
        out.append([st.st_atime_ns, st.st_mtime_ns])
        out.append(outcome(os.utime, J(r, "missing"), ns=(1, 1)))
        return out
    tw.both(body)
    tw.check()


def test_utime_now(tw):
    p = J(tw.via, "f")
    write(p, b"x")
    os.utime(p, ns=(10**9, 10**9))
    before = time.time_ns()
    utimensat(p, UTIME_NOW, UTIME_OMIT)
    st = os.stat(p)
    assert st.st_mtime_ns == 10**9
    assert st.st_atime_ns >= before - 50_000_000
    utimensat(p, UTIME_OMIT, UTIME_NOW)
    st = os.stat(p)
    assert st.st_mtime_ns >= before - 50_000_000
    os.utime(p, ns=(10**9, 10**9))
    os.utime(p)  # both now (times=NULL)
    st = os.stat(p)
    assert st.st_atime_ns >= before - 50_000_000 and st.st_mtime_ns >= before - 50_000_000
    tw.check_mirror()


# --- special files -------------------------------------------------------------

def test_mknod(tw):
    def body(r):
        out = []
        os.mknod(J(r, "fifo"), stat.S_IFIFO | 0o640)
        os.mknod(J(r, "sock"), stat.S_IFSOCK | 0o600)
        os.mknod(J(r, "chr"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
        os.mknod(J(r, "blk"), stat.S_IFBLK | 0o660, os.makedev(7, 200))
        os.mknod(J(r, "reg"), stat.S_IFREG | 0o604)
        for n in ("fifo", "sock", "chr", "blk", "reg"):
            st = os.lstat(J(r, n))
            out.append([stat.S_IFMT(st.st_mode), oct(stat.S_IMODE(st.st_mode)),
                        os.major(st.st_rdev), os.minor(st.st_rdev), st.st_size])
        out.append(outcome(os.mknod, J(r, "fifo"), stat.S_IFIFO | 0o600))
        out.append(outcome(os.mknod, J(r, "nodir", "x"), stat.S_IFIFO | 0o600))
        return out
    tw.both(body)
    tw.check()


def test_fifo_io(fs):
    p = fs.m("fifo")
    os.mkfifo(p)
    assert stat.S_ISFIFO(os.lstat(fs.b("fifo")).st_mode)
    got = []

    def reader():
        with open(p, "rb") as f:
            got.append(f.read())
    t = threading.Thread(target=reader)
    t.start()
    with open(p, "wb") as f:
        f.write(b"through the fifo " * 1000)
    t.join(10 * SLOW)
    assert got == [b"through the fifo " * 1000]


def test_unix_socket_bound_in_mount(tw):
    def body(r):
        out = []
        p = J(r, "sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            srv.bind(p)
            srv.listen(1)
            st = os.lstat(p)
            out.append([stat.S_ISSOCK(st.st_mode), oct(stat.S_IMODE(st.st_mode))])
            cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            cli.settimeout(10 * SLOW)
            cli.connect(p)
            conn, _ = srv.accept()
            cli.sendall(b"ping")
            out.append(conn.recv(4))
            conn.sendall(b"pong")
            out.append(cli.recv(4))
            conn.close()
            cli.close()
            d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            d.bind(J(r, "dgram"))
            c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            c.sendto(b"datagram", J(r, "dgram"))
            out.append(d.recv(100))
            d.close()
            c.close()
            out.append(outcome(srv.bind, p))
            s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            out.append(outcome(s2.bind, p))
            s2.close()
            s3 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            out.append(outcome(s3.connect, J(r, "missing")))
            write(J(r, "regular"), b"")
            out.append(outcome(s3.connect, J(r, "regular")))
            s3.close()
        finally:
            srv.close()
        os.unlink(p)
        out.append(os.path.lexists(p))
        return out
    v = tw.both(body)
    assert v[1][:3] == [[True, oct(0o755)], b"ping", b"pong"] or v[1][1:3] == [b"ping", b"pong"]
    assert not os.path.lexists(J(tw.bvia, "sock"))
    assert stat.S_ISSOCK(os.lstat(J(tw.bvia, "dgram")).st_mode)
    tw.check()


# --- readdir -----------------------------------------------------------------

def _scan(path):
    out = {}
    with os.scandir(path) as it:
        for e in it:
            assert e.name not in out, f"{e.name} listed twice"
            out[e.name] = (e.inode(), e.is_dir(follow_symlinks=False),
                           e.is_file(follow_symlinks=False),
                           e.is_symlink())
    return out


def _nofile_1024():
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def test_readdir_many_entries(mount_clamfs):
    # soft = hard = 1024: more entries than the daemon has fds, as for a
    # service started without LimitNOFILE
    fs = mount_clamfs(preexec_fn=_nofile_1024)
    b = fs.b("big")
    os.mkdir(b)
    for i in range(5000):
        n = f"entry-{i:05d}-" + "x" * (i % 40)
        if i % 10 == 0:
            os.mkdir(J(b, n))
        elif i % 10 == 1:
            os.symlink("target", J(b, n))
        else:
            os.close(os.open(J(b, n), os.O_CREAT | os.O_WRONLY, 0o644))
    sm, sb = _scan(fs.m("big")), _scan(b)
    assert len(sm) == 5000
    assert sm == sb  # names, d_ino and d_type
    # A second listing (cached dentries) gives the same.
    assert _scan(fs.m("big")) == sb
    names = os.listdir(fs.m("big"))
    assert sorted(names) == sorted(os.listdir(b))
    # Every entry listed can be looked up, and is what the backend has
    # (past the fd cap a lookup may have to wait for the evictor).
    for n in names:
        a = past_the_fd_cap(os.lstat, J(fs.m("big"), n))
        c = os.lstat(J(b, n))
        assert (a.st_ino, a.st_mode) == (c.st_ino, c.st_mode), n


def test_readdir_entries_added_and_removed_during_listing(fs):
    b = fs.b("d")
    os.mkdir(b)
    names = {f"orig-{i:05d}" for i in range(3000)}
    for n in names:
        os.close(os.open(J(b, n), os.O_CREAT | os.O_WRONLY, 0o644))
    for side, path in (("mount", fs.m("d")), ("backend", b)):
        seen = []
        with os.scandir(path) as it:
            for i, e in enumerate(it):
                seen.append(e.name)
                if i == 10:
                    for k in range(300):
                        os.close(os.open(J(path, f"new-{side}-{k}"),
                                         os.O_CREAT | os.O_WRONLY, 0o644))
        dup = {n for n in seen if seen.count(n) > 1} if len(seen) != len(set(seen)) else set()
        assert not dup, f"{side}: listed twice: {sorted(dup)[:10]}"
        missing = names - set(seen)
        assert not missing, f"{side}: original entries not listed: {sorted(missing)[:10]}"
        extra = set(seen) - names - {f"new-{s}-{k}" for s in ("mount", "backend")
                                     for k in range(300)}
        assert not extra, f"{side}: unknown entries listed: {sorted(extra)[:10]}"
    # Entries removed while listing: no entry twice, nothing unknown.
    seen = []
    with os.scandir(fs.m("d")) as it:
        for i, e in enumerate(it):
            seen.append(e.name)
            if i == 5:
                for k in range(300):
                    os.unlink(J(fs.m("d"), f"new-mount-{k}"))
    assert len(seen) == len(set(seen))
    assert sorted(os.listdir(fs.m("d"))) == sorted(os.listdir(b))


def test_readdir_odd_names(tw):
    names = ["space name", "new\nline", "tab\there", "back\\slash", "ü日本",
             "-dash", ".hidden", "..dots", "a" * 255, "quote'\"", "*?[]"]
    bnames = [b"\xff\xfe-latin1-\xe9"]

    def body(r):
        for n in names:
            write(J(r, n), n.encode())
        for n in bnames:
            write(os.path.join(os.fsencode(r), n), n)
        got = sorted(os.listdir(os.fsencode(r)))
        return [got] + [read(J(r, n)) for n in names]
    tw.both(body)
    tw.check()


def test_readdir_after_changes_and_rewinddir(fs):
    d = fs.m("d")
    os.mkdir(d)
    for i in range(50):
        write(J(d, f"f{i}"), b"")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = sorted(os.listdir(fd))
        os.lseek(fd, 0, os.SEEK_SET)
        second = sorted(os.listdir(fd))
    finally:
        os.close(fd)
    assert first == second == sorted(os.listdir(fs.b("d")))
    os.unlink(J(d, "f7"))
    assert sorted(os.listdir(d)) == sorted(os.listdir(fs.b("d")))
    write(J(fs.b("d"), "external"), b"")
    _eventually(lambda: sorted(os.listdir(d)) == sorted(os.listdir(fs.b("d"))),
                "entry created in the backend listed")


# --- statfs ------------------------------------------------------------------

def test_statfs(fs):
    write(fs.m("f"), b"x" * 100000)
    vm, vb = os.statvfs(fs.mnt), os.statvfs(fs.backend)
    for k in ("f_bsize", "f_frsize", "f_blocks", "f_files", "f_namemax"):
        assert getattr(vm, k) == getattr(vb, k), k
    # Free counts move with other activity on the machine: close, not equal.
    assert abs(vm.f_bfree - vb.f_bfree) * vb.f_frsize < 256 << 20
    assert abs(vm.f_bavail - vb.f_bavail) * vb.f_frsize < 256 << 20
    assert abs(vm.f_ffree - vb.f_ffree) < 10000
    fd = os.open(fs.m("f"), os.O_RDONLY)
    try:
        vf = os.fstatvfs(fd)
    finally:
        os.close(fd)
    assert vf.f_blocks == vb.f_blocks


# --- xattrs -------------------------------------------------------------------

def test_xattr_user(tw):
    def body(r):
        out = []
        write(J(r, "f"), b"x")
        os.mkdir(J(r, "d"))
        os.symlink("f", J(r, "l"))
        for obj in ("f", "d"):
            p = J(r, obj)
            for name, val in (("user.empty", b""), ("user.one", b"1"),
                              ("user.bin", bytes(range(256))), ("user.big", b"B" * 3000),
                              ("user.ü", b"unicode name")):
                out.append(outcome(os.setxattr, p, name, val))
            out.append(sorted(os.listxattr(p)))
            for name in ("user.empty", "user.one", "user.bin", "user.big", "user.ü",
                         "user.missing"):
                out.append(outcome(os.getxattr, p, name))
            out.append(outcome(getxattr_size, p, "user.big"))
            out.append(outcome(getxattr_size, p, "user.empty"))
            out.append(outcome(getxattr_buf, p, "user.big", 10))
            out.append(outcome(getxattr_buf, p, "user.one", 1))
            out.append(outcome(listxattr_size, p))
            out.append(outcome(listxattr_buf, p, 3))
            out.append(outcome(os.setxattr, p, "user.one", b"2", os.XATTR_CREATE))
            out.append(outcome(os.setxattr, p, "user.new", b"2", os.XATTR_REPLACE))
            out.append(outcome(os.setxattr, p, "user.one", b"22", os.XATTR_REPLACE))
            out.append(outcome(os.setxattr, p, "user.new", b"3", os.XATTR_CREATE))
            out.append(outcome(os.getxattr, p, "user.one"))
            out.append(outcome(os.setxattr, p, "user.huge", b"H" * 70000))
            out.append(outcome(os.setxattr, p, "user." + "n" * 250, b"v"))
            out.append(outcome(os.setxattr, p, "bogus.ns", b"v"))
            out.append(outcome(os.setxattr, p, "user.", b"v"))
            out.append(outcome(os.removexattr, p, "user.one"))
            out.append(outcome(os.removexattr, p, "user.one"))
            out.append(outcome(os.getxattr, p, "user.one"))
            out.append(sorted(os.listxattr(p)))
        out.append(outcome(os.setxattr, J(r, "l"), "user.x", b"v", follow_symlinks=False))
        out.append(outcome(os.getxattr, J(r, "l"), "user.x", follow_symlinks=False))
        out.append(outcome(os.listxattr, J(r, "l"), follow_symlinks=False))
        out.append(outcome(os.getxattr, J(r, "l"), "user.new"))  # follows
        out.append(outcome(os.getxattr, J(r, "missing"), "user.x"))
        fd = os.open(J(r, "f"), os.O_RDONLY)
        os.setxattr(fd, "user.viafd", b"fd")
        out.append(os.getxattr(fd, "user.viafd"))
        out.append(sorted(os.listxattr(fd)))
        os.close(fd)
        return out
    tw.both(body)
    tw.check()


def test_xattr_trusted_and_security_as_root(tw):
    def body(r):
        out = []
        write(J(r, "f"), b"x")
        out.append(outcome(os.setxattr, J(r, "f"), "trusted.t", b"root only"))
        out.append(outcome(os.getxattr, J(r, "f"), "trusted.t"))
        out.append(outcome(os.setxattr, J(r, "f"), "security.s", b"sec"))
        out.append(outcome(os.getxattr, J(r, "f"), "security.s"))
        out.append(sorted(os.listxattr(J(r, "f"))))
        return out
    tw.both(body)
    tw.check()


def _getfacl(path):
    r = subprocess.run(["getfacl", "-p", "-n", path], capture_output=True, text=True)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if not l.startswith("# file:")]
    return r.returncode, "\n".join(lines).replace(path, "<P>")


def test_posix_acls_as_root(tw):
    old = os.umask(0o022)
    try:
        for r in tw.roots():
            write(J(r, "f"), b"acl file")
            os.mkdir(J(r, "d"))
            assert setfacl("-m", "u:60001:rw,g:60010:r,m::rw", J(r, "f")) == 0
            assert setfacl("-d", "-m", "u:60002:rwx,g::r-x,o::-,m::rwx", J(r, "d")) == 0
            assert setfacl("-m", "u:60001:rx", J(r, "d")) == 0
            # New entries inherit the default ACL; umask is ignored then.
            os.close(os.open(J(r, "d", "inherit"), os.O_CREAT | os.O_WRONLY, 0o666))
            os.mkdir(J(r, "d", "subdir"), 0o777)
            os.mkdir(J(r, "d", "subdir", "deeper"), 0o700)
            os.mknod(J(r, "d", "fifo"), stat.S_IFIFO | 0o666)
            # chmod rewrites the ACL mask.
            os.chmod(J(r, "f"), 0o640)
        for rel in ("f", "d", "d/inherit", "d/subdir", "d/subdir/deeper", "d/fifo"):
            n = _getfacl(J(tw.nat, rel))
            v = _getfacl(J(tw.via, rel))
            bv = _getfacl(J(tw.bvia, rel))
            assert v == n, f"{rel}: mount\n{v[1]}\nnative\n{n[1]}"
            assert bv == n, f"{rel}: backend of mount\n{bv[1]}\nnative\n{n[1]}"
        for r in tw.roots():
            assert setfacl("-b", J(r, "f")) == 0
            assert setfacl("-k", J(r, "d")) == 0
        assert _getfacl(J(tw.via, "f")) == _getfacl(J(tw.nat, "f"))
        assert _getfacl(J(tw.via, "d")) == _getfacl(J(tw.nat, "d"))
    finally:
        os.umask(old)
    tw.check()


# --- fallocate / copy_file_range / lseek ---------------------------------------

def test_fallocate(tw):
    def body(r):
        out = []
        p = J(r, "f")
        write(p, bytes(range(256)) * 1024)  # 256 KiB
        fd = os.open(p, os.O_RDWR)
        try:
            def st():
                s = os.fstat(fd)
                return [s.st_size, Approx(s.st_blocks)]
            out.append(st())
            out.append(outcome(fallocate, fd, 0, 0, 1 << 20))
            out.append(st())
            out.append(outcome(fallocate, fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20))
            out.append(st())
            out.append(outcome(fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               4096, 65536))
            out.append(st())
            out.append(os.pread(fd, 256 * 1024, 0))
            out.append(outcome(fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096))
            out.append(st())
            out.append(os.pread(fd, 256 * 1024, 0))
            out.append(outcome(fallocate, fd, 0, 0, 0))
            out.append(outcome(fallocate, fd, 0, -1, 10))
            out.append(outcome(os.posix_fallocate, fd, 3 << 20, 1 << 20))
            out.append(st())
        finally:
            os.close(fd)
        fd = os.open(p, os.O_RDONLY)
        out.append(outcome(fallocate, fd, 0, 0, 10))
        os.close(fd)
        return out
    tw.both(body)
    tw.check()


def test_copy_file_range(tw):
    src = bytes((i * 7) % 251 for i in range(300000))

    def body(r):
        out = []
        write(J(r, "src"), src)
        fi = os.open(J(r, "src"), os.O_RDONLY)
        fo = os.open(J(r, "dst"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            n = 0
            while n < len(src):
                k = os.copy_file_range(fi, fo, len(src) - n)
                if k == 0:
                    break
                n += k
            out.append(n)
            out.append(os.copy_file_range(fi, fo, 5000, 1000, 400000))
            out.append(os.copy_file_range(fi, fo, 100, 299950, 10))
            out.append(os.copy_file_range(fi, fo, 100, 10**6, 0))  # at EOF: 0
            out.append(os.lseek(fi, 0, os.SEEK_CUR))
        finally:
            os.close(fi)
            os.close(fo)
        out.append(read(J(r, "dst")))
        fi = os.open(J(r, "src"), os.O_RDONLY)
        fo = os.open(J(r, "src"), os.O_RDONLY)
        out.append(outcome(os.copy_file_range, fi, fo, 10))
        os.close(fi)
        os.close(fo)
        return out
    tw.both(body)
    tw.check()


def test_lseek_data_hole(tw):
    def body(r):
        p = J(r, "sparse")
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, b"D" * 65536, 0)
            os.pwrite(fd, b"E" * 65536, 4 << 20)
            os.pwrite(fd, b"F" * 100, 10 << 20)
            os.fsync(fd)
            out = [os.fstat(fd).st_size]
            for off in (0, 100, 65536, 1 << 20, (4 << 20) + 10, 8 << 20,
                        (10 << 20) + 50, (10 << 20) + 100, 20 << 20):
                out.append([off, outcome(os.lseek, fd, off, os.SEEK_DATA),
                            outcome(os.lseek, fd, off, os.SEEK_HOLE)])
            out.append(outcome(os.lseek, fd, -1, os.SEEK_SET))
            out.append(os.lseek(fd, -10, os.SEEK_END))
            out.append(os.read(fd, 100))
        finally:
            os.close(fd)
        return out
    tw.both(body)
    tw.check()


# --- fsync / locks / mmap ------------------------------------------------------

def test_fsync_fdatasync_fsyncdir(tw):
    def body(r):
        out = []
        fd = os.open(J(r, "f"), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"sync me")
        out.append(outcome(os.fsync, fd))
        out.append(outcome(os.fdatasync, fd))
        os.close(fd)
        fd = os.open(r, os.O_RDONLY | os.O_DIRECTORY)
        out.append(outcome(os.fsync, fd))
        out.append(outcome(os.fdatasync, fd))
        os.close(fd)
        fd = os.open(J(r, "f"), os.O_RDONLY)
        out.append(outcome(os.fsync, fd))
        os.close(fd)
        return out
    tw.both(body)
    tw.check()


_LOCK_HOLDER = r"""
import fcntl, os, sys, time
path, kind, ready = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(path, os.O_RDWR)
if kind == "flock_ex":
    fcntl.flock(fd, fcntl.LOCK_EX)
elif kind == "flock_sh":
    fcntl.flock(fd, fcntl.LOCK_SH)
elif kind == "posix":
    fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)   # bytes [0, 100)
    fcntl.lockf(fd, fcntl.LOCK_SH, 100, 200) # bytes [200, 300) shared
open(ready, "w").close()
sys.stdin.read()  # hold until told
os.close(fd)
"""


def _lock_holder(path, kind, tmpdir):
    ready = os.path.join(tmpdir, f"ready-{kind}")
    if os.path.exists(ready):
        os.unlink(ready)
    p = subprocess.Popen(["/usr/bin/python3", "-c", _LOCK_HOLDER, path, kind, ready],
                         stdin=subprocess.PIPE)
    deadline = time.monotonic() + 10 * SLOW
    while not os.path.exists(ready):
        assert p.poll() is None, "lock holder died"
        assert time.monotonic() < deadline, "lock holder never got its lock"
        time.sleep(0.01)
    return p


def _release(p):
    p.stdin.close()
    assert p.wait(10 * SLOW) == 0


def _flock_probe(path):
    fd = os.open(path, os.O_RDWR)
    try:
        return [outcome(fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                outcome(fcntl.flock, fd, fcntl.LOCK_SH | fcntl.LOCK_NB)]
    finally:
        os.close(fd)


def test_flock_between_processes(tw, tmp_path):
    res = {}
    for r in tw.roots():
        p = J(r, "lockfile")
        write(p, b"")
        out = []
        h = _lock_holder(p, "flock_ex", str(tmp_path))
        out.append(_flock_probe(p))
        _release(h)
        out.append(_flock_probe(p))
        h = _lock_holder(p, "flock_sh", str(tmp_path))
        out.append(_flock_probe(p))
        _release(h)
        res[r] = out
    assert res[tw.via] == res[tw.nat]
    # And they are what flock promises.
    assert res[tw.via][0] == [("err", "EAGAIN"), ("err", "EAGAIN")]
    assert res[tw.via][1] == [("ok", None), ("ok", None)]
    assert res[tw.via][2] == [("err", "EAGAIN"), ("ok", None)]


def _posix_probe(path):
    import struct
    fd = os.open(path, os.O_RDWR)
    out = []
    try:
        for (ln, start) in ((10, 50), (100, 100), (10, 250), (10, 350)):
            out.append([start, outcome(fcntl.lockf, fd, fcntl.LOCK_EX | fcntl.LOCK_NB, ln, start)])
            fcntl.lockf(fd, fcntl.LOCK_UN, ln, start)
        out.append(outcome(fcntl.lockf, fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 250))
        fcntl.lockf(fd, fcntl.LOCK_UN, 10, 250)
        # F_GETLK: who holds byte 50?
        fl = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 50, 1, 0)
        r = fcntl.fcntl(fd, fcntl.F_GETLK, fl)
        typ, _, st, ln, pid = struct.unpack("hhqqi", r[:struct.calcsize("hhqqi")])
        out.append(["getlk", typ, st, ln, pid != 0])
    finally:
        os.close(fd)
    return out


def test_posix_locks_between_processes(tw, tmp_path):
    res = {}
    for r in tw.roots():
        p = J(r, "lockfile")
        write(p, b"x" * 1000)
        h = _lock_holder(p, "posix", str(tmp_path))
        res[r] = _posix_probe(p)
        _release(h)
        res[r].append(_posix_probe(p))
    assert res[tw.via] == res[tw.nat]
    v = res[tw.via]
    assert v[0] == [50, ("err", "EAGAIN")] or v[0] == [50, ("err", "EACCES")]
    assert v[1] == [100, ("ok", None)]
    assert v[2][1][0] == "err"  # shared lock held: exclusive refused
    assert v[4] == ("ok", None)  # shared on shared: fine
    assert v[5][1] == fcntl.F_WRLCK


def test_mmap_read_write(tw):
    def body(r):
        out = []
        p = J(r, "f")
        write(p, bytes(range(256)) * 64)
        fd = os.open(p, os.O_RDWR)
        try:
            m = mmap.mmap(fd, 16384, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            out.append(m[:16] + m[-16:])
            m[100:110] = b"MMAPWRITE!"
            m[8000:8004] = b"\x00\x01\x02\x03"
            m.flush()
            m.close()
            out.append(os.pread(fd, 16384, 0))
            os.ftruncate(fd, 8192)
            m = mmap.mmap(fd, 8192, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
            m[0:4] = b"PRIV"  # never reaches the file
            out.append(m[:8])
            m.close()
        finally:
            os.close(fd)
        out.append(read(p)[:8])
        return out
    tw.both(body)
    tw.check()
    # Writes made through a shared mapping on the mount are in the backend.
    assert read(J(tw.bvia, "f"))[100:110] == b"MMAPWRITE!"


def test_mmap_sees_backend_content(fs):
    data = os.urandom(3 * 4096 + 17)
    write(fs.b("f"), data)
    with open(fs.m("f"), "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert m[:] == data
        m.close()


def test_exec_from_mount(fs):
    src = "/bin/true"
    with open(src, "rb") as f:
        write(fs.m("true"), f.read(), 0o755)
    r = subprocess.run([fs.m("true")])
    assert r.returncode == 0
    write(fs.m("script"), b"#!/bin/sh\necho from-the-mount\n", 0o755)
    r = subprocess.run([fs.m("script")], capture_output=True, text=True)
    assert r.stdout == "from-the-mount\n"


# --- access / dir fds ----------------------------------------------------------

def test_access_as_root(tw):
    def body(r):
        out = []
        for mode in (0o000, 0o644, 0o100, 0o010, 0o001, 0o755):
            p = J(r, f"f{mode:o}")
            write(p, b"x", mode)
            os.chmod(p, mode)
            out.append([oct(mode)] + [os.access(p, m) for m in (os.R_OK, os.W_OK, os.X_OK)])
        os.mkdir(J(r, "d"), 0o000)
        out.append([os.access(J(r, "d"), m) for m in (os.R_OK, os.W_OK, os.X_OK)])
        out.append(os.access(J(r, "missing"), os.F_OK))
        return out
    tw.both(body)
    tw.check()


def test_dirfd_relative_ops_survive_rename(tw):
    def body(r):
        out = []
        os.mkdir(J(r, "d"))
        dfd = os.open(J(r, "d"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.rename(J(r, "d"), J(r, "moved"))
            fd = os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd)
            os.write(fd, b"relative")
            os.close(fd)
            os.mkdir("sub", dir_fd=dfd)
            os.symlink("f", "sl", dir_fd=dfd)
            out.append(sorted(os.listdir(dfd)))
            out.append(os.readlink("sl", dir_fd=dfd))
            out.append(outcome(os.stat, "missing", dir_fd=dfd))
            os.rename("f", "sub/g", src_dir_fd=dfd, dst_dir_fd=dfd)
            out.append(outcome(os.unlink, "sub", dir_fd=dfd))
            out.append(oct(stat.S_IMODE(os.stat("sub/g", dir_fd=dfd).st_mode)))
        finally:
            os.close(dfd)
        out.append(read(J(r, "moved", "sub", "g")))
        return out
    tw.both(body)
    tw.check()


def test_dir_removed_while_open(tw):
    def body(r):
        os.mkdir(J(r, "d"))
        dfd = os.open(J(r, "d"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.rmdir(J(r, "d"))
            return [outcome(os.listdir, dfd),
                    outcome(os.open, "new", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dfd),
                    os.fstat(dfd).st_nlink]
        finally:
            os.close(dfd)
    tw.both(body)
    tw.check()


# --- external changes to the backend -------------------------------------------

def test_external_changes_visible(fs):
    """Default timeouts: what another program does directly in the backend
    is visible through the mount within about the attr timeout (1 s)."""
    write(fs.b("f"), b"version one")
    assert read(fs.m("f")) == b"version one"
    assert read(fs.m("f")) == b"version one"  # cached re-read
    let_time_pass(0.05, "the rewrite's mtime differs from the cached "
                  "one (files are stamped from a coarse clock)")
    write(fs.b("f"), b"version TWO")  # same size
    _eventually(lambda: read(fs.m("f")) == b"version TWO", "same-size rewrite")
    with open(fs.b("f"), "ab") as f:
        f.write(b" and longer")
    _eventually(lambda: read(fs.m("f")) == b"version TWO and longer", "append")
    _eventually(lambda: os.stat(fs.m("f")).st_size == len(b"version TWO and longer"), "size")
    # Replaced by another inode (an editor's save).
    write(fs.b("f.new"), b"replacement")
    os.rename(fs.b("f.new"), fs.b("f"))
    _eventually(lambda: read(fs.m("f")) == b"replacement", "rename over")
    _eventually(lambda: os.stat(fs.m("f")).st_ino == os.stat(fs.b("f")).st_ino, "new ino")
    # Created and removed from outside.
    write(fs.b("g"), b"new file")
    assert read(fs.m("g")) == b"new file"  # negative_timeout 0: at once
    os.unlink(fs.b("g"))
    _eventually(lambda: not os.path.exists(fs.m("g")), "external unlink")
    os.mkdir(fs.b("dir"))
    write(fs.b("dir", "x"), b"in dir")
    assert read(fs.m("dir", "x")) == b"in dir"
    os.chmod(fs.b("f"), 0o600)
    _eventually(lambda: stat.S_IMODE(os.stat(fs.m("f")).st_mode) == 0o600, "chmod")


def test_external_truncate_and_shrink(fs):
    write(fs.b("f"), b"A" * 200000)
    assert read(fs.m("f")) == b"A" * 200000
    let_time_pass(0.05, "the rewrite's mtime differs from the cached "
                  "one (files are stamped from a coarse clock)")
    write(fs.b("f"), b"short")
    _eventually(lambda: read(fs.m("f")) == b"short", "shrunk file")
    fd = os.open(fs.m("f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 100, 0) == b"short"
        let_time_pass(0.05, "the rewrite's mtime differs from the cached "
                      "one (files are stamped from a coarse clock)")
        with open(fs.b("f"), "r+b") as f:
            f.write(b"SHORT")
        # An already open descriptor also sees new data after the timeout.
        _eventually(lambda: os.pread(fd, 100, 0) == b"SHORT", "open fd re-read")
    finally:
        os.close(fd)


def test_reopen_unchanged_file_cached_correctly(fs):
    data = os.urandom(1 << 20)
    write(fs.b("f"), data)
    for _ in range(5):
        assert read(fs.m("f")) == data
    let_time_pass(1.2, "the kernel's 1 s attribute and entry caches expire")
    assert read(fs.m("f")) == data
    # Changed through the mount: the next open sees the change.
    with open(fs.m("f"), "r+b") as f:
        f.seek(4096)
        f.write(b"changed")
    d2 = data[:4096] + b"changed" + data[4096 + 7:]
    assert read(fs.m("f")) == d2
    assert read(fs.b("f")) == d2


def _eventually(pred, what, limit=2.5):
    deadline = time.monotonic() + limit
    while True:
        if pred():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: mount still stale after {limit}s")
        time.sleep(0.05)
