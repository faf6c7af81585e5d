# SPDX-License-Identifier: GPL-2.0-or-later
# The verdict cache, proved with the daemon's counters and clamd's own log
# (LogClean: one line per scan): unchanged files are not rescanned, 50
# simultaneous openers cause one scan, infected verdicts are cached, and
# every way of changing a file invalidates: writes through the mount in the
# same second, a same-size pwrite, a writer still holding the file open,
# truncate/fallocate/copy_file_range, a change behind the mount's back with
# the mtime restored, and a signature update (TTL backstop).
import os
import threading
import time


from clamfstest.env import SLOW
from clamfstest.wait import let_time_pass
from fakeclamd import FakeClamd
from fsutil import FALLOC_FL_KEEP_SIZE, fallocate
from scanutil import (delta, mount_scan, put, stats, try_read, wait_detections,
                      wait_for)

CLEAN = b"clean content, nothing to see\n"


def test_unchanged_file_not_rescanned(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    data = os.urandom(300 * 1024)
    put(m.b("f"), data)
    put(m.b("e"), clamd.eicar)
    scans0 = clamd.scan_count()
    s0 = stats(m.mnt)
    for _ in range(5):
        assert try_read(m.m("f")) == ("ok", data)
    for _ in range(3):
        assert try_read(m.m("e")) == ("err", "EACCES")
    s1 = stats(m.mnt)
    assert delta(s0, s1, "opens_checked", "scans", "opens_scanned",
                 "opens_cache_hit", "opens_denied", "infected") == {
        "opens_checked": 8, "scans": 2, "opens_scanned": 2,
        "opens_cache_hit": 6, "opens_denied": 3, "infected": 3}
    # clamd saw exactly two scans, and no more arrive later
    assert clamd.wait_scan_count(scans0 + 2) == scans0 + 2
    dets = wait_detections(m, 3)
    assert [d["cached"] for d in dets] == ["no", "yes", "yes"]
    assert s1["cache_entries"] == 2
    # stat, atime updates and a rename do not change size/mtime/ctime...
    # a rename changes ctime on ext4: the file is rescanned, and clean.
    os.rename(m.m("f"), m.m("g"))
    assert try_read(m.m("g")) == ("ok", data)
    assert clamd.wait_scan_count(scans0 + 3) == scans0 + 3
    assert delta(s0, stats(m.mnt), "scans")["scans"] == 3


def test_50_simultaneous_openers_one_scan(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    data = os.urandom(2 * 1024 * 1024)
    put(m.b("big"), data)
    n = 50
    barrier = threading.Barrier(n)
    results = [None] * n

    def opener(i):
        barrier.wait()
        try:
            fd = os.open(m.m("big"), os.O_RDONLY)
        except OSError as e:
            results[i] = e.errno
            return
        results[i] = len(os.read(fd, 4096))
        os.close(fd)

    # the lookup is done once beforehand so that all opens race on OPEN
    os.stat(m.m("big"))
    scans0 = clamd.scan_count()
    s0 = stats(m.mnt)
    ts = [threading.Thread(target=opener, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60 * SLOW)
    assert results == [4096] * n
    s1 = stats(m.mnt)
    d = delta(s0, s1, "opens_checked", "scans", "opens_scanned",
              "opens_cache_hit", "scans_joined", "scans_spared")
    assert d["opens_checked"] == n
    assert d["scans"] == 1, d
    assert d["opens_scanned"] + d["opens_cache_hit"] == n, d
    # everybody who waited for a scan joined the single one in flight, or
    # (submitting just after it ended) was answered from its verdict
    assert d["scans_joined"] + d["scans_spared"] == \
        d["opens_scanned"] - 1, d
    assert clamd.wait_scan_count(scans0 + 1) == scans0 + 1


def _gated_clamd():
    """A clamd whose second scan waits for gate; scans lists every scan
    command it got."""
    gate, scans = threading.Event(), []

    def behaviour(ctx):
        if ctx.command.endswith(b"PING"):
            return ("reply", "PONG")
        if ctx.command.endswith(b"VERSION"):
            return ("reply", "ClamAV 1.4.6")
        scans.append(ctx.command)
        if len(scans) == 2:
            gate.wait(30 * SLOW)
        what = "stream" if ctx.command.endswith(b"INSTREAM") else "fd[1]"
        return ("reply", f"{what}: OK")
    return FakeClamd(behaviour, stats=1), gate, scans


def test_queued_open_takes_a_verdict_cached_meanwhile(mount_clamfs):
    """An open that skipped the cache (a process on the backend held the
    file open for writing) and waits in the queue: if that writer is gone,
    unchanged, when its scan would start, the cached verdict answers it
    and clamd is not asked (scans_spared); if it is still there, clamd
    is."""
    fk, gate, scans = _gated_clamd()
    with fk:
        m = mount_scan(mount_clamfs, fk.socket, "scan_threads=1")
        put(m.b("f"), CLEAN)
        put(m.b("g1"), b"g1\n")
        put(m.b("g2"), b"g2\n")
        assert try_read(m.m("f")) == ("ok", CLEAN)  # scan 1, cached

        def queued_read(blocker, writer_stays):
            n0 = len(scans)
            got = {}
            tg = threading.Thread(
                target=lambda: got.setdefault("g", try_read(m.m(blocker))))
            tg.start()
            # the only scanner thread is busy with the blocker's scan
            assert wait_for(lambda: len(scans) == n0 + 1, 10 * SLOW)
            w = open(m.b("f"), "r+b")  # writes nothing
            q0 = stats(m.mnt)["scans_queued"]
            tf = threading.Thread(
                target=lambda: got.setdefault("f", try_read(m.m("f"))))
            tf.start()
            assert wait_for(lambda: stats(m.mnt)["scans_queued"] > q0,
                            10 * SLOW), stats(m.mnt)
            if not writer_stays:
                w.close()
            gate.set()
            tg.join(30 * SLOW)
            tf.join(30 * SLOW)
            w.close()
            return got

        s0 = stats(m.mnt)
        got = queued_read("g1", writer_stays=False)
        assert got == {"g": ("ok", b"g1\n"), "f": ("ok", CLEAN)}
        assert len(scans) == 2, scans
        d = delta(s0, stats(m.mnt), "scans", "scans_spared",
                  "opens_scanned")
        assert d == {"scans": 1, "scans_spared": 1, "opens_scanned": 2}, d

        # a writer still there when the scan starts: clamd reads the file
        gate.clear()
        del scans[:]
        scans.append(b"the next scan is the blocker's")
        s0 = stats(m.mnt)
        got = queued_read("g2", writer_stays=True)
        assert got == {"g": ("ok", b"g2\n"), "f": ("ok", CLEAN)}
        assert len(scans) == 3, scans
        d = delta(s0, stats(m.mnt), "scans", "scans_spared")
        assert d == {"scans": 2, "scans_spared": 0}, d


def test_eicar_written_through_mount_same_second(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    # a new file, written and read back at once
    with open(m.m("new"), "wb") as f:
        f.write(clamd.eicar)
    assert try_read(m.m("new")) == ("err", "EACCES")
    # a clean file, read (verdict cached), then rewritten within the second
    with open(m.m("f"), "wb") as f:
        f.write(CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    t0 = time.time()
    with open(m.m("f"), "wb") as f:
        f.write(clamd.eicar)
    assert try_read(m.m("f")) == ("err", "EACCES")
    assert time.time() - t0 < 1.0 * SLOW


def test_pwrite_same_size(mount_clamfs, clamd):
    """A same-size overwrite may leave size and (coarse) mtime unchanged:
    the write through the mount must drop the cached verdict at once."""
    m = mount_scan(mount_clamfs, clamd)
    clean = b"A" * len(clamd.eicar)
    put(m.b("f"), clean)
    assert try_read(m.m("f")) == ("ok", clean)
    st0 = os.stat(m.b("f"))
    fd = os.open(m.m("f"), os.O_WRONLY)
    assert os.pwrite(fd, clamd.eicar, 0) == len(clamd.eicar)
    os.close(fd)
    assert os.stat(m.b("f")).st_size == st0.st_size
    assert try_read(m.m("f")) == ("err", "EACCES")
    # and back: a clean same-size pwrite makes it readable again
    fd = os.open(m.m("f"), os.O_WRONLY)
    os.pwrite(fd, clean, 0)
    os.close(fd)
    assert try_read(m.m("f")) == ("ok", clean)


O_PATH = 0o10000000


def daemon_opens_for_io(m, backend_path):
    """The daemon's fds open on backend_path for reading or writing (its
    O_PATH fd of the inode does not count)."""
    out = []
    fd_dir = f"/proc/{m.pid}/fd"
    for n in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, n)) != backend_path:
                continue
            with open(f"/proc/{m.pid}/fdinfo/{n}") as f:
                flags = next(int(l.split()[1], 8) for l in f
                             if l.startswith("flags:"))
        except (OSError, StopIteration):
            continue
        if not flags & O_PATH:
            out.append(n)
    return out


def test_writer_still_open(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    # a new file being written: the reader is refused while the writer
    # still holds it open
    wfd = os.open(m.m("up"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(wfd, clamd.eicar)
        assert try_read(m.m("up")) == ("err", "EACCES")
    finally:
        os.close(wfd)
    assert try_read(m.m("up")) == ("err", "EACCES")

    # a clean file with a cached verdict: once a writer has it open, every
    # read-open rescans, and sees what the writer wrote
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    wfd = os.open(m.m("f"), os.O_WRONLY)
    try:
        s0 = stats(m.mnt)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        s1 = stats(m.mnt)
        d = delta(s0, s1, "opens_cache_hit", "scans")
        assert d == {"opens_cache_hit": 0, "scans": 2}, d
        os.pwrite(wfd, clamd.eicar, 0)
        os.ftruncate(wfd, len(clamd.eicar))
        assert try_read(m.m("f")) == ("err", "EACCES")
    finally:
        os.close(wfd)
    assert try_read(m.m("f")) == ("err", "EACCES")
    # after the writer closed, the clean verdict of a clean file is cached
    # again
    put(m.b("g"), CLEAN)
    wfd = os.open(m.m("g"), os.O_WRONLY)
    os.close(wfd)
    # close() returns before the kernel's RELEASE reaches the daemon: until
    # then the writer is still open there, and no verdict may be cached
    assert wait_for(lambda: not daemon_opens_for_io(m, m.b("g")), 10), \
        "the daemon never saw the writer's release"
    assert try_read(m.m("g")) == ("ok", CLEAN)
    s0 = stats(m.mnt)
    assert try_read(m.m("g")) == ("ok", CLEAN)
    assert delta(s0, stats(m.mnt), "opens_cache_hit")["opens_cache_hit"] == 1


def test_truncate_fallocate_copy_invalidate(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    e = clamd.eicar
    # truncate: EICAR + padding (clean for the whole-file signature) cut
    # back to exactly EICAR
    put(m.b("t"), e + b"\0" * 10)
    assert try_read(m.m("t")) == ("ok", e + b"\0" * 10)
    os.truncate(m.m("t"), len(e))
    assert try_read(m.m("t")) == ("err", "EACCES")
    # ftruncate through a write-only fd
    put(m.b("t2"), e + b"pad")
    assert try_read(m.m("t2"))[0] == "ok"
    fd = os.open(m.m("t2"), os.O_WRONLY)
    os.ftruncate(fd, len(e))
    os.close(fd)
    assert try_read(m.m("t2")) == ("err", "EACCES")
    # copy_file_range (both ends on the mount) into a clean file of the
    # same size: the source, EICAR plus padding, is clean as a whole
    put(m.b("src"), e + b"pad")
    put(m.b("dst"), b"B" * len(e))
    assert try_read(m.m("dst"))[0] == "ok"
    s = os.open(m.m("src"), os.O_RDONLY)
    try:
        d = os.open(m.m("dst"), os.O_WRONLY)
        try:
            assert os.copy_file_range(s, d, len(e), 0, 0) == len(e)
        finally:
            os.close(d)
    finally:
        os.close(s)
    with open(m.b("dst"), "rb") as f:
        assert f.read() == e
    assert try_read(m.m("dst")) == ("err", "EACCES")
    # fallocate that extends the file: EICAR + zeros is clean again, so
    # a stale "infected" verdict must not survive either
    put(m.b("fa"), e)
    assert try_read(m.m("fa")) == ("err", "EACCES")
    fd = os.open(m.m("fa"), os.O_WRONLY)
    try:
        fallocate(fd, 0, 0, len(e) + 4096)
    finally:
        os.close(fd)
    assert os.path.getsize(m.b("fa")) == len(e) + 4096
    assert try_read(m.m("fa")) == ("ok", e + b"\0" * 4096)
    # KEEP_SIZE fallocate changes neither size nor content: still refused
    put(m.b("fk"), e)
    assert try_read(m.m("fk")) == ("err", "EACCES")
    fd = os.open(m.m("fk"), os.O_WRONLY)
    try:
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8192)
    finally:
        os.close(fd)
    assert try_read(m.m("fk")) == ("err", "EACCES")


def test_backend_change_with_mtime_restored(mount_clamfs, clamd):
    """Swap the content behind the mount's back, same size, and put the old
    atime/mtime back (touch -r): ctime still differs, so it is rescanned."""
    m = mount_scan(mount_clamfs, clamd)
    clean = b"Z" * len(clamd.eicar)
    put(m.b("f"), clean)
    assert try_read(m.m("f")) == ("ok", clean)
    st = os.stat(m.b("f"))
    with open(m.b("f"), "r+b") as f:
        f.write(clamd.eicar)
    os.utime(m.b("f"), ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.stat(m.b("f"))
    assert (st2.st_size, st2.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    s0 = stats(m.mnt)
    assert try_read(m.m("f")) == ("err", "EACCES")
    s1 = stats(m.mnt)
    assert delta(s0, s1, "scans")["scans"] == 1
    # the reverse: infected cached, then cleaned behind the mount's back
    put(m.b("g"), clamd.eicar)
    assert try_read(m.m("g")) == ("err", "EACCES")
    st = os.stat(m.b("g"))
    with open(m.b("g"), "r+b") as f:
        f.write(clean)
    os.utime(m.b("g"), ns=(st.st_atime_ns, st.st_mtime_ns))
    assert try_read(m.m("g")) == ("ok", clean)
    # replaced by a different inode with the same stamps: also rescanned
    put(m.b("h.tmp"), clamd.eicar)
    put(m.b("h"), clean)
    assert try_read(m.m("h")) == ("ok", clean)
    st = os.stat(m.b("h"))
    os.utime(m.b("h.tmp"), ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(m.b("h.tmp"), m.b("h"))
    let_time_pass(1.2, "the kernel's 1 s entry cache for \"h\" expires")
    assert try_read(m.m("h")) == ("err", "EACCES")


def test_new_signature_reload_ttl(mount_clamfs, clamd):
    """A new signature plus RELOAD. With only custom signatures clamd's
    VERSION reply carries no database version ("ClamAV 1.4.6"), so the
    version poll cannot notice the reload: the cache TTL is the backstop,
    and that is the path tested here. A clean verdict cached before the
    reload expires after cache_ttl seconds; the file is then refused."""
    ttl = 3
    m = mount_scan(mount_clamfs, clamd, f"cache_ttl={ttl}", "version_check=1")
    payload = b"reload-test-payload-" + os.urandom(8).hex().encode()
    put(m.b("f"), b"header\n" + payload + b"\ntrailer\n")
    put(m.b("other"), CLEAN)
    assert try_read(m.m("f"))[0] == "ok"
    t_scan = time.monotonic()
    # within the TTL the cached verdict serves (no rescan)
    s0 = stats(m.mnt)
    assert try_read(m.m("other"))[0] == "ok"
    assert try_read(m.m("other"))[0] == "ok"
    assert delta(s0, stats(m.mnt), "opens_cache_hit")["opens_cache_hit"] == 1
    clamd.add_signature("Clamfs-Reload-Test", payload)
    # refused at the latest ttl seconds (plus slack) after the scan
    deadline = t_scan + ttl + 3 * SLOW
    outcome = None
    while time.monotonic() < deadline:
        outcome = try_read(m.m("f"))
        if outcome == ("err", "EACCES"):
            break
        time.sleep(0.2)
    assert outcome == ("err", "EACCES"), \
        f"still {outcome[0]} {time.monotonic() - t_scan:.1f}s after the scan"
    dets = wait_detections(m, 1)
    assert dets[-1]["signature"] == "Clamfs-Reload-Test.UNOFFICIAL"


def test_cache_ttl_zero_disables(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "cache_ttl=0")
    put(m.b("f"), CLEAN)
    put(m.b("e"), clamd.eicar)
    scans0 = clamd.scan_count()
    s0 = stats(m.mnt)
    for _ in range(3):
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert try_read(m.m("e")) == ("err", "EACCES")
    d = delta(s0, stats(m.mnt), "scans", "opens_cache_hit")
    assert d == {"scans": 6, "opens_cache_hit": 0}
    assert clamd.wait_scan_count(scans0 + 6) == scans0 + 6


def test_cache_entries_bound(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "cache_entries=4")
    for i in range(10):
        put(m.b(f"f{i}"), CLEAN + bytes([i]))
    for i in range(10):
        assert try_read(m.m(f"f{i}"))[0] == "ok"
    s = stats(m.mnt)
    # below VCACHE_MAX_SHARDS entries the cache is one LRU: exactly full
    assert s["cache_entries"] == 4, s["cache_entries"]
    # the most recent one is still cached
    s0 = stats(m.mnt)
    assert try_read(m.m("f9"))[0] == "ok"
    assert delta(s0, stats(m.mnt), "opens_cache_hit")["opens_cache_hit"] == 1


def test_simultaneous_openers_of_infected_file(mount_clamfs, clamd):
    """20 openers of one unscanned infected file: one scan, all refused,
    and every refused open is reported (one detection line each)."""
    from scanutil import MARKER, ensure_marker_signature
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("bad"), os.urandom(2 * 1024 * 1024) + MARKER)
    os.stat(m.m("bad"))
    n = 20
    barrier = threading.Barrier(n)
    results = [None] * n

    def opener(i):
        barrier.wait()
        try:
            os.close(os.open(m.m("bad"), os.O_RDONLY))
            results[i] = "opened"
        except OSError as e:
            results[i] = e.errno

    s0 = stats(m.mnt)
    ts = [threading.Thread(target=opener, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60 * SLOW)
    import errno as _errno
    assert results == [_errno.EACCES] * n
    d = delta(s0, stats(m.mnt), "scans", "opens_denied", "infected")
    assert d == {"scans": 1, "opens_denied": n, "infected": n}, d
    assert len(wait_detections(m, n)) == n


def test_one_scan_thread_one_connection(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "scan_threads=1",
                   "clamd_connections=1")
    n = 12
    for i in range(n):
        put(m.b(f"f{i}"), os.urandom(64 * 1024))
    put(m.b("e"), clamd.eicar)
    results = [None] * n

    def rd(i):
        results[i] = try_read(m.m(f"f{i}"))[0]

    ts = [threading.Thread(target=rd, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    assert try_read(m.m("e")) == ("err", "EACCES")
    for t in ts:
        t.join(60 * SLOW)
    assert results == ["ok"] * n
    assert stats(m.mnt)["scans"] == n + 1
