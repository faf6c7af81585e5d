# SPDX-License-Identifier: GPL-2.0-or-later
# A restart after a crash never shows the raw backend (issue 22, item 3).
# A share protected in place (backend = mountpoint) whose clamfs was killed
# with SIGKILL, restarted while clamd is down with clamd_wait: during the
# whole wait another user who opens a file by the share's path gets an error
# (the dead mount stays there until the new mount replaces it), never the
# raw backend's bytes; once clamd answers the new mount serves clean files
# and refuses EICAR, and it is the only mount there.
import os
import signal

from adminutil import admin, ini, wait_log  # noqa: F401
from clamfstest.mountinfo import mounts_at
from fsutil import UID_A, GID_A, run_as
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


def inplace_share(admin, c, wait):
    base = admin.tempdir()
    os.chmod(base, 0o755)
    share = os.path.join(base, "share")
    os.mkdir(share, 0o755)
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


def test_restart_after_crash_never_shows_the_raw_backend(admin,
                                                         clamd_factory):
    c = clamd_factory()
    share, cfg = inplace_share(admin, c, 30)
    m = admin.start(["-f", "-o", f"config={cfg}"], share, share)
    before = read_as_user(share, c, 0.5)
    assert not [k for k in before if k.endswith("EICAR")], before
    assert before.get("e:EACCES") and before.get("clean:bytes"), before

    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(timeout=10)
    m.torn_down = True
    c.stop()
    m2 = admin.start(["-f", "-o", f"config={cfg}"], share, share,
                     wait=False)
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

    c.start()
    assert wait_log(m2, "clamd answers", timeout=30), m2.stderr_text()
    assert wait_log(m2, f"on {share}, clamd=", timeout=10), m2.stderr_text()
    assert len(wait_log(m2, "removed the dead mount")) == 1, \
        m2.stderr_text()
    after = read_as_user(share, c, 0.5)
    assert after.get("clean:bytes") and after.get("e:EACCES"), after
    assert set(after) == {"clean:bytes", "e:EACCES"}, after
    assert len(mounts_at(share)) == 1, mounts_at(share)
