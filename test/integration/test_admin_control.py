# SPDX-License-Identifier: GPL-2.0-or-later
# Commands to a running mount and what clamfs tells a unit by its exit
# status: `clamfs --reload TARGET` applies the configuration file and
# returns only when it is in force (non-zero, with the reason, when it was
# rejected); `clamfs --drop-cache TARGET`; TARGET is the mountpoint or the
# daemon's PID (systemd's $MAINPID). Neither command may leave an
# attribute on a user's file when given the wrong directory. A daemon
# killed with SIGKILL leaves a dead mount; starting clamfs again on the
# same mountpoint takes it away and serves the share again.
import errno
import os
import signal
import subprocess
import time

import pytest

from clamfstest.mountinfo import mounted, mounts_at
from adminutil import ini, run_fail, wait_log
from clamfstest.env import SANITIZE, SLOW, clamfs_bin
from clamfstest.wait import let_time_pass
from scanutil import put, stats, try_read

CLEAN = b"a clean file\n"

EXIT_CONFIG, EXIT_CLAMD, EXIT_MOUNT, EXIT_NOT_MOUNTED = 2, 3, 4, 5


def cfg_file(path, b, mnt, clamd_socket, on_infected="deny", extra=()):
    return ini(path, [("fuse", [("backend", b), ("mountpoint", mnt),
                                ("options", "allow_other")]),
                      ("clamd", [("clamd", clamd_socket)]),
                      # the tests count scans: none beside a waited open
                      ("scan", [("scan_ahead_dirs", "no")]),
                      # files are written just before they are read
                      ("cache", [("racy_window", "0")]),
                      ("action", [("on_infected", on_infected)] +
                       list(extra))])


def clamfs(*args, env=None, prefix=()):
    return subprocess.run(list(prefix) + [clamfs_bin()] + list(args),
                          capture_output=True, text=True, timeout=60 * SLOW,
                          env=env)


def share(admin, clamd, on_infected="deny"):
    base, b, mnt = admin.dirs_bm()
    cfg = cfg_file(os.path.join(base, "share.ini"), b, mnt, clamd.socket,
                   on_infected)
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "clean"), CLEAN)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    return base, b, mnt, cfg, m


def test_reload_is_synchronous(admin, clamd):
    base, b, mnt, cfg, m = share(admin, clamd)
    assert try_read(m.m("e")) == ("err", "EACCES")
    cfg_file(cfg, b, mnt, clamd.socket, on_infected="log")
    r = clamfs("--reload", mnt)
    assert r.returncode == 0, r
    assert "on_infected deny->log" in r.stdout, r
    # in force when the command returned: no waiting, no log polling
    assert try_read(m.m("e")) == ("ok", clamd.eicar)
    assert len(wait_log(m, "reload request: configuration reloaded")) == 1


def test_reload_by_pid(admin, clamd):
    base, b, mnt, cfg, m = share(admin, clamd)
    cfg_file(cfg, b, mnt, clamd.socket, on_infected="log")
    r = clamfs("--reload", str(m.pid))
    assert r.returncode == 0, r
    assert mnt in r.stdout and "deny->log" in r.stdout, r
    assert try_read(m.m("e")) == ("ok", clamd.eicar)
    # a PID that serves no clamfs mount
    r = clamfs("--reload", str(os.getpid()))
    assert r.returncode == EXIT_NOT_MOUNTED, r
    assert "no clamfs mount served by process" in r.stderr, r


def test_reload_rejected_returns_nonzero(admin, clamd):
    base, b, mnt, cfg, m = share(admin, clamd)
    with open(cfg, "a") as f:
        f.write("[scan]\nscan_mode = fax\n")
    r = clamfs("--reload", mnt)
    assert r.returncode == EXIT_CONFIG, r
    assert "rejected" in r.stderr and "scan_mode" in r.stderr, r
    # nothing changed, and the mount is fine
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert m.alive()


def test_each_reload_reads_its_own_outcome(admin, clamd):
    """Two administrators reloading at once: each `clamfs --reload` reads
    the outcome of its own request (kept under the token it set), not the
    one that finished last."""
    base, b, mnt, cfg, m = share(admin, clamd)
    name = "trusted.clamfs.reload"
    cfg_file(cfg, b, mnt, clamd.socket, on_infected="log")
    os.setxattr(mnt, name, b"first-1")
    with open(cfg, "a") as f:
        f.write("[scan]\nscan_mode = fax\n")
    try:
        os.setxattr(mnt, name, b"second-2")
        raise AssertionError("a bad configuration was accepted")
    except OSError as e:
        assert e.errno == errno.EINVAL, e
    first = os.getxattr(mnt, name + ".first-1").decode()
    second = os.getxattr(mnt, name + ".second-2").decode()
    assert "deny->log" in first and "scan_mode" not in first, first
    assert "scan_mode" in second, second
    assert os.getxattr(mnt, name).decode() == second  # the newest
    # a token nobody set, and tokens that are not plain words
    for bad in (name + ".nobody", name + ".first", name + "."):
        try:
            os.getxattr(mnt, bad)
            raise AssertionError(bad)
        except OSError as e:
            assert e.errno == errno.ENODATA, (bad, e)
    for token in (b"a/b", b"x" * 41, b"line\nbreak"):
        try:
            os.setxattr(mnt, name, token)
            raise AssertionError(token)
        except OSError as e:
            assert e.errno == errno.EINVAL, (token, e)
    # the longest token there is is kept like any other (the configuration
    # is still the rejected one)
    try:
        os.setxattr(mnt, name, b"y" * 40)
        raise AssertionError("a bad configuration was accepted")
    except OSError as e:
        assert e.errno == errno.EINVAL, e
    assert "scan_mode" in os.getxattr(mnt, name + "." + "y" * 40).decode()
    # the stats attribute: a size query leaves room for counters to grow
    size = len(os.getxattr(mnt, "trusted.clamfs.stats"))
    assert size > 100
    r = subprocess.run(["getfattr", "--only-values", "-n",
                        "trusted.clamfs.stats", mnt], capture_output=True)
    assert r.returncode == 0, r
    assert r.stdout.decode().endswith("\n"), r.stdout[-80:]


def test_drop_cache(admin, clamd):
    base, b, mnt, cfg, m = share(admin, clamd)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    before = stats(mnt)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert stats(mnt)["scans"] == before["scans"], "not served from cache"
    r = clamfs("--drop-cache", mnt)
    assert r.returncode == 0, r
    assert stats(mnt)["cache_clears"] == before["cache_clears"] + 1
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert stats(mnt)["scans"] == before["scans"] + 1, "cache not dropped"
    r = clamfs("--drop-cache", str(m.pid))
    assert r.returncode == 0, r


def test_wrong_target_leaves_no_attribute(admin, clamd):
    """A subdirectory of the mount, the backend, a plain directory: the
    command fails and writes nothing anywhere."""
    base, b, mnt, cfg, m = share(admin, clamd)
    os.mkdir(os.path.join(b, "sub"))
    plain = os.path.join(base, "plain")
    os.mkdir(plain)
    for target in (m.m("sub"), b, plain):
        for cmd in ("--reload", "--drop-cache"):
            r = clamfs(cmd, target)
            assert r.returncode == EXIT_NOT_MOUNTED, (cmd, target, r)
            assert "not the mountpoint of a clamfs mount" in r.stderr, r
    for d in (os.path.join(b, "sub"), b, plain):
        names = [n for n in os.listxattr(d) if n.startswith("trusted.")]
        assert names == [], (d, names)
    # and the daemon itself keeps its namespace away from the backend
    for name in ("trusted.clamfs.reload", "trusted.clamfs.drop_cache"):
        try:
            os.setxattr(m.m("sub"), name, b"1")
            raise AssertionError(f"{name} set on a subdirectory")
        except PermissionError:
            pass
    assert [n for n in os.listxattr(os.path.join(b, "sub"))
            if n.startswith("trusted.")] == []


def test_commands_need_root(admin, clamd):
    """CAP_SYS_ADMIN lets a caller reach trusted.* names; the daemon also
    wants uid 0 before it reloads or drops anything."""
    base, b, mnt, cfg, m = share(admin, clamd)
    cfg_file(cfg, b, mnt, clamd.socket, on_infected="log")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534",
                 "--clear-groups", "--inh-caps=+sys_admin",
                 "--ambient-caps=+sys_admin"]
    r = clamfs("--reload", mnt, prefix=as_nobody)
    assert r.returncode != 0, r
    assert "only root" in r.stderr, r
    assert try_read(m.m("e")) == ("err", "EACCES"), "reloaded for nobody"
    plain = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = clamfs("--drop-cache", mnt, prefix=plain)
    assert r.returncode != 0, r


def test_usage(admin):
    for args in (["--reload"], ["--reload", "a", "b"], ["--drop-cache"],
                 ["--reload", "-x"]):
        r = clamfs(*args)
        assert r.returncode == EXIT_CONFIG, (args, r)
        assert "usage: clamfs" in r.stderr, r


def test_restart_onto_its_own_dead_mount(admin, clamd):
    base, b, mnt, cfg, m = share(admin, clamd)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(timeout=10)
    assert mounted(mnt), "the kernel keeps a dead FUSE mount"
    try:
        os.statvfs(mnt)
        raise AssertionError("a dead mount answered statfs")
    except OSError as e:
        assert e.errno == 107, e  # ENOTCONN
    m.torn_down = True
    # the dead mount still counts as mounted: wait for the daemon's word
    m2 = admin.start(["-f", "-o", f"config={cfg}"], mnt, b, wait=False)
    lines = wait_log(m2, "removed the dead mount")
    assert len(lines) == 1 and mnt in lines[0], m2.stderr_text()
    assert len(wait_log(m2, f"on {mnt}, clamd=")) == 1, m2.stderr_text()
    assert try_read(m2.m("clean")) == ("ok", CLEAN)
    assert try_read(m2.m("e")) == ("err", "EACCES")
    # exactly one mount there now
    n = len(mounts_at(mnt))
    assert n == 1, n


def test_restart_in_place_onto_its_own_dead_mount(admin, clamd):
    """Backend and mountpoint the same directory (a share protected in
    place): the dead mount hides the backend too."""
    base = admin.tempdir()
    b = os.path.join(base, "share")
    os.mkdir(b)
    cfg = cfg_file(os.path.join(base, "share.ini"), b, b, clamd.socket)
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "clean"), CLEAN)
    m = admin.start(["-f", "-o", f"config={cfg}"], b, b)
    assert try_read(os.path.join(b, "clean")) == ("ok", CLEAN)
    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(timeout=10)
    m.torn_down = True
    m2 = admin.start(["-f", "-o", f"config={cfg}"], b, b, wait=False)
    assert len(wait_log(m2, "removed the dead mount")) == 1, \
        m2.stderr_text()
    assert len(wait_log(m2, f"on {b}, clamd=")) == 1, m2.stderr_text()
    assert try_read(os.path.join(b, "clean")) == ("ok", CLEAN)
    assert try_read(os.path.join(b, "e")) == ("err", "EACCES")


def test_dead_mount_of_another_kind_left_alone(admin, clamd):
    """Only a dead fuse.clamfs mount is taken away."""
    base, b, mnt = admin.dirs_bm()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt],
                   check=True)
    try:
        r = run_fail(["-f", b, mnt, "-o", f"clamd={clamd.socket},"
                      "nonempty"], timeout=5)
    except AssertionError:
        r = None  # it mounted on top: acceptable, not our concern here
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)
    if r is not None:
        assert "removed the dead mount" not in r.stderr, r


def test_exit_statuses(admin, clamd, clamd_factory):
    base, b, mnt = admin.dirs_bm()
    # a bad option value: configuration
    r = run_fail(["-f", b, mnt, "-o", f"clamd={clamd.socket},cache_ttl=-1"],
                 mnt)
    assert r.returncode == EXIT_CONFIG, r
    # a missing backend: mount
    r = run_fail(["-f", os.path.join(base, "gone"), mnt, "-o",
                  f"clamd={clamd.socket}"], mnt)
    assert r.returncode == EXIT_MOUNT, r
    # a missing mountpoint: mount
    r = run_fail(["-f", b, os.path.join(base, "gone"), "-o",
                  f"clamd={clamd.socket}"])
    assert r.returncode == EXIT_MOUNT, r
    # --check: clamd down is clamd's status, a bad path the mount's
    dead = clamd_factory()
    dead.stop()
    r = clamfs("--check", "-o", f"clamd={dead.socket}")
    assert r.returncode == EXIT_CLAMD, r
    r = clamfs("--check", "-o", f"clamd={clamd.socket},backend="
               f"{os.path.join(base, 'gone')}")
    assert r.returncode == EXIT_MOUNT, r
    # --stats of something that is not a clamfs mount
    r = clamfs("--drop-cache", os.path.join(base, "gone"))
    assert r.returncode == EXIT_NOT_MOUNTED, r


def test_live_status_for_systemctl(admin, clamd):
    """STATUS= is refreshed with live figures, and --reload goes through
    RELOADING=1 ... READY=1 as systemd expects of a notify service."""
    from adminutil import NotifyListener
    base, b, mnt = admin.dirs_bm()
    cfg = cfg_file(os.path.join(base, "share.ini"), b, mnt, clamd.socket)
    put(os.path.join(b, "e"), clamd.eicar)
    with NotifyListener(base) as n:
        m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b,
                        env_extra={"NOTIFY_SOCKET": n.path})
        assert try_read(m.m("e")) == ("err", "EACCES")
        deadline = time.monotonic() + 25 * SLOW
        live = []
        while time.monotonic() < deadline and not live:
            live = [x["text"] for x in n.messages
                    if "STATUS=clamd up;" in x["text"] and
                    "1 infected" in x["text"]]
            time.sleep(0.2)
        assert live, [x["text"] for x in n.messages]
        assert all(x["pid"] == m.pid for x in n.messages)
        r = clamfs("--reload", mnt)
        assert r.returncode == 0, r
        assert n.wait_field("RELOADING=1"), n.messages
        assert len(n.wait_field("READY=1", count=2)) == 2, n.messages


def test_users_dead_mount_left_alone(admin, clamd):
    """A user can leave a dead FUSE mount claiming the type fuse.clamfs
    (here: clamfs itself, run by that user and killed). Only a mount root
    made is taken away at start."""
    base = admin.tempdir()
    b, mnt = os.path.join(base, "ub"), os.path.join(base, "um")
    for d in (b, mnt):
        os.mkdir(d)
        os.chown(d, 65534, 65534)
    user = subprocess.Popen(
        # the capabilities stand in for the setuid fusermount3 (here
        # /dev/fuse is root's only): the kernel records user_id=65534
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "--inh-caps=+sys_admin,+dac_override",
         "--ambient-caps=+sys_admin,+dac_override",
         clamfs_bin(), "-f", b, mnt, "-o",
         f"clamd={clamd.socket},allow_other"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10 * SLOW
        while not mounted(mnt) and time.monotonic() < deadline:
            assert user.poll() is None, user.stderr.read()
            time.sleep(0.05)
        assert mounted(mnt)
        user.kill()
        user.wait(timeout=10)
        r = run_fail(["-f", b, mnt, "-o", f"clamd={clamd.socket}"],
                     timeout=10)
        assert r.returncode == EXIT_MOUNT, r
        assert "removed the dead mount" not in r.stderr, r
        assert mounted(mnt), "a user's mount was taken away by root"
    finally:
        if user.poll() is None:
            user.kill()
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(SANITIZE, reason="a sanitizer's allocator replaces "
                    "glibc's, whose behaviour this is about")
def test_reload_gives_back_a_replaced_cache(admin, clamd):
    """A reload that replaces the verdict cache gives the old one's tables
    (7 MB at 100000 entries) back to the system. A 60-minute soak saw the
    daemon's RSS climb from 24 to 68 MB in such steps while SIGHUPs
    switched cache_entries: glibc's dynamic mmap threshold had put later
    tables in the heap, where freed ones stayed resident."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")

    def configure(entries):
        ini(cfg, [("fuse", [("backend", b), ("mountpoint", mnt)]),
                  ("clamd", [("clamd", clamd.socket)]),
                  ("cache", [("cache_entries", str(entries))])])

    def reload_to(entries):
        configure(entries)
        r = clamfs("--reload", mnt)
        assert r.returncode == 0, r
        # the old generation goes with its last holder: the reload, or a
        # check of the database watch that had it pinned (nothing counts
        # the generations alive)
        let_time_pass(0.3, "the old generation's last holder lets go")
        return rss_kb(m.pid)

    configure(100000)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    small, big = [], []
    for _ in range(5):
        small.append(reload_to(64))
        big.append(reload_to(100000))
    small.append(reload_to(64))
    # each replaced table is given back: no step upwards per cycle ...
    assert small[-1] <= small[0] + 2048, (small, big)
    # ... and a big table is really there and really gone again
    assert big[-1] - small[-1] >= 4096, (small, big)
