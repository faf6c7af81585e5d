# SPDX-License-Identifier: GPL-2.0-or-later
# NFS export support, tested the way nfsd uses a filesystem: file handles
# from name_to_handle_at, opened again with open_by_handle_at after the
# kernel evicted the inodes (drop_caches) and across a remount. A handle of
# a clamfs mount holds the daemon's node id, so forged handles (random ids,
# the backend's own handle of a file outside a subdirectory backend, a
# handle whose generation says "any") must give ESTALE and leave the daemon
# running; the scan gate applies to opens by handle.
import ctypes
import ctypes.util
import os
import random
import resource
import struct

import pytest

from clamfstest.errnames import errname
from clamfstest.wait import past_the_fd_cap
from fsutil import LoopFs
from scanutil import mount_scan, put, stats, wait_for

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                    use_errno=True)
AT_FDCWD = -100
MAX_HANDLE_SZ = 128
# include/linux/exportfs.h
FILEID_INO32_GEN = 1
FILEID_INO64_GEN = 0x81  # FUSE's: node id (2 x u32), generation (u32)


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint),
                ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def name_to_handle(path):
    """(type, bytes) of the object at path, not following a last symlink."""
    fh = FileHandle(handle_bytes=MAX_HANDLE_SZ)
    mount_id = ctypes.c_int()
    if _libc.name_to_handle_at(AT_FDCWD, os.fsencode(path),
                               ctypes.byref(fh), ctypes.byref(mount_id),
                               0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return fh.handle_type, bytes(fh.f_handle[:fh.handle_bytes])


def open_by_handle(mnt, handle, flags=os.O_RDONLY):
    typ, data = handle
    fh = FileHandle(handle_bytes=len(data), handle_type=typ)
    ctypes.memmove(fh.f_handle, data, len(data))
    mfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = _libc.open_by_handle_at(mfd, ctypes.byref(fh),
                                     flags | os.O_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return fd
    finally:
        os.close(mfd)


def fuse_handle(nodeid, gen):
    return FILEID_INO64_GEN, struct.pack("=III", nodeid >> 32,
                                         nodeid & 0xffffffff, gen)


def nodeid_of(handle):
    typ, data = handle
    assert typ == FILEID_INO64_GEN, handle
    hi, lo, gen = struct.unpack("=III", data[:12])
    return hi << 32 | lo, gen


def read_handle(mnt, handle):
    fd = open_by_handle(mnt, handle)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def handle_errno(mnt, handle, flags=os.O_RDONLY):
    try:
        os.close(open_by_handle(mnt, handle, flags))
        return "ok"
    except OSError as e:
        return errname(e.errno)


def evict(m):
    """Has the kernel evict every inode of the mount it does not use, and
    waits until the daemon got the FORGETs (only the root is left)."""
    def gone():
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return stats(m.mnt)["inodes"] == 1
    assert wait_for(gone, 10, interval=0.2), stats(m.mnt)["inodes"]


def inode_count(m):
    return stats(m.mnt)["inodes"]


@pytest.fixture
def ext4_backend(mount_clamfs):
    """A whole ext4 filesystem as backend: node ids are its handles."""
    fs = LoopFs(mount_clamfs.tempdir("clamfs-exp"), 16,
                ["mkfs.ext4", "-q", "-F"])
    try:
        yield fs.path
    finally:
        fs.close()


def make_tree(m):
    put(m.b("f.txt"), b"file content\n")
    os.makedirs(m.b("a", "b"))
    put(m.b("a", "b", "g.txt"), b"deep content\n")


def backend_for(request, kind):
    return request.getfixturevalue("ext4_backend") if kind == "ext4" else None


@pytest.mark.parametrize("backend", ["subdir", "ext4"])
def test_handles_survive_eviction(mount_clamfs, clamd, request, backend):
    m = mount_scan(mount_clamfs, clamd, backend=backend_for(request, backend))
    make_tree(m)
    hf = name_to_handle(m.m("f.txt"))
    hd = name_to_handle(m.m("a", "b"))
    hg = name_to_handle(m.m("a", "b", "g.txt"))
    assert read_handle(m.mnt, hf) == b"file content\n"
    evict(m)
    # what nfsd does when a client comes back after the inode was evicted
    assert read_handle(m.mnt, hf) == b"file content\n"
    assert read_handle(m.mnt, hg) == b"deep content\n"
    evict(m)
    # a directory handle, reconnected through ".." up to the root
    dfd = open_by_handle(m.mnt, hd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sorted(os.listdir(dfd)) == ["g.txt"]
        pfd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
        try:
            assert os.listdir(pfd) == ["b"]
            assert os.fstat(pfd).st_ino == os.stat(m.b("a")).st_ino
        finally:
            os.close(pfd)
    finally:
        os.close(dfd)
    # a directory right below the root: its parent is the mount's root
    ha = name_to_handle(m.m("a"))
    evict(m)
    afd = open_by_handle(m.mnt, ha, os.O_RDONLY | os.O_DIRECTORY)
    try:
        up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=afd)
        st, root = os.fstat(up), os.stat(m.mnt)
        os.close(up)
        assert (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino)
    finally:
        os.close(afd)
    # the same file keeps its node id when it comes back by name
    evict(m)
    os.stat(m.m("a", "b", "g.txt"))
    assert name_to_handle(m.m("a", "b", "g.txt")) == hg
    assert name_to_handle(m.m("a", "b")) == hd
    assert m.alive()


def test_deleted_file_handle_is_stale(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("gone.txt"), b"x\n")
    h = name_to_handle(m.m("gone.txt"))
    os.unlink(m.m("gone.txt"))
    evict(m)
    # a new file may take the inode number: it must not answer the handle
    for i in range(20):
        put(m.b(f"new{i}"), b"new\n")
        os.stat(m.m(f"new{i}"))
    assert handle_errno(m.mnt, h) == "ESTALE"
    assert m.alive()


def test_directory_moved_out_of_the_backend(mount_clamfs, clamd):
    """A direct backend writer moves a directory out of a subdirectory
    backend while a client holds its handle: reopened after eviction, or
    reconnected through "..", it must not lead to the host's files
    around the backend."""
    m = mount_scan(mount_clamfs, clamd)
    os.makedirs(m.b("d", "sub"))
    put(m.b("d", "sub", "f.txt"), b"in the share\n")
    hsub = name_to_handle(m.m("d", "sub"))
    hd = name_to_handle(m.m("d"))
    outside = os.path.join(os.path.dirname(m.backend), "outside")
    put(os.path.join(os.path.dirname(m.backend), "secret.txt"), b"host\n")
    os.rename(m.b("d"), outside)
    evict(m)
    assert handle_errno(m.mnt, hd) == "ESTALE"
    assert handle_errno(m.mnt, hsub) == "ESTALE"
    # (the kernel also refuses a directory it cannot connect to the
    # export's root; the daemon no longer hands out the directories
    # around the backend while it tries: test_inode's
    # test_dir_beneath_root)
    assert inode_count(m) == 1, inode_count(m)
    assert m.alive()


def test_eicar_behind_handle_is_refused(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("eicar.com"), clamd.eicar)
    put(m.b("clean.txt"), b"clean\n")
    he = name_to_handle(m.m("eicar.com"))
    hc = name_to_handle(m.m("clean.txt"))
    assert handle_errno(m.mnt, he) == "EACCES"
    evict(m)
    assert handle_errno(m.mnt, he) == "EACCES"
    assert handle_errno(m.mnt, he, os.O_RDWR) == "EACCES"
    assert read_handle(m.mnt, hc) == b"clean\n"


def forged_ids(seen):
    rnd = random.Random(11)
    ids = [2, 3, 1 << 32, 2 << 32, 0xffffffffffffffff, 0xdeadbeef,
           0x00007f0000001000]
    ids += [rnd.getrandbits(64) for _ in range(200)]
    ids += [rnd.getrandbits(47) & ~0xf for _ in range(100)]  # like pointers
    return [i for i in ids if i not in seen and i != 1]


@pytest.mark.parametrize("backend", ["subdir", "ext4"])
def test_forged_handles_are_stale(mount_clamfs, clamd, request, backend):
    m = mount_scan(mount_clamfs, clamd, backend=backend_for(request, backend))
    make_tree(m)
    real = nodeid_of(name_to_handle(m.m("f.txt")))
    seen = {real[0]}
    for nodeid in forged_ids(seen):
        for gen in (0, real[1], 1):
            h = fuse_handle(nodeid, gen)
            assert handle_errno(m.mnt, h) in ("ESTALE", "ENOENT"), \
                hex(nodeid)
    # the right id with a wrong generation, once evicted too
    bad_gen = fuse_handle(real[0], real[1] ^ 0x5a5a)
    assert handle_errno(m.mnt, bad_gen) == "ESTALE"
    evict(m)
    assert handle_errno(m.mnt, bad_gen) == "ESTALE"
    if backend == "subdir":
        # the backend's own filesystem handle of a file outside it, as an
        # id: never decoded, whatever the bytes
        outside = os.path.join(os.path.dirname(m.backend), "outside.txt")
        put(outside, b"secret\n")
        # (ext4 here: inode number, generation; tmpfs adds a word)
        typ, data = name_to_handle(outside)
        w = struct.unpack(f"={len(data) // 4}I", data[:len(data) // 4 * 4])
        w = w + (0,) * (2 - len(w))
        for nodeid in (w[1] << 32 | w[0], w[0] << 32 | w[1], w[0]):
            for gen in (0, w[1]):
                assert handle_errno(m.mnt, fuse_handle(nodeid, gen)) == \
                    "ESTALE", (typ, data)
    else:
        # a real ext4 handle with generation 0 (which ext4 takes as
        # "any"): the same file, but not its id
        typ, data = name_to_handle(m.b("f.txt"))
        ino, gen = struct.unpack("=II", data)
        assert handle_errno(m.mnt, fuse_handle(ino, 0)) == "ESTALE"
        # and its id is exactly its handle: it survives a restart
        assert real[0] == gen << 32 | ino
        # the root's own ext4 handle is not another name for id 1
        typ, data = name_to_handle(m.b())
        ino, gen = struct.unpack("=II", data)
        assert handle_errno(m.mnt, fuse_handle(gen << 32 | ino, 0),
                            os.O_RDONLY | os.O_DIRECTORY) == "ESTALE"
    assert m.alive()
    assert read_handle(m.mnt, name_to_handle(m.m("f.txt"))) == \
        b"file content\n"


def test_handles_survive_parking_and_forgetting(mount_clamfs, clamd):
    # with few fds the daemon closes those of files nobody uses (parks
    # them) while files are looked up, then the kernel forgets them all:
    # the handles of parked and of forgotten ones still work
    def nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    m = mount_scan(mount_clamfs, clamd, preexec_fn=nofile)
    os.mkdir(m.b("d"))
    for i in range(1500):
        put(m.b("d", f"f{i}"), b"content %d\n" % i)
    handles = [name_to_handle(m.m("d", f"f{i}")) for i in range(0, 1500, 50)]
    for i in range(1500):
        past_the_fd_cap(os.stat, m.m("d", f"f{i}"))
    assert stats(m.mnt)["inode_fds"] < 256
    for k, h in enumerate(handles):
        assert read_handle(m.mnt, h) == b"content %d\n" % (k * 50)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")
    assert wait_for(lambda: inode_count(m) < 256, 10, interval=0.2), \
        inode_count(m)
    for k, h in enumerate(handles):
        assert read_handle(m.mnt, h) == b"content %d\n" % (k * 50)
    assert m.alive()


def remount(mount_clamfs, clamd, m):
    problems = m.teardown()
    assert not problems, problems
    return mount_scan(mount_clamfs, clamd, backend=m.backend, mnt=m.mnt)


def test_handles_survive_remount_of_whole_fs(mount_clamfs, clamd,
                                             ext4_backend):
    m = mount_scan(mount_clamfs, clamd, backend=ext4_backend)
    make_tree(m)
    hf = name_to_handle(m.m("f.txt"))
    hd = name_to_handle(m.m("a", "b"))
    hg = name_to_handle(m.m("a", "b", "g.txt"))
    m2 = remount(mount_clamfs, clamd, m)
    assert inode_count(m2) == 1
    assert read_handle(m2.mnt, hf) == b"file content\n"
    assert read_handle(m2.mnt, hg) == b"deep content\n"
    dfd = open_by_handle(m2.mnt, hd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.listdir(dfd) == ["g.txt"]
    finally:
        os.close(dfd)
    assert name_to_handle(m2.m("f.txt")) == hf


def test_subdir_handles_stale_after_remount(mount_clamfs, clamd):
    # documented: a subdirectory backend gets ids from a counter, so after
    # a restart its handles are stale, and never another file's
    m = mount_scan(mount_clamfs, clamd)
    make_tree(m)
    hf = name_to_handle(m.m("f.txt"))
    m2 = remount(mount_clamfs, clamd, m)
    # the new daemon hands out ids again, likely the same numbers
    os.stat(m2.m("a", "b", "g.txt"))
    os.stat(m2.m("f.txt"))
    assert handle_errno(m2.mnt, hf) == "ESTALE"
    assert read_handle(m2.mnt, name_to_handle(m2.m("f.txt"))) == \
        b"file content\n"
