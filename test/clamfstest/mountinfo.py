# SPDX-License-Identifier: GPL-2.0-or-later
"""What is mounted where, from /proc/self/mountinfo."""
import os
import re


def _unescape(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


class MountEntry:
    """One line of mountinfo: mount_id, mountpoint, mount_opts, fstype,
    source, super_opts, dev ("major:minor"), minor (the device minor, which
    names the FUSE connection under /sys/fs/fuse/connections)."""

    def __init__(self, line):
        parts = line.split()
        sep = parts.index("-")
        self.mount_id = int(parts[0])
        self.dev = parts[2]
        self.minor = int(parts[2].split(":")[1])
        self.mountpoint = _unescape(parts[4])
        self.mount_opts = parts[5].split(",")
        self.fstype = parts[sep + 1]
        self.source = _unescape(parts[sep + 2])
        self.super_opts = parts[sep + 3].split(",") \
            if len(parts) > sep + 3 else []

    def __repr__(self):
        return (f"<{self.source} on {self.mountpoint} type {self.fstype} "
                f"({','.join(self.mount_opts)}; {','.join(self.super_opts)})>")


# A new mount namespace starts with a copy of every mount of its maker's,
# and here (no shared mounts: systemd is not PID 1) no propagation mode makes
# the copies follow the host's unmounts. A copied FUSE mount keeps its
# connection alive, and its daemon serves on after `fusermount3 -u` on the
# host (the soak's "hung at exit" of 2026-12-01, while CI's Debian 13 lane
# ran). Every mount namespace the tests make comes from
# scripts/new-mount-namespace, which drops those copies: argv prefix.
UNSHARE_MOUNT = (os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "scripts", "new-mount-namespace"),)


def mounts(pid="self"):
    with open(f"/proc/{pid}/mountinfo") as f:
        return [MountEntry(l) for l in f if l.strip()]


def holders(dev):
    """Why a FUSE daemon lives on after its unmount: [(pid, comm,
    mountpoint)] of one process per other mount namespace that still has a
    mount of device dev ("major:minor", MountEntry.dev)."""
    mine = os.stat("/proc/self/ns/mnt").st_ino
    seen = {mine}
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ns = os.stat(f"/proc/{d}/ns/mnt").st_ino
            if ns in seen:
                continue
            seen.add(ns)
            held = [m for m in mounts(d) if m.dev == dev]
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        out += [(int(d), comm, m.mountpoint) for m in held[:1]]
    return out


def mounts_at(path):
    """Every mount (of any type) stacked on path."""
    path = os.path.abspath(path)
    return [m for m in mounts() if m.mountpoint == path]


def fuse_mounts_at(path):
    """The FUSE mounts stacked on path."""
    # abspath, not realpath: realpath would lstat the mountpoint, i.e. send
    # the new mount a GETATTR and fill the kernel's attribute cache.
    return [m for m in mounts_at(path) if m.fstype.startswith("fuse")]


def mounted(path):
    """Whether a FUSE filesystem is mounted on path."""
    return bool(fuse_mounts_at(path))
