# SPDX-License-Identifier: GPL-2.0-or-later
# The verdict store (issue 23, item 4): clean verdicts kept across a
# restart in DIR/verdicts.mdb. A restarted clamfs must serve an unchanged,
# already scanned file without a scan, and must never trust a kept verdict
# for content it did not judge: a file changed while clamfs was down, a
# database that changed, an old verdict past its TTL, a store planted or
# damaged by somebody else, or one kept for another backend.
import os
import subprocess
import time

from clamfstest.env import clamfs_bin
from clamfstest.wait import let_time_pass
from fakeclamd import FakeClamd, versioned
from fsutil import LoopFs
from scanutil import (mount_scan, put, run_clamfs_expect_fail, stats,
                      try_read, wait_for)

CLEAN = b"clean file for the store\n"


def store_dir(mount_clamfs):
    d = os.path.join(mount_clamfs.tempdir("clamfs-s"), "store")
    os.mkdir(d, 0o700)
    return d


def mount_store(mount_clamfs, clamd, store, *opts, backend=None, mnt=None,
                **kw):
    m = mount_scan(mount_clamfs, clamd, "verdict_store=" + store,
                   "version_check=1", *opts, backend=backend, mnt=mnt, **kw)
    # nothing is served from or put in the store before VERSION answered
    assert wait_for(lambda: stats(m.mnt)["clamd_engine"] != "unknown", 10), \
        stats(m.mnt)
    return m


def restart(mount_clamfs, m, clamd, store, *opts, backend=None):
    problems = m.teardown()
    assert not problems, problems
    return mount_store(mount_clamfs, clamd, store, *opts,
                       backend=backend or m.backend, mnt=m.mnt)


def read_names(m, names):
    for n in names:
        assert try_read(m.m(n)) == ("ok", CLEAN + n.encode()), n


def test_unchanged_files_open_without_a_scan_after_a_restart(
        mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    names = ["f%03d" % i for i in range(40)]
    for n in names:
        put(m.b(n), CLEAN + n.encode())
    put(m.b("eicar.com"), clamd.eicar)
    read_names(m, names)
    assert try_read(m.m("eicar.com")) == ("err", "EACCES")
    assert stats(m.mnt)["scans"] == 41
    m = restart(mount_clamfs, m, clamd, store)
    assert stats(m.mnt)["store_entries"] == 40
    read_names(m, names)
    s = stats(m.mnt)
    assert s["scans"] == 0, s
    assert s["store_hits"] == 40, s
    assert s["opens_cache_hit"] == 40, s
    # infected verdicts are not kept: scanned and refused again
    assert try_read(m.m("eicar.com")) == ("err", "EACCES")
    assert stats(m.mnt)["scans"] == 1
    # not copied to the cache (it would live a whole TTL from now there):
    # the second open asks the store again
    read_names(m, names[:5])
    assert stats(m.mnt)["store_hits"] == 45
    assert stats(m.mnt)["scans"] == 1


def test_a_file_changed_while_clamfs_was_down_is_scanned(mount_clamfs,
                                                         clamd):
    """The same size and the old mtime put back: only ctime tells, and it
    must. The new content is EICAR: it must be refused."""
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    body = b"X" * len(clamd.eicar)
    put(m.b("f.com"), body)
    put(m.b("g"), CLEAN)
    assert try_read(m.m("f.com")) == ("ok", body)
    assert try_read(m.m("g")) == ("ok", CLEAN)
    problems = m.teardown()
    assert not problems, problems
    st = os.stat(m.b("f.com"))
    with open(m.b("f.com"), "r+b") as f:
        f.write(clamd.eicar)
    os.utime(m.b("f.com"), ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(m.b("f.com"))
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    m = mount_store(mount_clamfs, clamd, store, backend=m.backend, mnt=m.mnt)
    assert try_read(m.m("f.com")) == ("err", "EACCES")
    assert try_read(m.m("g")) == ("ok", CLEAN)
    s = stats(m.mnt)
    assert (s["scans"], s["store_hits"]) == (1, 1), s


def test_a_database_change_while_down_is_not_trusted(mount_clamfs):
    """Custom signatures give no database version: a fake clamd says one."""
    db = {"version": 27000}
    store = store_dir(mount_clamfs)
    with FakeClamd(versioned(db)) as fk:
        m = mount_store(mount_clamfs, fk.socket, store)
        put(m.b("f"), CLEAN)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        m = restart(mount_clamfs, m, fk.socket, store)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert (stats(m.mnt)["scans"], stats(m.mnt)["store_hits"]) == (0, 1)
        problems = m.teardown()
        assert not problems, problems
        db["version"] = 27001
        m = mount_store(mount_clamfs, fk.socket, store,
                        backend=m.backend, mnt=m.mnt)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        s = stats(m.mnt)
        assert (s["scans"], s["store_hits"]) == (1, 0), s


def test_a_database_change_while_mounted_empties_the_store(mount_clamfs):
    db = {"version": 27000}
    store = store_dir(mount_clamfs)
    with FakeClamd(versioned(db)) as fk:
        m = mount_store(mount_clamfs, fk.socket, store)
        put(m.b("f"), CLEAN)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert wait_for(lambda: stats(m.mnt)["store_entries"] == 1, 10)
        db["version"] = 27001
        assert wait_for(lambda: stats(m.mnt)["cache_clears"] >= 1, 10)
        assert wait_for(lambda: stats(m.mnt)["store_entries"] == 0, 10), \
            stats(m.mnt)
        # and the watch's version at the next start says the same
        m = restart(mount_clamfs, m, fk.socket, store)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert stats(m.mnt)["scans"] == 1


def test_drop_cache_empties_the_store(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    r = subprocess.run([clamfs_bin(), "--drop-cache", m.mnt],
                       capture_output=True, text=True)
    assert r.returncode == 0, r
    assert stats(m.mnt)["cache_clears"] == 1
    m = restart(mount_clamfs, m, clamd, store)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s = stats(m.mnt)
    assert (s["scans"], s["store_hits"]) == (1, 0), s


def test_kept_verdicts_expire_with_the_cache_ttl(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store, "cache_ttl=2")
    put(m.b("f"), CLEAN)
    t0 = time.time()
    assert try_read(m.m("f")) == ("ok", CLEAN)
    m = restart(mount_clamfs, m, clamd, store, "cache_ttl=2")
    let_time_pass(max(0.0, t0 + 2.5 - time.time()),
                  "the verdict's 2 s TTL runs out")
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s = stats(m.mnt)
    assert (s["scans"], s["store_hits"]) == (1, 0), s


def test_racy_stamps_are_not_kept(mount_clamfs, clamd):
    """A file opened right after it was written has a stamp that a
    same-tick rewrite would keep: no verdict is cached, none is kept."""
    store = store_dir(mount_clamfs)
    opts = ("racy_window=5", "racy_learn=no")
    m = mount_store(mount_clamfs, clamd, store, *opts)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    m = restart(mount_clamfs, m, clamd, store, *opts)
    assert stats(m.mnt)["store_entries"] == 0
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert stats(m.mnt)["scans"] == 1


def test_a_damaged_store_is_refused_and_rebuilt(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    problems = m.teardown()
    assert not problems, problems
    path = os.path.join(store, "verdicts.mdb")
    with open(path, "r+b") as f:
        f.write(os.urandom(8192))
    m = mount_store(mount_clamfs, clamd, store, backend=m.backend, mnt=m.mnt)
    assert "is not a clamfs verdict store" in m.stderr_text()
    s = stats(m.mnt)
    assert s["store_rebuilds"] == 1, s
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert stats(m.mnt)["scans"] == 1
    # and it works again
    m = restart(mount_clamfs, m, clamd, store)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert stats(m.mnt)["store_hits"] == 1


def test_a_store_planted_by_another_user_is_not_used(mount_clamfs, clamd):
    """A real store, but a file somebody else owns: it could say anything."""
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    problems = m.teardown()
    assert not problems, problems
    os.chown(os.path.join(store, "verdicts.mdb"), 65534, 65534)
    m = mount_store(mount_clamfs, clamd, store, backend=m.backend, mnt=m.mnt)
    assert "is not clamfs's own file" in m.stderr_text()
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert stats(m.mnt)["scans"] == 1


def test_a_directory_others_may_write_fails_the_mount(mount_clamfs, clamd):
    base = mount_clamfs.tempdir()
    for mode, owner in ((0o777, 0), (0o700, 65534)):
        store = os.path.join(base, "s%o%d" % (mode, owner))
        os.mkdir(store)
        os.chmod(store, mode)
        os.chown(store, owner, owner)
        b, mnt = os.path.join(base, "b"), os.path.join(base, "m")
        os.makedirs(b, exist_ok=True)
        os.makedirs(mnt, exist_ok=True)
        p = run_clamfs_expect_fail(
            clamfs_bin(), b, mnt,
            ["clamd=" + clamd.socket, "verdict_store=" + store])
        assert p.returncode != 0
        assert "verdict store: directory " + store in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(store, "verdicts.mdb"))


def test_a_store_kept_for_another_backend_is_emptied(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    other = os.path.join(mount_clamfs.tempdir(), "b2")
    os.mkdir(other, 0o755)
    put(os.path.join(other, "f"), CLEAN)
    m = restart(mount_clamfs, m, clamd, store, backend=other)
    assert "was kept for another backend filesystem" in m.stderr_text()
    assert stats(m.mnt)["store_entries"] == 0
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert stats(m.mnt)["scans"] == 1


def test_no_store_without_the_database_watch(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_scan(mount_clamfs, clamd, "verdict_store=" + store,
                   "version_check=0")
    assert "verdict_store needs version_check" in m.stderr_text()
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert not os.path.exists(os.path.join(store, "verdicts.mdb"))


def test_a_file_opened_for_writing_through_the_mount_is_forgotten(
        mount_clamfs, clamd):
    """Whatever the writer does to the stamp, the kept verdict goes."""
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    put(m.b("f"), CLEAN)
    put(m.b("g"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("g")) == ("ok", CLEAN)
    assert wait_for(lambda: stats(m.mnt)["store_entries"] == 2, 10)
    fd = os.open(m.m("f"), os.O_WRONLY)
    os.close(fd)
    assert wait_for(lambda: stats(m.mnt)["store_entries"] == 1, 10), \
        stats(m.mnt)
    m = restart(mount_clamfs, m, clamd, store)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert try_read(m.m("g")) == ("ok", CLEAN)
    s = stats(m.mnt)
    assert (s["scans"], s["store_hits"]) == (1, 1), s


def test_two_mounts_do_not_share_a_store(mount_clamfs, clamd):
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store)
    other = mount_store(mount_clamfs, clamd, store)
    assert "is in use by another clamfs" in other.stderr_text()
    put(other.b("f"), CLEAN)
    assert try_read(other.m("f")) == ("ok", CLEAN)
    assert stats(other.mnt)["store_writes"] == 0
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert wait_for(lambda: stats(m.mnt)["store_writes"] == 1, 10)


def test_a_backend_with_coarse_stamps_keeps_nothing(mount_clamfs, clamd):
    """ext4 with 128-byte inodes keeps whole seconds: a stamp that cannot
    prove a rewrite across a restart is not kept (network, FUSE and
    FAT-like backends, where a writer may set ctime, neither)."""
    store = store_dir(mount_clamfs)
    fs = LoopFs(mount_clamfs.tempdir("clamfs-store"), 32,
                ["mkfs.ext4", "-q", "-F", "-I", "128"])
    try:
        put(os.path.join(fs.path, "f"), CLEAN)
        let_time_pass(2.5, "older than the 2 s racy window: cacheable")
        m = mount_store(mount_clamfs, clamd, store, "racy_window=2",
                        backend=fs.path)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        assert stats(m.mnt)["opens_cache_hit"] == 1  # the cache keeps it
        m = restart(mount_clamfs, m, clamd, store, "racy_window=2")
        assert try_read(m.m("f")) == ("ok", CLEAN)
        s = stats(m.mnt)
        assert (s["scans"], s["store_hits"], s["store_entries"]) == \
            (1, 0, 0), s
        problems = m.teardown()
        assert not problems, problems
    finally:
        fs.close()


def test_kept_by_a_daemonized_clamfs(mount_clamfs, clamd):
    """The store is opened in the process that serves, after the fork."""
    store = store_dir(mount_clamfs)
    m = mount_store(mount_clamfs, clamd, store, foreground=False)
    put(m.b("f"), CLEAN)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    assert wait_for(lambda: stats(m.mnt)["store_writes"] == 1, 10), \
        stats(m.mnt)
    problems = m.teardown()
    assert not problems, problems
    m = mount_store(mount_clamfs, clamd, store, foreground=False,
                    backend=m.backend, mnt=m.mnt)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    s = stats(m.mnt)
    assert (s["scans"], s["store_hits"]) == (0, 1), s
