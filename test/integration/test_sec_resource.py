# SPDX-License-Identifier: GPL-2.0-or-later
# Writes carried out for a user must meet the limits the user meets
# natively: the daemon runs as root, but without CAP_SYS_RESOURCE (quota
# hard limits, the blocks ext4 reserves for root).
import os

import pytest

from fsutil import GID_A, UID_A, LoopFs, run_as
from scanutil import mount_scan

# Fills a file until the filesystem says no: by write(), or by dirtying a
# shared mapping of a sparse file page by page (the kernel writes the
# pages back to the daemon without credentials).
FILL = """
import errno, mmap
def by_write(p):
    n = 0
    chunk = b"z" * 65536
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while n < (64 << 20):
            try:
                n += os.write(fd, chunk)
            except OSError as e:
                return [n, errno.errorcode[e.errno]]
    finally:
        os.close(fd)
    return [n, "none"]
def by_mmap(p):
    # each MiB in a child: natively a fault that cannot allocate is SIGBUS
    size = 32 << 20
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, size)
    n = 0
    for off in range(0, size, 1 << 20):
        child = os.fork()
        if child == 0:
            mm = mmap.mmap(fd, 1 << 20, offset=off)
            mm[:] = b"m" * (1 << 20)
            try:
                mm.flush()
            except OSError as e:
                os._exit(3)
            os._exit(0)
        _, status = os.waitpid(child, 0)
        if status != 0:
            os.close(fd)
            return [n, "SIGBUS" if os.WIFSIGNALED(status) else "EIO"]
        n = off + (1 << 20)
    os.close(fd)
    return [n, "none"]
fn = by_write if ARGS["how"] == "write" else by_mmap
emit(fn(P(ARGS["name"])))
"""


@pytest.fixture
def reserved_fs(mount_clamfs):
    # half of a 24 MiB ext4 is reserved for root
    fs = LoopFs(mount_clamfs.tempdir("clamfs-res"), 24,
                ["mkfs.ext4", "-q", "-F", "-m", "50"])
    os.chmod(fs.path, 0o1777)
    try:
        yield fs.path
    finally:
        fs.close()


@pytest.mark.parametrize("how", ["write", "mmap"])
def test_user_cannot_use_root_reserve(mount_clamfs, clamd, reserved_fs, how):
    # natively first: a file the daemon never saw is freed at unlink
    native, err = run_as(UID_A, GID_A, [], FILL, reserved_fs,
                         args={"name": "native", "how": how})
    assert err in ("ENOSPC", "SIGBUS"), (native, err)
    os.unlink(os.path.join(reserved_fs, "native"))
    os.sync()
    m = mount_scan(mount_clamfs, clamd, backend=reserved_fs)
    via_mount, err = run_as(UID_A, GID_A, [], FILL, m.mnt,
                            args={"name": "a", "how": how})
    assert err in ("ENOSPC", "EIO", "SIGBUS"), (via_mount, err)
    # no more through the mount than natively (slack: metadata blocks)
    assert via_mount <= native + (1 << 20), (via_mount, native)
    assert os.statvfs(reserved_fs).f_bfree * 4096 > 10 << 20, \
        "the root reserve was used"



def test_daemon_has_no_sys_resource(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    CAP_SYS_RESOURCE = 24
    for tid in os.listdir(f"/proc/{m.pid}/task"):
        with open(f"/proc/{m.pid}/task/{tid}/status") as f:
            caps = {l.split(":")[0]: int(l.split(":")[1], 16)
                    for l in f if l.startswith("Cap")}
        for kind in ("CapEff", "CapPrm", "CapInh", "CapBnd"):
            assert not caps[kind] & (1 << CAP_SYS_RESOURCE), (tid, kind)
