# SPDX-License-Identifier: GPL-2.0-or-later
"""What the soak (bench/soak, issue 13) found, each as a minimal test.

A file deleted directly on the backend (not through the mount) after it
was opened through the mount keeps its inode in the kernel (FUSE was not
told of the unlink: nlink stays 1, so the unreferenced inode is not evicted
and no FORGET comes) and so clamfs keeps its O_PATH descriptor: the
daemon's fd count and the backend's space of deleted files grow with every
such deletion until memory pressure makes the kernel forget them. A share
whose backend is also cleaned from outside (a quarantine sweep, a mail
spool) slowly pins deleted files' space and descriptors."""
import os
import time

import pytest

from fsutil import SLOW


def daemon_fds(m):
    return len(os.listdir(f"/proc/{m.pid}/fd"))


@pytest.mark.xfail(strict=True, reason="issue 13 soak finding: inodes of "
                   "files deleted behind the mount keep their O_PATH fd "
                   "until the kernel forgets them (no FORGET without "
                   "memory pressure)")
def test_backend_deletions_release_fds(mount_clamfs, clamd):
    m = mount_clamfs(opts=[f"clamd={clamd.socket}"])
    for i in range(5):
        with open(m.b(f"warm{i}"), "wb") as f:
            f.write(b"clean")
        with open(m.m(f"warm{i}"), "rb") as f:
            f.read()
        os.unlink(m.b(f"warm{i}"))
    time.sleep(2 * SLOW)  # past entry_timeout: the names are looked up again
    for i in range(5):
        assert not os.path.exists(m.m(f"warm{i}"))
    before = daemon_fds(m)
    for i in range(100):
        with open(m.b(f"f{i}"), "wb") as f:
            f.write(b"clean")
        with open(m.m(f"f{i}"), "rb") as f:
            assert f.read() == b"clean"
        os.unlink(m.b(f"f{i}"))
    time.sleep(2 * SLOW)
    for i in range(100):
        assert not os.path.exists(m.m(f"f{i}"))
    after = daemon_fds(m)
    assert after - before < 10, f"daemon fds {before} -> {after}"
