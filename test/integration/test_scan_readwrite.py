# SPDX-License-Identifier: GPL-2.0-or-later
# Read-write opens, as a file server makes them (smbd opens a document
# read-write whenever its client asks for write access). The gate decides
# such an open on a read-only descriptor of the file before it opens the
# file as asked, so an unchanged file is a verdict cache hit as it is for
# a reader; a handle that wrote nothing leaves the verdict in place, and
# one that wrote (any way there is to write through a handle) leaves none.
import errno
import mmap
import os
import subprocess
import time

import pytest

from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import wait_for
from fsutil import (FALLOC_FL_KEEP_SIZE, GID_A, UID_A, LineChild, fallocate,
                    share_of)
from scanutil import daemon_files, delta, mount_scan, put, released, stats
from test_sec_lease import HOLDER
from test_sec_writers import Mapper

SIZE = 68  # as long as the EICAR test file


@pytest.fixture
def share(mount_clamfs):
    """A backend with a directory an ordinary user may write."""
    return share_of(mount_clamfs.tempdir("clamfs-rw"))


def scans_reach(m, s0, n):
    """Waits (bounded) until the scans since s0 are n: a scan is counted
    once its waiters are answered. Then the counters since s0."""
    wait_for(lambda: delta(s0, stats(m.mnt), "scans")["scans"] >= n,
             10 * SLOW)
    return stats(m.mnt)


def rw_read(path, flags=0):
    """Opens path read-write and reads it all: bytes, or the errno."""
    try:
        fd = os.open(path, os.O_RDWR | flags)
    except OSError as e:
        return e.errno
    try:
        return os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)


def settled_rw_read(m, path, flags=0, others=0):
    """rw_read, then a wait for the handle's release, which the kernel
    sends after close() returned: an open that comes while a writer's
    release is on its way is decided as one beside a writer (scanned,
    nothing kept), which the counting tests here do not mean to test.
    others: files the daemon holds open for readers meanwhile."""
    r = rw_read(path, flags)
    if others:
        assert wait_for(lambda: len(daemon_files(m)) <= others, 10 * SLOW)
    else:
        released(m)
    return r


def test_read_write_opens_of_an_unchanged_file_are_cache_hits(
        mount_clamfs, clamd):
    """The finding of issue 37: no read-write open was ever a cache hit,
    and each one's scan was thrown away."""
    m = mount_scan(mount_clamfs, clamd)
    data = os.urandom(64 * 1024)
    put(m.b("doc"), data)
    s0 = stats(m.mnt)
    for _ in range(5):
        assert settled_rw_read(m, m.m("doc")) == data
    d = delta(s0, stats(m.mnt), "scans", "cache_hits", "opens_checked")
    assert d == {"scans": 1, "cache_hits": 4, "opens_checked": 5}
    # readers take the verdict a read-write open left, and the other way
    with open(m.m("doc"), "rb") as f:
        assert f.read() == data
    assert settled_rw_read(m, m.m("doc")) == data
    assert delta(s0, stats(m.mnt), "scans")["scans"] == 1


def test_non_blocking_read_write_opens_are_cache_hits(mount_clamfs, clamd):
    """smbd opens files read-write with O_NONBLOCK."""
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("doc"), b"B" * SIZE)
    put(m.b("e"), clamd.eicar)
    s0 = stats(m.mnt)
    for _ in range(3):
        assert settled_rw_read(m, m.m("doc"), os.O_NONBLOCK) == b"B" * SIZE
        assert settled_rw_read(m, m.m("e"), os.O_NONBLOCK) == 13
    assert delta(s0, stats(m.mnt), "scans", "cache_hits") == {
        "scans": 2, "cache_hits": 4}


def test_an_infected_file_is_refused_to_read_write_opens(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("e"), clamd.eicar)
    s0 = stats(m.mnt)
    for _ in range(3):
        assert settled_rw_read(m, m.m("e")) == 13
    d = delta(s0, stats(m.mnt), "scans", "cache_hits", "opens_denied")
    assert d == {"scans": 1, "cache_hits": 2, "opens_denied": 3}


def _write_eicar(fd, eicar, how, src):
    """Makes the file open read-write at fd (SIZE bytes of 'B', or EICAR
    and ten more bytes for a truncate) the EICAR test file, through fd."""
    if how == "write":
        os.pwrite(fd, eicar, 0)
    elif how == "mmap":
        mp = mmap.mmap(fd, SIZE, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE)
        mp[:] = eicar  # stores, written back by the kernel
        mp.close()
    elif how == "ftruncate":
        os.ftruncate(fd, SIZE)
    elif how == "copy_file_range":
        sfd = os.open(src, os.O_RDONLY)
        try:
            assert os.copy_file_range(sfd, fd, SIZE, 2, 0) == SIZE
        finally:
            os.close(sfd)


@pytest.mark.parametrize("how",
                         ["write", "mmap", "ftruncate", "copy_file_range"])
def test_a_handle_that_wrote_keeps_no_verdict(mount_clamfs, clamd, how):
    """Clean, read through read-write handles (one scan, then hits), then
    a read-write handle makes it EICAR: the next read-write open and the
    next reader are refused."""
    m = mount_scan(mount_clamfs, clamd)
    start = clamd.eicar + b"0123456789" if how == "ftruncate" else b"B" * SIZE
    put(m.b("doc"), start)
    # the source of copy_file_range, clean: EICAR from its third byte
    put(m.b("src"), b"XX" + clamd.eicar)
    for _ in range(2):
        assert rw_read(m.m("doc")) == start
    fd = os.open(m.m("doc"), os.O_RDWR)
    try:
        _write_eicar(fd, clamd.eicar, how, m.m("src"))
    finally:
        os.close(fd)
    with open(m.b("doc"), "rb") as f:
        assert f.read() == clamd.eicar, "the test wrote no EICAR"
    assert rw_read(m.m("doc")) == 13
    with pytest.raises(PermissionError):
        open(m.m("doc"), "rb").close()


def test_fallocate_drops_the_verdict(mount_clamfs, clamd):
    """A fallocate through a handle leaves the content as it was here,
    but it is a write: the next open is scanned again."""
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("doc"), b"B" * SIZE)
    assert settled_rw_read(m, m.m("doc")) == b"B" * SIZE
    s0 = stats(m.mnt)
    fd = os.open(m.m("doc"), os.O_RDWR)
    try:
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20)
    finally:
        os.close(fd)
    assert settled_rw_read(m, m.m("doc")) == b"B" * SIZE
    assert delta(s0, scans_reach(m, s0, 1), "scans", "cache_hits") == {
        "scans": 1, "cache_hits": 1}


def test_a_handle_that_wrote_nothing_keeps_the_verdict(mount_clamfs, clamd):
    """Opened read-write, read, closed, many times and overlapping a
    reader: one scan in all."""
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("doc"), b"B" * SIZE)
    s0 = stats(m.mnt)
    with open(m.m("doc"), "rb") as reader:
        for _ in range(3):
            assert settled_rw_read(m, m.m("doc"), others=1) == b"B" * SIZE
        assert reader.read() == b"B" * SIZE
    with open(m.m("doc"), "rb") as f:
        assert f.read() == b"B" * SIZE
    assert delta(s0, stats(m.mnt), "scans")["scans"] == 1


def test_a_backend_writer_during_the_decision_is_caught(
        mount_clamfs, clamd, share):
    """The attacker holds a writable shared mapping of the backend file
    while read-write opens are decided: none of their verdicts is kept,
    so EICAR stored through the mapping afterwards (no stamp moves) is
    found by the next open, read-write or not."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    x = m.b("share", "x")
    mapper = Mapper(x)
    try:
        mapper.store(b"B" * SIZE)
        s0 = stats(m.mnt)
        for _ in range(2):
            assert rw_read(m.m("share", "x")) == b"B" * SIZE
        assert delta(s0, scans_reach(m, s0, 2), "scans", "cache_hits") == {
            "scans": 2, "cache_hits": 0}
        before = os.stat(x)
        mapper.store(clamd.eicar)
        after = os.stat(x)
        assert (after.st_mtime_ns, after.st_ctime_ns) == \
            (before.st_mtime_ns, before.st_ctime_ns), \
            "the store moved a timestamp: the test proves nothing here"
        assert rw_read(m.m("share", "x")) == 13
    finally:
        mapper.close()


def test_content_changed_behind_the_mount_is_scanned_again(
        mount_clamfs, clamd):
    """Cached clean for read-write opens, then replaced in place on the
    backend with its mtime put back: the ctime moved, so the next
    read-write open is a fresh scan, and refused."""
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("doc"), b"B" * SIZE)
    for _ in range(2):
        assert rw_read(m.m("doc")) == b"B" * SIZE
    st = os.stat(m.b("doc"))
    with open(m.b("doc"), "r+b") as f:
        f.write(clamd.eicar)
    os.utime(m.b("doc"), ns=(st.st_atime_ns, st.st_mtime_ns))
    assert rw_read(m.m("doc")) == 13


# A read lease: broken by an open for writing, not by one for reading.
READ_HOLDER = HOLDER.replace("os.O_RDWR", "os.O_RDONLY").replace(
    "fcntl.F_WRLCK", "fcntl.F_RDLCK")
RW_CAT = ("import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
          "sys.stdout.buffer.write(os.pread(fd, 4096, 0))")


def test_a_read_lease_met_by_the_open_as_asked(mount_clamfs, clamd, share):
    """The read-only open a decision is made on passes a read lease; the
    open as asked would wait for its break. It is tried again later, as
    any open held by a lease, and the caller gets the file once the
    holder lets go; nobody else waits meanwhile."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    x = m.b("share", "doc")
    put(x, b"B" * SIZE)
    os.chown(x, UID_A, GID_A)
    assert rw_read(m.m("share", "doc")) == b"B" * SIZE
    holder = LineChild(UID_A, GID_A, READ_HOLDER, [x], "leased")
    try:
        victim = subprocess.Popen([PYTHON, "-c", RW_CAT, m.m("share", "doc")],
                                  stdout=subprocess.PIPE)
        time.sleep(0.5)
        assert victim.poll() is None, "the open did not wait for the lease"
        with open(m.m("share", "doc"), "rb") as f:
            assert f.read() == b"B" * SIZE
        holder.ask("release", "released")
        out, _ = victim.communicate(timeout=30 * SLOW)
        assert victim.returncode == 0
        assert out == b"B" * SIZE
    finally:
        holder.close()


def test_a_read_lease_fails_a_non_blocking_read_write_open(
        mount_clamfs, clamd, share):
    """As natively: EWOULDBLOCK at once (after clamfs's own few tries),
    not a wait; once the holder lets go the open gets through."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    x = m.b("share", "doc")
    put(x, b"B" * SIZE)
    os.chown(x, UID_A, GID_A)
    holder = LineChild(UID_A, GID_A, READ_HOLDER, [x], "leased")
    try:
        t0 = time.monotonic()
        assert rw_read(m.m("share", "doc"), os.O_NONBLOCK) == \
            errno.EWOULDBLOCK
        assert time.monotonic() - t0 < 5 * SLOW
        holder.ask("release", "released")
    finally:
        holder.close()
    assert rw_read(m.m("share", "doc"), os.O_NONBLOCK) == b"B" * SIZE
