# SPDX-License-Identifier: GPL-2.0-or-later
"""Ways around the scan gate found in review, each closed: hard links that
borrow an excluded name, dirty pages of a writer's shared mapping, flock
waiters exhausting the workers, the detection hook's signal mask, and
directory listing without search permission."""
import fcntl
import mmap
import os
import subprocess
import sys
import time

from clamfstest.wait import let_time_pass
from scanutil import mount_scan, put, stats, try_read, wait_for

CLEAN = b"harmless text of the same size as the test file.............x\n123"


def test_hard_link_cannot_borrow_an_excluded_name(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=*.iso")
    put(m.b("disk.iso"), clamd.eicar)
    put(m.b("plain.iso"), CLEAN)
    # an excluded name alone is let through unscanned, as configured
    assert try_read(m.m("plain.iso")) == ("ok", CLEAN)
    assert stats(m.mnt)["opens_excluded"] == 1
    # the .iso is looked up first, so its name is the one the daemon knows
    assert os.path.exists(m.m("disk.iso"))
    os.link(m.m("disk.iso"), m.m("setup.exe"))
    assert try_read(m.m("setup.exe")) == ("err", "EACCES")
    # with more than one name, no name can exempt the file
    assert try_read(m.m("disk.iso")) == ("err", "EACCES")
    assert stats(m.mnt)["opens_excluded"] == 1


def test_dirty_shared_mapping_is_scanned(mount_clamfs, clamd):
    """A writer's MAP_SHARED stores stay in the kernel until written back:
    a reader opening meanwhile must be judged on them, not on the stale
    backend copy."""
    m = mount_scan(mount_clamfs, clamd)
    data = clamd.eicar
    clean = b"c" * len(data)
    put(m.b("shared.bin"), clean)
    assert try_read(m.m("shared.bin")) == ("ok", clean)
    fd = os.open(m.m("shared.bin"), os.O_RDWR)
    try:
        mp = mmap.mmap(fd, len(data), mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE)
        mp[:] = data  # dirty pages only; no write(), no msync()
        with open(m.b("shared.bin"), "rb") as f:
            backend_now = f.read()
        r = try_read(m.m("shared.bin"))
        assert r == ("err", "EACCES"), (r, backend_now == clean)
        mp.close()
    finally:
        os.close(fd)


def _lock_waiters():
    """The pids /proc/locks shows waiting for a lock (the "->" lines)."""
    with open("/proc/locks") as f:
        return {int(l.split()[5]) for l in f if l.split()[1] == "->"}


def test_blocked_flock_waiters_do_not_hang_the_mount(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "threads=4")
    put(m.b("lock"), b"x")
    put(m.b("other"), CLEAN)
    holder = open(m.m("lock"), "rb")
    fcntl.flock(holder, fcntl.LOCK_EX)
    waiters = [subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl,sys; f=open(sys.argv[1],'rb'); "
         "fcntl.flock(f, fcntl.LOCK_SH)", m.m("lock")])
        for _ in range(8)]
    try:
        pids = {w.pid for w in waiters}
        assert wait_for(lambda: pids <= _lock_waiters(), 10), \
            (pids, _lock_waiters())
        assert all(w.poll() is None for w in waiters)  # really blocked
        t = time.monotonic()
        os.stat(m.m("other"))
        assert try_read(m.m("other")) == ("ok", CLEAN)
        assert time.monotonic() - t < 1.0
        # and the waiters can be killed while they wait
        for w in waiters[:2]:
            w.kill()
        for w in waiters[:2]:
            w.wait(timeout=5)
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        holder.close()
        for w in waiters:
            w.wait(timeout=10)
    assert all(w.returncode == 0 for w in waiters[2:])


def test_hook_runs_with_no_signal_blocked(mount_clamfs, clamd, tmp_path):
    out = tmp_path / "sigblk"
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\ngrep SigBlk /proc/self/status > %s\n" % out)
    hook.chmod(0o755)
    m = mount_scan(mount_clamfs, clamd, "infected_cmd=%s" % hook)
    put(m.b("bad.com"), clamd.eicar)
    assert try_read(m.m("bad.com")) == ("err", "EACCES")
    assert wait_for(lambda: out.exists() and out.read_text().strip(), 5)
    mask = int(out.read_text().split()[1], 16)
    assert mask == 0, out.read_text()


def test_list_directory_without_search_permission(mount_clamfs, clamd):
    """A directory readable but not searchable can be listed (names only),
    as natively."""
    m = mount_scan(mount_clamfs, clamd)
    os.mkdir(m.b("ronly"), 0o755)
    put(m.b("ronly", "f"), b"x")
    os.chmod(m.b("ronly"), 0o744)  # others: r, no x
    as_user = [
        "setpriv", "--reuid=60001", "--regid=60001", "--clear-groups", "--",
        sys.executable, "-c",
        "import os,sys; print(sorted(os.listdir(sys.argv[1])))"]
    native = subprocess.run(as_user + [m.b("ronly")], capture_output=True,
                            text=True)
    mounted = subprocess.run(as_user + [m.m("ronly")], capture_output=True,
                             text=True)
    assert native.returncode == 0, native.stderr
    assert (mounted.returncode, mounted.stdout) == (0, native.stdout), \
        mounted.stderr


def test_two_reloads_changing_the_cache_keep_the_mount_alive(
        mount_clamfs, clamd, tmp_path):
    cfg = tmp_path / "c.ini"

    def write(ttl):
        cfg.write_text("[clamd]\nclamd = %s\nversion_check = 1\n"
                       "[cache]\ncache_ttl = %d\n" % (clamd.socket, ttl))
    write(100)
    m = mount_clamfs(opts=["config=%s" % cfg])
    put(m.b("f"), CLEAN)
    for ttl in (200, 300):
        write(ttl)
        m.proc.send_signal(1)
        assert wait_for(lambda: ("cache_ttl %d->%d" % (ttl - 100, ttl))
                        in m.stderr_text(), 5), m.stderr_text()
    # no counter tells a check of the database watch (version_check=1)
    let_time_pass(2.5, "the database watch runs against the new cache")
    assert m.proc.poll() is None, m.stderr_text()
    assert try_read(m.m("f")) == ("ok", CLEAN)
