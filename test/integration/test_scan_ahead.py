# SPDX-License-Identifier: GPL-2.0-or-later
# Scanning ahead (issue 23, item 2): a file written through the mount is
# scanned in the background once its last writer closes it, so its first
# reader finds a verdict instead of waiting for clamd. The verdict only
# fills the cache: it must never be trusted for content the scan did not
# see (a rewrite on the backend, a writer still holding the file), never be
# made for names the policy excludes, and never on a backend whose coarse
# timestamps would not let it be kept.
import os
import threading
import time

import pytest

from fsutil import LoopFs
from clamfstest.wait import let_time_pass
from scanutil import (delta, detections, mount_scan, released, stats,
                      try_read, wait_for, write_through)

CLEAN = b"C" * 68  # as long as the EICAR test file


def mount_ahead(mount_clamfs, clamd, *opts, **kw):
    # the defaults (mount_scan turns scan_ahead off for the other suites);
    # the racy window is learnt (20 ms) on the ext4 the tests use
    if not any(o.split("=")[0] == "scan_ahead" for o in opts):
        opts = ("scan_ahead=yes",) + opts
    return mount_scan(mount_clamfs, clamd, "racy_window=2", *opts, **kw)


def cached(m, n, timeout=10):
    """Waits until n verdicts of scans ahead were stored."""
    assert wait_for(lambda: stats(m.mnt)["ahead_cached"] >= n, timeout), \
        stats(m.mnt)


def settled(m, n, timeout=10):
    """Waits until at least n scans ahead were asked for and every one
    asked for was answered (made, dropped or spared; only they scan
    here), and until every release has come and every scan's verdict is
    in (the daemon holds no file open: the scan's descriptor is closed
    after its verdict is stored and counted)."""
    def done():
        s = stats(m.mnt)
        return s["ahead_scans"] >= n and s["scans_queued"] == 0 and \
            s["scans"] + s["scans_background_dropped"] + \
            s["scans_spared"] >= s["ahead_scans"]
    assert wait_for(done, timeout), stats(m.mnt)
    released(m, timeout)
    return stats(m.mnt)


def test_files_written_through_the_mount_are_read_from_the_cache(
        mount_clamfs, clamd):
    m = mount_ahead(mount_clamfs, clamd)
    names = ["f%02d" % i for i in range(20)]
    for n in names:
        write_through(m.m(n), CLEAN + n.encode())
    cached(m, len(names))
    before = settled(m, len(names))
    assert before["ahead_cached"] == len(names), before
    assert before["scans_background"] == len(names), before
    for n in names:
        assert try_read(m.m(n)) == ("ok", CLEAN + n.encode())
    d = delta(before, stats(m.mnt), "scans", "opens_cache_hit")
    assert d == {"scans": 0, "opens_cache_hit": len(names)}


def test_scan_ahead_leaves_the_access_time_alone(mount_clamfs, clamd):
    """Nobody read the file: its atime must not say otherwise (relatime
    would move it at the first read after the write)."""
    m = mount_ahead(mount_clamfs, clamd)
    write_through(m.m("f"), CLEAN)
    before = os.stat(m.b("f"))
    assert before.st_atime_ns <= before.st_mtime_ns
    cached(m, 1)
    after = os.stat(m.b("f"))
    assert after.st_atime_ns == before.st_atime_ns


def test_infected_upload_is_refused_from_the_ahead_verdict(mount_clamfs,
                                                           clamd):
    m = mount_ahead(mount_clamfs, clamd)
    write_through(m.m("up.com"), clamd.eicar)
    cached(m, 1)
    before = settled(m, 1)
    assert before["ahead_cached"] == 1
    # nothing is acted on, nor logged, until somebody opens it
    assert detections(m) == []
    assert os.path.exists(m.b("up.com"))
    assert try_read(m.m("up.com")) == ("err", "EACCES")
    d = delta(before, stats(m.mnt), "scans", "opens_cache_hit",
              "opens_denied")
    assert d == {"scans": 0, "opens_cache_hit": 1, "opens_denied": 1}
    det = detections(m)
    assert len(det) == 1 and det[0]["cached"] == "yes", det


def test_quarantine_acts_on_open_after_an_ahead_verdict(mount_clamfs, clamd,
                                                        tmp_path):
    qdir = tmp_path / "q"
    qdir.mkdir(mode=0o700)
    m = mount_ahead(mount_clamfs, clamd, "on_infected=quarantine",
                    "quarantine_dir=%s" % qdir)
    write_through(m.m("up.com"), clamd.eicar)
    cached(m, 1)
    assert os.path.exists(m.b("up.com"))
    assert try_read(m.m("up.com")) == ("err", "EACCES")
    assert not os.path.exists(m.b("up.com"))
    assert len(detections(m)) == 1


def test_backend_rewrite_after_close_is_never_served_from_the_ahead_verdict(
        mount_clamfs, clamd):
    """A client of the backend rewrites the file, same size, at every
    moment of the scan ahead's life: before it is held back, while it
    waits for the racy window, while clamd reads, after it. Every open
    must see the rewrite refused."""
    m = mount_ahead(mount_clamfs, clamd)
    delays = [0, 0.001, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.3]
    for i, delay in enumerate(delays):
        name = "r%02d" % i
        write_through(m.m(name), CLEAN)
        let_time_pass(delay, "the rewrite lands at this point of the scan "
                      "ahead's life")
        fd = os.open(m.b(name), os.O_WRONLY)
        try:
            os.pwrite(fd, clamd.eicar, 0)
        finally:
            os.close(fd)
    # a release the backend writer's open came before asks for no scan:
    # settled() waits for every release
    s = settled(m, 0)
    # the later rewrites came after the scans ahead had started
    assert s["ahead_scans"] >= 3, s
    for i, delay in enumerate(delays):
        assert try_read(m.m("r%02d" % i)) == ("err", "EACCES"), delay


def test_writer_holding_the_file_keeps_the_ahead_verdict_out(mount_clamfs,
                                                             clamd):
    """A writer on the backend holds the file, mapped and stored into,
    while a writer through the mount writes it and closes: stores into
    the mapping's dirty page move no stamp, so no scan ahead may vouch for
    the file."""
    import mmap
    m = mount_ahead(mount_clamfs, clamd)
    write_through(m.m("held"), CLEAN)
    cached(m, 1)
    fd = os.open(m.b("held"), os.O_RDWR)
    try:
        mm = mmap.mmap(fd, len(CLEAN))
        mm[0:1] = b"C"  # the first store: the page is writable from now on
        w = os.open(m.m("held"), os.O_WRONLY)
        os.pwrite(w, CLEAN, 0)
        os.close(w)
        # the release came and its scan was dealt with (the mapping held
        # here is not the daemon's)
        released(m)
        s = stats(m.mnt)
        # asked for at the close, dropped when it would start
        assert s["ahead_scans"] == 2 and s["ahead_cached"] == 1, s
        assert s["scans_background_dropped"] == 1, s
        mm[:] = clamd.eicar
        mm.close()
    finally:
        os.close(fd)
    assert try_read(m.m("held")) == ("err", "EACCES")


def test_excluded_names_and_big_files_are_not_scanned_ahead(mount_clamfs,
                                                            clamd):
    m = mount_ahead(mount_clamfs, clamd, "exclude=skip/**")
    os.mkdir(m.m("skip"))
    write_through(m.m("skip", "x"), CLEAN)
    write_through(m.m("empty"), b"")
    with open(m.m("big"), "wb") as f:
        f.truncate(64 * 1024 * 1024 + 1)
    released(m)  # releases come asynchronously
    write_through(m.m("small"), CLEAN)
    s = settled(m, 1)
    assert s["ahead_scans"] == 1 and s["scans"] == 1, s


def test_files_removed_before_their_last_close_are_not_scanned(
        mount_clamfs, clamd):
    """Temporary files a program removes while it still writes them:
    nobody can open them again. (One removed right after its close is
    dropped too, if that comes before its scan starts: the removal moves
    its ctime; not asserted, it is a race with the scanner.)"""
    m = mount_ahead(mount_clamfs, clamd)
    for i in range(10):
        fd = os.open(m.m("tmp%d" % i), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, CLEAN)
        os.unlink(m.m("tmp%d" % i))
        os.close(fd)
    released(m)  # releases come asynchronously
    write_through(m.m("kept"), CLEAN)
    s = settled(m, 1)
    assert s["ahead_scans"] == 1 and s["scans"] == 1, s


def test_no_scan_ahead_without_two_general_threads(mount_clamfs, clamd):
    """scan_threads=2 leaves one thread for any file: a background scan
    there would hold up a user's big file."""
    m = mount_ahead(mount_clamfs, clamd, "scan_threads=2")
    write_through(m.m("f"), CLEAN)
    released(m)  # the release, which would ask for the scan, came
    s = stats(m.mnt)
    assert s["ahead_scans"] == 0 and s["scans"] == 0, s


def test_scan_ahead_can_be_turned_off(mount_clamfs, clamd):
    m = mount_ahead(mount_clamfs, clamd, "scan_ahead=no")
    write_through(m.m("f"), CLEAN)
    released(m)  # the release, which would ask for the scan, came
    before = stats(m.mnt)
    assert before["ahead_scans"] == 0 and before["scans"] == 0
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert delta(before, stats(m.mnt), "scans") == {"scans": 1}


def test_scan_on_close_takes_precedence(mount_clamfs, clamd):
    m = mount_ahead(mount_clamfs, clamd, "scan_on_close",
                    "on_infected=delete")
    write_through(m.m("up.com"), clamd.eicar)
    assert wait_for(lambda: not os.path.exists(m.b("up.com")), 5)
    s = stats(m.mnt)
    assert s["ahead_scans"] == 0 and s["close_scans"] == 1, s


@pytest.fixture
def coarse_backend(mount_clamfs):
    """ext4 with 128-byte inodes: timestamps keep whole seconds."""
    fs = LoopFs(mount_clamfs.tempdir("clamfs-ahead"), 32,
                ["mkfs.ext4", "-q", "-F", "-I", "128"])
    try:
        yield fs.path
    finally:
        fs.close()


def test_no_scan_ahead_where_timestamps_are_coarse(mount_clamfs, clamd,
                                                   coarse_backend):
    """Its verdict could not be kept for 2 s: clamd is not asked."""
    m = mount_ahead(mount_clamfs, clamd, backend=coarse_backend)
    write_through(m.m("f"), CLEAN)
    released(m)  # the release, which would ask for the scan, came
    s = stats(m.mnt)
    assert s["ahead_scans"] == 0 and s["scans"] == 0, s
    assert try_read(m.m("f")) == ("ok", CLEAN)


def test_a_reader_never_waits_behind_a_flood_of_scans_ahead(mount_clamfs,
                                                            clamd):
    """One user unpacks thousands of files; another user's open of an
    unscanned big file (the small-file thread cannot take it) is served
    before the backlog of background scans, with the fewest threads that
    make them (two general ones)."""
    m = mount_ahead(mount_clamfs, clamd, "scan_threads=3")
    os.makedirs(m.b("other"))
    doc = CLEAN * (2 * 1024 * 1024 // len(CLEAN))
    with open(m.b("other", "doc"), "wb") as f:
        f.write(doc)
    stop = threading.Event()

    def flood():
        i = 0
        while not stop.is_set():
            write_through(m.m("w%05d" % i), CLEAN + str(i).encode())
            i += 1

    t = threading.Thread(target=flood)
    t.start()
    try:
        assert wait_for(lambda: stats(m.mnt)["scans_queued"] >= 20, 20)
        t0 = time.monotonic()
        assert try_read(m.m("other", "doc")) == ("ok", doc)
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
    # behind at most one background scan per general thread: a few ms;
    # the backlog itself is many times that
    assert took < 1.0, took
