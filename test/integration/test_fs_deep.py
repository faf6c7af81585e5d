# SPDX-License-Identifier: GPL-2.0-or-later
# A tree deeper than PATH_MAX (300 levels of 20-character names, 6300 bytes)
# made, walked, changed and removed through the mount with dir-fd relative
# calls and step-by-step chdir, also after the kernel forgot every inode.
import os
import shutil
import stat

import pytest

from fsutil import outcome

# Mirror tests run with scanning on, against the private clamd.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")

DEPTH = 300
NAMES = [f"level-{i:04d}-".ljust(20, "x") for i in range(DEPTH)]
assert all(len(n) == 20 for n in NAMES)
DIRFLAGS = os.O_RDONLY | os.O_DIRECTORY


def walk_fd(top, names):
    """An fd of top/names[0]/.../names[-1], opened one level at a time."""
    fd = os.open(top, DIRFLAGS)
    try:
        for n in names:
            nfd = os.open(n, DIRFLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError:
        os.close(fd)
        raise
    return fd


def build(top):
    fd = os.open(top, DIRFLAGS)
    for n in NAMES:
        os.mkdir(n, 0o755, dir_fd=fd)
        nfd = os.open(n, DIRFLAGS, dir_fd=fd)
        os.close(fd)
        fd = nfd
    f = os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
    os.write(f, b"at the bottom " * 1000)
    os.close(f)
    os.symlink("../" * 3 + "bottom-of-3", "up3", dir_fd=fd)
    return fd


def drop_kernel_caches():
    """Makes the kernel forget cached dentries and inodes, so the daemon
    gets FORGETs and must look every level up again."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def test_deep_tree_through_mount(fs):
    rel = "/".join(NAMES)
    assert len(os.path.join(fs.mnt, rel)) > 4096
    fd = build(fs.mnt)
    try:
        st_m = os.fstat(fd)
    finally:
        os.close(fd)
    # The backend holds exactly that, same inode.
    bfd = walk_fd(fs.backend, NAMES)
    try:
        assert os.fstat(bfd).st_ino == st_m.st_ino
        f = os.open("bottom", os.O_RDONLY, dir_fd=bfd)
        assert os.read(f, 1 << 20) == b"at the bottom " * 1000
        os.close(f)
        assert os.readlink("up3", dir_fd=bfd) == "../../../bottom-of-3"
    finally:
        os.close(bfd)
    # Full paths are too long on both sides, with the same errno.
    full_m, full_b = os.path.join(fs.mnt, rel, "bottom"), os.path.join(fs.backend, rel, "bottom")
    assert outcome(os.stat, full_m) == outcome(os.stat, full_b) == ("err", "ENAMETOOLONG")

    # Walk down again after the kernel forgot everything.
    drop_kernel_caches()
    fd = walk_fd(fs.mnt, NAMES)
    try:
        assert os.fstat(fd).st_ino == st_m.st_ino
        f = os.open("bottom", os.O_RDWR, dir_fd=fd)
        assert os.read(f, 14) == b"at the bottom "
        os.pwrite(f, b"CHANGED", 0)
        os.close(f)
        assert sorted(os.listdir(fd)) == ["bottom", "up3"]
        os.mkdir("sub", dir_fd=fd)
        os.rename("bottom", "sub/moved", src_dir_fd=fd, dst_dir_fd=fd)
        assert stat.S_ISREG(os.stat("sub/moved", dir_fd=fd).st_mode)
        os.link("sub/moved", "hard", src_dir_fd=fd, dst_dir_fd=fd)
        assert os.stat("hard", dir_fd=fd).st_nlink == 2
        assert outcome(os.stat, "up3", dir_fd=fd) == ("err", "ENOENT")
    finally:
        os.close(fd)
    bfd = walk_fd(fs.backend, NAMES)
    try:
        f = os.open("sub/moved", os.O_RDONLY, dir_fd=bfd)
        assert os.read(f, 14) == b"CHANGEDbottom "
        os.close(f)
    finally:
        os.close(bfd)

    # Rename a directory half way down; the subtree follows.
    mid = NAMES[:150]
    fd = walk_fd(fs.mnt, mid)
    try:
        os.rename(NAMES[150], "renamed-in-the-middle", src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    names2 = mid + ["renamed-in-the-middle"] + NAMES[151:]
    drop_kernel_caches()
    fd = walk_fd(fs.mnt, names2)
    try:
        assert os.fstat(fd).st_ino == st_m.st_ino
    finally:
        os.close(fd)
    assert outcome(walk_fd, fs.mnt, NAMES) == ("err", "ENOENT")

    # fwalk (fd based) sees the whole tree, like in the backend.
    def count(top):
        dirs = files = 0
        for _, ds, fs_, _ in os.fwalk(top):
            dirs += len(ds)
            files += len(fs_)
        return dirs, files
    assert count(fs.mnt) == count(fs.backend) == (DEPTH + 1, 2 + 1)

    # Remove it all through the mount (fd-relative rmtree).
    shutil.rmtree(os.path.join(fs.mnt, NAMES[0]))
    assert os.listdir(fs.backend) == []
    assert os.listdir(fs.mnt) == []


def test_deep_chdir_step_by_step(fs):
    fd = build(fs.mnt)
    os.close(fd)
    old = os.getcwd()
    try:
        # The same walk in the backend and through the mount.
        res = {}
        for side, top in (("backend", fs.backend), ("mount", fs.mnt)):
            os.chdir(top)
            for n in NAMES:
                os.chdir(n)
            out = [os.stat(".").st_ino]
            with open("bottom", "rb") as f:
                out.append(f.read(14))
            with open(f"made-by-chdir-{side}", "wb") as f:
                f.write(side.encode())
            out.append(sorted(x for x in os.listdir(".") if not x.startswith(("made-by", "dir-"))))
            os.mkdir(f"dir-{side}")
            os.chdir(f"dir-{side}")
            os.chdir("..")
            cwd = outcome(os.getcwd)
            if cwd[0] == "ok":
                cwd = ("ok", os.path.relpath(cwd[1], top))
            out.append(cwd)
            for _ in NAMES:
                os.chdir("..")
            out.append(os.stat(".").st_ino == os.stat(top).st_ino)
            out.append(os.getcwd() == top)
            res[side] = out
        assert res["mount"] == res["backend"]
        assert res["mount"][-2:] == [True, True]
    finally:
        os.chdir(old)
    bfd = walk_fd(fs.backend, NAMES)
    try:
        assert sorted(os.listdir(bfd)) == ["bottom", "dir-backend", "dir-mount",
                                           "made-by-chdir-backend", "made-by-chdir-mount",
                                           "up3"]
        f = os.open("made-by-chdir-mount", os.O_RDONLY, dir_fd=bfd)
        assert os.read(f, 100) == b"mount"
        os.close(f)
    finally:
        os.close(bfd)


@pytest.mark.parametrize("level", [1, 100])
def test_long_names_at_depth(fs, level):
    """255-byte names work at any depth, 256 fail with ENAMETOOLONG, as in
    the backend."""
    for top in (fs.backend, fs.mnt):
        sub = "nat" if top == fs.backend else "via"
        os.mkdir(os.path.join(top, sub))
    res = {}
    for sub, top in (("nat", fs.backend), ("via", fs.mnt)):
        fd = os.open(os.path.join(top, sub), DIRFLAGS)
        for i in range(level):
            os.mkdir(NAMES[i], dir_fd=fd)
            nfd = os.open(NAMES[i], DIRFLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
        try:
            res[sub] = [
                outcome(os.mkdir, "d" * 255, dir_fd=fd),
                outcome(os.mkdir, "d" * 256, dir_fd=fd),
                outcome(lambda: os.close(os.open("f" * 256, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))),
                outcome(os.stat, "d" * 256, dir_fd=fd),
                outcome(os.symlink, "t", "s" * 256, dir_fd=fd),
                outcome(os.rename, "d" * 255, "r" * 256, src_dir_fd=fd, dst_dir_fd=fd),
                sorted(os.listdir(fd)),
            ]
        finally:
            os.close(fd)
    assert res["via"] == res["nat"]
    assert res["via"][1] == ("err", "ENAMETOOLONG")
