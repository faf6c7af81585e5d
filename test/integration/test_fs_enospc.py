# SPDX-License-Identifier: GPL-2.0-or-later
# A full backend: the soak's writer operations (O_TRUNC rewrite, rename over,
# O_APPEND, pwrite, mmap + msync, extending truncate) on existing files of a
# small tmpfs backend while a filler on the backend keeps it full, frees a
# little and all of it, and fills it again. What a writer was told succeeded
# is what the mount and the backend hold; what failed leaves the mount
# showing the backend's bytes. Run as root and as an unprivileged owner
# (clamfs writes with the writer's fsuid). The worker is enospc_work.py.
import errno
import json
import os
import random
import subprocess
import threading

import pytest

from clamfstest.mapped import mapped_write
from clamfstest.env import PYTHON, SLOW
from fsutil import setpriv_prefix

# Scanning on, as deployed: the keep-cache decision rides on the scan.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")

HERE = os.path.dirname(os.path.abspath(__file__))
UID = 60001
SECONDS = 12


@pytest.fixture
def tmpfs_backend(mount_clamfs):
    d = mount_clamfs.tempdir("clamfs-enospc")
    b = os.path.join(d, "b")
    os.mkdir(b)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755",
                    "clamfs-enospc", b], check=True)
    yield b
    # clamfs on top goes first (checked as the factory would), then the
    # tmpfs under it
    problems = [p for m in mount_clamfs.mounts for p in m.teardown()]
    subprocess.run(["umount", b], check=True)
    if problems:
        pytest.fail("clamfs teardown:\n" + "\n".join(problems),
                    pytrace=False)


class Filler(threading.Thread):
    """Fills the backend directly to ENOSPC, holds it full, frees a few
    pages or all of it, and again, until stopped."""

    def __init__(self, backend, seed):
        super().__init__(daemon=True)
        self.path = os.path.join(backend, ".fill")
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.fills = 0

    def fill(self, fd):
        chunk = b"\xa5" * 65536
        while True:
            try:
                if os.write(fd, chunk) == 0:
                    return
            except OSError:
                break
        while True:  # the last pages, one by one
            try:
                if os.write(fd, chunk[:4096]) == 0:
                    return
            except OSError:
                return

    def run(self):
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while not self.stopping.is_set():
                self.fill(fd)
                self.fills += 1
                self.stopping.wait(self.rng.uniform(0.02, 0.3))
                size = os.fstat(fd).st_size
                if self.rng.random() < 0.6:
                    # a little room: writes get part of their bytes in
                    keep = max(0, size - self.rng.randint(1, 12) * 4096 -
                               self.rng.randint(0, 4095))
                else:
                    keep = 0
                os.ftruncate(fd, keep)
                os.lseek(fd, keep, os.SEEK_SET)
                self.stopping.wait(self.rng.uniform(0.0, 0.1))
        finally:
            os.close(fd)
            os.unlink(self.path)

    def stop(self):
        self.stopping.set()
        self.join()


def seed_files(backend, uid, rng):
    names = []
    for k, size in enumerate((100, 4096, 4097, 30000, 70001, 150000)):
        n = f"f{k}"
        with open(os.path.join(backend, n), "wb") as f:
            f.write(rng.randbytes(size))
        os.chown(os.path.join(backend, n), uid, uid)
        names.append(n)
    return names


@pytest.mark.parametrize("uid", [0, UID], ids=["root", "owner"])
def test_writes_on_a_full_backend(mount_clamfs, tmpfs_backend, uid):
    rng = random.Random(f"enospc-{uid}")
    names = seed_files(tmpfs_backend, uid, rng)
    os.chown(tmpfs_backend, uid, uid)
    fs = mount_clamfs(backend=tmpfs_backend)
    # the seeded files scanned once, so later opens may keep the cache
    for n in names:
        with open(fs.m(n), "rb") as f:
            f.read()
    filler = Filler(tmpfs_backend, rng.random())
    filler.start()
    try:
        cmd = [PYTHON, os.path.join(HERE, "enospc_work.py"), fs.mnt,
               tmpfs_backend, str(SECONDS), str(rng.random())] + names
        if uid:
            cmd = setpriv_prefix(uid, uid) + cmd
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=(SECONDS + 60) * SLOW)
    finally:
        filler.stop()
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    counts = res["counts"]
    print(f"fills {filler.fills}; {counts}")
    failed = sum(v for k, v in counts.items() if not k.endswith("_ok"))
    ok = sum(v for k, v in counts.items() if k.endswith("_ok"))
    # the run exercised both sides: the backend was full and it was not
    assert filler.fills > 5 and failed > 0 and ok > 0, counts
    assert not res["problems"], json.dumps(res["problems"], indent=1)


def fill_up(backend):
    """Fills the backend to the last page; returns the filler's path."""
    path = os.path.join(backend, ".fill")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (b"\xa5" * 65536, b"\xa5" * 4096):
            while True:
                try:
                    if os.write(fd, chunk) == 0:
                        break
                except OSError:
                    break
    finally:
        os.close(fd)
    return path


def test_mapped_write_into_a_hole_of_a_full_backend(mount_clamfs,
                                                    tmpfs_backend):
    """One write-back of two pages: the first is in the backend already,
    the second a hole the full backend cannot fill. The backend takes the
    first page only (a short write); msync must say so, not lose the rest
    (the kernel ignores the count a write-back is answered with)."""
    fs = mount_clamfs(backend=tmpfs_backend)
    p = fs.m("f")
    with open(p, "wb") as f:
        f.write(b"a" * 8192)
    os.truncate(p, 20000)  # from 8192 on: a hole in the tmpfs
    filler = fill_up(tmpfs_backend)
    fd = os.open(p, os.O_RDWR)
    try:
        try:
            mapped_write(fd, 20000, 8000, b"B" * 400)
            err = None
        except OSError as e:
            err = e.errno
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(filler)
    with open(fs.b("f"), "rb") as f:
        back = f.read()
    if err is None:
        assert back[8000:8400] == b"B" * 400, \
            "msync succeeded, but the backend lost the second page"
    else:
        # msync's ENOSPC; or, with kernel passthrough (the mapping is the
        # backend file's own), SIGBUS at the fault, as on tmpfs itself
        assert err in (errno.ENOSPC, errno.EFAULT), err
    with open(p, "rb") as f:
        assert f.read() == back
