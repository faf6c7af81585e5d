# SPDX-License-Identifier: GPL-2.0-or-later
# "Racily clean" verdicts: a backend whose timestamps keep whole seconds (a
# loop-mounted ext4 image with 128-byte inodes, as FAT or many NFS/CIFS
# servers tick in 1-2 s) lets a same-size rewrite within one second keep
# size, mtime and ctime. A verdict, or page cache, stamped with such a
# young ctime must not be trusted: the next open scans again.
import os
import shutil
import tempfile
import time

import pytest

from clamfstest.wait import let_time_pass
from fsutil import LoopFs
from scanutil import delta, mount_scan, put, stats, try_read

CLEAN = b"C" * 68  # as long as the EICAR test file


def ext4_image(mount_clamfs, inode_size):
    """A loop-mounted ext4 directory; 128-byte inodes keep whole seconds,
    256-byte ones nanoseconds."""
    fs = LoopFs(mount_clamfs.tempdir("clamfs-racy"), 32,
                ["mkfs.ext4", "-q", "-F", "-I", str(inode_size)])
    try:
        yield fs.path
    finally:
        fs.close()


@pytest.fixture
def coarse_backend(mount_clamfs):
    """A directory on ext4 with whole-second timestamps."""
    yield from ext4_image(mount_clamfs, 128)


def stamp(path):
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def rewrite_in_place(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def drop_page_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")


def same_second_rewrite(m, name, first, second, check, tries=10):
    """Writes `first` to the backend, has the mount read it, rewrites it
    with `second` within the same second (retrying when a second boundary
    fell in between), then calls check(). Returns how many rounds ran."""
    done = 0
    while done < tries:
        # start just after a second boundary: the rounds fit in one second
        let_time_pass(1.02 - time.time() % 1, "a second boundary")
        put(m.b(name), first)
        before = stamp(m.b(name))
        assert before[1] % 1_000_000_000 == 0, "backend keeps sub-seconds"
        assert try_read(m.m(name)) == ("ok", first)
        rewrite_in_place(m.b(name), second)
        if stamp(m.b(name)) != before:
            continue  # crossed a second: not the case under test
        check()
        done += 1
    return done


@pytest.mark.parametrize("window", [2, 0])
def test_same_second_rewrite_is_rescanned(mount_clamfs, clamd, coarse_backend,
                                          window):
    # window 0 is the control: the rule off, the cache serves the old
    # verdict for the new content, which is what racy_window prevents
    m = mount_scan(mount_clamfs, clamd, f"racy_window={window}",
                   backend=coarse_backend)
    results = []

    def check():
        drop_page_cache()
        results.append(try_read(m.m("x")))

    rounds = 10 if window else 3
    s0 = stats(m.mnt)
    assert same_second_rewrite(m, "x", CLEAN, clamd.eicar, check,
                               rounds) == rounds
    hits = delta(s0, stats(m.mnt), "opens_cache_hit")["opens_cache_hit"]
    if window:
        assert results == [("err", "EACCES")] * rounds, results
        assert hits == 0
    else:
        assert results == [("ok", clamd.eicar)] * rounds, results
        assert hits == rounds


def test_same_second_rewrite_drops_page_cache(mount_clamfs, clamd,
                                              coarse_backend):
    m = mount_scan(mount_clamfs, clamd, "racy_window=2",
                   backend=coarse_backend)
    results = []
    other = b"D" * 68

    def check():
        # no cache dropping: the kernel must not keep the old pages
        results.append(try_read(m.m("y")))

    assert same_second_rewrite(m, "y", CLEAN, other, check, 5) == 5
    assert results == [("ok", other)] * 5, results


def test_settled_file_is_cached(mount_clamfs, clamd, coarse_backend):
    # the default window: a file changed long enough ago is cached as ever
    m = mount_scan(mount_clamfs, clamd, "racy_window=2",
                   backend=coarse_backend)
    put(m.b("old"), CLEAN)
    put(m.b("new"), CLEAN)
    let_time_pass(3.2, "old's whole-second ctime gets older than the 2 s "
                  "racy window")
    put(m.b("new"), CLEAN)
    s0 = stats(m.mnt)
    for _ in range(3):
        assert try_read(m.m("old")) == ("ok", CLEAN)
        assert try_read(m.m("new")) == ("ok", CLEAN)
    d = delta(s0, stats(m.mnt), "scans", "opens_cache_hit")
    # old: one scan, two hits; new (changed just now): a scan each time
    assert d == {"scans": 4, "opens_cache_hit": 2}, d


# --- a backend whose stamps keep nanoseconds: the window is learnt -------

@pytest.fixture
def fine_backend(mount_clamfs):
    """ext4 with 256-byte inodes (nanosecond stamps), a loop image."""
    yield from ext4_image(mount_clamfs, 256)


@pytest.mark.parametrize("learn", ["yes", "no"])
def test_fresh_file_is_cached_after_a_few_ticks(mount_clamfs, clamd,
                                                fine_backend, learn):
    """With nanosecond stamps a file written 50 ms ago is cached at its
    first open, where the 2 s window would scan it at every open."""
    m = mount_scan(mount_clamfs, clamd, "racy_window=2",
                   "racy_learn=" + learn, backend=fine_backend)
    put(m.b("fresh"), CLEAN)
    assert os.stat(m.b("fresh")).st_ctime_ns % 1_000_000_000 != 0
    let_time_pass(0.05, "the file gets older than the learnt window "
                  "(a few clock ticks)")
    s0 = stats(m.mnt)
    for _ in range(3):
        assert try_read(m.m("fresh")) == ("ok", CLEAN)
    d = delta(s0, stats(m.mnt), "scans", "opens_cache_hit")
    if learn == "yes":
        assert d == {"scans": 1, "opens_cache_hit": 2}, d
    else:
        assert d == {"scans": 3, "opens_cache_hit": 0}, d


@pytest.fixture
def shm_dir():
    """A directory on tmpfs (nanosecond stamps, no page_mkwrite)."""
    d = tempfile.mkdtemp(prefix="clamfs-racy.", dir="/dev/shm")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("backend_kind", ["ext4", "tmpfs"])
def test_tight_same_size_rewrites_are_never_served_stale(
        shm_dir, mount_clamfs, clamd, fine_backend, backend_kind):
    """Same-size rewrites in place, as fast as they come and at delays
    around the learnt window, each followed by an open through the mount:
    every open is judged on the content written last."""
    backend = fine_backend if backend_kind == "ext4" else shm_dir
    m = mount_scan(mount_clamfs, clamd, "racy_window=2", backend=backend)
    put(m.b("x"), CLEAN)
    wrong = []
    delays = [0, 0, 0.005, 0.015, 0.019, 0.021, 0.025, 0.04]
    for i in range(240):
        data = clamd.eicar if i % 2 else CLEAN
        rewrite_in_place(m.b("x"), data)
        d = delays[i % len(delays)]
        if d:
            let_time_pass(d, "the open comes at this point of the window")
        want = ("err", "EACCES") if i % 2 else ("ok", CLEAN)
        for again in (0, 1):  # the second open may find the verdict
            got = try_read(m.m("x"))
            if got != want:
                wrong.append((i, d, again, got[0]))
    assert wrong == [], wrong
    hits = stats(m.mnt)["opens_cache_hit"]
    if backend_kind == "ext4":
        # the learnt window applied: settled clean contents were cached
        assert hits > 0
    else:
        # tmpfs: a mapping's stores need not move a stamp, so no verdict
        # is trusted there at all (test_sec_writers.py)
        assert hits == 0
