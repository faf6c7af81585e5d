# SPDX-License-Identifier: GPL-2.0-or-later
# Data integrity through the mount: random-content round trips of awkward
# sizes and chunkings, random pwrite/truncate sequences against an in-memory
# model, sparse files beyond 4 GiB, O_APPEND and several processes writing
# and reading at once. Every byte is checked through the mount and in the
# backend.
import hashlib
import mmap
import os
import random
import subprocess

import pytest

from clamfstest.env import PYTHON, SLOW
from fsutil import lstat_dict, outcome

# Mirror tests run with scanning on, against the private clamd.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")

SIZES = [0, 1, 4095, 4096, 4097, 65536, 128 * 1024 + 1, 3 * 1024 * 1024]


def rbytes(n, seed):
    return random.Random(seed).randbytes(n)


def read_chunks(path, chunk):
    out = bytearray()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            out += b
    return bytes(out)


def write_chunks(path, data, chunk, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        for i in range(0, len(data), chunk):
            n = os.write(fd, data[i:i + chunk])
            assert n == len(data[i:i + chunk])
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", SIZES)
def test_roundtrip_sizes(fs, size):
    data = rbytes(size, size)
    for chunk in (1 << 20, 4096, 1000):
        if size > 200000 and chunk == 1000:
            chunk = 9973  # keep the run short, still unaligned
        name = f"w{chunk}"
        write_chunks(fs.m(name), data, chunk)
        assert os.stat(fs.m(name)).st_size == size
        assert lstat_dict(fs.m(name)) == lstat_dict(fs.b(name))
        with open(fs.b(name), "rb") as f:
            assert f.read() == data, f"backend content after writes of {chunk}"
        for rchunk in (1 << 20, 4096, 777):
            if size > 200000 and rchunk == 777:
                continue
            assert read_chunks(fs.m(name), rchunk) == data, f"mount read {rchunk}"
    # Written in the backend, read through the mount.
    d2 = rbytes(size, size + 1)
    write_chunks(fs.b("fromb"), d2, 1 << 20)
    assert read_chunks(fs.m("fromb"), 1 << 20) == d2
    # Random preads.
    rng = random.Random(size)
    fd = os.open(fs.m("fromb"), os.O_RDONLY)
    try:
        for _ in range(50):
            off = rng.randrange(0, size + 10)
            ln = rng.randrange(0, 200000)
            assert os.pread(fd, ln, off) == d2[off:off + ln]
    finally:
        os.close(fd)


def test_random_pwrite_truncate_model(fs):
    """A few hundred random pwrites, truncates and reads through one file
    descriptor, checked against a model at every step and at the end in the
    backend."""
    rng = random.Random(1234)
    model = bytearray()
    fd = os.open(fs.m("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for step in range(400):
            op = rng.random()
            if op < 0.6:
                off = rng.randrange(0, len(model) + 70000)
                ln = rng.choice([1, 17, 4096, 4097, 65536, rng.randrange(1, 300000)])
                data = rng.randbytes(ln)
                assert os.pwrite(fd, data, off) == ln
                if off > len(model):
                    model += bytes(off - len(model))
                model[off:off + ln] = data
            elif op < 0.7:
                n = rng.randrange(0, len(model) + 100000)
                os.ftruncate(fd, n)
                if n < len(model):
                    del model[n:]
                else:
                    model += bytes(n - len(model))
            else:
                off = rng.randrange(0, len(model) + 10)
                ln = rng.randrange(0, 300000)
                got = os.pread(fd, ln, off)
                assert got == bytes(model[off:off + ln]), f"step {step}: pread({ln}, {off})"
            if step % 50 == 0:
                assert os.fstat(fd).st_size == len(model)
    finally:
        os.close(fd)
    assert read_chunks(fs.m("f"), 1 << 20) == bytes(model)
    with open(fs.b("f"), "rb") as f:
        assert f.read() == bytes(model)


def test_truncate_up_down_then_read(fs):
    data = rbytes(3 << 20, 7)
    write_chunks(fs.m("f"), data, 1 << 20)
    os.truncate(fs.m("f"), (1 << 20) + 3)
    assert read_chunks(fs.m("f"), 65536) == data[:(1 << 20) + 3]
    os.truncate(fs.m("f"), 5 << 20)
    got = read_chunks(fs.m("f"), 1 << 20)
    assert got == data[:(1 << 20) + 3] + bytes((5 << 20) - (1 << 20) - 3)
    with open(fs.m("f"), "r+b") as f:
        f.seek(4 << 20)
        f.write(b"tail")
    got = read_chunks(fs.m("f"), 1 << 20)
    assert got[4 << 20:(4 << 20) + 4] == b"tail"
    with open(fs.b("f"), "rb") as f:
        assert f.read() == got
    assert lstat_dict(fs.m("f")) == lstat_dict(fs.b("f"))


def test_writes_reach_backend_before_close(fs):
    """No writeback caching: once write() returned, another program reading
    the backend sees the data (the scanner will read the backend)."""
    fd = os.open(fs.m("f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"first")
        with open(fs.b("f"), "rb") as f:
            assert f.read() == b"first"
        os.pwrite(fd, b"X" * 100000, 3)
        with open(fs.b("f"), "rb") as f:
            assert f.read() == b"fir" + b"X" * 100000
    finally:
        os.close(fd)


def test_o_direct_io(fs):
    buf = mmap.mmap(-1, 1 << 20)
    buf.write(rbytes(1 << 20, 99))
    fd = os.open(fs.m("direct"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.write(fd, buf) == 1 << 20
        rb = mmap.mmap(-1, 1 << 20)
        assert os.preadv(fd, [rb], 0) == 1 << 20
        assert rb[:] == buf[:]
    finally:
        os.close(fd)
    with open(fs.b("direct"), "rb") as f:
        assert f.read() == buf[:]


def test_sparse_beyond_4gib(fs):
    five = 5 << 30
    fd = os.open(fs.m("sparse"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"head", 0)
        os.pwrite(fd, b"at five GiB", five)
        os.pwrite(fd, b"past 4GiB", (4 << 30) + 12345)
        st = os.fstat(fd)
        assert st.st_size == five + len(b"at five GiB")
        assert os.pread(fd, 11, five) == b"at five GiB"
        assert os.pread(fd, 9, (4 << 30) + 12345) == b"past 4GiB"
        assert os.pread(fd, 4096, 3 << 30) == bytes(4096)
        assert os.pread(fd, 100, five + 3) == b"five GiB"
        bfd = os.open(fs.b("sparse"), os.O_RDONLY)
        try:
            for off in (0, 4096, 4 << 30, (4 << 30) + 12345, five - 1, five + 5):
                for wh in (os.SEEK_DATA, os.SEEK_HOLE):
                    assert outcome(os.lseek, fd, off, wh) == outcome(os.lseek, bfd, off, wh), \
                        (off, wh)
        finally:
            os.close(bfd)
    finally:
        os.close(fd)
    sm, sb = lstat_dict(fs.m("sparse")), lstat_dict(fs.b("sparse"))
    assert sm == sb
    assert sb["blocks"] < 1000  # still sparse in the backend
    with open(fs.b("sparse"), "rb") as f:
        f.seek(five)
        assert f.read() == b"at five GiB"
    os.truncate(fs.m("sparse"), (4 << 30) + 1)
    assert lstat_dict(fs.m("sparse")) == lstat_dict(fs.b("sparse"))
    assert os.stat(fs.m("sparse")).st_size == (4 << 30) + 1
    os.truncate(fs.m("sparse"), 6 << 30)
    with open(fs.m("sparse"), "rb") as f:
        f.seek((4 << 30) + 12345)
        assert f.read(10) == bytes(10)
    os.unlink(fs.m("sparse"))


WRITER = r"""
import os, random, sys, hashlib
root, tag, nfiles = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = []
for k in range(nfiles):
    rng = random.Random(f"{tag}-{k}")
    size = rng.randrange(1, 3 << 20)
    data = rng.randbytes(size)
    chunk = rng.choice([4096, 65536, 1 << 20, 12345])
    p = os.path.join(root, f"{tag}-{k}")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(0, size, chunk):
        os.write(fd, data[i:i + chunk])
    os.fsync(fd)
    os.close(fd)
    with open(p, "rb") as f:
        if f.read() != data:
            print(f"MISMATCH right after writing {p}")
            sys.exit(1)
    print(p, hashlib.sha256(data).hexdigest())
"""


def test_concurrent_writers_distinct_files(fs):
    procs = [subprocess.Popen([PYTHON, "-c", WRITER, fs.mnt, f"w{i}", "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    expect = {}
    for p in procs:
        out, err = p.communicate(timeout=300 * SLOW)
        assert p.returncode == 0, out + err
        for line in out.splitlines():
            path, h = line.split()
            expect[os.path.basename(path)] = h
    assert len(expect) == 24
    for name, h in expect.items():
        for side in (fs.m(name), fs.b(name)):
            with open(side, "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == h, side


APPENDER = r"""
import os, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
for i in range(n):
    line = f"{tag}:{i:06d}:" + tag * (i % 50) + "\n"
    assert os.write(fd, line.encode()) == len(line)
os.close(fd)
"""


def test_concurrent_o_append(fs):
    results = {}
    for side, root in (("backend", fs.b("nat")), ("mount", fs.m("via"))):
        os.mkdir(root)
        p = os.path.join(root, "log")
        with open(p, "wb"):
            pass
        procs = [subprocess.Popen([PYTHON, "-c", APPENDER, p, t, "1500"])
                 for t in "abcd"]
        for pr in procs:
            assert pr.wait(300 * SLOW) == 0
        with open(p, "rb") as f:
            data = f.read()
        lines = data.decode().split("\n")
        assert lines[-1] == ""
        lines = lines[:-1]
        bad = [l for l in lines if l.split(":")[2] != l[0] * (int(l.split(":")[1]) % 50)]
        assert not bad, f"{side}: torn lines {bad[:3]}"
        results[side] = (len(data), sorted(lines))
    assert results["mount"] == results["backend"]
    assert len(results["mount"][1]) == 6000
    with open(fs.b("via", "log"), "rb") as f:
        assert len(f.read()) == results["mount"][0]


READER = r"""
import hashlib, os, sys, random
path, want, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(os.getpid())
for r in range(rounds):
    with open(path, "rb", buffering=0) as f:
        chunk = rng.choice([4096, 65536, 1 << 20, 131073])
        h = hashlib.sha256()
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    if h.hexdigest() != want:
        print("BAD READ", r, chunk)
        sys.exit(1)
"""

STATTER = r"""
import os, sys
root, rounds = sys.argv[1], int(sys.argv[2])
for r in range(rounds):
    names = os.listdir(root)
    for n in names:
        try:
            os.lstat(os.path.join(root, n))
        except FileNotFoundError:
            pass
    p = os.path.join(root, f"tmp-{os.getpid()}-{r}")
    with open(p, "wb") as f:
        f.write(b"x" * r)
    os.rename(p, p + ".done")
    os.unlink(p + ".done")
"""


def test_concurrent_readers_and_metadata(fs):
    data = rbytes(8 << 20, 5)
    write_chunks(fs.b("big"), data, 1 << 20)
    want = hashlib.sha256(data).hexdigest()
    procs = [subprocess.Popen([PYTHON, "-c", READER, fs.m("big"), want, "4"])
             for _ in range(4)]
    procs += [subprocess.Popen([PYTHON, "-c", STATTER, fs.mnt, "150"]) for _ in range(3)]
    for p in procs:
        assert p.wait(300 * SLOW) == 0
    assert sorted(os.listdir(fs.mnt)) == ["big"]


def test_many_small_files_several_processes(fs):
    code = r"""
import os, sys, random
root, tag = sys.argv[1], sys.argv[2]
d = os.path.join(root, tag)
os.mkdir(d)
rng = random.Random(tag)
for i in range(500):
    data = rng.randbytes(rng.randrange(0, 9000))
    with open(os.path.join(d, f"{i}"), "wb") as f:
        f.write(data)
for i in range(0, 500, 3):
    os.unlink(os.path.join(d, f"{i}"))
for i in range(1, 500, 3):
    os.rename(os.path.join(d, f"{i}"), os.path.join(d, f"r{i}"))
"""
    procs = [subprocess.Popen([PYTHON, "-c", code, fs.mnt, f"p{i}"]) for i in range(4)]
    for p in procs:
        assert p.wait(300 * SLOW) == 0
    for i in range(4):
        tag = f"p{i}"
        rng = random.Random(tag)
        expect = {}
        for k in range(500):
            expect[str(k)] = rng.randbytes(rng.randrange(0, 9000))
        for k in range(0, 500, 3):
            del expect[str(k)]
        for k in range(1, 500, 3):
            expect[f"r{k}"] = expect.pop(str(k))
        assert sorted(os.listdir(fs.m(tag))) == sorted(expect)
        assert sorted(os.listdir(fs.b(tag))) == sorted(expect)
        for n, v in expect.items():
            with open(fs.m(tag, n), "rb") as f:
                assert f.read() == v, (tag, n)
