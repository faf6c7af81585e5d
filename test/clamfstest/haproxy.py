# SPDX-License-Identifier: GPL-2.0-or-later
"""A private HAProxy for the fleet and TLS tests.

Debian's haproxy package starts a service when installed, so it is never
installed on a test host: scripts/deps unpacks it into
/var/cache/clamfs-deps/haproxy (CLAMFS_HAPROXY overrides; a host's
/usr/sbin/haproxy is used as a program only, its service untouched).

HAProxy(config) writes the configuration into its own temporary directory
(the text may name {dir} for files there), checks it (`haproxy -c`), runs
it in the foreground (`-db`, its own pid file) in a new session, and waits
until every `bind` port accepts connections. command() talks to its
runtime API socket. stop() kills it and waits; cleanup() also removes the
directory. Nothing else is ever signalled.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

HAPROXY = os.environ.get("CLAMFS_HAPROXY") or next(
    (p for p in ("/var/cache/clamfs-deps/haproxy/usr/sbin/haproxy",
                 "/usr/sbin/haproxy") if os.access(p, os.X_OK)),
    "/var/cache/clamfs-deps/haproxy/usr/sbin/haproxy")


def available():
    """None when HAProxy can run here, else why not."""
    if not os.access(HAPROXY, os.X_OK):
        return f"no haproxy at {HAPROXY} (scripts/deps unpacks it)"
    r = subprocess.run([HAPROXY, "-v"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"{HAPROXY} -v failed: {r.stderr.strip()}"
    return None


class HAProxyError(Exception):
    pass


class HAProxy:
    def __init__(self, config):
        self.dir = tempfile.mkdtemp(prefix="cfh", dir="/tmp")
        self.conf = os.path.join(self.dir, "haproxy.cfg")
        self.pid_path = os.path.join(self.dir, "haproxy.pid")
        self.log_path = os.path.join(self.dir, "haproxy.log")
        self.proc = None
        with open(self.conf, "w") as f:
            f.write(config.replace("{dir}", self.dir))
        self.ports = [int(p) for p in
                      re.findall(r"^\s*bind\s+[\d.]+:(\d+)", config, re.M)]

    def start(self, timeout=10.0):
        r = subprocess.run([HAPROXY, "-c", "-f", self.conf],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise HAProxyError(f"haproxy -c: {r.stdout}{r.stderr}")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [HAPROXY, "-db", "-f", self.conf, "-p", self.pid_path],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)
        log.close()
        end = time.monotonic() + timeout
        for port in self.ports:
            while True:
                if self.proc.poll() is not None:
                    raise HAProxyError(f"haproxy exited with "
                                       f"{self.proc.returncode}:\n"
                                       f"{self.log_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port),
                                             timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise HAProxyError(f"port {port} not listening:\n"
                                           f"{self.log_text()}")
                    time.sleep(0.05)
        return self

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def command(self, line, sock="admin.sock", timeout=5.0):
        """Sends one command to the runtime API socket {dir}/<sock> (the
        configuration must have `stats socket {dir}/admin.sock`); returns
        the answer."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(os.path.join(self.dir, sock))
            s.sendall(line.encode() + b"\n")
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    return data.decode(errors="replace")
                data += b

    def stop(self):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            # the process group is haproxy alone (start_new_session)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def cleanup(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
