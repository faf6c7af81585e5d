# SPDX-License-Identifier: GPL-2.0-or-later
# scan_mode=path used to hand clamd a name, and the directories on a name
# in a share belong to its users. A user who owns a directory on the path
# swaps it (renameat2 RENAME_EXCHANGE) with one holding a symlink while
# another user reads through the mount: clamd, given the old name, scanned
# the symlink (it skips symlinks and answers OK), and a stat() that
# followed links found the opened file there again: EICAR was served. Now
# path mode sends the opened file, as fdpass and stream do.
import os
import subprocess
import sys
import textwrap

import pytest

from clamfstest.env import SLOW
from fsutil import (GID_A, GID_B, UID_A, UID_B, run_as, setpriv_prefix,
                    share_of)
from scanutil import mount_scan, stats

# The attacker: exchanges directories x and y of its share, as fast as it
# can, until stdin closes.
SWAPPER = textwrap.dedent("""
    import ctypes, os, sys, threading
    libc = ctypes.CDLL(None, use_errno=True)
    RENAME_EXCHANGE = 2
    share = sys.argv[1].encode()
    stop = []
    threading.Thread(target=lambda: (sys.stdin.read(), stop.append(1)),
                     daemon=True).start()
    n = 0
    print("swapping", flush=True)
    while not stop:
        if libc.renameat2(-100, share + b"/x", -100, share + b"/y",
                          RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: %d" % ctypes.get_errno())
        n += 1
    print(n, flush=True)
""")

# The victim: reads x/f and y/f in turn through the mount; counts what
# it got. Both names reach the EICAR file whichever way round x and y are.
VICTIM = """
    import time
    got = {"eicar": 0, "clean": 0, "errors": {}}
    end = time.monotonic() + ARGS["seconds"]
    eicar = bytes.fromhex(ARGS["eicar"])
    while time.monotonic() < end:
        for d in ("x", "y"):
            try:
                with open(P("share/%s/f" % d), "rb") as f:
                    data = f.read()
                got["eicar" if data == eicar else "clean"] += 1
            except OSError as e:
                k = errno.errorcode.get(e.errno, str(e.errno))
                got["errors"][k] = got["errors"].get(k, 0) + 1
    emit(got)
"""


@pytest.fixture
def share(mount_clamfs):
    """A backend whose `share` directory belongs to the attacker."""
    return share_of(mount_clamfs.tempdir("clamfs-ps"))


def plant(backend, eicar):
    """x/f is the EICAR file; y/f a symlink that reaches it while y and x
    have swapped names (and loops otherwise)."""
    share = os.path.join(backend, "share")
    for d in ("x", "y"):
        os.mkdir(os.path.join(share, d))
    with open(os.path.join(share, "x", "f"), "wb") as f:
        f.write(eicar)
    os.symlink("../y/f", os.path.join(share, "y", "f"))
    for p in ("x", "y", "x/f", "y/f"):
        os.lchown(os.path.join(share, p), UID_A, GID_A)


def test_swapped_directories_never_serve_eicar(mount_clamfs, clamd, share):
    m = mount_scan(mount_clamfs, clamd, "scan_mode=path", "cache_ttl=0",
                   backend=share)
    plant(share, clamd.eicar)
    swapper = subprocess.Popen(
        setpriv_prefix(UID_A, GID_A) + [
            sys.executable, "-c", SWAPPER, os.path.join(share, "share")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout.readline().strip() == "swapping"
        got = run_as(UID_B, GID_B, [], VICTIM, m.mnt,
                     {"seconds": 4 * SLOW, "eicar": clamd.eicar.hex()},
                     timeout=120)
    finally:
        swapper.stdin.close()
        swapper.wait(timeout=10 * SLOW)
    swaps = int(swapper.stdout.read().strip() or 0)
    assert swapper.returncode == 0 and swaps > 100
    assert got["eicar"] == 0, got
    assert got["clean"] == 0, got  # every byte read was refused
    # refused as infected (or the name led nowhere), never failed: clamd
    # saw the opened file each time
    assert set(got["errors"]) <= {"EACCES", "ELOOP", "ENOENT"}, got
    assert got["errors"].get("EACCES", 0) > 0, got
    assert stats(m.mnt)["opens_error_denied"] == 0
    assert "scan_mode=path: clamd is sent the opened file" in \
        m.stderr_text()
