# SPDX-License-Identifier: GPL-2.0-or-later
# File capabilities (security.capability) through the mount. The kernel asks
# for this attribute before every write, and clamfs answers that one name
# without taking on the caller's identity: whoever asks, through the mount,
# must get exactly what the backend holds, and a write must still drop the
# capability as it does natively.
import os

import pytest

from fsutil import GID_A, GID_SHARED, UID_A, UID_B, Twin, run_as, summarize

pytestmark = pytest.mark.usefixtures("session_clamd_opts")

USER_A = (UID_A, GID_A, [GID_SHARED])
CAP = "security.capability"


def _with_cap(r, name="f", mode=0o666, owner=UID_B):
    p = os.path.join(r, name)
    with open(p, "wb") as f:
        f.write(b"x")
    os.chown(p, owner, owner)
    os.chmod(p, mode)
    # a v2 capability: cap_net_raw in permitted, effective bit set
    value = (0x02000001).to_bytes(4, "little") + (1 << 13).to_bytes(4, "little")
    value += bytes(12)
    os.setxattr(p, CAP, value)
    return p


def _same(fs, user, code, setup):
    tw = Twin(fs)
    setup(tw.nat)
    setup(tw.bvia)
    if user is None:
        n = summarize(run_as(0, 0, [0], code, tw.nat))
        v = summarize(run_as(0, 0, [0], code, tw.via))
    else:
        uid, gid, groups = user
        n = summarize(run_as(uid, gid, groups, code, tw.nat))
        v = summarize(run_as(uid, gid, groups, code, tw.via))
    assert v == n, f"mount: {v}\nbackend: {n}"
    tw.check()
    return v


READ = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
size = libc.getxattr(P("f").encode(), b"security.capability", None, 0)
out = [size if size >= 0 else errno.errorcode[ctypes.get_errno()]]
out.append(outcome(lambda: os.getxattr(P("f"), "security.capability").hex()))
out.append(outcome(lambda: os.getxattr(P("plain"), "security.capability").hex()))
emit(out)
"""


def _setup_read(r):
    _with_cap(r, mode=0o644)
    with open(os.path.join(r, "plain"), "wb") as f:
        f.write(b"y")


@pytest.mark.parametrize("user", [USER_A, None], ids=["user", "root"])
def test_capability_read_as_backend(fs, user):
    """Size query, value and absence of security.capability are the
    backend's, for another user's file and for root."""
    v = _same(fs, user, READ, _setup_read)
    assert v[0] == 20 and v[1][0] == "ok" and v[2] == ["err", "ENODATA"]


WRITE = r"""
out = [outcome(lambda: os.getxattr(P("f"), "security.capability").hex())]
fd = os.open(P("f"), os.O_WRONLY | os.O_APPEND)
out.append(outcome(os.write, fd, b"A"))
out.append(outcome(lambda: os.getxattr(P("f"), "security.capability").hex()))
out.append(outcome(os.write, fd, b"B"))
os.close(fd)
out.append(outcome(lambda: open(P("f"), "rb").read().decode()))
emit(out)
"""


@pytest.mark.parametrize("user", [USER_A, None], ids=["user", "root"])
def test_write_drops_capability(fs, user):
    """A write drops the file's capability, as natively, and a read of it
    right after sees it gone."""
    v = _same(fs, user, WRITE, _with_cap)
    assert v[0][0] == "ok" and v[1] == ["ok", 1]
    assert v[2] == ["err", "ENODATA"] and v[4] == ["ok", "xAB"]
