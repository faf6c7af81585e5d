# SPDX-License-Identifier: GPL-2.0-or-later
# One user's lease must not stall other users (issue 36, item 2). Any user
# may take a lease on a file it owns on the backend (fcntl F_SETLEASE); an
# open that conflicts with it waits for the kernel's lease-break time
# (45 s) unless it is non-blocking. Opens, creates and truncations through
# the mount that wait so must not hold the mount's workers: the attacker's
# own calls wait as natively, the victim's calls on its own files are
# answered at once, and a non-blocking open gets EWOULDBLOCK as natively.
import errno
import os
import subprocess
import textwrap
import time

import pytest

from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import wait_for
from fsutil import GID_A, GID_B, UID_A, UID_B, LineChild, run_as, \
    setpriv_prefix, share_of
from scanutil import mount_scan, put

CONTENT = b"the attacker's own file\n"

# Holds a write lease on the file argv[1] (its owner's right) until told
# to let go; the break's SIGIO is ignored, so the lease stays until the
# kernel's lease-break time has passed or "release" comes.
HOLDER = textwrap.dedent("""
    import fcntl, os, signal, sys
    F_SETLEASE = 1024
    signal.signal(signal.SIGIO, signal.SIG_IGN)
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
    print("leased", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "release":
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
            print("released", flush=True)
        elif cmd == "exit":
            break
""")

# The victim, on its own files: the time a stat, a read, a create and a
# truncate each take through the mount.
VICTIM = """
import time
D = ARGS.get("dir", "victim")
out = {}
def timed(name, fn):
    t = time.monotonic()
    r = outcome(fn)
    out[name] = [round(time.monotonic() - t, 3), r[0]]
timed("stat", lambda: os.stat(P(D + "/mine")).st_size)
def cat():
    with open(P(D + "/mine"), "rb") as f:
        return len(f.read())
timed("cat", cat)
def create():
    with open(P(D + "/new"), "wb") as f:
        return f.write(b"x")
timed("create", create)
timed("truncate", lambda: os.truncate(P(D + "/mine"), 3))
emit(out)
"""


@pytest.fixture
def backend(mount_clamfs):
    b = share_of(mount_clamfs.tempdir("clamfs-lease"))
    put(os.path.join(b, "share", "leased"), CONTENT)
    os.chown(os.path.join(b, "share", "leased"), UID_A, GID_A)
    put(os.path.join(b, "share", "mine"), b"another file of the attacker\n")
    os.chown(os.path.join(b, "share", "mine"), UID_A, GID_A)
    victim = os.path.join(b, "victim")
    os.mkdir(victim, 0o755)
    put(os.path.join(victim, "mine"), b"victim's own file\n")
    os.chown(victim, UID_B, GID_B)
    os.chown(os.path.join(victim, "mine"), UID_B, GID_B)
    return b


def syscall(pid):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return ""


# open, openat, truncate, openat2 (x86_64)
BLOCKING_CALLS = ("2", "257", "76", "437")


def blocked_in_call(pid):
    """Whether pid sleeps in an open or a truncate (through the mount, or
    behind one that does, on the inode's lock)."""
    return syscall(pid) in BLOCKING_CALLS


def as_attacker(code, *args):
    return subprocess.Popen(
        setpriv_prefix(UID_A, GID_A) + [PYTHON, "-c", code] + list(args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


CAT = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())"
# to its own length: the lease is broken all the same, and the reads
# racing it see one content
TRUNCATE = "import os, sys; os.truncate(sys.argv[1], %d)" % len(CONTENT)
# an open with O_CREAT of the existing leased file (a FUSE CREATE)
CREATE = ("import os, sys; os.close(os.open(sys.argv[1], "
          "os.O_WRONLY | os.O_CREAT, 0o644))")
NONBLOCK = textwrap.dedent("""
    import errno, os, sys
    try:
        os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK))
        print("opened")
    except OSError as e:
        print(errno.errorcode[e.errno])
""")


LOOKUP = """
import time
t = time.monotonic()
r = outcome(os.stat, P(ARGS["name"]))
emit([round(time.monotonic() - t, 3), r[0]])
"""


def test_a_lease_stalls_no_other_user(mount_clamfs, clamd, backend):
    # negative entries kept: an O_CREAT open of a name the kernel saw
    # absent is a CREATE, which the kernel sends with the directory locked
    m = mount_scan(mount_clamfs, clamd, "negative_timeout=60",
                   backend=backend)
    leased = m.m("share", "leased")
    fresh = m.m("share", "fresh")
    assert not os.path.exists(fresh)
    put(os.path.join(backend, "share", "fresh"), CONTENT)
    os.chown(os.path.join(backend, "share", "fresh"), UID_A, GID_A)
    holder = LineChild(UID_A, GID_A, HOLDER,
                       [os.path.join(backend, "share", "leased")], "leased")
    holder2 = LineChild(UID_A, GID_A, HOLDER,
                        [os.path.join(backend, "share", "fresh")], "leased")
    waiting = []
    try:
        # more blocked callers than the mount has workers
        waiting = [as_attacker(CAT, leased) for _ in range(20)]
        waiting += [as_attacker(TRUNCATE, leased) for _ in range(4)]
        waiting += [as_attacker(CREATE, leased) for _ in range(2)]
        # a CREATE of the name the kernel believes absent, now leased
        creating = as_attacker(CREATE, fresh)
        waiting.append(creating)
        killed = as_attacker(CAT, leased)
        # each has reached the mount and waits there for its answer
        assert wait_for(lambda: all(blocked_in_call(p.pid)
                                    for p in waiting + [killed]), 20), \
            [syscall(p.pid) for p in waiting + [killed]]
        victim = run_as(UID_B, GID_B, [], VICTIM, m.mnt, timeout=120)
        # nor a lookup in the directory of the waiting CREATE
        lookup = run_as(UID_B, GID_B, [], LOOKUP, m.mnt,
                        args={"name": "share/mine"}, timeout=120)
        # the attacker's own uid is not held up by its waits either
        same_uid = run_as(UID_A, GID_A, [], VICTIM, m.mnt, timeout=120,
                          args={"dir": "share"})
        # a waiting caller can be killed, as natively: it is answered
        # (EINTR) at its next attempt, not at the end of the lease
        t = time.monotonic()
        killed.kill()
        killed.wait(timeout=60 * SLOW)
        killed_secs = time.monotonic() - t
        # a non-blocking open of the leased file fails as natively
        r = subprocess.run(setpriv_prefix(UID_A, GID_A) +
                           [PYTHON, "-c", NONBLOCK, leased],
                           capture_output=True, text=True, timeout=30)
        nonblock = r.stdout.strip()
        still = [p.poll() for p in waiting]
        holder.ask("release", "released")
        holder2.ask("release", "released")
        done = [p.communicate(timeout=60 * SLOW) for p in waiting]
        codes = [p.returncode for p in waiting]
    finally:
        for p in waiting:
            if p.poll() is None:
                p.kill()
        holder.close()
        holder2.close()
    limit = 1.0 * SLOW
    for who in (victim, same_uid, {"lookup": lookup}):
        for name, (secs, ok) in who.items():
            assert ok == "ok", who
            assert secs < limit, f"the {name} waited {secs} s: {who}"
    # answered at its next attempt (200 ms apart at most), not when the
    # kernel's lease-break time ran out
    assert killed_secs < 5 * SLOW, killed_secs
    assert nonblock == errno.errorcode[errno.EWOULDBLOCK], r.stdout + r.stderr
    # the attacker's own calls waited for its lease, as natively
    assert still == [None] * len(waiting), still
    assert codes == [0] * len(waiting), [d[1] for d in done]
    assert [out for out, _ in done[:20]] == [CONTENT] * 20
    assert os.path.getsize(os.path.join(backend, "share", "leased")) == \
        len(CONTENT)
