# SPDX-License-Identifier: GPL-2.0-or-later
# Two unprivileged users (60001, 60002; supplementary group 60010) through an
# allow_other mount run by root: every request runs as the caller, so each
# user gets exactly the backend's answer (same errno), owns what it creates,
# and setgid directories, sticky directories and POSIX ACLs behave as on the
# backend. Each scenario runs once directly in the backend and once through
# the mount, as the same user, and the outcomes and trees are compared.
import os
import threading

import pytest

from clamfstest.acl import setfacl
from fsutil import (GID_A, GID_B, GID_OTHER, GID_SHARED, UID_A, UID_B, Twin,
                    run_as, summarize)

# Mirror tests run with scanning on, against the private clamd.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")

USER_A = (UID_A, GID_A, [GID_SHARED])
USER_A_NOGROUPS = (UID_A, GID_A, [])
USER_B = (UID_B, GID_B, [GID_SHARED])


def build_tree(r):
    """The same starting tree, made by root directly in the backend."""
    J = lambda *p: os.path.join(r, *p)

    def mk(p, mode, uid, gid):
        os.mkdir(J(p))
        os.chown(J(p), uid, gid)
        os.chmod(J(p), mode)

    def fl(p, mode, uid, gid, data=b"data"):
        with open(J(p), "wb") as f:
            f.write(data)
        os.chown(J(p), uid, gid)
        os.chmod(J(p), mode)
    mk("shared", 0o770, 0, GID_SHARED)
    fl("shared/f", 0o660, 0, GID_SHARED, b"shared file")
    mk("ownA", 0o700, UID_A, GID_A)
    fl("ownA/secret", 0o600, UID_A, GID_A, b"A's secret")
    mk("ownB", 0o755, UID_B, GID_B)
    fl("ownB/readable", 0o644, UID_B, GID_B, b"B readable")
    fl("ownB/private", 0o600, UID_B, GID_B, b"B private")
    fl("ownB/grp", 0o640, UID_B, GID_SHARED, b"group readable")
    fl("ownB/nogrp", 0o604, 0, GID_SHARED, b"others yes, group no")
    fl("ownB/other", 0o640, UID_B, GID_OTHER, b"group other")
    with open("/bin/true", "rb") as f:
        fl("ownB/exec", 0o711, UID_B, GID_B, f.read())  # execute-only binary
    mk("xonly", 0o711, 0, 0)
    fl("xonly/known", 0o644, 0, 0, b"known name")
    mk("sticky", 0o1777, 0, 0)
    fl("sticky/root_owned", 0o666, 0, 0)
    mk("sgid", 0o2775, 0, GID_SHARED)
    mk("acl", 0o750, 0, 0)
    setfacl("-m", f"u:{UID_A}:rwx", J("acl"))
    setfacl("-d", "-m", f"u:{UID_A}:rwx,u:{UID_B}:r-x,g::r-x,o::---", J("acl"))
    fl("acl/f", 0o640, 0, 0, b"acl file")
    setfacl("-m", f"u:{UID_B}:rw", J("acl/f"))
    fl("suid", 0o6777, UID_B, GID_SHARED, b"setuid file")
    mk("open", 0o777, 0, 0)
    fl("open/xattrs", 0o644, 0, 0)
    os.setxattr(J("open/xattrs"), "user.u", b"user value")
    os.setxattr(J("open/xattrs"), "trusted.t", b"root only")
    fl("open/xw", 0o666, UID_B, GID_B)
    os.setxattr(J("open/xw"), "user.w", b"w")


# The snippet every user runs: a list of [op, args...] on paths relative to
# ROOT; the outcome of each, with the resulting owner/mode where relevant.
OPS_SNIPPET = r"""
import fcntl
def st(p):
    s = os.lstat(P(p))
    return [s.st_uid, s.st_gid, oct(s.st_mode)]
def w(p, data, flags=os.O_WRONLY):
    fd = os.open(P(p), flags)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)
def rd(p):
    with open(P(p), "rb") as f:
        return f.read().decode("latin1")
def create(p, mode):
    os.close(os.open(P(p), os.O_CREAT | os.O_EXCL | os.O_WRONLY, int(mode, 8)))
    return st(p)
def mkdir(p, mode):
    os.mkdir(P(p), int(mode, 8))
    return st(p)
def chmod(p, mode):
    os.chmod(P(p), int(mode, 8))
    return st(p)
def chown(p, u, g):
    os.chown(P(p), u, g)
    return st(p)
def listdir(p):
    return sorted(os.listdir(P(p)))
def run_file(p):
    import subprocess
    return subprocess.run([P(p)], capture_output=True).returncode
def flock(p):
    fd = os.open(P(p), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)
def access(p):
    return [os.access(P(p), m) for m in (os.F_OK, os.R_OK, os.W_OK, os.X_OK)]
OPS = {
    "read": rd,
    "write": lambda p, d: w(p, d),
    "append": lambda p, d: (w(p, d, os.O_WRONLY | os.O_APPEND), st(p))[1],
    "trunc_open": lambda p: w(p, "", os.O_WRONLY | os.O_TRUNC),
    "truncate": lambda p, n: os.truncate(P(p), n),
    "create": create,
    "mkdir": mkdir,
    "mkfifo": lambda p: (os.mkfifo(P(p), 0o666), st(p))[1],
    "mknod_chr": lambda p: os.mknod(P(p), 0o20600, os.makedev(1, 3)),
    "unlink": lambda p: os.unlink(P(p)),
    "rmdir": lambda p: os.rmdir(P(p)),
    "rename": lambda a, b: os.rename(P(a), P(b)),
    "link": lambda a, b: os.link(P(a), P(b)),
    "symlink": lambda t, p: (os.symlink(t, P(p)), st(p))[1],
    "chmod": chmod,
    "chown": chown,
    "utime_now": lambda p: os.utime(P(p)),
    "utime_set": lambda p: os.utime(P(p), ns=(10**9, 2 * 10**9)),
    "listdir": listdir,
    "stat": st,
    "access": access,
    "setxattr": lambda p, n, v: os.setxattr(P(p), n, v.encode()),
    "getxattr": lambda p, n: os.getxattr(P(p), n).decode("latin1"),
    "listxattr": lambda p: sorted(os.listxattr(P(p))),
    "removexattr": lambda p, n: os.removexattr(P(p), n),
    "exec": run_file,
    "flock": flock,
}
emit([[op] + list(a) + [outcome(OPS[op], *a)] for op, *a in ARGS["ops"]])
"""

SCENARIO_A = [
    ("read", "shared/f"), ("write", "shared/f", "by A"), ("read", "shared/f"),
    ("create", "shared/a_file", "666"), ("create", "shared/a_file", "666"),
    ("read", "ownB/readable"), ("write", "ownB/readable", "x"),
    ("read", "ownB/private"), ("read", "ownB/grp"), ("write", "ownB/grp", "x"),
    ("read", "ownB/nogrp"), ("read", "ownB/other"), ("read", "ownA/secret"),
    ("listdir", "ownA"), ("listdir", "ownB"), ("create", "ownB/x", "644"),
    ("mkdir", "ownB/d", "755"), ("unlink", "ownB/readable"),
    ("rename", "ownB/readable", "open/stolen"),
    ("chmod", "ownB/readable", "777"), ("chown", "ownB/readable", UID_A, -1),
    ("chown", "shared/a_file", -1, GID_SHARED), ("chown", "shared/a_file", -1, GID_B),
    ("chown", "shared/a_file", UID_B, -1), ("chown", "shared/a_file", -1, -1),
    ("truncate", "ownB/readable", 0), ("trunc_open", "ownB/readable"),
    ("truncate", "shared/f", 2), ("utime_now", "shared/f"), ("utime_set", "shared/f"),
    ("utime_set", "shared/a_file"), ("utime_now", "ownB/readable"),
    ("listdir", "xonly"), ("read", "xonly/known"), ("stat", "xonly/known"),
    ("create", "xonly/new", "644"),
    ("create", "sticky/a", "644"), ("unlink", "sticky/root_owned"),
    ("write", "sticky/root_owned", "ok"),
    ("create", "sgid/f", "666"), ("mkdir", "sgid/d", "777"), ("create", "sgid/d/g", "640"),
    ("mkdir", "sgid/d/e", "700"),
    ("chmod", "sgid/f", "2755"),
    ("listdir", "acl"), ("create", "acl/newA", "666"), ("mkdir", "acl/dirA", "777"),
    ("create", "acl/dirA/deep", "600"), ("read", "acl/f"),
    ("append", "suid", "A was here"),
    ("setxattr", "shared/f", "user.byA", "a"), ("getxattr", "shared/f", "user.byA"),
    ("setxattr", "ownB/readable", "user.x", "x"), ("getxattr", "open/xattrs", "user.u"),
    ("getxattr", "open/xattrs", "trusted.t"), ("listxattr", "open/xattrs"),
    ("setxattr", "open/xattrs", "trusted.x", "x"), ("setxattr", "open/xw", "user.w2", "v"),
    ("removexattr", "open/xw", "user.w"), ("setxattr", "open/xattrs", "user.v", "v"),
    ("mkfifo", "open/fifoA"), ("mknod_chr", "open/chrA"),
    ("link", "ownB/private", "open/hl_private"), ("link", "shared/f", "open/hl_shared"),
    ("link", "open/xw", "open/hl_xw"),
    ("symlink", "ownA/secret", "open/symA"), ("read", "open/symA"),
    ("rename", "shared/a_file", "open/a_moved"), ("stat", "open/a_moved"),
    ("create", "open/g", "644"), ("chmod", "open/g", "2755"), ("chown", "open/g", -1, GID_SHARED),
    ("chmod", "open/g", "6755"),
    ("access", "ownB/readable"), ("access", "ownB/exec"), ("access", "ownB/private"),
    ("access", "shared/f"), ("access", "acl/f"), ("access", "acl"),
    ("exec", "ownB/exec"), ("flock", "ownB/readable"),
    ("rmdir", "sgid/d"), ("unlink", "sgid/d/g"),
]

SCENARIO_A_NOGROUPS = [
    ("read", "shared/f"), ("listdir", "shared"), ("read", "ownB/grp"),
    ("read", "ownB/nogrp"), ("create", "sgid/f2", "666"), ("mkdir", "sgid/d2", "777"),
    ("create", "open/nogroups", "644"), ("chown", "open/nogroups", -1, GID_SHARED),
    ("chmod", "open/g", "2755"), ("stat", "open/g"),
    ("create", "sgid/tmp", "644"), ("stat", "sgid/tmp"),
    ("chmod", "sgid/tmp", "2644"),  # gid 60010 is not ours now: S_ISGID dropped
    ("read", "acl/f"), ("listdir", "acl"), ("create", "acl/newA2", "600"),
]

SCENARIO_B = [
    ("unlink", "sticky/a"), ("rename", "sticky/a", "sticky/b"), ("write", "sticky/a", "x"),
    ("create", "sticky/b_file", "600"),
    ("read", "acl/f"), ("write", "acl/f", "B via ACL"), ("listdir", "acl"),
    ("read", "acl/newA"), ("read", "ownA/secret"), ("listdir", "ownA"),
    ("create", "ownB/newB", "640"), ("chmod", "ownB/readable", "600"),
    ("chown", "ownB/readable", -1, GID_SHARED), ("chown", "ownB/readable", -1, GID_OTHER),
    ("read", "shared/f"), ("unlink", "open/a_moved"), ("unlink", "ownB/d"),
    ("stat", "suid"), ("chmod", "suid", "6777"), ("stat", "suid"),
    ("write", "suid", "B writes own"), ("stat", "suid"),
    ("read", "sgid/f"), ("unlink", "sgid/f"), ("setxattr", "ownB/readable", "user.b", "b"),
    ("listxattr", "ownB/readable"), ("getxattr", "ownB/readable", "user.b"),
    ("utime_set", "ownB/readable"), ("stat", "ownB/readable"),
    ("access", "acl/f"), ("access", "acl/newA"),
]


def _scenario_diffs(tw, user, ops, umask=0o022):
    uid, gid, groups = user
    res = {}
    for root in (tw.nat, tw.via):
        res[root] = run_as(uid, gid, groups, OPS_SNIPPET, root,
                           {"ops": [list(o) for o in ops]}, umask=umask)
    nat, via = summarize(res[tw.nat]), summarize(res[tw.via])
    diffs = [f"  uid {uid} groups {groups}: {v[:-1]}: mount {v[-1]} backend {n[-1]}"
             for n, v in zip(nat, via) if n != v]
    return via, diffs


def _run_scenario(tw, user, ops, umask=0o022):
    via, diffs = _scenario_diffs(tw, user, ops, umask)
    assert not diffs, ("the mount answers differently from the backend:\n"
                       + "\n".join(diffs))
    return via


@pytest.fixture(params=["default_permissions", "no_default_permissions"])
def ptw(request, mount_clamfs):
    opts = () if request.param == "default_permissions" else ("no_default_permissions",)
    fs = mount_clamfs(opts=opts)
    tw = Twin(fs)
    build_tree(tw.nat)
    build_tree(tw.bvia)
    return tw


def test_two_users_scenario(ptw):
    """All three runs happen before judging, so one report lists every
    difference."""
    via, diffs = _scenario_diffs(ptw, USER_A, SCENARIO_A)
    _, d2 = _scenario_diffs(ptw, USER_A_NOGROUPS, SCENARIO_A_NOGROUPS)
    via_b, d3 = _scenario_diffs(ptw, USER_B, SCENARIO_B)
    assert not diffs + d2 + d3, ("the mount answers differently from the backend:\n"
                                 + "\n".join(diffs + d2 + d3))
    # The outcomes are not vacuous: some calls must succeed, others fail.
    # An operation done twice (a read before and after a write) is judged
    # by its first outcome.
    d = {}
    for x in via:
        d.setdefault(tuple(x[:-1]), tuple(x[-1]))
    assert d[("read", "shared/f")] == ("ok", "shared file")
    assert d[("create", "shared/a_file", "666")] == ("ok", [UID_A, GID_A, oct(0o100644)])
    assert d[("read", "ownB/private")] == ("err", "EACCES")
    assert d[("chmod", "ownB/readable", "777")] == ("err", "EPERM")
    assert d[("create", "sgid/f", "666")][1][1] == GID_SHARED
    d = {}
    for x in via_b:
        d.setdefault(tuple(x[:-1]), tuple(x[-1]))
    assert d[("unlink", "sticky/a")] == ("err", "EPERM")
    # B is granted acl/f by its ACL but cannot search the directory "acl"
    assert d[("read", "acl/f")] == ("err", "EACCES")
    ptw.check()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o000])
def test_user_umask_and_default_acl(fs, umask):
    tw = Twin(fs)
    for r in (tw.nat, tw.bvia):
        os.chmod(r, 0o777)
        os.mkdir(os.path.join(r, "plain"), 0o777)
        os.chmod(os.path.join(r, "plain"), 0o777)
        os.mkdir(os.path.join(r, "dacl"), 0o777)
        os.chmod(os.path.join(r, "dacl"), 0o777)
        setfacl("-d", "-m", f"u::rwx,g::rwx,o::r-x,u:{UID_B}:rw-,m::rwx",
                 os.path.join(r, "dacl"))
    ops = []
    for d in ("plain", "dacl"):
        ops += [("create", f"{d}/f666", "666"), ("create", f"{d}/f600", "600"),
                ("create", f"{d}/f777", "777"), ("mkdir", f"{d}/d777", "777"),
                ("mkdir", f"{d}/d750", "750"), ("mkfifo", f"{d}/fifo"),
                ("symlink", "target", f"{d}/sym")]
    _run_scenario(tw, USER_A, ops, umask=umask)
    tw.check()


CREATOR_SNIPPET = r"""
import time
me = ARGS["tag"]
out = []
for i in range(ARGS["n"]):
    p = P(f"{me}-{i}")
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    os.write(fd, me.encode())
    os.close(fd)
    os.mkdir(P(f"{me}-d{i}"))
    s = os.stat(p)
    if (s.st_uid, s.st_gid) != (os.getuid(), os.getgid()):
        out.append([p, s.st_uid, s.st_gid])
    r = outcome(os.open, P("rootonly"), os.O_RDONLY)
    if os.getuid() != 0 and r[0] != "err":
        out.append(["rootonly readable", r])
emit(out)
"""


def test_concurrent_users_get_their_own_identity(fs):
    """Requests of different users served at the same time by different
    threads: every file is owned by the user who created it, and nobody
    borrows somebody else's rights."""
    d = fs.b("shared")
    os.mkdir(d)
    os.chmod(d, 0o777)
    with open(os.path.join(d, "rootonly"), "wb") as f:
        f.write(b"root")
    os.chmod(os.path.join(d, "rootonly"), 0o600)
    users = [("A", USER_A), ("B", USER_B), ("A2", (UID_A, GID_A, [])),
             ("B2", (UID_B, GID_B, [GID_SHARED, GID_OTHER])), ("root", (0, 0, []))]
    results, errors = {}, []

    def worker(tag, user):
        try:
            uid, gid, groups = user
            results[tag] = run_as(uid, gid, groups, CREATOR_SNIPPET, fs.m("shared"),
                                  {"tag": tag, "n": 150})
        except Exception as e:  # reported below
            errors.append(f"{tag}: {e}")
    ts = [threading.Thread(target=worker, args=u) for u in users]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for tag, r in results.items():
        assert r == [], f"{tag}: wrong identity: {r[:5]}"
    want = {tag: (u[0], u[1]) for tag, u in users}
    bad = []
    for n in os.listdir(d):
        if n == "rootonly":
            continue
        tag = n.rsplit("-", 1)[0]
        s = os.lstat(os.path.join(d, n))
        if (s.st_uid, s.st_gid) != want[tag]:
            bad.append((n, s.st_uid, s.st_gid))
        if not n.rsplit("-", 1)[1].startswith("d"):
            with open(os.path.join(d, n), "rb") as f:
                if f.read() != tag.encode():
                    bad.append((n, "content"))
    assert not bad, bad[:10]
    assert len(os.listdir(d)) == 1 + len(users) * 300


# --- focused checks (each also part of the scenario above) ---------------------

def _same_as_backend(fs, user, code, setup, umask=0o022):
    tw = Twin(fs)
    setup(tw.nat)
    setup(tw.bvia)
    uid, gid, groups = user
    n = summarize(run_as(uid, gid, groups, code, tw.nat, umask=umask))
    v = summarize(run_as(uid, gid, groups, code, tw.via, umask=umask))
    assert v == n, f"mount: {v}\nbackend: {n}"
    tw.check()
    return v


def test_write_to_others_setuid_file(fs):
    """Writing to a world-writable set-user-ID file of another user works
    and drops S_ISUID (and S_ISGID with group exec), as in the backend."""
    def setup(r):
        p = os.path.join(r, "suid")
        with open(p, "wb") as f:
            f.write(b"x")
        os.chown(p, UID_B, GID_SHARED)
        os.chmod(p, 0o6777)
    v = _same_as_backend(fs, USER_A, r"""
out = [outcome(lambda: os.write(os.open(P("suid"), os.O_WRONLY | os.O_APPEND), b"A"))]
out.append(oct(os.stat(P("suid")).st_mode))
out.append(outcome(os.truncate, P("suid"), 0))
emit(out)
""", setup)
    assert v[0][0] == "ok"


def test_trusted_xattrs_hidden_from_users(fs):
    """listxattr as an unprivileged user does not show trusted.* names
    (the backend hides them from callers without CAP_SYS_ADMIN)."""
    def setup(r):
        p = os.path.join(r, "f")
        with open(p, "wb") as f:
            f.write(b"x")
        os.setxattr(p, "trusted.secret", b"root only")
        os.setxattr(p, "user.public", b"everyone")
    v = _same_as_backend(fs, USER_A, r"""
emit([outcome(lambda: sorted(os.listxattr(P("f")))),
      outcome(os.getxattr, P("f"), "trusted.secret")])
""", setup)
    assert v[0] == ["ok", ["user.public"]]


def test_execute_only_binary(fs):
    """A 0711 binary of another user can be executed (not read), as in the
    backend."""
    def setup(r):
        p = os.path.join(r, "true")
        with open("/bin/true", "rb") as src, open(p, "wb") as f:
            f.write(src.read())
        os.chown(p, UID_B, GID_B)
        os.chmod(p, 0o711)
    v = _same_as_backend(fs, USER_A, r"""
import subprocess
emit([outcome(lambda: subprocess.run([P("true")]).returncode),
      outcome(lambda: open(P("true"), "rb").read(1))])
""", setup)
    assert v == [["ok", 0], ["err", "EACCES"]]


@pytest.mark.parametrize("opts", [(), ("no_default_permissions",)])
def test_access_syscall(mount_clamfs, opts):
    """access(2)/faccessat answer as in the backend, with or without
    default_permissions."""
    fs = mount_clamfs(opts=opts)

    def setup(r):
        for name, mode, owner in (("ro", 0o644, UID_B), ("rw", 0o666, UID_B),
                                  ("none", 0o600, UID_B), ("x", 0o711, UID_B),
                                  ("mine", 0o700, UID_A)):
            p = os.path.join(r, name)
            with open(p, "wb") as f:
                f.write(b"x")
            os.chown(p, owner, owner)
            os.chmod(p, mode)
    v = _same_as_backend(fs, USER_A, r"""
emit([[n] + [os.access(P(n), m) for m in (os.F_OK, os.R_OK, os.W_OK, os.X_OK)]
      for n in ("ro", "rw", "none", "x", "mine", "missing")])
""", setup)
    assert v[0] == ["ro", True, True, False, False]


@pytest.mark.parametrize("opts", [(), ("no_default_permissions",)])
def test_directory_search_permission(mount_clamfs, opts):
    """A user who may not search a directory cannot reach what is inside,
    even a world-readable file whose name is known (lookups and opens run
    with the caller's rights, with or without default_permissions)."""
    fs = mount_clamfs(opts=opts)

    def setup(r):
        d = os.path.join(r, "closed")
        os.mkdir(d)
        with open(os.path.join(d, "open-file"), "wb") as f:
            f.write(b"inside a closed directory")
        os.chmod(os.path.join(d, "open-file"), 0o666)
        os.mkdir(os.path.join(d, "sub"), 0o777)
        os.chown(d, UID_B, GID_B)
        os.chmod(d, 0o700)
    v = _same_as_backend(fs, USER_A, r"""
emit([outcome(os.stat, P("closed/open-file")),
      outcome(lambda: open(P("closed/open-file"), "rb").read().decode()),
      outcome(lambda: open(P("closed/open-file"), "ab").close()),
      outcome(os.listdir, P("closed/sub")),
      outcome(lambda: os.close(os.open(P("closed/sub/new"), os.O_CREAT | os.O_WRONLY, 0o644))),
      outcome(os.listdir, P("closed"))])
""", setup)
    assert v == [["err", "EACCES"]] * 6


@pytest.mark.parametrize("opts", [(), ("no_default_permissions",)])
def test_search_permission_after_another_user_looked_up(mount_clamfs, opts):
    """The same, right after the directory's owner used the name through
    the mount (the kernel has the name cached): the other user is still
    refused, as in the backend."""
    fs = mount_clamfs(opts=opts)
    tw = Twin(fs)
    for r in (tw.nat, tw.bvia):
        d = os.path.join(r, "closed")
        os.mkdir(d)
        with open(os.path.join(d, "f"), "wb") as f:
            f.write(b"secret-ish")
        os.chmod(os.path.join(d, "f"), 0o666)
        os.chown(d, UID_B, GID_B)
        os.chmod(d, 0o700)
    code = r"""
emit([outcome(lambda: open(P("closed/f"), "rb").read().decode()),
      outcome(lambda: os.stat(P("closed/f")).st_size)])
"""
    res = {}
    for root in (tw.nat, tw.via):
        owner = run_as(UID_B, GID_B, [], code, root)
        other = run_as(UID_A, GID_A, [GID_SHARED], code, root)
        res[root] = [owner, other]
    assert res[tw.via] == res[tw.nat], f"mount {res[tw.via]} backend {res[tw.nat]}"
    assert res[tw.via][1] == [["err", "EACCES"], ["err", "EACCES"]]
