# SPDX-License-Identifier: GPL-2.0-or-later
"""Processes by program and argument, from /proc."""
import os
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
