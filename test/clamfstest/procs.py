# SPDX-License-Identifier: GPL-2.0-or-later
"""Processes by program and argument, from /proc."""
import os
import subprocess
import time

from .env import SLOW


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def pid_alive(pid):
    """Running (not gone, not a zombie)."""
    try:
        return _state(pid) != "Z"
    except OSError:
        return False


def pids_of(binary, token, exact=True):
    """Live pids of processes running binary (also when deleted since)
    with token among their arguments: an argument equal to it (exact), or
    holding it, e.g. inside an -o list (exact=False)."""
    real = os.path.realpath(binary)
    tok = os.fsencode(token)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{d}/exe").replace(" (deleted)", "")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            state = _state(d)
        except OSError:
            continue
        if exe != real or state == "Z":
            continue
        if any(tok == a or (not exact and tok in a) for a in argv[1:]):
            out.append(int(d))
    return out


def wait_gone(pid, timeout=15):
    """Waits until pid has exited (or is a zombie); raises on timeout."""
    deadline = time.monotonic() + timeout * SLOW
    while pid_alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still running {timeout}s "
                                 "later")
        time.sleep(0.02)


def proc_status(pid):
    """/proc/PID/status as {field: text}."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def threads(pid):
    return int(proc_status(pid).get("Threads", 0))


def children(pid):
    """The pids of pid's children, of every thread, zombies included (a
    child is gone from the list once its parent reaped it)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return out


def stacks(pid, timeout=60):
    """Every thread's stack of a live process, as text for a report: the
    kernel's (/proc/PID/task/*/stack: where a thread waits in a syscall)
    and the user-space one from gdb, when gdb is installed. For a daemon
    that does not exit: without it, a hang leaves nothing to read."""
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as e:
        return f"no stacks of {pid}: {e}"
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stack") as f:
                kstack = f.read().rstrip()
        except OSError as e:
            comm, kstack = "?", str(e)
        out.append(f"--- thread {tid} ({comm}), kernel stack:\n{kstack}")
    try:
        r = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid),
                            "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=timeout)
        out.append("--- gdb, thread apply all bt:\n" + r.stdout + r.stderr)
    except (OSError, subprocess.TimeoutExpired) as e:
        out.append(f"--- gdb: {e}")
    return "\n".join(out)
