# SPDX-License-Identifier: GPL-2.0-or-later
# writeback_cache=yes: the kernel keeps what writers write in its page
# cache and writes it back later, in big pieces. Those bytes are in no
# backend file a scanner can read, yet another opener of the file would
# read them from the shared page cache. The attacker here is a user
# writing through the mount and holding the file open, the victim another
# user opening it: the victim's open must be decided on what it will read.
# The mounts have no passthrough: with it the option stays off.
import os
import subprocess
import textwrap

import pytest

from clamfstest.env import SLOW
from clamfstest.wait import let_time_pass, wait_for
from fsutil import (GID_A, GID_B, UID_A, UID_B, VICTIM_READ, LineChild,
                    run_as, share_of, victim_read)
from scanutil import (MARKER, MARKER_SIG, delta, detections,
                      ensure_marker_signature, mount_scan, stats,
                      wait_detections)

WB = ("writeback_cache=yes", "passthrough=off")

# The attacker: opens the file as told (through the mount), writes what it
# is told at the offset it is told, one command a line, and keeps the file
# open (and, with "map", a shared writable mapping of it) until "exit".
WRITER = textwrap.dedent("""
    import mmap, os, sys
    path, how = sys.argv[1], sys.argv[2]
    flags = {"create": os.O_WRONLY | os.O_CREAT,
             "write": os.O_WRONLY, "map": os.O_RDWR}[how]
    fd = os.open(path, flags, 0o644)
    mp = None
    if how == "map":
        mp = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE)
    print("open", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "exit":
            break
        off, data = int(cmd[0]), bytes.fromhex(cmd[1])
        if mp is not None:
            mp[off:off + len(data)] = data  # a store, no write(), no msync()
        else:
            os.pwrite(fd, data, off)
        print("done", flush=True)
    if mp is not None:
        mp.close()
    os.close(fd)
""")

class Writer(LineChild):
    """A process of UID_A holding the file open for writing."""

    def __init__(self, path, how):
        super().__init__(UID_A, GID_A, WRITER, [path, how], "open")

    def write(self, off, data):
        self.ask(f"{off} {data.hex()}", "done")

    def close(self):
        assert super().close() == 0


@pytest.fixture
def share(mount_clamfs):
    """A backend with a directory the attacker (UID_A) may write."""
    return share_of(mount_clamfs.tempdir("clamfs-wb"))


def write_unseen(m, name, data):
    """A Writer that created share/NAME and wrote data into it in pieces,
    still held open: the backend file is still empty (checked)."""
    w = Writer(m.m("share", name), "create")
    for off, piece in pieces(data, 17):
        w.write(off, piece)
    if os.stat(m.b("share", name)).st_size != 0:
        w.close()
        raise AssertionError("written back already: the test proves "
                             "nothing here")
    return w


def writeback_mount(mount_clamfs, clamd, share, *opts):
    m = mount_scan(mount_clamfs, clamd, *WB, *opts, backend=share)
    assert stats(m.mnt)["writeback_cache"] == "on"
    return m


def pieces(data, size):
    return [(off, data[off:off + size]) for off in range(0, len(data), size)]


@pytest.mark.parametrize("writeback", [True, False])
def test_small_writes_reach_the_daemon_batched(mount_clamfs, clamd, share,
                                                writeback):
    """What the option is for: 4 KiB writes arrive as a few big ones, and
    the file reads back as written, through the mount and on the
    backend. Without the option every write is a request."""
    opts = WB if writeback else ("passthrough=off",)
    m = mount_scan(mount_clamfs, clamd, *opts, backend=share)
    assert stats(m.mnt)["writeback_cache"] == ("on" if writeback else "off")
    data = os.urandom(1 << 20)
    s0 = stats(m.mnt)
    fd = os.open(m.m("share", "big"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for off, piece in pieces(data, 4096):
            assert os.write(fd, piece) == len(piece)
    finally:
        os.close(fd)
    writes = delta(s0, stats(m.mnt), "daemon_writes")["daemon_writes"]
    if writeback:
        assert writes <= 64, f"{writes} write requests for 256 writes"
    else:
        assert writes >= 256
    with open(m.b("share", "big"), "rb") as f:
        assert f.read() == data, "the backend lacks what was written"
    with open(m.m("share", "big"), "rb") as f:
        assert f.read() == data


def test_passthrough_keeps_writeback_off(mount_clamfs, clamd, share):
    """Where passthrough is on, writes reach the backend at once: the
    option is then left off (and says so), never both."""
    m = mount_scan(mount_clamfs, clamd, "writeback_cache=yes", backend=share)
    s = stats(m.mnt)
    want = "off" if s["passthrough_state"] == "on" else "on"
    assert s["writeback_cache"] == want
    if want == "off":
        assert "writeback_cache off (passthrough" in m.stderr_text()


def test_unwritten_bytes_of_a_new_file_are_scanned(mount_clamfs, clamd, share):
    """The reproduction: a new file, EICAR written in pieces and kept
    open. On the backend the file is still empty, which alone would let
    an open through unscanned (an empty file needs no scan), while the
    page cache the victim reads from holds EICAR."""
    m = writeback_mount(mount_clamfs, clamd, share)
    w = write_unseen(m, "x", clamd.eicar)
    try:
        r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
        assert r.get("ok") != clamd.eicar.hex(), "unscanned bytes served"
        assert r == {"err": 13}
    finally:
        w.close()
    assert [d["signature"] for d in detections(m)] == \
        ["Eicar-Test.UNOFFICIAL"]


VICTIM_READ_WRITE = victim_read("r+b")


@pytest.mark.parametrize("victim", ["reader", "read-write"])
@pytest.mark.parametrize("how", ["write", "map"])
def test_unwritten_bytes_of_a_clean_file_are_scanned(mount_clamfs, clamd,
                                                      share, how, victim):
    """A 64 KiB file scanned clean (its verdict cached), then a marker the
    scanner detects written into its middle in 4 KiB pieces (or stored
    through a shared mapping) by a writer who keeps it open: the backend
    file is as it was, so only a scan after a write-back can see it."""
    ensure_marker_signature(clamd)
    m = writeback_mount(mount_clamfs, clamd, share)
    x = m.b("share", "x")
    clean = b"c" * 65536
    with open(x, "wb") as f:
        f.write(clean)
    os.chown(x, UID_A, GID_A)
    assert run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt) == \
        {"ok": clean.hex()}
    os.chmod(x, 0o666)  # the read-write victim may open it so
    before = os.stat(x)
    dirty = bytearray(clean)
    dirty[30000:30000 + len(MARKER)] = MARKER
    w = Writer(m.m("share", "x"), how)
    try:
        for off, piece in pieces(bytes(dirty), 4096):
            w.write(off, piece)
        after = os.stat(x)
        with open(x, "rb") as f:
            assert f.read() == clean and after.st_mtime_ns == \
                before.st_mtime_ns, \
                "written back already: the test proves nothing here"
        code = VICTIM_READ if victim == "reader" else VICTIM_READ_WRITE
        r = run_as(UID_B, GID_B, [], code, m.mnt)
        assert r.get("ok") != bytes(dirty).hex(), "unscanned bytes served"
        assert r == {"err": 13}
    finally:
        w.close()
    assert [d["signature"] for d in detections(m)] == \
        [MARKER_SIG + ".UNOFFICIAL"]
    with open(x, "rb") as f:
        assert f.read() == bytes(dirty), "the writer's bytes were lost"


def test_truncating_open_beside_a_writer_does_not_hang(mount_clamfs, clamd,
                                                        share):
    """An O_TRUNC open makes the kernel hold back write-back of the file
    until it is answered: a scan that waited for a write-back then would
    wait for itself. The open must finish, the file be empty, and what
    the writer writes afterwards be scanned as anything else."""
    m = writeback_mount(mount_clamfs, clamd, share)
    w = Writer(m.m("share", "x"), "create")
    try:
        w.write(0, b"a" * 8192)
        code = """
            fd = os.open(P("share/x"), os.O_RDWR | os.O_TRUNC)
            emit({"size": os.fstat(fd).st_size, "data": os.read(fd, 99).hex()})
            os.close(fd)
        """
        assert run_as(UID_A, GID_A, [], code, m.mnt, timeout=20) == \
            {"size": 0, "data": ""}
        for off, piece in pieces(clamd.eicar, 17):
            w.write(off, piece)
        r = run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt)
        assert r == {"err": 13}
    finally:
        w.close()


def test_a_writer_who_may_not_read(mount_clamfs, clamd, share):
    """The kernel reads pages in to complete partial writes, which a
    write-only open of a file the writer may not read cannot do: such a
    writer still writes, partial pages and appends, by direct I/O."""
    m = writeback_mount(mount_clamfs, clamd, share)
    x = m.b("share", "x")
    with open(x, "wb") as f:
        f.write(b"0123456789" * 1000)
    os.chown(x, UID_A, GID_A)
    os.chmod(x, 0o622)  # others may write, not read
    code = """
        fd = os.open(P("share/x"), os.O_WRONLY)
        os.pwrite(fd, b"abc", 5000)
        os.close(fd)
        fd = os.open(P("share/x"), os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"tail")
        os.close(fd)
        try:
            os.open(P("share/x"), os.O_RDONLY)
            emit({"read": True})
        except OSError as e:
            emit({"read": e.errno})
    """
    assert run_as(UID_B, GID_B, [], code, m.mnt) == {"read": 13}
    want = bytearray(b"0123456789" * 1000)
    want[5000:5003] = b"abc"
    want += b"tail"
    with open(x, "rb") as f:
        assert f.read() == bytes(want)
    with open(m.m("share", "x"), "rb") as f:
        assert f.read() == bytes(want)


def test_another_users_file_written_and_closed(mount_clamfs, clamd, share):
    """The kernel keeps the times of what it caches and sends them at the
    close, as explicit times, which only the owner may set: a writer who
    is not the owner (a shared, group-writable file), and a reader closing
    after it, must still close without an error, and the file's mtime
    must move; a non-owner's touch (which write permission allows) too."""
    m = writeback_mount(mount_clamfs, clamd, share)
    x = m.b("share", "x")
    with open(x, "wb") as f:
        f.write(b"a" * 10000)
    os.chown(x, UID_A, GID_A)
    os.chmod(x, 0o666)
    os.utime(x, ns=(10**18, 10**18))  # 2001
    code = """
        fd = os.open(P("share/x"), os.O_WRONLY)
        os.pwrite(fd, b"b" * 100, 50)
        r = {"close": outcome(os.close, fd)}
        with open(P("share/x"), "rb") as f:
            r["data"] = f.read(200).hex()
        emit(r)
    """
    r = run_as(UID_B, GID_B, [], code, m.mnt)
    assert r == {"close": ["ok", None],
                 "data": (b"a" * 50 + b"b" * 100 + b"a" * 50).hex()}
    assert os.stat(x).st_mtime_ns > 10**18 + 10**9 * 3600, \
        "the write's mtime did not reach the backend"
    os.utime(x, ns=(10**18, 10**18))
    code = """
        emit(outcome(os.utime, P("share/x")))
    """
    assert run_as(UID_B, GID_B, [], code, m.mnt) == ["ok", None]
    assert os.stat(x).st_mtime_ns > 10**18 + 10**9 * 3600, \
        "the touch did not reach the backend"
    code = """
        emit(outcome(os.utime, P("share/x"), ns=(1, 1)))
    """
    assert run_as(UID_B, GID_B, [], code, m.mnt) == ["err", "EPERM"], \
        "a non-owner set explicit times"


def test_an_append_only_file_is_appended_to(mount_clamfs, clamd, share):
    """An append-only backend file (chattr +a) refuses a writer without
    O_APPEND, which the write-back cache would ask for: the appending
    writer gets its own flags and direct I/O, and its close succeeds."""
    m = writeback_mount(mount_clamfs, clamd, share)
    x = m.b("share", "log")
    with open(x, "wb") as f:
        f.write(b"one\n")
    os.chown(x, UID_A, GID_A)
    if subprocess.run(["chattr", "+a", x]).returncode != 0:
        pytest.skip("the backend's filesystem has no append-only flag")
    try:
        code = """
            fd = os.open(P("share/log"), os.O_WRONLY | os.O_APPEND)
            r = {"write": outcome(os.write, fd, b"two\\n")}
            r["close"] = outcome(os.close, fd)
            r["plain"] = outcome(os.open, P("share/log"), os.O_WRONLY)
            emit(r)
        """
        r = run_as(UID_A, GID_A, [], code, m.mnt)
        assert r == {"write": ["ok", 4], "close": ["ok", None],
                     "plain": ["err", "EPERM"]}
        with open(x, "rb") as f:
            assert f.read() == b"one\ntwo\n"
    finally:
        subprocess.run(["chattr", "-a", x])


def test_close_scan_sees_the_written_back_upload(mount_clamfs, clamd, share):
    """scan_on_close under the write-back cache: the writer's close writes
    its pages back before the release that starts the scan, so an upload
    of EICAR is found although no write reached the daemon before."""
    m = writeback_mount(mount_clamfs, clamd, share, "scan_on_close",
                        "on_infected=delete")
    write_unseen(m, "up", clamd.eicar).close()
    assert wait_for(lambda: not os.path.lexists(m.b("share", "up")),
                    5 * SLOW), "the upload was not deleted after close"
    # the log line may come a moment after the file went
    assert wait_detections(m, 1)[0]["event"] == "close"


def test_appends_land_at_the_end(mount_clamfs, clamd, share):
    """O_APPEND goes to the kernel, which knows the size of what is still
    cached: two appending writers, one after the other, in order."""
    m = writeback_mount(mount_clamfs, clamd, share)
    path = m.m("share", "log")
    for line in (b"first\n", b"second\n"):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    with open(m.b("share", "log"), "rb") as f:
        assert f.read() == b"first\nsecond\n"


def test_a_closed_writer_leaves_nothing_unwritten(mount_clamfs, clamd, share):
    """Every writer's close writes its pages back before the daemon counts
    it gone, so the next open may use the verdict cache: the file is on
    the backend whole, the first reader's scan finds the marker, the
    second open is answered from the cache."""
    ensure_marker_signature(clamd)
    m = writeback_mount(mount_clamfs, clamd, share)
    data = b"z" * 20000 + MARKER + b"z" * 20000
    w = Writer(m.m("share", "x"), "create")
    try:
        for off, piece in pieces(data, 4096):
            w.write(off, piece)
    finally:
        w.close()
    with open(m.b("share", "x"), "rb") as f:
        assert f.read() == data
    s0 = stats(m.mnt)
    for _ in range(2):
        assert run_as(UID_B, GID_B, [], VICTIM_READ, m.mnt) == {"err": 13}
    d = delta(s0, stats(m.mnt), "scans", "cache_hits")
    assert d == {"scans": 1, "cache_hits": 1}
    wait_for(lambda: len(detections(m)) >= 1, 5 * SLOW)


# Keeps pages dirty: 4 KiB writes over a 16 MiB file, round and round.
DIRTIER = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    block = b"d" * 4096
    off = 0
    try:
        while True:
            os.pwrite(fd, block, off)
            off = (off + 4096) % (16 << 20)
    except OSError:
        pass
""")

# Opens and reads the file over and over: each open beside the writer has
# its pages written back before its scan.
REOPENER = textwrap.dedent("""
    import os, sys
    try:
        while True:
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.read(fd, 4096)
            os.close(fd)
    except OSError:
        pass
""")


def test_stop_while_pages_are_written_back(mount_clamfs, clamd, share):
    """SIGTERM while opens beside a busy writer have the kernel write its
    pages back: a scanner thread may be waiting for a write-back that
    only a FUSE worker can take in, and the workers are gone once the
    loop ends. The daemon must still answer it, stop and exit 0."""
    import signal
    import sys
    m = writeback_mount(mount_clamfs, clamd, share)
    path = m.m("share", "x")
    procs = [subprocess.Popen([sys.executable, "-c", DIRTIER, path])]
    wait_for(lambda: os.path.exists(m.b("share", "x")), 5 * SLOW)
    procs += [subprocess.Popen([sys.executable, "-c", REOPENER, path])
              for _ in range(3)]
    try:
        let_time_pass(1.5, "the writer and the reopeners have write-backs "
                      "under way before scans")
        os.kill(m.pid, signal.SIGTERM)
        assert m.wait_exit(15 * SLOW) == 0
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("mode", ["writeback", "mapping"])
def test_a_stop_writes_back_what_writers_left(mount_clamfs, clamd, share,
                                               mode):
    """systemctl stop is a SIGTERM: what write() already took into the
    write-back cache, or a store into a shared mapping (on any mount),
    must reach the backend before the daemon goes, not be dropped with
    the mount. The writer still holds the file when the stop comes."""
    import signal
    data = os.urandom(1 << 20)
    if mode == "writeback":
        m = writeback_mount(mount_clamfs, clamd, share)
        w = Writer(m.m("share", "x"), "create")
    else:
        m = mount_scan(mount_clamfs, clamd, "passthrough=off",
                       backend=share)
        x = m.b("share", "x")  # the mapping needs the file at its size
        with open(x, "wb") as f:
            f.write(b"\0" * len(data))
        os.chown(x, UID_A, GID_A)
        w = Writer(m.m("share", "x"), "map")
    try:
        for off, piece in pieces(data, 4096):
            w.write(off, piece)
        with open(m.b("share", "x"), "rb") as f:
            assert f.read() != data, \
                "written back already: the test proves nothing here"
        os.kill(m.pid, signal.SIGTERM)
        assert m.wait_exit(20 * SLOW) == 0
        with open(m.b("share", "x"), "rb") as f:
            assert f.read() == data, "acknowledged writes lost at stop"
    finally:
        w.p.kill()
        w.p.wait()
