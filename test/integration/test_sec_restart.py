# SPDX-License-Identifier: GPL-2.0-or-later
# A restart after a crash never shows the raw backend (issue 22, item 3).
# A share protected in place (backend = mountpoint) whose clamfs was killed
# with SIGKILL, restarted while clamd is down with clamd_wait: during the
# whole wait another user who opens a file by the share's path gets an error
# (the dead mount stays there until the new mount replaces it), never the
# raw backend's bytes; once clamd answers the new mount serves clean files
# and refuses EICAR, and it is the only mount there.
import json
import os
import signal
import subprocess

import pytest

from adminutil import ini, wait_log
from clamfstest.mountinfo import mounts_at
from clamfstest.env import PYTHON
from fsutil import UID_A, GID_A, run_as, setpriv_prefix
from scanutil import put

CLEAN = b"clean\n"

# Reads ROOT/e and ROOT/clean by path again and again for ARGS["secs"]
# seconds (the observation window, not a sleep: every pass is a fresh open
# through the share's path); counts outcomes.
READER = """
import time
from collections import Counter
eicar = bytes(ARGS["eicar"])
seen = Counter()
end = time.monotonic() + ARGS["secs"]
while time.monotonic() < end:
    for name in ("e", "clean"):
        try:
            with open(P(name), "rb") as f:
                data = f.read()
            seen[name + ":" + ("EICAR" if eicar in data else "bytes")] += 1
        except OSError as e:
            seen[name + ":" + errno.errorcode.get(e.errno, str(e.errno))] += 1
emit(dict(seen))
"""


def inplace_share(admin, c, wait, own_fs=False):
    """A share protected in place; with own_fs a filesystem of its own
    mounted there (a tmpfs over a directory holding only "shadow")."""
    base = admin.tempdir()
    os.chmod(base, 0o755)
    share = os.path.join(base, "share")
    os.mkdir(share, 0o755)
    if own_fs:
        put(os.path.join(share, "shadow"), CLEAN)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=755",
                        "tmpfs", share], check=True)
    put(os.path.join(share, "e"), c.eicar)
    put(os.path.join(share, "clean"), CLEAN)
    for n in ("e", "clean"):
        os.chmod(os.path.join(share, n), 0o644)
    cfg = ini(os.path.join(base, "share.ini"),
              [("fuse", [("backend", share), ("mountpoint", share),
                         ("options", "allow_other")]),
               ("clamd", [("clamd", c.socket), ("clamd_wait", str(wait))]),
               ("cache", [("racy_window", "0")])])
    return share, cfg


def read_as_user(share, c, secs):
    return run_as(UID_A, GID_A, None, READER, share,
                  args={"eicar": list(c.eicar), "secs": secs},
                  timeout=secs + 60)


# A user whose cwd is inside the share (taken through the live mount):
# after each line on stdin, reads "e" relative to the cwd and prints the
# outcome.
CWD_READER = """
import errno, json, os, sys
os.chdir(sys.argv[1])
eicar = bytes(json.loads(sys.argv[2]))
print("ready", flush=True)
for _ in sys.stdin:
    try:
        with open("e", "rb") as f:
            out = "EICAR" if eicar in f.read() else "bytes"
    except OSError as e:
        out = errno.errorcode.get(e.errno, str(e.errno))
    print(out, flush=True)
"""


class CwdReader:
    def __init__(self, share, c):
        self.p = subprocess.Popen(
            setpriv_prefix(UID_A, GID_A) +
            [PYTHON, "-c", CWD_READER, share, json.dumps(list(c.eicar))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def read(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def crash(m, c):
    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(timeout=10)
    m.torn_down = True
    c.stop()


def unmount_all(share, mounts):
    """Stops the daemons (SIGTERM: a clean stop; the teardown still checks
    how they ended) and takes every mount off share, the backend's own
    filesystem last."""
    for m in mounts:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGTERM)
            m.proc.wait(timeout=30)
    while mounts_at(share):
        subprocess.run(["umount", "-l", share], check=True)


@pytest.mark.parametrize("own_fs", [False, True],
                         ids=["directory", "own-filesystem"])
def test_restart_after_crash_never_shows_the_raw_backend(admin,
                                                         clamd_factory,
                                                         own_fs):
    c = clamd_factory()
    share, cfg = inplace_share(admin, c, 30, own_fs)
    # a filesystem mounted inside the backend, under the mount
    inner = os.path.join(share, "sub")
    os.mkdir(inner, 0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=755",
                    "tmpfs", inner], check=True)
    put(os.path.join(inner, "insub"), CLEAN)
    os.chmod(os.path.join(inner, "insub"), 0o644)
    started = []
    try:
        crash_and_restart(admin, c, share, cfg, started)
        # only the backend's own filesystem under the mount
        assert len(mounts_at(share)) == (2 if own_fs else 1), \
            mounts_at(share)
        # the new mount reaches into mounts inside the backend, and names
        # files by their paths (rules, logs and quarantine need them)
        with open(os.path.join(share, "sub", "insub"), "rb") as f:
            assert f.read() == CLEAN
        lines = [x for x in started[-1].stderr_text().splitlines()
                 if "infected path=" in x]
        assert lines and all('path="e"' in x for x in lines), lines
        if own_fs:
            ms = started[-1]
            ms.proc.send_signal(signal.SIGTERM)
            assert ms.proc.wait(timeout=30) == 0, ms.stderr_text()
            assert [x.fstype for x in mounts_at(share)] == ["tmpfs"]
    finally:
        unmount_all(share, started)
        subprocess.run(["umount", "-l", inner], check=False)


def crash_and_restart(admin, c, share, cfg, started):
    m = admin.start(["-f", "-o", f"config={cfg}"], share, share)
    started.append(m)
    before = read_as_user(share, c, 0.5)
    assert not [k for k in before if k.endswith("EICAR")], before
    assert before.get("e:EACCES") and before.get("clean:bytes"), before
    inside = CwdReader(share, c)
    assert inside.read() == "EACCES"

    crash(m, c)
    m2 = admin.start(["-f", "-o", f"config={cfg}"], share, share,
                     wait=False)
    started.append(m2)
    try:
        assert wait_log(m2, "waiting up to 30 s for clamd"), \
            m2.stderr_text()
        during = read_as_user(share, c, 3)
        # still waiting all along: the window covered the wait, not a mount
        assert not wait_log(m2, "clamd answers", timeout=0), \
            m2.stderr_text()
        assert m2.proc.poll() is None, m2.stderr_text()
    except BaseException:
        m2.proc.send_signal(signal.SIGTERM)  # ends the wait for teardown
        raise
    served = {k: v for k, v in during.items()
              if k.endswith(("EICAR", "bytes"))}
    if served:
        m2.proc.send_signal(signal.SIGTERM)
    assert not served, f"the raw backend was served during the wait: {during}"
    # the dead mount's answer, to every open by the share's path
    assert set(during) == {"e:ENOTCONN", "clean:ENOTCONN"}, during
    assert inside.read() == "ENOTCONN"

    c.start()
    assert wait_log(m2, "clamd answers", timeout=30), m2.stderr_text()
    assert wait_log(m2, f"on {share}, clamd=", timeout=10), m2.stderr_text()
    assert len(wait_log(m2, "removed the dead mount")) == 1, \
        m2.stderr_text()
    after = read_as_user(share, c, 0.5)
    assert after.get("clean:bytes") and after.get("e:EACCES"), after
    assert set(after) == {"clean:bytes", "e:EACCES"}, after
    # a cwd taken in the old mount stays in it: dead, never the raw backend
    assert inside.read() == "ENOTCONN"
    inside.close()


def test_stop_during_the_wait_leaves_the_dead_mount(admin, clamd_factory):
    """SIGTERM while the restart waits for clamd: clamfs exits cleanly and
    the dead mount stays, still refusing everything; the next start
    replaces it."""
    c = clamd_factory()
    share, cfg = inplace_share(admin, c, 30)
    m = admin.start(["-f", "-o", f"config={cfg}"], share, share)
    crash(m, c)
    m2 = admin.start(["-f", "-o", f"config={cfg}"], share, share,
                     wait=False)
    assert wait_log(m2, "waiting up to 30 s for clamd"), m2.stderr_text()
    m2.proc.send_signal(signal.SIGTERM)
    assert m2.proc.wait(timeout=10) == 0, m2.stderr_text()
    m2.torn_down = True
    assert len(mounts_at(share)) == 1, mounts_at(share)
    assert read_as_user(share, c, 0.2).keys() == {"e:ENOTCONN",
                                                   "clean:ENOTCONN"}
    c.start()
    m3 = admin.start(["-f", "-o", f"config={cfg}"], share, share)
    assert wait_log(m3, "removed the dead mount"), m3.stderr_text()
    after = read_as_user(share, c, 0.2)
    assert set(after) == {"clean:bytes", "e:EACCES"}, after


def test_wait_given_up_mounts_fail_closed(admin, clamd_factory):
    """clamd_wait runs out with clamd still down: the new mount replaces
    the dead one and refuses every open (on_error=deny) until clamd
    answers; the raw backend is never shown in between."""
    c = clamd_factory()
    share, cfg = inplace_share(admin, c, 2)
    m = admin.start(["-f", "-o", f"config={cfg}"], share, share)
    crash(m, c)
    m2 = admin.start(["-f", "-o", f"config={cfg}"], share, share,
                     wait=False)
    assert wait_log(m2, "waiting up to 2 s for clamd"), m2.stderr_text()
    seen = read_as_user(share, c, 4)
    assert wait_log(m2, "still not answering after 2 s"), m2.stderr_text()
    assert wait_log(m2, "removed the dead mount"), m2.stderr_text()
    assert set(seen) <= {"e:ENOTCONN", "clean:ENOTCONN", "e:EIO",
                         "clean:EIO"}, seen
    after = read_as_user(share, c, 0.2)
    assert set(after) == {"e:EIO", "clean:EIO"}, after


# An unprivileged user racing restarts for clamfs's staging directories
# (issue 36, item 3): inotify on /run and /tmp names each new
# "clamfs-stage.*" directory; the racer opens it (O_PATH) again and again
# and keeps every descriptor whose identity differs from the directory's
# own (a mount was attached there), and likewise for each entry it can
# list in it. Through every kept descriptor it looks for "e", three levels
# down, and reads it; it does so again at the end, long after the
# restarts, since a lazily detached mount lives on through a descriptor.
# Reads stdin lines: "report" prints what it read so far.
STAGE_RACER = r"""
import ctypes, os, select, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
IN_CREATE, IN_ISDIR = 0x100, 0x40000000
ino = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
assert ino >= 0
watched = {libc.inotify_add_watch(ino, d.encode(), IN_CREATE): d
           for d in ("/run", "/tmp")}
eicar = bytes(ARGS["eicar"])
stages = {}     # path: identity of the directory itself (or an entry)
seen = set()    # every stage named
kept = []       # (path, descriptor) onto something mounted there
raw = set()     # the paths through which EICAR was read
print("ready", flush=True)

def ident(fd):
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)

def try_keep(path, own):
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    i = ident(fd)
    # a few descriptors a directory are as good as many
    if own is None or i == own or \
            sum(1 for p, _ in kept if p == path) >= 3:
        os.close(fd)
        return own or i
    kept.append((path, fd))
    return own

def read_beneath(dfd, depth, where):
    try:
        rfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
    except OSError:
        return
    try:
        names = os.listdir(rfd)
    except OSError:
        names = []
    os.close(rfd)
    for n in names:
        if n == "e":
            try:
                f = os.open(n, os.O_RDONLY, dir_fd=dfd)
                data = os.read(f, 4096)
                os.close(f)
                if eicar in data:
                    raw.add(where)
            except OSError:
                pass
        elif depth > 0:
            try:
                sub = os.open(n, os.O_PATH | os.O_DIRECTORY, dir_fd=dfd)
            except OSError:
                continue
            read_beneath(sub, depth - 1, where)
            os.close(sub)

def sweep():
    for path, fd in kept:
        read_beneath(fd, 3, path)

buf = b""
while True:
    r, _, _ = select.select([ino, sys.stdin], [], [], 0 if stages else 0.05)
    if ino in r:
        data = os.read(ino, 65536)
        off = 0
        while off < len(data):
            wd, mask, cookie, ln = struct.unpack_from("iIII", data, off)
            name = data[off + 16:off + 16 + ln].rstrip(b"\0").decode()
            off += 16 + ln
            if name.startswith("clamfs-stage."):
                stages[os.path.join(watched[wd], name)] = None
                seen.add(name)
    if sys.stdin in r:
        line = sys.stdin.readline()
        if not line:
            break
        sweep()
        print(json.dumps({"stages": len(seen), "kept": len(kept),
                          "raw": sorted(raw)}),
              flush=True)
        continue
    for path in list(stages):
        if not os.path.lexists(path):
            del stages[path]
            continue
        stages[path] = try_keep(path, stages[path])
        try:
            names = os.listdir(path)
        except OSError:
            names = []
        for n in names:
            stages.setdefault(os.path.join(path, n), None)
"""


def test_restart_stage_unreachable_for_users(admin, clamd_factory):
    """20 crashes and restarts of an in-place share, each over its dead
    mount, with an unprivileged user racing for the stage the restart
    uses: it never reaches the raw backend (EICAR unscanned), neither
    during a restart nor through a descriptor kept past it."""
    c = clamd_factory()
    share, cfg = inplace_share(admin, c, 30)
    racer = subprocess.Popen(
        setpriv_prefix(UID_A, GID_A) +
        [PYTHON, "-c", "import json\nARGS = json.loads(__import__('sys')"
         ".argv[1])\n" + STAGE_RACER, json.dumps({"eicar": list(c.eicar)})],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    started = []
    try:
        assert racer.stdout.readline().strip() == "ready"
        m = admin.start(["-f", "-o", f"config={cfg}"], share, share)
        started.append(m)
        for _ in range(20):
            os.kill(m.pid, signal.SIGKILL)
            m.proc.wait(timeout=10)
            m.torn_down = True
            m = admin.start(["-f", "-o", f"config={cfg}"], share, share,
                            wait=False)
            started.append(m)
            assert wait_log(m, "removed the dead mount", timeout=30), \
                m.stderr_text()
        # the share itself refuses EICAR after all of it
        seen = read_as_user(share, c, 0.2)
        assert set(seen) == {"e:EACCES", "clean:bytes"}, seen
        assert racer.poll() is None, racer.stderr.read()
        racer.stdin.write("report\n")
        racer.stdin.flush()
        report = json.loads(racer.stdout.readline())
    finally:
        racer.stdin.close()
        racer.wait(timeout=30)
        unmount_all(share, started)
    # it saw every restart's stages (a racer that saw none proves nothing)
    assert report["stages"] >= 20, report
    assert report["raw"] == [], \
        f"the raw backend was read through a restart's stage: {report}"
