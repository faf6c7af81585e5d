# SPDX-License-Identifier: GPL-2.0-or-later
# Two clamds behind a private HAProxy (doc/fleet.md's configuration: PING
# health checks, leastconn, retries with redispatch), one clamd= line for
# clamfs: one clamd is killed (SIGKILL) a third of the way into 8 readers
# opening 1,200 unscanned files, and not one open may fail. Run several
# times, the other clamd each time, each from both marked up again.
#
# The killed clamd still completes TCP handshakes for a moment while its
# process is torn down, and HAProxy hands it connections before a check
# can mark it down: clamfs' retry, which goes back to the same address,
# must not land in that moment (scanq.c waits briefly before it).
import time

import pytest

from clamfstest import haproxy
from clamfstest.clamd import free_tcp_port
from clamfstest.env import SLOW
from clamfstest.wait import wait_for
from scanutil import mount_scan, put, read_all

pytestmark = pytest.mark.skipif(haproxy.available() is not None,
                                reason=str(haproxy.available()))

RUNS = 6
FILES = 1200


def _config(port, clamds):
    servers = "".join(
        f"    server clamd{i + 1} 127.0.0.1:{c.tcp_port} check\n"
        for i, c in enumerate(clamds))
    return f"""global
    maxconn 512
    stats socket {{dir}}/admin.sock level admin
    log stdout format raw local0

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 1s
    timeout client 130s
    timeout server 130s
    retries 2
    option redispatch 1

frontend clamd_in
    bind 127.0.0.1:{port}
    default_backend clamds

backend clamds
    balance leastconn
    option tcp-check
    tcp-check connect
    tcp-check send nPING\\n
    tcp-check expect string PONG
    default-server inter 1s fastinter 200ms downinter 1s fall 2 rise 2 on-marked-down shutdown-sessions
{servers}"""


def _up(h):
    """How many of the backend's servers HAProxy has marked UP."""
    up = 0
    for line in h.command("show stat").splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == "clamds" and f[1].startswith("clamd"):
            up += f[17] == "UP"
    return up


def test_kill_one_clamd_behind_haproxy(mount_clamfs, clamd_factory):
    cs = [clamd_factory() for _ in range(2)]
    port = free_tcp_port()
    h = haproxy.HAProxy(_config(port, cs))
    h.start()
    try:
        assert wait_for(lambda: _up(h) == 2, 10), h.log_text()[-2000:]
        m = mount_scan(mount_clamfs, f"tcp://127.0.0.1:{port}",
                       "scan_threads=8", "scan_timeout=20")
        start = time.monotonic()
        failed = []
        for run in range(RUNS):
            victim = cs[run % 2]
            names = [f"r{run}f{i:04d}" for i in range(FILES)]
            for n in names:
                put(m.b(n), b"file %s\n" % n.encode())
            failures = read_all(m.mnt, names,
                                after=(FILES // 3, victim.kill))
            if failures:
                failed.append((run, failures))
            # the next run starts from both marked up again
            assert wait_for(lambda: _up(h) < 2, 10), h.log_text()[-2000:]
            victim.start()
            assert wait_for(lambda: _up(h) == 2, 10), h.log_text()[-2000:]
        elapsed = time.monotonic() - start
        assert failed == [], (failed, h.log_text()[-4000:])
        assert elapsed < 45 * SLOW, elapsed
    finally:
        h.cleanup()
