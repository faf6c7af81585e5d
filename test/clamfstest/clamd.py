# SPDX-License-Identifier: GPL-2.0-or-later
"""Start and drive a private clamd for tests and benchmarks.

Shared by the tests (conftest.py), bench/ and scripts/demo, so it
imports nothing from pytest.  Everything lives in a short temporary directory
(/tmp/cfsXXXX: sun_path holds at most 107 bytes).  The signature database is
written here: an .hdb line matching the EICAR test file, which is assembled
at run time from two halves and never stored whole in the repository.
"""
import hashlib
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from .procs import pids_of
from .wait import let_time_pass

# The host's clamd program when clamav-daemon is installed (its service is
# never used), else the one scripts/deps unpacked without installing
# Debian's services; CLAMFS_CLAMD overrides both.
CLAMD = os.environ.get("CLAMFS_CLAMD") or next(
    (p for p in ("/usr/sbin/clamd",
                 "/var/cache/clamfs-deps/clamav/usr/sbin/clamd")
     if os.access(p, os.X_OK)), "/usr/sbin/clamd")

# Two halves, so that no file of the repository contains the test string.
_EICAR_A = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR"
_EICAR_B = b"-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


def eicar_bytes():
    """The 68-byte EICAR anti-virus test file."""
    return _EICAR_A + _EICAR_B


# The user an unprivileged clamd runs as: Debian's clamav where a clamav
# package created it, else nobody, which every Debian system has (a fresh
# machine that never installed clamav has no clamav user).
try:
    pwd.getpwnam("clamav")
    UNPRIVILEGED = "clamav"
except KeyError:
    UNPRIVILEGED = "nobody"
EICAR_SIGNATURE = "Eicar-Test"  # clamd reports it as Eicar-Test.UNOFFICIAL


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(addr, data, timeout=10.0, fds=None):
    """Send raw bytes to clamd at addr (socket path or (host, port)) and
    return everything it sends back until it closes the connection."""
    if isinstance(addr, tuple):
        s = socket.create_connection(addr, timeout=timeout)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(addr)
    with s:
        if fds:
            socket.send_fds(s, [data], fds)
        else:
            s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b


class ClamdError(Exception):
    pass


class Clamd:
    """A private clamd with its own socket, TCP port, database and log.

    Attributes:
      workdir      the temporary directory holding everything
      socket       UNIX socket path (short)
      tcp_port     TCP port on 127.0.0.1;  tcp_addr: "tcp://127.0.0.1:PORT"
      conf, log_path, pid_path, db_dir
      user         the user clamd runs as ("root" or e.g. "clamav")
      proc         the subprocess.Popen of the running clamd, or None
    Methods:
      start(), stop(), kill(), restart(), running(), ping(),
      wait_pong(timeout), command(bytes), reload(),
      add_signature(name, data) (.ndb, then RELOAD),
      add_hash_signature(name, data) (.hdb, then RELOAD),
      log_text(), scan_count(), wait_scan_count(n), eicar (property),
      cleanup().
    """

    def __init__(self, user="root", stream_max="1M", options=None,
                 start_timeout=120.0):
        self.user = user
        self.start_timeout = start_timeout
        self.workdir = tempfile.mkdtemp(prefix="cfs", dir="/tmp")
        os.chmod(self.workdir, 0o755)
        self.socket = os.path.join(self.workdir, "clamd.sock")
        self.tcp_port = free_tcp_port()
        self.tcp_addr = f"tcp://127.0.0.1:{self.tcp_port}"
        self.conf = os.path.join(self.workdir, "clamd.conf")
        self.log_path = os.path.join(self.workdir, "clamd.log")
        self.pid_path = os.path.join(self.workdir, "clamd.pid")
        self.db_dir = os.path.join(self.workdir, "db")
        self.tmp_dir = os.path.join(self.workdir, "tmp")
        self.proc = None
        self._stderr_path = os.path.join(self.workdir, "clamd.stderr")
        os.mkdir(self.db_dir)
        os.mkdir(self.tmp_dir)
        data = eicar_bytes()
        with open(os.path.join(self.db_dir, "test.hdb"), "w") as f:
            f.write(f"{hashlib.md5(data).hexdigest()}:{len(data)}:"
                    f"{EICAR_SIGNATURE}\n")
        opts = {
            "LocalSocket": self.socket,
            "LocalSocketMode": "666",
            "FixStaleSocket": "true",
            "TCPSocket": str(self.tcp_port),
            "TCPAddr": "127.0.0.1",
            "DatabaseDirectory": self.db_dir,
            "TemporaryDirectory": self.tmp_dir,
            "Foreground": "true",
            "User": user,
            "PidFile": self.pid_path,
            "LogFile": self.log_path,
            "LogClean": "yes",
            "LogTime": "no",
            "StreamMaxLength": stream_max,
            "MaxThreads": "12",
            "MaxConnectionQueueLength": "30",
            "SelfCheck": "3600",
        }
        opts.update(options or {})
        self.options = opts
        with open(self.conf, "w") as f:
            for k, v in opts.items():
                f.write(f"{k} {v}\n")
        if user != "root":
            pw = pwd.getpwnam(user)
            for root, dirs, files in os.walk(self.workdir):
                for n in dirs + files + [""]:
                    os.chown(os.path.join(root, n), pw.pw_uid, pw.pw_gid)

    @property
    def eicar(self):
        return eicar_bytes()

    # -- lifecycle -------------------------------------------------------
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        """Start clamd and wait until it answers PING (not a fixed sleep)."""
        if self.running():
            return
        self._log_offset_at_start = self._log_size()
        err = open(self._stderr_path, "ab")
        self.proc = subprocess.Popen([CLAMD, "-c", self.conf],
                                     stdin=subprocess.DEVNULL,
                                     stdout=err, stderr=err,
                                     start_new_session=True)
        err.close()
        self.wait_pong(self.start_timeout)

    def wait_pong(self, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise ClamdError(f"clamd exited with {self.proc.returncode}"
                                 f":\n{self.tail()}")
            if self.ping(timeout=2.0):
                return
            time.sleep(0.05)
        raise ClamdError(f"clamd did not answer PING in {timeout}s:\n"
                         f"{self.tail()}")

    def ping(self, timeout=5.0):
        try:
            return command(self.socket, b"zPING\0", timeout) == b"PONG\0"
        except OSError:
            return False

    def stop(self, timeout=30.0):
        """SIGTERM and wait.  Raises if clamd crashed on the way out or left
        a process behind."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise ClamdError("clamd ignored SIGTERM for "
                                 f"{timeout}s:\n{self.tail()}")
        leftovers = self.leftover_pids()
        if leftovers:
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise ClamdError(f"clamd left processes behind: {leftovers}")
        if proc.returncode not in (0, -signal.SIGTERM):
            raise ClamdError(f"clamd exited with {proc.returncode} on "
                             f"SIGTERM:\n{self.tail()}")

    def kill(self):
        """SIGKILL, as a crash would."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.kill()
        proc.wait()

    def restart(self):
        self.stop()
        self.start()

    def leftover_pids(self):
        """Processes still running clamd with our configuration file."""
        return pids_of(CLAMD, self.conf)

    def cleanup(self):
        """Stop clamd (killing it if it misbehaves) and remove workdir."""
        try:
            self.stop()
        finally:
            if self.proc is not None:
                self.kill()
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- commands --------------------------------------------------------
    def command(self, data, timeout=10.0, tcp=False, fds=None):
        addr = ("127.0.0.1", self.tcp_port) if tcp else self.socket
        return command(addr, data, timeout, fds)

    def reload(self, timeout=60.0):
        """RELOAD and wait until clamd reports the new database loaded."""
        before = self.log_text().count("Database correctly reloaded")
        reply = self.command(b"zRELOAD\0")
        if reply != b"RELOADING\0":
            raise ClamdError(f"RELOAD answered {reply!r}")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.log_text().count("Database correctly reloaded") > before:
                self.wait_pong()
                return
            time.sleep(0.05)
        raise ClamdError(f"reload did not finish:\n{self.tail()}")

    def add_signature(self, name, data, reload=True):
        """Detect `data` anywhere in a file (.ndb body signature)."""
        with open(os.path.join(self.db_dir, "extra.ndb"), "a") as f:
            f.write(f"{name}:0:*:{data.hex()}\n")
        if reload:
            self.reload()

    def add_realistic_database(self, hashes=500000, bodies=100000, seed=37):
        """Before start(): a database of the size and kind a scan pays for
        with Debian's real ones (their hash signatures, MD5 of whole files,
        and their body signatures, byte patterns searched in every file,
        a fifth of them with gaps), generated here so that nothing
        real-world is needed offline; none of them matches a file a test
        or benchmark writes, but EICAR's. Returns the number written."""
        rng = random.Random(seed)
        with open(os.path.join(self.db_dir, "bench.hdb"), "w") as f:
            for i in range(hashes):
                f.write("%032x:%d:Clamfs.Bench.Hash-%d\n" % (
                    rng.getrandbits(128), rng.randrange(64, 1 << 24), i))
        with open(os.path.join(self.db_dir, "bench.ndb"), "w") as f:
            for i in range(bodies):
                head = rng.getrandbits(8 * 12).to_bytes(12, "big").hex()
                tail = rng.getrandbits(8 * 8).to_bytes(8, "big").hex()
                body = head + tail if i % 5 else \
                    head + "{0-16}" + tail if i % 2 else head + "*" + tail
                f.write("Clamfs.Bench.Body-%d:0:*:%s\n" % (i, body))
        if self.user != "root":
            pw = pwd.getpwnam(self.user)
            for n in ("bench.hdb", "bench.ndb"):
                os.chown(os.path.join(self.db_dir, n), pw.pw_uid, pw.pw_gid)
        return hashes + bodies

    def add_hash_signature(self, name, data, reload=True):
        """Detect a file whose whole content is `data` (.hdb)."""
        with open(os.path.join(self.db_dir, "extra.hdb"), "a") as f:
            f.write(f"{hashlib.md5(data).hexdigest()}:{len(data)}:{name}\n")
        if reload:
            self.reload()

    # -- log -------------------------------------------------------------
    def _log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def scan_count(self):
        """Files clamd has scanned (LogClean logs clean ones too)."""
        n = 0
        for line in self.log_text().splitlines():
            if line.endswith(": OK") or line.endswith(" FOUND"):
                n += 1
        return n

    def wait_scan_count(self, expected, timeout=10.0):
        """clamd logs a scan just after replying: wait until the log shows
        `expected` scans, let stragglers land, and return the count (which
        may then exceed `expected` if clamd scanned more)."""
        end = time.monotonic() + timeout
        while self.scan_count() < expected and time.monotonic() < end:
            time.sleep(0.02)
        let_time_pass(0.1, "a scan more than expected would be logged "
                      "within this", scaled=True)
        return self.scan_count()

    def tail(self, n=30):
        text = self.log_text().splitlines()[-n:]
        try:
            with open(self._stderr_path, errors="replace") as f:
                text += f.read().splitlines()[-n:]
        except OSError:
            pass
        return "\n".join(text)
