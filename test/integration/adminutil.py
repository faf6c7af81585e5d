# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the operations tests (test_admin_*.py): clamfs started the
way an administrator starts it (`clamfs -f -o config=FILE` with nothing
else, from fstab through mount(8), under a systemd-style NOTIFY_SOCKET),
configuration files, signals and log lines.

- `admin` fixture: a factory of temporary directories and of clamfs runs
  from a full argv, in the foreground (start) or daemonized (start_bg);
  every mount is torn down and checked like mount_clamfs's (exit status
  0, no sanitizer report, nothing left).
- ini(): a configuration file from sections.
- run_fail(): a clamfs that must refuse to start.
- clamfs_pids(): clamfs processes whose argv holds a given string.
- NotifyListener: a systemd-like NOTIFY_SOCKET recording each datagram,
  its sender and whether the mount was up when it arrived.
The EICAR string is never written here: it comes from the clamd fixture.
"""
import os
import socket
import struct
import subprocess
import threading
import time

from clamfstest.env import SLOW, clamfs_bin
from clamfstest.env import sanitizer_env as asan_env
from clamfstest.mount import Mount, MountFactory, launch, wait_mounted
from clamfstest.mountinfo import mounted
from clamfstest.procs import pids_of
from clamfstest.wait import wait_for

__all__ = ["Admin", "ini", "run_fail", "clamfs_pids",
           "NotifyListener", "wait_log", "mounted", "asan_env"]


def ini(path, sections, raw_tail=""):
    """Writes an INI file: sections is a list of (name, [(key, value)]).
    Returns the path."""
    lines = ["; written by test_admin_*"]
    for name, items in sections:
        lines.append(f"[{name}]")
        for k, v in items:
            lines.append(f"{k} = {v}")
        lines.append("")
    text = "\n".join(lines) + "\n" + raw_tail
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)  # a reload never sees half a file
    return path


def clamfs_pids(token):
    """Pids of live clamfs processes with `token` among their arguments (or
    inside an -o list)."""
    return pids_of(clamfs_bin(), token, exact=False)


def wait_log(m, text, timeout=5, count=1):
    """Waits until the daemon's stderr holds `text` `count` times; returns
    the matching lines."""
    def matching():
        return [l for l in m.stderr_text().splitlines() if text in l]
    wait_for(lambda: len(matching()) >= count, timeout, 0.02)
    return matching()


def run_fail(argv, mnt=None, timeout=20, env=None):
    """Runs clamfs (argv without the binary) that must refuse to start and
    returns the CompletedProcess. If it mounted after all, unmounts it and
    fails the test."""
    full = [clamfs_bin()] + list(argv)
    p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        if mnt:
            subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        p.kill()
        out, err = p.communicate(timeout=30)
        raise AssertionError(f"{full} kept running although it must refuse "
                             f"to start:\n{err}")
    if mnt and mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        raise AssertionError(f"{full} exited {p.returncode} but mounted "
                             f"{mnt}:\n{err}")
    return subprocess.CompletedProcess(full, p.returncode, out, err)


class Admin(MountFactory):
    """Mounts started the way an administrator does (argv, INI, systemd,
    fstab); the directories and teardown are MountFactory's."""
    prefix = "clamfs-a"

    def dirs_bm(self):
        """(base, backend, mountpoint): fresh directories."""
        base = self.tempdir()
        b, m = os.path.join(base, "b"), os.path.join(base, "m")
        os.mkdir(b, 0o755)
        os.mkdir(m, 0o755)
        return base, b, m

    def start(self, args, mnt, backend=None, env_extra=None, wait=True,
              timeout=10):
        """Runs `clamfs ARGS` in the foreground (args must hold -f) and
        waits for the mount at mnt. Returns a clamfstest.mount.Mount."""
        env = dict(os.environ)
        env.update(env_extra or {})
        m = launch([clamfs_bin()] + list(args), backend, mnt,
                   self.tempdir("clamfs-w"), timeout, wait=False, env=env)
        self.mounts.append(m)
        if wait:
            self.wait_mounted(m, timeout)
        return m

    def start_bg(self, args, mnt, backend, token, cwd=None, timeout=20):
        """Runs `clamfs ARGS` without -f: it must return 0 with the mount
        up and leave one daemon, found by `token` in its argv. Sanitizer
        reports of the daemon go to files the teardown checks."""
        argv = [clamfs_bin()] + list(args)
        workdir = self.tempdir("clamfs-w")
        m = Mount(backend, mnt, argv, workdir, False)
        env = asan_env(m.san_prefix)
        r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, env=env, cwd=cwd,
                           timeout=timeout * SLOW)
        pids = clamfs_pids(token)
        m.pid = pids[0] if len(pids) == 1 else None
        self.mounts.append(m)
        assert r.returncode == 0, f"{argv} exited {r.returncode}: {r.stderr}"
        assert mounted(mnt), f"{argv} returned before the mount was up"
        assert m.pid, f"daemon of {token}: {pids}"
        return m

    def wait_mounted(self, m, timeout=10):
        return wait_mounted(m, timeout)


class NotifyListener:
    """A NOTIFY_SOCKET as systemd provides one: an AF_UNIX datagram socket
    with SO_PASSCRED. Each datagram is recorded as a dict: text, pid (the
    sender's, from SCM_CREDENTIALS), t (monotonic), and up: whether
    `watch_mnt` showed in /proc/self/mountinfo when it arrived."""

    def __init__(self, directory, watch_mnt=None):
        self.path = os.path.join(directory, "notify.sock")
        self.watch_mnt = watch_mnt
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        credsize = struct.calcsize("3i")
        while not self.stop.is_set():
            try:
                data, anc, _, _ = self.sock.recvmsg(
                    4096, socket.CMSG_SPACE(credsize))
            except socket.timeout:
                continue
            except OSError:
                return
            up = mounted(self.watch_mnt) if self.watch_mnt else None
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and \
                        kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", payload[:credsize])[0]
            with self.lock:
                self.messages.append({"text": data.decode(errors="replace"),
                                      "pid": pid, "t": time.monotonic(),
                                      "up": up})

    def with_field(self, field):
        """Messages holding the line `field` (e.g. "READY=1")."""
        with self.lock:
            return [m for m in self.messages
                    if field in m["text"].split("\n")]

    def wait_field(self, field, timeout=10, count=1):
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            got = self.with_field(field)
            if len(got) >= count:
                return got
            time.sleep(0.01)
        return self.with_field(field)

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
