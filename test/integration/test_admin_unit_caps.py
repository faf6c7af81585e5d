# SPDX-License-Identifier: GPL-2.0-or-later
# The shipped unit's CapabilityBoundingSet is all the daemon has under
# systemd: run it with exactly that set and check that what needs a
# capability still works, where the tests' own root would hide a missing
# one. The writer probe takes a read lease on files root does not own,
# which needs CAP_LEASE: without it no verdict would ever be cached.
import ctypes
import os
import re

import pytest

from scanutil import delta, mount_scan, stats

TOP = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CAPS = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID",
        "KILL", "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
        "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT",
        "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
        "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE",
        "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE",
        "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
        "PERFMON", "BPF", "CHECKPOINT_RESTORE"]  # linux/capability.h order
PR_CAPBSET_DROP = 24


def unit_caps():
    with open(os.path.join(TOP, "etc", "clamfs@.service.in")) as f:
        m = re.search(r"^CapabilityBoundingSet=(.*)$", f.read(), re.M)
    names = m.group(1).split()
    assert all(n.startswith("CAP_") and n[4:] in CAPS for n in names), names
    return {n[4:] for n in names}


def bounded_to(keep):
    """A preexec_fn: the child keeps only these capabilities (root's
    permitted set after exec is its bounding set)."""
    def drop():
        libc = ctypes.CDLL(None, use_errno=True)
        for i, name in enumerate(CAPS):
            if name not in keep:
                libc.prctl(PR_CAPBSET_DROP, i, 0, 0, 0)
    return drop


@pytest.mark.parametrize("caps", ["unit", "unit-without-lease"])
def test_unit_capabilities_cache_verdicts(mount_clamfs, clamd, caps):
    keep = unit_caps()
    if caps == "unit-without-lease":
        keep.discard("LEASE")
    m = mount_scan(mount_clamfs, clamd, preexec_fn=bounded_to(keep))
    # a user's file: root may take a lease on it only with CAP_LEASE
    path = m.b("users-file")
    with open(path, "wb") as f:
        f.write(b"u" * 100)
    os.chown(path, 60001, 60001)
    s0 = stats(m.mnt)
    for _ in range(3):
        with open(m.m("users-file"), "rb") as f:
            assert f.read() == b"u" * 100
    d = delta(s0, stats(m.mnt), "scans", "scans_joined", "opens_cache_hit")
    warned = "cannot tell whether a backend file has writers" in \
        m.stderr_text()
    if caps == "unit":
        assert d == {"scans": 1, "scans_joined": 0, "opens_cache_hit": 2}, d
        assert not warned, m.stderr_text()
    else:
        # the control: what the unit would do without CAP_LEASE. No
        # verdict is kept, so every open is scanned; one that comes while
        # the previous open's scan is still in the queue (answered, not
        # yet gone: a loaded machine) joins it instead, by design
        # (scanq.h's single flight)
        assert d["opens_cache_hit"] == 0, d
        assert d["scans"] >= 1 and d["scans"] + d["scans_joined"] == 3, d
        assert warned
