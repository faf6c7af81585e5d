# SPDX-License-Identifier: GPL-2.0-or-later
# Reading a directory ahead (issue 23, item 2): when an open has to wait
# for a scan, the other small files of its directory are scanned in the
# background, so that a reader going through a tree it did not write
# (grep -r over files put on the backend directly) finds verdicts. Such a
# verdict only fills the cache: it is acted on when the file is opened,
# never trusted for content it did not see, never made for names the
# policy excludes, and the walk never leaves the directory.
import os
import subprocess

from scanutil import (delta, detections, mount_scan, put, stats, try_read,
                      wait_for)

CLEAN = b"C" * 68  # as long as the EICAR test file


def mount_dirs(mount_clamfs, clamd, *opts, **kw):
    """Reading ahead on (the default, off in mount_scan), else the
    defaults; the racy window is learnt (20 ms) on the tests' ext4."""
    if not any(o.split("=")[0] == "scan_ahead_dirs" for o in opts):
        opts = ("scan_ahead_dirs=yes",) + opts
    return mount_scan(mount_clamfs, clamd, "racy_window=2", *opts, **kw)


def tree(m, names, data=CLEAN, under="tree"):
    for n in names:
        put(m.b(under, n), data + n.encode())


def walked(m, n, walks=1, timeout=15):
    """Waits until the walks are over (ahead_dirs is counted at the
    end of one), n verdicts of theirs were kept and nothing is queued;
    returns the counters then."""
    def done():
        s = stats(m.mnt)
        return s["ahead_dirs"] >= walks and s["scans_queued"] == 0 and \
            s["ahead_cached"] >= n
    assert wait_for(done, timeout), stats(m.mnt)
    return stats(m.mnt)


def stays(m, check, seconds=0.5):
    """Asserts that check(counters) holds for a while: for what must
    not happen later (a walk, a scan), where no event says it will not."""
    assert not wait_for(lambda: not check(stats(m.mnt)), seconds), \
        stats(m.mnt)


def test_a_waited_open_has_its_siblings_scanned(mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd)
    names = ["f%02d" % i for i in range(20)]
    tree(m, names)
    assert try_read(m.m("tree", "f00")) == ("ok", CLEAN + b"f00")
    before = walked(m, len(names) - 1)
    assert before["ahead_dirs"] == 1, before
    assert before["ahead_dir_scans"] == len(names) - 1, before
    for n in names[1:]:
        assert try_read(m.m("tree", n)) == ("ok", CLEAN + n.encode())
    d = delta(before, stats(m.mnt), "scans", "opens_cache_hit",
              "ahead_dirs")
    assert d == {"scans": 0, "opens_cache_hit": len(names) - 1,
                 "ahead_dirs": 0}, d


def test_an_infected_sibling_is_refused_and_logged_when_opened(
        mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd)
    put(m.b("tree", "a"), CLEAN)
    put(m.b("tree", "up.com"), clamd.eicar)
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN)
    before = walked(m, 1)
    # nothing is acted on, nor logged, until somebody opens it
    assert detections(m) == []
    assert try_read(m.m("tree", "up.com")) == ("err", "EACCES")
    d = delta(before, stats(m.mnt), "scans", "opens_denied")
    assert d == {"scans": 0, "opens_denied": 1}, d
    det = detections(m)
    assert len(det) == 1 and det[0]["cached"] == "yes", det


def test_a_sibling_changed_after_its_scan_is_scanned_again(mount_clamfs,
                                                           clamd):
    """Same size, on the backend directly: the verdict of the walk does
    not cover the new content."""
    m = mount_dirs(mount_clamfs, clamd)
    put(m.b("tree", "a"), CLEAN)
    put(m.b("tree", "b"), CLEAN)
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN)
    before = walked(m, 1)
    with open(m.b("tree", "b"), "r+b") as f:
        f.write(clamd.eicar)
    assert try_read(m.m("tree", "b")) == ("err", "EACCES")
    assert delta(before, stats(m.mnt), "scans") == {"scans": 1}


def test_the_walk_stays_in_the_directory(mount_clamfs, clamd, tmp_path):
    """Not the parent, not a subdirectory, no symlink (to a file outside
    the backend or inside it), no fifo, no empty file."""
    outside = tmp_path / "outside"
    outside.write_bytes(clamd.eicar)  # a scan of it would be logged
    m = mount_dirs(mount_clamfs, clamd)
    put(m.b("top"), CLEAN)
    tree(m, ["a", "b"])
    put(m.b("tree", "sub", "deep"), CLEAN)
    put(m.b("tree", "empty"), b"")
    os.symlink(str(outside), m.b("tree", "out"))
    os.symlink("a", m.b("tree", "in"))
    os.mkfifo(m.b("tree", "fifo"))
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN + b"a")
    s = walked(m, 1)
    assert s["ahead_dir_scans"] == 1, s
    assert detections(m) == []
    before = stats(m.mnt)
    assert try_read(m.m("top")) == ("ok", CLEAN)
    assert try_read(m.m("tree", "sub", "deep")) == ("ok", CLEAN)
    d = delta(before, stats(m.mnt), "scans", "opens_cache_hit")
    assert d["opens_cache_hit"] == 0 and d["scans"] >= 2, d


def test_excluded_names_are_not_scanned_ahead(mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd, "exclude=*.iso")
    put(m.b("tree", "a"), CLEAN)
    put(m.b("tree", "b"), CLEAN)
    put(m.b("tree", "disk.iso"), CLEAN)
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN)
    s = walked(m, 1)
    assert s["ahead_dir_scans"] == 1, s


def test_scanning_ahead_leaves_the_access_time_alone(mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd)
    put(m.b("tree", "a"), CLEAN)
    put(m.b("tree", "b"), CLEAN)
    os.utime(m.b("tree", "b"), ns=(1_000_000_000, 2_000_000_000))
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN)
    walked(m, 1)
    assert os.stat(m.b("tree", "b")).st_atime_ns == 1_000_000_000


def test_a_file_a_writer_holds_is_not_scanned_ahead(mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd)
    put(m.b("tree", "a"), CLEAN)
    put(m.b("tree", "b"), CLEAN)
    # write-only: a read-write open waits for its own verdict, and walks
    # the directory itself (test_read_write_open_walks_its_directory)
    w = os.open(m.m("tree", "b"), os.O_WRONLY)
    try:
        assert try_read(m.m("tree", "a")) == ("ok", CLEAN)
        s = walked(m, 0)
        assert s["ahead_dir_scans"] == 0 and s["ahead_cached"] == 0, s
        os.write(w, clamd.eicar)
    finally:
        os.close(w)
    assert try_read(m.m("tree", "b")) == ("err", "EACCES")


def test_read_write_open_walks_its_directory(mount_clamfs, clamd):
    """A file server opens documents read-write: such an open that waits
    for a scan has the files beside it scanned ahead, as a reader's."""
    m = mount_dirs(mount_clamfs, clamd)
    tree(m, ["a", "b", "c"])
    fd = os.open(m.m("tree", "a"), os.O_RDWR)
    os.close(fd)
    s = walked(m, 2)
    assert s["ahead_dirs"] == 1 and s["ahead_dir_scans"] == 2, s
    before = stats(m.mnt)
    for n in "bc":
        fd = os.open(m.m("tree", n), os.O_RDWR)
        assert os.read(fd, 100) == CLEAN + n.encode()
        os.close(fd)
    assert delta(before, stats(m.mnt), "scans", "opens_cache_hit") == {
        "scans": 0, "opens_cache_hit": 2}


def test_nothing_is_scanned_ahead_when_turned_off(mount_clamfs, clamd):
    m = mount_dirs(mount_clamfs, clamd, "scan_ahead_dirs=no")
    tree(m, ["a", "b", "c"])
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN + b"a")
    before = stats(m.mnt)
    for n in "bc":
        assert try_read(m.m("tree", n)) == ("ok", CLEAN + n.encode())
    s = stats(m.mnt)
    assert s["ahead_dirs"] == 0 and s["ahead_dir_scans"] == 0, s
    assert delta(before, s, "scans") == {"scans": 2}


def test_the_walk_is_on_by_default(mount_clamfs, clamd):
    m = mount_clamfs(opts=["clamd=" + clamd.socket, "racy_window=2"])
    tree(m, ["a", "b", "c"])
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN + b"a")
    s = walked(m, 2)
    assert s["ahead_dirs"] == 1 and s["ahead_dir_scans"] == 2, s


def test_nothing_is_scanned_ahead_without_a_cache(mount_clamfs, clamd):
    """Its verdict would be thrown away."""
    m = mount_dirs(mount_clamfs, clamd, "cache_ttl=0")
    tree(m, ["a", "b", "c"])
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN + b"a")
    stays(m, lambda s: s["ahead_dirs"] == 0 and s["scans"] == 1)


def test_a_directory_is_walked_once_a_minute_at_most(mount_clamfs, clamd):
    """Another waited open in it (a file changed since) does not walk it
    again."""
    m = mount_dirs(mount_clamfs, clamd)
    tree(m, ["a", "b", "c"])
    assert try_read(m.m("tree", "a")) == ("ok", CLEAN + b"a")
    walked(m, 2)
    put(m.b("tree", "b"), CLEAN + b"B")
    assert try_read(m.m("tree", "b")) == ("ok", CLEAN + b"B")
    stays(m, lambda s: s["ahead_dirs"] == 1 and s["ahead_dir_scans"] == 2)


def test_a_directory_the_reader_may_not_list_is_not_walked(mount_clamfs,
                                                           clamd):
    """Search permission only (a 0711 home): the reader opens a file by
    name, the walk would list the directory as that reader."""
    m = mount_dirs(mount_clamfs, clamd)
    tree(m, ["a", "b"])
    os.chmod(m.b("tree"), 0o711)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", "cat", m.m("tree", "a")],
                       capture_output=True)
    assert r.returncode == 0 and r.stdout == CLEAN + b"a", r
    stays(m, lambda s: s["ahead_dirs"] == 0 and s["ahead_dir_scans"] == 0)
    # root may list it: walked for root
    assert try_read(m.m("tree", "b")) == ("ok", CLEAN + b"b")
    walked(m, 0)
