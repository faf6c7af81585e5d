# SPDX-License-Identifier: GPL-2.0-or-later
# tls:// clamd addresses against a private HAProxy that terminates TLS in
# front of the private clamd, with a CA made at run time by the openssl tool:
# scans through TLS work (clean read, EICAR refused); a certificate from
# another CA, for another name, or expired refuses the connection, the open
# fails closed with EIO and the log says why; a plaintext server answering
# "stream: OK" on a tls:// address never yields a clean verdict; a client
# certificate HAProxy requires works when configured and fails closed when
# not; a CA file replaced under the same name is in force after SIGHUP. Also the configuration side: no tls:// without a CA, and the warning
# for plain TCP to another host.
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading

import pytest

from clamfstest import haproxy
from clamfstest.clamd import free_tcp_port
from clamfstest.env import SLOW, clamfs_bin
from clamfstest.tlsca import ScratchCA
from clamfstest.wait import wait_for
from scanutil import mount_scan, put, scan_failures, try_read

pytestmark = pytest.mark.skipif(haproxy.available() is not None,
                                reason=str(haproxy.available()))

CLEAN = b"a clean file read through TLS\n" * 20


class Pki:
    pass


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="cft", dir="/tmp")
    p = Pki()
    try:
        p.ca = ScratchCA(d, "clamfs test CA")
        p.other_ca = ScratchCA(d, "unrelated CA")
        p.server = p.ca.issue("clamd.test", dns=["clamd.test"],
                              ips=["127.0.0.1"])
        p.expired = p.ca.issue("expired", dns=["clamd.test"],
                               ips=["127.0.0.1"], expired=True)
        p.client = p.ca.issue("clamfs client", client=True)
        yield p
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def proxy(pki, clamd):
    """One HAProxy, three TLS frontends to the session clamd: the good
    certificate, the expired one, and the good one requiring a client
    certificate from the test CA."""
    ports = {k: free_tcp_port() for k in ("ok", "expired", "mtls")}
    h = haproxy.HAProxy(f"""global
    maxconn 100
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend ok
    bind 127.0.0.1:{ports["ok"]} ssl crt {pki.server.pem}
    default_backend clamd
frontend expired
    bind 127.0.0.1:{ports["expired"]} ssl crt {pki.expired.pem}
    default_backend clamd
frontend mtls
    bind 127.0.0.1:{ports["mtls"]} ssl crt {pki.server.pem} ca-file {pki.ca.cert} verify required
    default_backend clamd
backend clamd
    server c1 127.0.0.1:{clamd.tcp_port}
""")
    try:
        h.start()
        h.port = ports
        yield h
    finally:
        h.cleanup()


def tls_mount(mount_clamfs, port, *opts, host="127.0.0.1"):
    return mount_scan(mount_clamfs, f"tls://{host}:{port}", *opts)


def test_scans_over_tls(mount_clamfs, clamd, pki, proxy):
    # the name defaults to the address's host: here the IP SAN
    m = tls_mount(mount_clamfs, proxy.port["ok"], f"clamd_tls_ca={pki.ca.cert}")
    put(m.b("clean.txt"), CLEAN)
    put(m.b("eicar.com"), clamd.eicar)
    before = clamd.scan_count()
    assert try_read(m.m("clean.txt")) == ("ok", CLEAN)
    assert try_read(m.m("eicar.com")) == ("err", "EACCES")
    # both went to clamd through HAProxy
    assert clamd.wait_scan_count(before + 2) >= before + 2
    assert scan_failures(m) == []


def test_explicit_name(mount_clamfs, clamd, pki, proxy):
    m = tls_mount(mount_clamfs, proxy.port["ok"],
                  f"clamd_tls_ca={pki.ca.cert}", "clamd_tls_name=clamd.test")
    put(m.b("clean.txt"), CLEAN)
    put(m.b("eicar.com"), clamd.eicar)
    assert try_read(m.m("clean.txt")) == ("ok", CLEAN)
    assert try_read(m.m("eicar.com")) == ("err", "EACCES")


def refused(m, name, why):
    """The open of name fails closed and the log names the reason."""
    put(m.b(name), CLEAN)
    assert try_read(m.m(name)) == ("err", "EIO")
    fails = wait_for(lambda: scan_failures(m), 5)
    assert fails, m.stderr_text()
    assert fails[0]["error"] == "connect", fails[0]
    assert why in fails[0]["reason"], fails[0]
    assert fails[0]["open"] == "denied-EIO"


@pytest.mark.parametrize("case", ["other-ca", "other-name", "expired"])
def test_certificate_refused(mount_clamfs, pki, proxy, case):
    if case == "other-ca":
        opts = [f"clamd_tls_ca={pki.other_ca.cert}"]
        port, why = proxy.port["ok"], "unable to get local issuer"
    elif case == "other-name":
        opts = [f"clamd_tls_ca={pki.ca.cert}",
                "clamd_tls_name=other.test"]
        port, why = proxy.port["ok"], "hostname mismatch"
    else:
        opts = [f"clamd_tls_ca={pki.ca.cert}"]
        port, why = proxy.port["expired"], "certificate has expired"
    m = tls_mount(mount_clamfs, port, *opts)
    refused(m, "f.txt", why)


class LoopbackServer:
    """A TCP listener on 127.0.0.1 that hands each connection, one at a
    time in its own thread, to handle(conn); set attributes handle uses
    before calling this __init__."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                try:
                    self.handle(c)
                except OSError:
                    pass

    def close(self):
        self.srv.close()


class PlainAnswerer(LoopbackServer):
    """Answers every connection with a clean verdict in plain text, as a
    wrongly configured terminator (or an attacker) would; it keeps the
    first bytes it received."""

    def __init__(self):
        self.first = []
        super().__init__()

    def handle(self, c):
        c.settimeout(2)
        self.first.append(c.recv(5))
        c.sendall(b"stream: OK\0" + b"1: stream: OK\0")


def test_plaintext_answer_refused(mount_clamfs, pki):
    srv = PlainAnswerer()
    try:
        m = tls_mount(mount_clamfs, srv.port, f"clamd_tls_ca={pki.ca.cert}")
        put(m.b("f.txt"), CLEAN)
        assert try_read(m.m("f.txt")) == ("err", "EIO")
        fails = wait_for(lambda: scan_failures(m), 5)
        assert fails and fails[0]["error"] == "connect", m.stderr_text()
        assert "TLS" in fails[0]["reason"], fails[0]
        # what it got was a TLS handshake record, never a command
        assert srv.first and all(b[:1] == b"\x16" for b in srv.first), \
            srv.first
    finally:
        srv.close()


class CorruptRecords(LoopbackServer):
    """A TLS server with the good certificate that completes the handshake
    and then answers with a record that cannot decrypt, as an attacker on
    the path can inject; the client gets a fatal TLS error mid-reply."""

    def __init__(self, pki):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.server.cert, pki.server.key)
        self.handshakes = 0
        super().__init__()

    def handle(self, c):
        c.settimeout(5)
        with self.ctx.wrap_socket(c, server_side=True) as t:
            self.handshakes += 1
            got = b""
            # the whole INSTREAM, up to its zero-length chunk: the client
            # is then reading the verdict
            while not got.endswith(b"\0\0\0\0"):
                b = t.recv(65536)
                if not b:
                    break
                got += b
            raw = socket.socket(fileno=os.dup(t.fileno()))
            with raw:
                raw.sendall(b"\x17\x03\x03\x00\x20" + os.urandom(32))
                raw.recv(64)


def test_corrupt_record_after_handshake(mount_clamfs, pki):
    """A TLS error on an established connection fails the open closed and
    leaves the daemon serving (it used to be read as a partial reply that
    was never set: undefined behaviour, a crash)."""
    srv = CorruptRecords(pki)
    try:
        m = tls_mount(mount_clamfs, srv.port, f"clamd_tls_ca={pki.ca.cert}")
        put(m.b("f.txt"), CLEAN)
        put(m.b("g.txt"), CLEAN)
        assert try_read(m.m("f.txt")) == ("err", "EIO")
        assert try_read(m.m("g.txt")) == ("err", "EIO")
        assert srv.handshakes >= 1
        fails = wait_for(lambda: scan_failures(m), 5)
        assert fails, m.stderr_text()
        # a broken connection, not a reply cut short (before the fix, the
        # error was read as a partial reply the TLS layer never gave)
        assert all("Connection reset" in f["reason"] for f in fails), fails
        assert m.alive(), m.stderr_text()
    finally:
        srv.close()


def test_client_certificate(mount_clamfs, clamd, pki, proxy):
    m = tls_mount(mount_clamfs, proxy.port["mtls"],
                  f"clamd_tls_ca={pki.ca.cert}",
                  f"clamd_tls_cert={pki.client.cert}",
                  f"clamd_tls_key={pki.client.key}")
    put(m.b("clean.txt"), CLEAN)
    put(m.b("eicar.com"), clamd.eicar)
    assert try_read(m.m("clean.txt")) == ("ok", CLEAN)
    assert try_read(m.m("eicar.com")) == ("err", "EACCES")
    # the same frontend without a client certificate: refused, fail closed
    m2 = tls_mount(mount_clamfs, proxy.port["mtls"],
                   f"clamd_tls_ca={pki.ca.cert}")
    put(m2.b("clean.txt"), CLEAN)
    assert try_read(m2.m("clean.txt")) == ("err", "EIO")
    fails = wait_for(lambda: scan_failures(m2), 5)
    assert fails and fails[0]["error"] in ("connect", "protocol"), \
        m2.stderr_text()


def reloaded(m, count):
    """SIGHUPs m and returns its count-th reload line."""
    os.kill(m.pid, signal.SIGHUP)
    lines = wait_for(lambda: [l for l in m.stderr_text().splitlines()
                              if "SIGHUP:" in l][count - 1:], 10 * SLOW)
    assert lines, m.stderr_text()[-2000:]
    return lines[0]


def test_rotated_ca_is_read_again_on_sighup(mount_clamfs, pki, proxy):
    """An administrator who replaces the CA file under the same name (to
    drop trust in a compromised CA, or to follow a terminator's new one)
    and sends SIGHUP gets the new file in force at once, not at the next
    restart: no option's text changed, yet the backends are rebuilt."""
    d = tempfile.mkdtemp(prefix="cfca", dir="/tmp")
    try:
        ca = os.path.join(d, "ca.pem")

        def rotate(src):
            # as an administrator or a deploy tool would: a new file
            # renamed over the old one
            shutil.copyfile(src, ca + ".new")
            os.rename(ca + ".new", ca)

        rotate(pki.ca.cert)
        m = tls_mount(mount_clamfs, proxy.port["ok"], f"clamd_tls_ca={ca}")
        put(m.b("a.txt"), CLEAN)
        assert try_read(m.m("a.txt")) == ("ok", CLEAN)
        # trust moves to another CA: the terminator's certificate is no
        # longer good enough
        rotate(pki.other_ca.cert)
        line = reloaded(m, 1)
        assert "clamd_tls_ca" in line, line
        refused(m, "b.txt", "unable to get local issuer")
        # and back: scans work again without a remount
        rotate(pki.ca.cert)
        reloaded(m, 2)
        put(m.b("c.txt"), CLEAN)
        assert try_read(m.m("c.txt")) == ("ok", CLEAN)
        # a SIGHUP with the files untouched rebuilds nothing
        line = reloaded(m, 3)
        assert "nothing changed" in line, line
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check(*opts):
    args = [clamfs_bin(), "--check"]
    for o in opts:
        args += ["-o", o]
    return subprocess.run(args, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30 * SLOW)


def test_check_tls_settings(pki, proxy):
    ok = check(f"clamd=tls://127.0.0.1:{proxy.port['ok']}",
               f"clamd_tls_ca={pki.ca.cert}")
    assert ok.returncode == 0, ok
    assert "ClamAV" in ok.stdout
    # a CA is required: never "verify nothing"
    r = check(f"clamd=tls://127.0.0.1:{proxy.port['ok']}")
    assert r.returncode == 2, r
    assert "clamd_tls_ca" in r.stdout + r.stderr, r
    r = check(f"clamd=tls://127.0.0.1:{proxy.port['ok']}",
              "clamd_tls_ca=/nonexistent/ca.pem")
    assert r.returncode == 2, r
    r = check(f"clamd=tls://127.0.0.1:{proxy.port['ok']}",
              f"clamd_tls_ca={pki.ca.cert}",
              f"clamd_tls_cert={pki.client.cert}")
    assert r.returncode == 2 and "go together" in r.stdout + r.stderr, r
    # refused certificate: --check says why
    r = check(f"clamd=tls://127.0.0.1:{proxy.port['expired']}",
              f"clamd_tls_ca={pki.ca.cert}")
    assert r.returncode != 0 and "certificate has expired" in r.stdout, r


WARNING = "is plain TCP to another host"


def test_plain_tcp_warning(clamd):
    # loopback: no warning
    r = check(f"clamd={clamd.tcp_addr}")
    assert r.returncode == 0 and WARNING not in r.stderr + r.stdout, r
    # another host (TEST-NET-1, never routed): one warning, whether or not
    # clamd answers there
    r = check("clamd=tcp://192.0.2.1:3310", "clamd_connect_timeout=1")
    assert (r.stderr + r.stdout).count(WARNING) == 1, r
    assert "doc/security.md" in r.stderr, r
