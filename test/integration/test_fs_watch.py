# SPDX-License-Identifier: GPL-2.0-or-later
# watch_backend=yes: the kernel keeps names, attributes and directory
# contents for an hour, and a fanotify watch on the backend's filesystem
# tells it of every change made around the mount (issue 38, part 1).
# Each test changes the backend directly, as a local user, an NFS or
# Samba server or a restore would, and looks through the mount. The
# control mount has the same hour-long timeouts without the watch: there
# the same checks see the stale view, so they can fail.
import os
import random
import re
import signal
import stat
import subprocess
import threading
import time

import pytest

from scanutil import mount_scan, put, stats

# what a change may take to show through the mount; the issue asks for
# 100 ms, and the latencies are printed (a loaded CI machine gets slack)
VISIBLE_S = 1.0


def kernel_ready():
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m[1]), int(m[2])) >= (6, 16)


pytestmark = pytest.mark.skipif(
    not kernel_ready(), reason="watch_backend needs Linux >= 6.16")


@pytest.fixture
def watched(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "watch_backend=yes")
    assert stats(m.mnt)["backend_watch"] == "on"
    return m


def seen(pred, limit=VISIBLE_S):
    """Seconds until pred() held, or None."""
    t0 = time.perf_counter()
    while True:
        if pred():
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > limit:
            return None
        time.sleep(0.001)


def view(root, racing=False):
    """Every name under root with its type, size and mode. racing: a walk
    beside a writer, where a listed name may be gone by the time it is
    looked at; it is passed over, as find does, so that the walk goes on."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                if not racing:
                    raise
                continue
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size)
    return out


def changes(m):
    """The six kinds of change the issue names, and their siblings, each
    with the check that the mount shows it."""
    d, md = m.b("d"), m.m("d")
    return [
        ("create", lambda: put(os.path.join(d, "new"), b"hello"),
         lambda: "new" in os.listdir(md)),
        ("delete", lambda: os.unlink(os.path.join(d, "old")),
         lambda: "old" not in os.listdir(md)
         and not os.path.exists(os.path.join(md, "old"))),
        ("rename", lambda: os.rename(os.path.join(d, "new"),
                                     os.path.join(d, "renamed")),
         lambda: sorted(os.listdir(md)) == ["renamed"]
         and os.path.exists(os.path.join(md, "renamed"))),
        ("chmod", lambda: os.chmod(os.path.join(d, "renamed"), 0o600),
         lambda: os.stat(os.path.join(md, "renamed")).st_mode & 0o777
         == 0o600),
        ("write", lambda: open(os.path.join(d, "renamed"), "ab").write(
            b" world"),
         lambda: os.stat(os.path.join(md, "renamed")).st_size == 11),
        ("touch", lambda: os.utime(os.path.join(d, "renamed"), (1000, 1000)),
         lambda: os.stat(os.path.join(md, "renamed")).st_mtime == 1000),
        ("truncate", lambda: os.truncate(os.path.join(d, "renamed"), 2),
         lambda: os.stat(os.path.join(md, "renamed")).st_size == 2),
        ("link", lambda: os.link(os.path.join(d, "renamed"),
                                 os.path.join(d, "linked")),
         lambda: os.stat(os.path.join(md, "renamed")).st_nlink == 2
         and "linked" in os.listdir(md)),
        ("mkdir", lambda: os.mkdir(os.path.join(d, "sub")),
         lambda: os.path.isdir(os.path.join(md, "sub"))),
        ("move a directory", lambda: os.rename(os.path.join(d, "sub"),
                                               m.b("moved")),
         lambda: "sub" not in os.listdir(md)
         and os.path.isdir(m.m("moved"))),
        ("rmdir", lambda: os.rmdir(m.b("moved")),
         lambda: not os.path.exists(m.m("moved"))),
        ("chmod a directory", lambda: os.chmod(d, 0o700),
         lambda: os.stat(md).st_mode & 0o777 == 0o700),
    ]


def prime(m):
    """A directory the kernel has listed and a file it has stat'ed."""
    put(m.b("d", "old"), b"x")
    assert os.listdir(m.m("d")) == ["old"]
    assert os.stat(m.m("d", "old")).st_size == 1


def test_each_change_behind_the_mount_shows(watched):
    m = watched
    prime(m)
    s0 = stats(m.mnt)["watch_events"]
    took = {}
    for name, change, shows in changes(m):
        change()
        took[name] = seen(shows)
    print("seconds until visible:", took)
    assert all(t is not None for t in took.values()), took
    assert stats(m.mnt)["watch_events"] > s0


def test_without_the_watch_hour_long_timeouts_are_stale(mount_clamfs,
                                                        clamd):
    """The control: the checks above fail without the watch, so they
    test it. (clamfs keeps its 1 s timeouts unless told otherwise.)"""
    m = mount_scan(mount_clamfs, clamd, "attr_timeout=3600",
                   "entry_timeout=3600")
    assert stats(m.mnt)["backend_watch"] == "off"
    prime(m)
    stale = [name for name, change, shows in changes(m)
             if (change(), seen(shows, limit=0.3))[1] is None]
    # listings are not cached without the watch: creates, deletes and
    # renames show in readdir at once; attributes do not
    assert {"chmod", "write", "touch", "truncate"} <= set(stale), stale


def test_own_changes_are_not_events(watched):
    """What goes through the mount the kernel made itself: the watch skips
    the daemon's own backend calls. (Data written through kernel
    passthrough is written by the kernel in the writer's name, so it comes
    back as events: harmless, and not counted on here.)"""
    m = watched
    s0 = stats(m.mnt)["watch_events"]
    for i in range(20):
        os.mknod(m.m("f%d" % i), 0o644 | stat.S_IFREG)
        os.chmod(m.m("f%d" % i), 0o600)
        os.rename(m.m("f%d" % i), m.m("g%d" % i))
        os.mkdir(m.m("d%d" % i))
        os.rmdir(m.m("d%d" % i))
    os.unlink(m.m("g0"))
    assert sorted(os.listdir(m.mnt)) == sorted("g%d" % i
                                               for i in range(1, 20))
    # then one change behind the mount: once the cached listing shows it
    # (the watch's invalidation, counted first), every event before it
    # has been read, and it is the only one counted
    os.mkdir(m.b("marker"))
    assert seen(lambda: "marker" in os.listdir(m.mnt)) is not None
    assert stats(m.mnt)["watch_events"] == s0 + 1


def test_thousands_of_changes_while_a_reader_walks(watched):
    """A writer makes 3,000 changes of every kind behind the mount while a
    reader walks it; once the writer stops, the mount's view is the
    backend's."""
    m = watched
    for i in range(20):
        os.mkdir(m.b("d%d" % i))
        for j in range(20):
            put(m.b("d%d" % i, "f%d" % j), b"x" * j)
    stop = threading.Event()
    walks = []

    def reader():
        # a walk that gave up at the first name gone under it never ended
        # while the writer ran flat out (CI, 2026-12-07): one that goes on
        # past vanished names always ends, and each one is counted
        while not stop.is_set():
            view(m.mnt, racing=True)
            walks.append(1)

    t = threading.Thread(target=reader)
    t.start()
    rnd = random.Random(38)
    try:
        for k in range(3000):
            d = m.b("d%d" % rnd.randrange(20))
            names = os.listdir(d)
            op = rnd.randrange(5)
            if op == 0 or not names:
                put(os.path.join(d, "n%d" % k), b"y" * rnd.randrange(50))
            elif op == 1:
                os.unlink(os.path.join(d, rnd.choice(names)))
            elif op == 2:
                os.rename(os.path.join(d, rnd.choice(names)),
                          m.b("d%d" % rnd.randrange(20), "r%d" % k))
            elif op == 3:
                os.chmod(os.path.join(d, rnd.choice(names)),
                         rnd.choice([0o600, 0o644, 0o640]))
            else:
                with open(os.path.join(d, rnd.choice(names)), "ab") as f:
                    f.write(b"z" * rnd.randrange(1, 9))
    finally:
        # the walk under way when the writer ends began among its changes
        seen(lambda: walks, limit=30)
        stop.set()
        t.join()
    assert walks, "the reader never finished a walk"
    # the watch may still be working through thousands of queued events
    assert seen(lambda: view(m.mnt) == view(m.backend), limit=20) is not None


def test_lost_events_invalidate_everything(watched):
    """More changes than fanotify queues while the daemon cannot read them
    (stopped): the kernel drops what it caches, and the mount shows the
    backend as it is, including the deletion of a name it had cached."""
    m = watched
    prime(m)
    os.mkdir(m.b("many"))
    assert os.listdir(m.m("many")) == []
    with open("/proc/sys/fs/fanotify/max_queued_events") as f:
        queue = int(f.read())
    if queue > 100000:
        pytest.skip("fanotify's queue holds %d events here" % queue)
    before = stats(m.mnt)["watch_overflows"]
    os.kill(m.pid, signal.SIGSTOP)
    try:
        for i in range(queue + 1000):
            open(m.b("many", "f%06d" % i), "wb").close()
        os.unlink(m.b("d", "old"))
        os.chmod(m.b("d"), 0o700)
    finally:
        os.kill(m.pid, signal.SIGCONT)
    # the loss first, through the root's xattr alone: listing "many" now
    # would bring 17,000 inodes in by READDIRPLUS, and the evictor making
    # room would drop d's cached name and attributes as well, showing the
    # backend as it is without the overflow's doing (seen under load, CI
    # 2026-12-07)
    assert seen(lambda: stats(m.mnt)["watch_overflows"] > before,
                limit=10) is not None
    assert seen(lambda: os.listdir(m.m("d")) == []
                and not os.path.exists(m.m("d", "old"))
                and os.stat(m.m("d")).st_mode & 0o777 == 0o700,
                limit=10) is not None
    assert len(os.listdir(m.m("many"))) == queue + 1000


def test_a_filesystem_mounted_inside_is_not_cached_for_long(watched):
    """The watch covers the backend's own filesystem: a tmpfs mounted in
    the backend gets the configured timeouts, so a change made in it
    behind the mount shows once they run out, not an hour later."""
    m = watched
    sub = m.b("sub")
    os.mkdir(sub)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", sub],
                   check=True)
    try:
        put(os.path.join(sub, "f"), b"x")
        os.chmod(os.path.join(sub, "f"), 0o644)
        assert os.stat(m.m("sub", "f")).st_mode & 0o777 == 0o644
        os.chmod(os.path.join(sub, "f"), 0o600)
        # attr_timeout is 1 s by default
        assert seen(lambda: os.stat(m.m("sub", "f")).st_mode & 0o777
                    == 0o600, limit=3) is not None
    finally:
        subprocess.run(["umount", "-l", sub], check=False)
