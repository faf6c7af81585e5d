# SPDX-License-Identifier: GPL-2.0-or-later
"""A fault-injecting fake clamd for what a real one will not do on demand:
never answer, answer byte by byte, hang up mid-reply, send garbage or a
megabyte without a terminator, close a session just as it is reused.

It speaks enough of the protocol to be driven by clamdproto: NUL-framed
z-commands, IDSESSION numbering, INSTREAM chunks, FILDES descriptors.  The
reply to each scan is chosen by `behaviour`, a function (ctx) -> action:
  ("reply", text)        send "<id>: text\\0" (id only inside a session)
  ("raw", bytes)         send bytes verbatim
  ("bytewise", bytes, s) send bytes one at a time, s seconds apart
  ("close", bytes)       send bytes, then close the connection
  ("silent",)            never answer (keep the connection open)
ctx has .command (e.g. b"zFILDES"), .id, .nth (scan count on this
connection, from 1), .conn_no (connection count, from 1), .stream_len.
STATS (which clamfs sends to learn clamd's MaxThreads) is answered as a
clamd of `stats` threads would, without asking `behaviour`; with
stats=None it goes to `behaviour` like any other command.
"""
import fcntl
import os
import socket
import struct
import tempfile
import threading

from clamfstest.wait import let_time_pass


class Ctx:
    def __init__(self, command, id_, nth, conn_no, stream_len):
        self.command = command
        self.id = id_
        self.nth = nth
        self.conn_no = conn_no
        self.stream_len = stream_len


class FakeClamd:
    def __init__(self, behaviour, instream_early=None, stats=256):
        self.behaviour = behaviour
        self.stats = stats
        # Reply sent as soon as an INSTREAM starts, before reading its data.
        self.instream_early = instream_early
        self.dir = tempfile.mkdtemp(prefix="cfk", dir="/tmp")
        self.socket = os.path.join(self.dir, "fake.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.socket)
        self.srv.listen(64)
        self.connections = 0
        self.commands = []
        self.fildes_flags = []  # F_GETFL of each descriptor received
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.open_conns = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self):
        self.stop_ev.set()
        try:
            self.srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.srv.close()
        for c in list(self.open_conns):
            try:
                c.close()
            except OSError:
                pass
        self.thread.join(5)
        try:
            os.unlink(self.socket)
        except OSError:
            pass
        os.rmdir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _accept(self):
        while not self.stop_ev.is_set():
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                n = self.connections
            self.open_conns.append(c)
            threading.Thread(target=self._serve, args=(c, n),
                             daemon=True).start()

    @staticmethod
    def _recv_exact(c, n, buf):
        while len(buf) < n:
            b = c.recv(65536)
            if not b:
                raise EOFError
            buf += b
        return buf[:n], buf[n:]

    def _note_fds(self, fds):
        for fd in fds:
            with self.lock:
                self.fildes_flags.append(fcntl.fcntl(fd, fcntl.F_GETFL))
            os.close(fd)

    def _serve(self, c, conn_no):
        buf = b""
        session = False
        next_id = 1
        nth = 0
        try:
            while True:
                while b"\0" not in buf:
                    # a FILDES descriptor may come with the command bytes
                    b, fds, _, _ = socket.recv_fds(c, 65536, 4)
                    self._note_fds(fds)
                    if not b:
                        return
                    buf += b
                cmd, buf = buf.split(b"\0", 1)
                with self.lock:
                    self.commands.append(cmd)
                if cmd == b"zIDSESSION":
                    session = True
                    continue
                if cmd == b"zEND":
                    return
                id_ = next_id if session else None
                if session:
                    next_id += 1
                if cmd.endswith(b"STATS") and self.stats is not None:
                    prefix = f"{id_}: ".encode() if id_ is not None else b""
                    c.sendall(prefix + stats_reply(self.stats).encode() +
                              b"\0")
                    if not session:
                        return
                    continue
                stream_len = 0
                if cmd == b"zFILDES":
                    if not buf:
                        msg, fds, _, _ = socket.recv_fds(c, 1, 1)
                        self._note_fds(fds)
                    else:
                        buf = buf[1:]
                elif cmd == b"zINSTREAM":
                    if self.instream_early is not None:
                        c.sendall(self.instream_early)
                        let_time_pass(0.2, "the client reads the early "
                                      "reply before the hang-up")
                        return
                    while True:
                        hdr, buf = self._recv_exact(c, 4, buf)
                        (n,) = struct.unpack(">I", hdr)
                        if n == 0:
                            break
                        _, buf = self._recv_exact(c, n, buf)
                        stream_len += n
                nth += 1
                act = self.behaviour(Ctx(cmd, id_, nth, conn_no,
                                         stream_len))
                prefix = f"{id_}: ".encode() if id_ is not None else b""
                kind = act[0]
                if kind == "reply":
                    c.sendall(prefix + act[1].encode() + b"\0")
                elif kind == "raw":
                    c.sendall(act[1])
                elif kind == "bytewise":
                    for i in range(len(act[1])):
                        c.sendall(act[1][i:i + 1])
                        let_time_pass(act[2], "a reply one byte at a time")
                elif kind == "close":
                    if act[1]:
                        c.sendall(act[1])
                    return
                elif kind == "silent":
                    self.stop_ev.wait(120)
                    return
                if not session:
                    return
        except (EOFError, OSError):
            return
        finally:
            try:
                c.close()
            except OSError:
                pass


def versioned(db):
    """A behaviour: a clamd with database version db["version"] (read at
    each VERSION, so a test can change it) that finds every file clean.
    Custom signatures give a real clamd no database version."""
    def behaviour(ctx):
        if ctx.command.endswith(b"PING"):
            return ("reply", "PONG")
        if ctx.command.endswith(b"VERSION"):
            return ("reply", "ClamAV 1.4.6/%d/Mon Jan  1 00:00:00 2024"
                    % db["version"])
        what = "stream" if ctx.command.endswith(b"INSTREAM") else "fd[1]"
        return ("reply", f"{what}: OK")
    return behaviour


def stats_reply(max_threads, live=1, idle=0):
    """clamd 1.4.6's STATS text (without its NUL), threads as given."""
    return ("POOLS: 1\n\nSTATE: VALID PRIMARY\n"
            f"THREADS: live {live}  idle {idle} max {max_threads} "
            "idle-timeout 30\nQUEUE: 0 items\n\tSTATS 0.000005 \n\n"
            "MEMSTATS: heap N/A mmap N/A used N/A free N/A releasable N/A "
            "pools 1 pools_used 5.883M pools_total 5.964M\nEND")


class StallClamd:
    """A clamd wedged in its scans (or behind an MTU black hole, or a
    middlebox that drops streams): PING, VERSION and STATS are answered at
    once, scans (FILDES, INSTREAM) are swallowed while .swallow is set and
    answered OK once it is cleared. .scans counts the scan commands,
    .answered those that got a verdict."""

    def __init__(self, max_threads=12):
        self.swallow = True
        self.max_threads = max_threads
        self.lock = threading.Lock()
        self.scans = 0
        self.answered = 0
        self.fake = FakeClamd(self._behaviour, stats=max_threads)
        self.socket = self.fake.socket

    def _behaviour(self, ctx):
        if ctx.command.endswith(b"PING"):
            return ("reply", "PONG")
        if ctx.command.endswith(b"VERSION"):
            return ("reply", "ClamAV 1.4.6")
        with self.lock:
            self.scans += 1
        if self.swallow:
            return ("silent",)
        with self.lock:
            self.answered += 1
        what = "stream" if ctx.command.endswith(b"INSTREAM") else "fd[1]"
        return ("reply", f"{what}: OK")

    def close(self):
        self.fake.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
