# SPDX-License-Identifier: GPL-2.0-or-later
# A clamd that answers PING but never answers a scan (issue 22, item 5): a
# clamd wedged in its scans, an MTU black hole, a middlebox that drops
# large streams. As the second of two backends it cost every other open
# half the scan_timeout (its attempt, then the retry on the real clamd)
# while --stats showed it healthy and nothing was logged: its PING
# cleared the suspicion its timeout had raised. After a scan timeout the
# health probe is a tiny scan, not a PING: the backend is ejected once (one
# log line, one ejection in --stats) and readmitted by the same probe when
# it scans again.
import os
import time

from clamfstest.env import SLOW
from fakeclamd import StallClamd
from scanutil import mount_scan, put, stats, try_read, wait_for

TIMEOUT = 10


def _open_times(m, names):
    took = []
    for n in names:
        t = time.monotonic()
        r = try_read(m.m(n))
        took.append(round(time.monotonic() - t, 3))
        assert r[0] == "ok", (n, r)
    print("open times", took)
    return took


def _lines(m, addr, what):
    return [line for line in m.stderr_text().splitlines()
            if addr in line and what in line]


def test_pinging_backend_that_swallows_scans_is_ejected(mount_clamfs, clamd):
    with StallClamd() as fake:
        m = mount_scan(mount_clamfs, clamd.socket, "clamd=" + fake.socket,
                       f"scan_timeout={TIMEOUT}")
        names = [f"f{i:02d}" for i in range(16)]
        for n in names:
            put(m.b(n), os.urandom(4096))
        took = _open_times(m, names)
        # one open may pay the first timeout (half the deadline, then the
        # retry on the real clamd); the probe scan that follows takes the
        # fake out and no later open goes there
        slow = [t for t in took if t >= 1.0]
        assert len(slow) <= 1, took
        assert max(took) < TIMEOUT, took
        assert fake.scans >= 1
        assert wait_for(lambda: stats(m.mnt)["backend_1_state"] ==
                        "ejected", 5 * SLOW), m.stderr_text()[-2000:]
        st = stats(m.mnt)
        assert st["backend_1_ejections"] == 1, st
        assert st["backend_1_healthy"] == 0
        assert st["backend_0_state"] == "healthy"
        ejected = _lines(m, fake.socket, "ejected")
        assert len(ejected) == 1, m.stderr_text()[-2000:]
        assert "scan timed out" in ejected[0], ejected
        # more opens: still none pays for the fake, and the log says it
        # once, however often its probe scans fail meanwhile
        more = [f"g{i:02d}" for i in range(8)]
        for n in more:
            put(m.b(n), os.urandom(4096))
        took = _open_times(m, more)
        assert max(took) < 1.0, took
        assert len(_lines(m, fake.socket, "ejected")) == 1

        # it scans again: the same probe readmits it (the backoff doubles
        # from 0.5 s up to 30 s while it fails)
        fake.swallow = False
        assert wait_for(lambda: stats(m.mnt)["backend_1_state"] ==
                        "healthy", 40 * SLOW), m.stderr_text()[-2000:]
        back = _lines(m, fake.socket, "back in the fleet")
        assert len(back) == 1, m.stderr_text()[-2000:]
        at = fake.answered
        later = [f"h{i:02d}" for i in range(12)]
        for n in later:
            put(m.b(n), os.urandom(4096))
        took = _open_times(m, later)
        assert max(took) < 1.0, took
        # it takes real scans again, not only the probe's
        assert fake.answered > at + 2, (at, fake.answered)
        assert stats(m.mnt)["backend_1_ejections"] == 1
