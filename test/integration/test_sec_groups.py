# SPDX-License-Identifier: GPL-2.0-or-later
# A caller's supplementary groups cost a read of its /proc status file,
# and file servers (smbd, NFS) make every request as the connected user.
# They are read only where a permission check may need them: a call is
# first made without them only on objects whose group class has every
# right their other class has, with no ACL, on a local filesystem, so
# that leaving them out can only deny (and the call is then made again
# with them). Proven here from both sides: the ordinary work of a user
# reads no groups, and everything the groups deny or grant still is,
# at once, for users whose groups change while they work.
import os
import struct

import pytest

from fsutil import GID_A, GID_B, GID_SHARED, UID_A, UID_B, run_as, run_py
from scanutil import delta, mount_scan, put, stats

WORK = """
out = {}
d = P("work")
os.mkdir(d)
for i in range(5):
    p = os.path.join(d, "f%d" % i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"content %d" % i)
    os.close(fd)
    os.setxattr(p, "user.DOSATTRIB", b"as smbd keeps it")
for i in range(5):
    p = os.path.join(d, "f%d" % i)
    with open(p, "r+b") as f:
        out[p] = f.read().decode()
    os.stat(p)
for i in range(5):
    os.unlink(os.path.join(d, "f%d" % i))
os.rmdir(d)
emit(out)
"""


@pytest.fixture
def m(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    os.chmod(m.backend, 0o777)
    return m


def test_ordinary_work_reads_no_groups(m):
    """The finding of issue 37: every request of a non-root caller read
    its groups from /proc. Creating, setting a user.* attribute, opening
    read-write, reading, looking up and removing files in the user's own
    directory reads none, nor does reading another user's file whose
    group bits give what its other bits give."""
    os.chown(m.backend, UID_A, GID_A)
    os.chmod(m.backend, 0o755)
    put(m.b("theirs"), b"anybody may read")
    os.chmod(m.b("theirs"), 0o644)
    s0 = stats(m.mnt)
    r = run_as(UID_A, GID_A, [GID_SHARED], WORK, m.mnt)
    assert sorted(r.values()) == ["content %d" % i for i in range(5)]
    r = run_as(UID_A, GID_A, [GID_SHARED], READ, m.mnt,
               {"names": ["theirs"]})
    assert r == {"theirs": ["ok", "anybody may read"]}
    assert delta(s0, stats(m.mnt), "caller_groups_read") == {
        "caller_groups_read": 0}
    # a name made in a directory of another's, judged as other: the
    # groups are read (a chmod meanwhile could grant a member more)
    os.chown(m.backend, 0, 0)
    os.chmod(m.backend, 0o777)
    code = 'os.mkdir(P("mine")); emit(1)'
    assert run_as(UID_A, GID_A, [GID_SHARED], code, m.mnt) == 1
    assert delta(s0, stats(m.mnt), "caller_groups_read")[
        "caller_groups_read"] >= 1


READ = """
def rd(p):
    with open(p, "rb") as f:
        return f.read().decode()
emit({n: outcome(rd, P(n)) for n in ARGS["names"]})
"""


def acl_denying_group(gid):
    """A system.posix_acl_access value: owner rw, owning group r, the
    named group gid nothing, mask r, others r."""
    entries = [(0x01, 6, 0xffffffff), (0x04, 4, 0xffffffff), (0x08, 0, gid),
               (0x10, 4, 0xffffffff), (0x20, 4, 0xffffffff)]
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", t, p, i) for t, p, i in entries)


def test_what_a_group_denies_stays_denied(m):
    """Natively a member of a file's group gets the group's bits, which
    here give less than others get (0604), or an ACL denies the member's
    group by name: both are refused through the mount, as natively."""
    put(m.b("mode0604"), b"others may read")
    os.chown(m.b("mode0604"), 0, GID_SHARED)
    os.chmod(m.b("mode0604"), 0o604)
    put(m.b("acl"), b"an ACL denies the shared group")
    os.chmod(m.b("acl"), 0o644)
    os.setxattr(m.b("acl"), "system.posix_acl_access",
                acl_denying_group(GID_SHARED))
    names = {"names": ["mode0604", "acl"]}
    member = run_as(UID_A, GID_A, [GID_SHARED], READ, m.mnt, names)
    assert member == run_as(UID_A, GID_A, [GID_SHARED], READ, m.backend,
                            names)
    assert member == {"mode0604": ["err", "EACCES"],
                      "acl": ["err", "EACCES"]}
    # and a non-member reads both, as natively
    other = run_as(UID_B, GID_B, [], READ, m.mnt, names)
    assert other["mode0604"][0] == "ok" and other["acl"][0] == "ok"


def test_what_a_group_grants_is_granted(m):
    """A file and a directory only the shared group may use: a member
    reads the file, and creates and removes files in the directory."""
    put(m.b("team", "doc"), b"for the team")
    os.chown(m.b("team"), 0, GID_SHARED)
    os.chmod(m.b("team"), 0o770)
    os.chown(m.b("team", "doc"), 0, GID_SHARED)
    os.chmod(m.b("team", "doc"), 0o660)
    code = """
def rw(p):
    with open(p, "r+b") as f:
        return f.read().decode()
def mk():
    fd = os.open(P("team/new"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    os.close(fd)
    return os.stat(P("team/new")).st_gid
emit({"rw": outcome(rw, P("team/doc")), "create": outcome(mk),
      "unlink": outcome(os.unlink, P("team/new")),
      "mkdir": outcome(os.mkdir, P("team/sub")),
      "rmdir": outcome(os.rmdir, P("team/sub"))})
"""
    r = run_as(UID_A, GID_A, [GID_SHARED], code, m.mnt)
    assert r == {"rw": ["ok", "for the team"], "create": ["ok", GID_A],
                 "unlink": ["ok", None], "mkdir": ["ok", None],
                 "rmdir": ["ok", None]}, r
    outsider = run_as(UID_B, GID_B, [], code, m.mnt)
    assert all(v == ["err", "EACCES"] for v in outsider.values()), outsider


# One process changing its groups between calls, as smbd does for each
# connected user: as root it takes the groups it is told, then acts as
# UID_A through its effective ids (FUSE sees the fsuid), and so on.
SWITCHER = """
import json, os, sys
path, script = sys.argv[1], json.loads(sys.argv[2])
out = []
for groups in script:
    os.seteuid(0)
    os.setgroups(groups)
    os.setegid(%d)
    os.seteuid(%d)
    try:
        with open(path, "rb") as f:
            out.append(f.read().decode())
    except OSError as e:
        out.append(e.errno)
os.seteuid(0)
print(json.dumps(out))
""" % (GID_A, UID_A)


def test_groups_that_change_while_a_user_works(m):
    """Left the group: refused at the very next open; back in it:
    granted at once. Nothing about the groups is remembered between
    requests."""
    put(m.b("g"), b"group only")
    os.chown(m.b("g"), 0, GID_SHARED)
    os.chmod(m.b("g"), 0o640)
    script = [[GID_SHARED], [], [GID_SHARED], [], [], [GID_SHARED]]
    import json
    r = run_py(SWITCHER, [m.m("g"), json.dumps(script)])
    got = json.loads(r.stdout)
    assert got == ["group only", 13, "group only", 13, 13, "group only"]


def test_a_file_made_behind_a_create_is_judged_with_the_groups(
        mount_clamfs, clamd):
    """The kernel sends CREATE for a name it believes absent (here a
    cached miss); the backend may have the file by then, made by another
    user with a mode whose group bits deny its group. The create opens
    that file as an open would: its group member is refused, not judged
    as one of the others."""
    m = mount_scan(mount_clamfs, clamd, "negative_timeout=60")
    os.chmod(m.backend, 0o777)
    assert not os.path.exists(m.m("late"))  # the miss, cached
    put(m.b("late"), b"others may read, the group may not")
    os.chown(m.b("late"), 0, GID_SHARED)
    os.chmod(m.b("late"), 0o604)
    code = """
emit(outcome(lambda: os.close(os.open(P("late"), os.O_RDONLY | os.O_CREAT,
                                      0o644))))
"""
    s0 = stats(m.mnt)
    assert run_as(UID_A, GID_A, [GID_SHARED], code, m.mnt) == \
        ["err", "EACCES"]
    # (it was a CREATE: the groups were read once the file was seen)
    assert delta(s0, stats(m.mnt), "caller_groups_read") == {
        "caller_groups_read": 1}
    assert run_as(UID_A, GID_A, [GID_SHARED], code, m.backend) == \
        ["err", "EACCES"]
