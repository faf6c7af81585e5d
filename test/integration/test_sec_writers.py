# SPDX-License-Identifier: GPL-2.0-or-later
# A verdict must never outlive the content it was given for. Stores into a
# shared writable mapping of the backend file move no timestamp once the
# page is dirty, so the verdict cache's key cannot see them: only knowing
# that nobody holds the file open for writing can. Here the attacker is a
# local user writing the backend directly (as a Samba or NFS client of the
# raw directory would), the victim another user reading through the mount.
import os
import subprocess
import sys
import textwrap
import time

import pytest

from clamfstest.env import SLOW
from fsutil import (GID_A, GID_B, UID_A, UID_B, VICTIM_READ, LineChild,
                    run_as, setpriv_prefix, share_of)
from scanutil import delta, detections, mount_scan, stats

SIZE = 68  # as long as the EICAR test file

# The attacker: maps `x` shared and writable, closes the fd, and then
# stores what it is told through the mapping, one line a command.
MAPPER = textwrap.dedent("""
    import mmap, os, sys
    path = sys.argv[1]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, %d)
    mp = mmap.mmap(fd, %d, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    print("mapped", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "exit":
            break
        mp[:] = bytes.fromhex(cmd)  # a store, no write(), no msync()
        print("stored", flush=True)
    mp.close()
""" % (SIZE, SIZE))

class Mapper(LineChild):
    """A process of UID_A holding a writable shared mapping of a file."""

    def __init__(self, path):
        super().__init__(UID_A, GID_A, MAPPER, [path], "mapped")

    def store(self, data):
        self.ask(data.hex(), "stored")


@pytest.fixture
def share(mount_clamfs):
    """A backend with a directory the attacker may write."""
    return share_of(mount_clamfs.tempdir("clamfs-wr"))


def settle(path, window_s):
    """Waits until the file's ctime is older than the racy window."""
    while time.time() - os.stat(path).st_ctime < window_s + 0.2:
        time.sleep(0.1)


@pytest.mark.parametrize("racy_window", ["2", "0"])
@pytest.mark.parametrize("where", ["backend", "mount"])
def test_store_into_a_dirty_mapping_is_not_served_from_cache(
        mount_clamfs, clamd, share, racy_window, where):
    """The reproduction of issue 22 item 1: a clean verdict taken while
    the attacker's mapping is writable, then EICAR stored through it.
    Mapped through the mount, with kernel passthrough the mapping is the
    backend file's own and outlives the open's release just the same."""
    m = mount_scan(mount_clamfs, clamd, "racy_window=" + racy_window,
                   backend=share)
    x = m.b("share", "x")
    mapper = Mapper(x if where == "backend" else m.m("share", "x"))
    try:
        mapper.store(b"B" * SIZE)  # the first write fault moves mtime
        settle(x, int(racy_window))
        before = os.stat(x)
        # opened without reading: scanned clean
        os.close(os.open(m.m("share", "x"), os.O_RDONLY))
        mapper.store(clamd.eicar)  # the page is dirty: no stamp moves
        after = os.stat(x)
        # (through the mount without passthrough the gate has the kernel
        # write the dirty pages back before its scan, which moves them)
        assert where == "mount" or \
            (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == \
            (before.st_size, before.st_mtime_ns, before.st_ctime_ns), \
            "the store moved a timestamp: the test proves nothing here"
        r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
        served = r.get("ok") == clamd.eicar.hex()
        assert not served, \
            "EICAR served from a verdict taken while a writer held it"
        assert r == {"err": 13}
    finally:
        mapper.close()
    assert [d["signature"] for d in detections(m)] == \
        ["Eicar-Test.UNOFFICIAL"]


def test_writer_that_came_and_went_leaves_no_stale_verdict(
        mount_clamfs, clamd, share):
    """A mapping that is gone when the verdict is looked up: the file was
    judged while it was writable, so its verdict was never stored, and
    what the mapping left behind is scanned."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    x = m.b("share", "x")
    mapper = Mapper(x)
    try:
        mapper.store(b"B" * SIZE)
        os.close(os.open(m.m("share", "x"), os.O_RDONLY))
        mapper.store(clamd.eicar)
    finally:
        mapper.close()
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
    assert r == {"err": 13}


def test_no_writer_still_caches(mount_clamfs, clamd, share):
    """The check costs nothing in verdicts: a file nobody writes is
    scanned once and then answered from the cache."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    with open(m.b("share", "y"), "wb") as f:
        f.write(b"y" * SIZE)
    s0 = stats(m.mnt)
    for _ in range(5):
        with open(m.m("share", "y"), "rb") as f:
            assert f.read() == b"y" * SIZE
    d = delta(s0, stats(m.mnt), "scans", "cache_hits")
    assert d == {"scans": 1, "cache_hits": 4}


def test_a_reader_does_not_fail_a_writer(mount_clamfs, clamd, share):
    """The check takes a read lease for an instant. A writer opening the
    file through the mount meanwhile, even with O_NONBLOCK, must not be
    refused (the daemon's backend open waits the instant out), and one
    opening the backend directly without O_NONBLOCK waits it out too."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    with open(m.b("share", "z"), "wb") as f:
        f.write(b"z" * SIZE)
    code = textwrap.dedent("""
        import os, sys, time
        end = time.monotonic() + float(sys.argv[3])
        n = 0
        while time.monotonic() < end:
            fd = os.open(sys.argv[1], os.O_WRONLY | int(sys.argv[2]))
            os.close(fd)
            n += 1
        print(n)
    """)
    writers = [subprocess.Popen(
        [sys.executable, "-c", code, path, str(flags), str(3 * SLOW)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for path, flags in ((m.m("share", "z"), os.O_NONBLOCK),
                            (m.b("share", "z"), 0))]
    reads = 0
    while any(w.poll() is None for w in writers):
        with open(m.m("share", "z"), "rb") as f:
            assert f.read() == b"z" * SIZE
        reads += 1
    for w in writers:
        out, err = w.communicate()
        assert w.returncode == 0, err
        assert int(out) > 0
    assert reads > 0


@pytest.fixture
def shm_share():
    """An attacker's share on tmpfs, whose mappings ask for no write
    notification: a store into a page a read fault mapped moves no stamp."""
    import shutil
    import tempfile
    base = tempfile.mkdtemp(prefix="clamfs-wrshm.", dir="/dev/shm")
    os.chmod(base, 0o755)
    try:
        yield share_of(os.path.join(base, "t"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


# The attacker on tmpfs: opens read-write, maps, reads first (the read
# fault maps the page writable: no write fault follows), stores, leaves.
HIT_AND_RUN = textwrap.dedent("""
    import mmap, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    mp = mmap.mmap(fd, %d, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    mp[0]
    mp[:] = bytes.fromhex(sys.argv[2])
    mp.close()
    os.close(fd)
""" % SIZE)


def test_a_writer_that_left_no_trace_on_tmpfs(mount_clamfs, clamd, shm_share):
    """On tmpfs a writer that came and went after a clean verdict leaves
    size, mtime and ctime as they were: the verdict must not be trusted."""
    m = mount_scan(mount_clamfs, clamd, backend=shm_share)
    x = m.b("share", "x")
    with open(x, "wb") as f:
        f.write(b"A" * SIZE)
    os.chown(x, UID_A, GID_A)
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
    assert r == {"ok": (b"A" * SIZE).hex()}
    before = os.stat(x)
    subprocess.run(setpriv_prefix(UID_A, GID_A) + [
        sys.executable, "-c", HIT_AND_RUN, x, clamd.eicar.hex()], check=True)
    after = os.stat(x)
    assert (after.st_mtime_ns, after.st_ctime_ns) == \
        (before.st_mtime_ns, before.st_ctime_ns), \
        "the store moved a timestamp: the test proves nothing here"
    # the mount's own page cache of the old bytes goes (tmpfs keeps its)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
    served = r.get("ok") == clamd.eicar.hex()
    assert not served, "EICAR served from a verdict tmpfs cannot vouch for"
    assert r == {"err": 13}


def test_pages_cached_while_a_writer_held_the_file_are_dropped(
        mount_clamfs, clamd, share):
    """A reader whose open was allowed reads what a mapping stored later
    (open-time rule); the pages it caches must not be handed to the next
    opener once the writer put the clean bytes back: that open is scanned
    clean, and the kernel must read the file again."""
    m = mount_scan(mount_clamfs, clamd, backend=share)
    x = m.b("share", "x")
    mapper = Mapper(x)
    try:
        mapper.store(b"B" * SIZE)
        early = os.open(m.m("share", "x"), os.O_RDONLY)  # scanned: clean
        try:
            mapper.store(clamd.eicar)
            assert os.pread(early, SIZE, 0) in (clamd.eicar, b"B" * SIZE)
            mapper.store(b"B" * SIZE)
        finally:
            os.close(early)
    finally:
        mapper.close()
    r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
    assert r == {"ok": (b"B" * SIZE).hex()}, \
        "stale pages served" if r.get("ok") == clamd.eicar.hex() else r
