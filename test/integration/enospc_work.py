# SPDX-License-Identifier: GPL-2.0-or-later
"""The writer side of test_fs_enospc.py, run as its own process (as root or,
through setpriv, as an unprivileged user owning the files).

usage: enospc_work.py MNT BACKEND SECONDS SEED FILE...

Loops over the soak writer's operations on existing files (an O_TRUNC
rewrite to the same size, a rename over from a temporary, O_APPEND, pwrite,
a write through a shared mapping with msync, a truncate that extends with a
hole) while the test fills and frees the backend. After every operation
that succeeded, write, fsync and close included, the file must hold exactly
what was written, read through the mount and directly in the backend; after
every one that failed, the mount must show what the backend holds (no page
left in the kernel's cache that the backend never got). Prints one JSON
object: counts and the problems found.
"""
import errno
import json
import os
import random
import sys
import time

# run as a script: the shared test package is one directory up
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from clamfstest.mapped import mapped_write  # noqa: E402

MAX_SIZE = 192 << 10


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                return b"".join(out)
            out.append(b)
    finally:
        os.close(fd)


def write_all(fd, data, rng):
    off = 0
    while off < len(data):
        n = rng.choice((512, 4096, 65536))
        off += os.write(fd, data[off:off + n])


def first_diff(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return min(len(a), len(b))


class Work:
    def __init__(self, mnt, backend, seed, names):
        self.mnt, self.backend = mnt, backend
        self.rng = random.Random(seed)
        self.names = names
        self.want = {n: read_file(self.b(n)) for n in names}
        self.counts = {}
        self.problems = []
        self.n = 0

    def m(self, n):
        return os.path.join(self.mnt, n)

    def b(self, n):
        return os.path.join(self.backend, n)

    def count(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1

    # -- the operations: each returns the bytes the file must now hold --
    def op_trunc(self, n):
        old = self.want[n]
        size = len(old)
        if not 0 < size <= MAX_SIZE:
            size = self.rng.randint(1, 64 << 10)
        data = self.rng.randbytes(size)
        fd = os.open(self.m(n), os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(fd, data, self.rng)
            os.fsync(fd)
        finally:
            os.close(fd)
        return data

    def op_rename(self, n):
        self.n += 1
        tmp = f"{n}.{self.n}.tmp"
        data = self.rng.randbytes(self.rng.choice(
            (len(self.want[n]), 4097, self.rng.randint(1, 64 << 10))))
        fd = os.open(self.m(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o644)
        try:
            try:
                write_all(fd, data, self.rng)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(self.m(tmp), self.m(n))
        except OSError:
            try:
                os.unlink(self.m(tmp))
            except OSError:
                pass
            raise
        return data

    def op_append(self, n):
        add = self.rng.randbytes(self.rng.randint(1, 32 << 10))
        fd = os.open(self.m(n), os.O_WRONLY | os.O_APPEND)
        try:
            write_all(fd, add, self.rng)
            os.fsync(fd)
        finally:
            os.close(fd)
        return self.want[n] + add

    def op_pwrite(self, n):
        old = self.want[n]
        off = self.rng.randint(0, len(old))
        add = self.rng.randbytes(self.rng.randint(1, 16 << 10))
        fd = os.open(self.m(n), os.O_WRONLY)
        try:
            if os.pwrite(fd, add, off) != len(add):
                raise OSError(errno.ENOSPC, "short pwrite")
            os.fsync(fd)
        finally:
            os.close(fd)
        return old[:off] + add + old[off + len(add):]

    def op_mmap(self, n):
        old = self.want[n]
        if not old:
            return old
        off = self.rng.randint(0, len(old) - 1)
        add = self.rng.randbytes(min(len(old) - off,
                                     self.rng.randint(1, 8192)))
        self.detail = {"off": off, "len": len(add)}
        fd = os.open(self.m(n), os.O_RDWR)
        try:
            mapped_write(fd, len(old), off, add)
            os.fsync(fd)
        finally:
            os.close(fd)
        return old[:off] + add + old[off + len(add):]

    def op_extend(self, n):
        """A hole past the end: a later mapped write into it needs a new
        backend page, so its write-back can meet ENOSPC."""
        old = self.want[n]
        size = len(old) + self.rng.randint(1, 3 * 4096)
        os.truncate(self.m(n), size)
        return old + b"\0" * (size - len(old))

    OPS = ("trunc", "rename", "append", "pwrite", "mmap", "extend")

    def check(self, n, op, want, err):
        try:
            via = read_file(self.m(n))
        except OSError as e:
            self.problems.append({"op": op, "file": n, "what": "reread",
                                  "errno": errno.errorcode.get(e.errno)})
            return
        back = read_file(self.b(n))
        if err is None:
            for where, got in (("mount", via), ("backend", back)):
                if got != want:
                    k = first_diff(got, want)
                    self.problems.append({**self.detail,
                        "got": got[k:k + 8].hex(), "wanted": want[k:k + 8].hex(),
                        "op": op, "file": n, "what": "succeeded, " + where +
                        " differs from what was written",
                        "want_size": len(want), "got_size": len(got),
                        "first_diff": first_diff(got, want)})
        elif via != back:
            self.problems.append({
                "op": op, "file": n, "errno": err,
                "what": "failed, mount differs from backend",
                "mount_size": len(via), "backend_size": len(back),
                "first_diff": first_diff(via, back)})
        # what the file holds now, whatever the mount made of it
        self.want[n] = back

    def run(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            n = self.rng.choice(self.names)
            op = self.rng.choice(self.OPS)
            if len(self.want[n]) > MAX_SIZE:
                op = "trunc"
            elif op == "extend" and self.rng.random() < 0.5:
                op = "mmap"
            err = None
            self.detail = {}
            try:
                want = getattr(self, "op_" + op)(n)
                self.count(op + "_ok")
            except OSError as e:
                want = None
                err = errno.errorcode.get(e.errno, str(e.errno))
                self.count(f"{op}_{err}")
            self.check(n, op, want, err)
            if len(self.problems) >= 20:
                break
        return {"counts": self.counts, "problems": self.problems}


def main():
    mnt, backend, seconds, seed = sys.argv[1:5]
    w = Work(mnt, backend, seed, sys.argv[5:])
    print(json.dumps(w.run(float(seconds))))


if __name__ == "__main__":
    main()
