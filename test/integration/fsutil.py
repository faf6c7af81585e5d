# SPDX-License-Identifier: GPL-2.0-or-later
# Helpers for the mirror-filesystem tests: outcomes (result or errno name) of
# an operation, stat and tree snapshots to compare the mount with the
# backend, running Python snippets as an unprivileged user via setpriv, and
# ctypes wrappers for the syscalls Python lacks (renameat2, fallocate,
# utimensat with UTIME_NOW/UTIME_OMIT, raw xattr size queries).
import ctypes
import ctypes.util
import hashlib
import json
import os
import stat
import subprocess
import textwrap

from clamfstest.env import PYTHON, SLOW
from clamfstest.errnames import errname

# Two unprivileged users with their own primary groups and one shared
# supplementary group. No passwd entries needed.
UID_A, GID_A = 60001, 60001
UID_B, GID_B = 60002, 60002
GID_SHARED = 60010
GID_OTHER = 60020  # a group neither user is in

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def outcome(fn, *args, **kwargs):
    """('ok', value) or ('err', 'ENOENT')."""
    try:
        return ("ok", fn(*args, **kwargs))
    except OSError as e:
        return ("err", errname(e.errno))


def summarize(v):
    """The same value with long byte strings replaced by their length and
    hash, so that a failed comparison prints something readable."""
    if isinstance(v, (bytes, bytearray)) and len(v) > 64:
        return f"<{len(v)} bytes sha256:{hashlib.sha256(v).hexdigest()[:16]} " \
               f"head:{bytes(v[:16])!r}>"
    if isinstance(v, str) and len(v) > 200:
        return f"<str {len(v)} chars sha256:" \
               f"{hashlib.sha256(v.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}>"
    if isinstance(v, tuple):
        return tuple(summarize(x) for x in v)
    if isinstance(v, list):
        return [summarize(x) for x in v]
    if isinstance(v, dict):
        return {k: summarize(x) for k, x in v.items()}
    return v


def check_errno(ret):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


# --- ctypes wrappers ---------------------------------------------------------

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
RENAME_WHITEOUT = 4
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
FALLOC_FL_ZERO_RANGE = 0x10
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2

_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                            ctypes.c_char_p, ctypes.c_uint]
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64]
_libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_size_t]
_libc.getxattr.restype = ctypes.c_ssize_t
_libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
_libc.listxattr.restype = ctypes.c_ssize_t


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p,
                            ctypes.POINTER(Timespec), ctypes.c_int]


def renameat2(old, new, flags):
    return check_errno(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD,
                                       os.fsencode(new), flags))


def fallocate(fd, mode, offset, length):
    return check_errno(_libc.fallocate(fd, mode, offset, length))


def utimensat(path, atime, mtime, follow=True):
    """atime/mtime: (sec, nsec) tuples or UTIME_NOW / UTIME_OMIT."""
    def ts(v):
        if isinstance(v, tuple):
            return Timespec(v[0], v[1])
        return Timespec(0, v)
    arr = (Timespec * 2)(ts(atime), ts(mtime))
    return check_errno(_libc.utimensat(AT_FDCWD, os.fsencode(path), arr,
                                       0 if follow else AT_SYMLINK_NOFOLLOW))


def getxattr_size(path, name):
    """getxattr(path, name, NULL, 0): the size of the value."""
    return check_errno(_libc.getxattr(os.fsencode(path), os.fsencode(name),
                                      None, 0))


def getxattr_buf(path, name, size):
    """getxattr with a caller-sized buffer (ERANGE when too small)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = check_errno(_libc.getxattr(os.fsencode(path), os.fsencode(name),
                                   buf, size))
    return buf.raw[:n]


def listxattr_size(path):
    return check_errno(_libc.listxattr(os.fsencode(path), None, 0))


def listxattr_buf(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = check_errno(_libc.listxattr(os.fsencode(path), buf, size))
    return buf.raw[:n]


# --- stat and tree snapshots -------------------------------------------------

class Approx(int):
    """A block count compared with a tolerance: two files made by the same
    calls on ext4 may differ by an extent-tree block (8 sectors) depending on
    where their blocks landed. Exact comparisons are kept for the same file
    seen through the mount and in the backend."""
    TOL = 16

    def __eq__(self, other):
        return isinstance(other, int) and abs(int(self) - int(other)) <= self.TOL

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__

    def __repr__(self):
        return f"~{int(self)}"

def stat_dict(st, ino=True, times=True):
    """The fields a mirror must reproduce; ino/times only when comparing the
    same file seen through the mount and in the backend."""
    d = {
        "type": stat.S_IFMT(st.st_mode),
        "mode": oct(stat.S_IMODE(st.st_mode)),
        "nlink": st.st_nlink,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "size": st.st_size,
        "blocks": st.st_blocks,
        "rdev": st.st_rdev,
    }
    if ino:
        d["ino"] = st.st_ino
    else:
        d["blocks"] = Approx(st.st_blocks)
    if times:
        d["atime_ns"] = st.st_atime_ns
        d["mtime_ns"] = st.st_mtime_ns
        d["ctime_ns"] = st.st_ctime_ns
    return d


def lstat_dict(path, **kw):
    return stat_dict(os.lstat(path), **kw)


def _xattrs(path, follow):
    try:
        names = sorted(os.listxattr(path, follow_symlinks=follow))
    except OSError as e:
        return ("err", errname(e.errno))
    out = {}
    for n in names:
        try:
            out[n] = os.getxattr(path, n, follow_symlinks=follow).hex()
        except OSError as e:
            out[n] = ("err", errname(e.errno))
    return out


def entry_snapshot(path, ino=False, times=False, content=True):
    st = os.lstat(path)
    d = stat_dict(st, ino=ino, times=times)
    if stat.S_ISDIR(st.st_mode):
        # Directory size and block counts depend on the history of the
        # directory (ext4 never shrinks them): compare only in mirror mode.
        if not ino:
            d.pop("size")
            d.pop("blocks")
    if stat.S_ISREG(st.st_mode) and content:
        with open(path, "rb") as f:
            d["sha256"] = hashlib.sha256(f.read()).hexdigest()
    if stat.S_ISLNK(st.st_mode):
        d["target"] = os.readlink(path)
    d["xattrs"] = _xattrs(path, follow=False) if not stat.S_ISLNK(st.st_mode) \
        else None
    return d


def tree_snapshot(root, ino=False, times=False, content=True):
    """{relpath: entry_snapshot} for everything under root (root itself as
    '.'), walked top-down without following symlinks."""
    snap = {".": entry_snapshot(root, ino=ino, times=times, content=content)}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames + filenames):
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            snap[rel] = entry_snapshot(p, ino=ino, times=times, content=content)
    return snap


def diff_snapshots(a, b, label_a="a", label_b="b"):
    """Human-readable differences, [] when equal."""
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in a:
            out.append(f"{k}: only in {label_b}")
        elif k not in b:
            out.append(f"{k}: only in {label_a}")
        elif a[k] != b[k]:
            fields = sorted(set(a[k]) | set(b[k]))
            for f in fields:
                if a[k].get(f) != b[k].get(f):
                    out.append(f"{k}: {f}: {label_a}={a[k].get(f)!r} "
                               f"{label_b}={b[k].get(f)!r}")
    return out


# --- running code as another user --------------------------------------------

# The prelude every snippet gets: `outcome`, `ROOT`, `ARGS`, and `emit(obj)`
# to hand a JSON result back.
_PRELUDE = textwrap.dedent("""\
    import errno, json, os, stat, sys
    ROOT = sys.argv[1]
    ARGS = json.loads(sys.argv[2])
    def outcome(fn, *a, **kw):
        try:
            r = fn(*a, **kw)
            return ["ok", r if isinstance(r, (int, str, bool, list, type(None))) else repr(r)]
        except OSError as e:
            return ["err", errno.errorcode.get(e.errno, str(e.errno))]
    def P(rel):
        return os.path.join(ROOT, rel)
    def emit(obj):
        sys.stdout.write("\\n@@RESULT@@" + json.dumps(obj) + "\\n")
    """)


def share_of(base, uid=UID_A, gid=GID_A):
    """A backend in the new directory base (both 0755) whose `share`
    directory belongs to uid: a user who writes the backend directly."""
    backend = os.path.join(base, "b")
    os.makedirs(os.path.join(backend, "share"))
    os.chmod(base, 0o755)
    os.chmod(backend, 0o755)
    os.chown(os.path.join(backend, "share"), uid, gid)
    return backend


def setpriv_prefix(uid, gid, groups=None):
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
    if groups:
        cmd.append("--groups=" + ",".join(str(g) for g in groups))
    else:
        cmd.append("--clear-groups")
    cmd.append("--")
    return cmd


def run_as(uid, gid, groups, code, root, args=None, umask=0o022, timeout=60):
    """Runs `code` (after the prelude) as uid/gid with the given
    supplementary groups and umask; returns what it emit()ted."""
    src = _PRELUDE + f"os.umask({umask:#o})\n" + textwrap.dedent(code)
    cmd = setpriv_prefix(uid, gid, groups) + [
        PYTHON, "-c", src, root, json.dumps(args if args is not None else {})]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=timeout * SLOW)
    marker = "@@RESULT@@"
    if r.returncode != 0 or marker not in r.stdout:
        raise AssertionError(f"snippet as uid {uid} failed (rc {r.returncode}):\n"
                             f"stdout: {r.stdout}\nstderr: {r.stderr}")
    return json.loads(r.stdout.rsplit(marker, 1)[1].strip())


def run_py(code, args=(), timeout=120, check=True):
    """Runs a Python snippet as root in a new process."""
    r = subprocess.run([PYTHON, "-c", textwrap.dedent(code)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=timeout * SLOW)
    if check and r.returncode != 0:
        raise AssertionError(f"snippet failed (rc {r.returncode}):\n"
                             f"stdout: {r.stdout}\nstderr: {r.stderr}")
    return r


# --- the twin: a native area and a mounted area of the same backend ---------

class Twin:
    """Two empty directories in the backend: `nat`, worked on directly, and
    `via`, worked on through the mount (`bvia` is the same directory seen in
    the backend). `both(fn)` runs fn(root) on each and demands the same
    outcome; `check()` demands the same resulting trees, and that the mount
    shows exactly what the backend holds (inode numbers and times too)."""

    def __init__(self, fs, name="t"):
        self.fs = fs
        self.nat = fs.b(name + "-nat")
        self.bvia = fs.b(name + "-via")
        self.via = fs.m(name + "-via")
        os.mkdir(self.nat)
        os.mkdir(self.bvia)

    def roots(self):
        return (self.nat, self.via)

    def both(self, fn, *args, label=None):
        n = summarize(outcome(fn, self.nat, *args))
        v = summarize(outcome(fn, self.via, *args))
        if v != n and v[0] == n[0] == "ok" and isinstance(v[1], list) \
                and isinstance(n[1], list) and len(v[1]) == len(n[1]):
            diffs = [f"  step {i}: mount {a!r} backend {b!r}"
                     for i, (a, b) in enumerate(zip(v[1], n[1])) if a != b]
            raise AssertionError(f"{label or getattr(fn, '__name__', fn)}: "
                                 "mount and backend differ:\n" + "\n".join(diffs))
        assert v == n, (f"{label or getattr(fn, '__name__', fn)}: "
                        f"mount gave {v}, backend gave {n}")
        return v

    def check_mirror(self, rel="."):
        """Every entry under via/rel, seen through the mount and directly in
        the backend, has identical stat fields (ino, times included)."""
        top = os.path.join(self.via, rel)
        paths = [top]
        for dirpath, dirnames, filenames in os.walk(top):
            paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
        diffs = []
        for p in paths:
            r = os.path.relpath(p, self.via)
            try:
                sm = lstat_dict(p)
                sb = lstat_dict(os.path.join(self.bvia, r))
            except OSError as e:
                diffs.append(f"{r}: {e}")
                continue
            for k in sm:
                if sm[k] != sb[k]:
                    diffs.append(f"{r}: {k}: mount={sm[k]!r} backend={sb[k]!r}")
        assert not diffs, "mount differs from its backend:\n" + "\n".join(diffs)

    def check(self, content=True):
        self.check_mirror()
        a = tree_snapshot(self.nat, content=content)
        b = tree_snapshot(self.via, content=content)
        d = diff_snapshots(a, b, "native", "mount")
        assert not d, "tree made through the mount differs:\n" + "\n".join(d)


class LoopFs:
    """A small filesystem image loop-mounted at a new directory under base
    (e.g. ext4 with 128-byte inodes for whole-second timestamps, or with a
    large root reserve). Unmount with close()."""

    def __init__(self, base, size_mb, mkfs):
        self.img = os.path.join(base, "img")
        self.path = os.path.join(base, "fs")
        os.mkdir(self.path)
        with open(self.img, "wb") as f:
            f.truncate(size_mb << 20)
        subprocess.run(mkfs + [self.img], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["mount", "-o", "loop", self.img, self.path],
                       check=True)
        os.chmod(self.path, 0o755)

    def close(self):
        # lazily: a clamfs mount over it may still be going away
        subprocess.run(["umount", "-l", self.path], check=True)


def victim_read(mode="rb"):
    """For run_as(): opens share/x under the mount with mode, reads it and
    emits {"ok": hex} or {"err": errno} (the victim of the writers'
    tests)."""
    return f"""
    try:
        with open(P("share/x"), "{mode}") as f:
            emit({{"ok": f.read().hex()}})
    except OSError as e:
        emit({{"err": e.errno}})
"""


VICTIM_READ = victim_read()


class LineChild:
    """A Python child running code as uid/gid, driven a line at a time: it
    prints `ready` once set up, then answers each line it is sent with
    one line, and ends at "exit"."""

    def __init__(self, uid, gid, code, args, ready):
        self.p = subprocess.Popen(
            setpriv_prefix(uid, gid) + [PYTHON, "-c", code] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == ready

    def ask(self, line, answer):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == answer

    def close(self):
        """Ends the child; its exit status."""
        if self.p.poll() is None:
            self.p.stdin.write("exit\n")
            self.p.stdin.flush()
        return self.p.wait(timeout=10 * SLOW)
