# SPDX-License-Identifier: GPL-2.0-or-later
"""The soak's workload processes: writers and readers, run through the mount
(`bench/soak/run --role writer|reader ...`, started by the soak as root or as an
unprivileged user).

A writer owns a range of oracle slots (soak_oracle.py) and a directory
w<id>; it creates, rewrites (in place or by rename over), appends
(O_APPEND), pwrites, writes through mmap, renames, hard-links, truncates,
reads back and unlinks its files, copies trees with cp -r and tar, and
churns directories. It keeps each committed version's bytes in memory and
records it in the oracle after close and fsync.

A reader picks random slots of every writer and checks each byte it reads
against the oracle, and tries to open the EICAR files the fault driver drops
(an open must be refused; any byte returned is a broken invariant).

Each process appends JSON lines to its own log: errors with their times
(the soak judges later whether a fault window allowed them), broken
invariants, and every second its cumulative counters and latencies.
"""
import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time

from clamfstest.mapped import MappedSigbus, mapped_read, mapped_write
from soak_oracle import Oracle, has_eicar

READ_OPEN_OPS = ("verify", "read", "mmap", "eicar_open", "recover")


class Log:
    def __init__(self, logdir, role, ident):
        self.pid = os.getpid()
        self.f = open(os.path.join(logdir, f"{role}{ident}-{self.pid}.jsonl"),
                      "a", buffering=1)
        self.role, self.ident = role, ident
        self.counts = {}
        self.lat_max = {}
        self.last_flush = 0.0

    def put(self, rec):
        rec["pid"] = self.pid
        rec["who"] = f"{self.role}{self.ident}"
        self.f.write(json.dumps(rec) + "\n")

    def count(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def lat(self, op, sec):
        if sec > self.lat_max.get(op, 0.0):
            self.lat_max[op] = sec

    def error(self, op, path, e, t0, stage="", extra=None):
        rec = {"k": "error", "op": op, "path": path, "t0": t0,
               "t1": time.time(), "stage": stage,
               "errno": errno.errorcode.get(e, str(e))}
        if extra:
            rec.update(extra)
        self.put(rec)
        self.count(f"err_{op}_{rec['errno']}")

    def violation(self, kind, **detail):
        self.put({"k": "violation", "kind": kind, "t": time.time(), **detail})

    def flush(self, force=False):
        now = time.monotonic()
        if force or now - self.last_flush >= 1.0:
            self.last_flush = now
            self.put({"k": "counters", "t": time.time(),
                      "counts": self.counts, "lat_max": self.lat_max})


class Stop(Exception):
    pass


class Proc:
    """What writers and readers share: the mount, the oracle, the log."""

    def __init__(self, a, role):
        self.mnt = a.mnt
        self.oracle = Oracle(a.oracle, a.nslots)
        self.log = Log(a.logdir, role, a.id)
        self.rng = random.Random(f"{a.seed}-{role}-{a.id}-{os.getpid()}")
        self.deadline = a.deadline
        self.stop = False
        signal.signal(signal.SIGTERM, self._term)

    def _term(self, *_):
        self.stop = True

    def m(self, rel):
        return os.path.join(self.mnt, rel)

    def timed(self, op, fn, *args):
        t0 = time.monotonic()
        try:
            return fn(*args)
        finally:
            dt = time.monotonic() - t0
            self.log.lat(op, dt)
            if dt > self.deadline:
                self.log.violation("deadline", op=op, seconds=round(dt, 3),
                                   limit=self.deadline, args=str(args)[:200])

    def ropen(self, op, path, flags=os.O_RDONLY):
        """A read-capable open (decided by a scan): counted by outcome."""
        t0w = time.time()
        try:
            fd = self.timed("open", os.open, path, flags)
        except OSError as e:
            self.log.count(f"ropen_{errno.errorcode.get(e.errno, e.errno)}")
            e.t0 = t0w
            e.at_open = True
            raise
        self.log.count("ropen_ok")
        return fd

    def read_all(self, fd, use_mmap=False):
        if use_mmap:
            size = os.fstat(fd).st_size  # what the kernel believes
            if size:
                # in a child: a hole of the full backend is SIGBUS with
                # passthrough (the mapping is the backend's), as natively
                return mapped_read(fd, size)
        out = []
        while True:
            b = os.read(fd, self.rng.choice((4096, 65536, 131072, 1 << 20)))
            if not b:
                return b"".join(out)
            out.append(b)


def write_all(fd, data, rng):
    off = 0
    while off < len(data):
        n = rng.choice((512, 4096, 65536, 131072))
        off += os.write(fd, data[off:off + n])


def sha(b):
    return hashlib.sha256(b).digest()


class Writer(Proc):
    def __init__(self, a):
        super().__init__(a, "writer")
        self.first, self.count = a.first, a.count
        self.large = a.large
        self.dir = f"w{a.id}"
        os.makedirs(self.m(self.dir), exist_ok=True)
        self.data = {}  # slot -> committed bytes
        self.n = 0
        self.trace = os.environ.get("SOAK_TRACE") == "1"
        self.tmp = ""  # a write's temporary name, while it exists
        self.cur_op = "recover"

    def name(self, i):
        self.n += 1
        return f"{self.dir}/f{i}.{self.log.pid}.{self.n}"

    def content(self, size):
        return self.rng.randbytes(size)

    def new_size(self):
        if self.rng.random() < 0.2:
            return self.rng.randint(256 << 10, self.large)
        return self.rng.choice((0, 1, 100, 4096, 4097,
                                self.rng.randint(1, 64 << 10)))

    # -- slot bookkeeping ------------------------------------------------
    def commit(self, i, data, path, link=""):
        self.data[i] = data
        self.oracle.commit(i, len(data), sha(data), path, link)
        if self.trace:
            self.log.put({"k": "commit", "t": time.time(), "slot": i,
                          "op": self.cur_op, "path": path, "link": link,
                          "size": len(data), "sha": sha(data).hex()[:12]})

    def drop(self, i):
        """A change failed half-way: the file's content is unknown, so it
        leaves the oracle and the tree."""
        _, _, _, path, link = self.oracle.read(i)
        self.oracle.begin(i)
        tmp, self.tmp = self.tmp, ""
        for p in (path, link, tmp):
            if p:
                try:
                    os.unlink(self.m(p))
                except OSError as e:
                    if e.errno != errno.ENOENT:
                        self.log.error("drop", p, e.errno, time.time())
        self.data.pop(i, None)
        self.oracle.clear(i)

    def recover(self):
        """After a kill: forget files a dead predecessor left half-changed
        (and its temporaries), read back (and so verify) the complete ones
        to know their bytes."""
        for n in os.listdir(self.m(self.dir)):
            if n[0] in "td" and os.path.isdir(self.m(f"{self.dir}/{n}")):
                shutil.rmtree(self.m(f"{self.dir}/{n}"), ignore_errors=True)
            elif n.endswith(".tmp"):
                try:
                    os.unlink(self.m(f"{self.dir}/{n}"))
                except OSError as e:
                    self.log.error("drop", n, e.errno, time.time())
        for i in range(self.first, self.first + self.count):
            g, size, digest, path, link = self.oracle.read(i)
            if g % 2 or not path:
                if path or link or g % 2:
                    self.drop(i)
                continue
            for attempt in range(30):
                t0 = time.time()
                try:
                    fd = self.ropen("recover", self.m(path))
                    try:
                        b = self.read_all(fd)
                    finally:
                        os.close(fd)
                except OSError as e:
                    self.log.error("recover", path, e.errno, t0, "open")
                    if e.errno == errno.EIO and attempt < 29:
                        time.sleep(1)
                        continue
                    self.drop(i)
                    break
                if has_eicar(b):
                    self.log.violation("eicar_served", path=path, n=len(b))
                if len(b) != size or sha(b) != digest:
                    self.log.violation("content", path=path, op="recover",
                                       want_size=size, got_size=len(b))
                    self.drop(i)
                else:
                    self.data[i] = b
                    self.log.count("verified")
                break

    # -- operations on one slot ------------------------------------------
    def op_write(self, i):
        old = self.data.get(i)
        _, _, _, path, link = self.oracle.read(i)
        data = self.content(self.new_size())
        self.oracle.begin(i)
        if old is None or self.rng.random() < 0.3:
            # a new file, or an editor's save: a temporary name, then
            # rename over the old one (which loses its hard link's twin
            # content: the link keeps the old inode)
            tmp = self.name(i) + ".tmp"
            self.tmp = tmp
            dst = path or self.name(i)
            fd = os.open(self.m(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644)
            self.stage = "io"
            try:
                write_all(fd, data, self.rng)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(self.m(tmp), self.m(dst))
            self.tmp = ""
            if link:
                os.unlink(self.m(link))
            self.commit(i, data, dst)
        else:
            fd = os.open(self.m(path), os.O_WRONLY | os.O_TRUNC)
            self.stage = "io"
            try:
                write_all(fd, data, self.rng)
                os.fsync(fd)
            finally:
                os.close(fd)
            self.commit(i, data, path, link)

    def op_append(self, i):
        _, _, _, path, link = self.oracle.read(i)
        add = self.content(self.rng.randint(1, 32 << 10))
        self.oracle.begin(i)
        fd = os.open(self.m(path), os.O_WRONLY | os.O_APPEND)
        self.stage = "io"
        try:
            write_all(fd, add, self.rng)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.commit(i, self.data[i] + add, path, link)

    def op_pwrite(self, i):
        _, _, _, path, link = self.oracle.read(i)
        old = self.data[i]
        off = self.rng.randint(0, len(old))
        add = self.content(self.rng.randint(1, 16 << 10))
        self.oracle.begin(i)
        fd = os.open(self.m(path), os.O_WRONLY)
        self.stage = "io"
        try:
            if os.pwrite(fd, add, off) != len(add):
                # a short write (the backend filled up): the file now
                # holds part of it; its content leaves the oracle
                raise OSError(errno.ENOSPC, "short pwrite")
            os.fsync(fd)
        finally:
            os.close(fd)
        new = old[:off] + add + old[off + len(add):]
        self.commit(i, new, path, link)

    def op_mmap(self, i):
        _, _, _, path, link = self.oracle.read(i)
        old = self.data[i]
        if not old:
            return
        off = self.rng.randint(0, len(old) - 1)
        add = self.content(min(len(old) - off, self.rng.randint(1, 8192)))
        self.oracle.begin(i)
        fd = self.ropen("mmap", self.m(path), os.O_RDWR)  # scanned: O_RDWR
        self.stage = "io"
        try:
            seen = os.fstat(fd).st_size
            if seen != len(old):
                self.log.violation("content", path=path, op="mmap_fstat",
                                   want_size=len(old), got_size=seen)
                raise OSError(errno.EBADE, "size differs from the oracle")
            # with passthrough a hole of the full backend is SIGBUS, as
            # natively: an error of this operation, not a crash
            mapped_write(fd, len(old), off, add)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.commit(i, old[:off] + add + old[off + len(add):], path, link)

    def op_rename(self, i):
        _, _, _, path, link = self.oracle.read(i)
        dst = self.name(i)
        self.oracle.begin(i)
        self.stage = "io"
        os.rename(self.m(path), self.m(dst))
        self.commit(i, self.data[i], dst, link)

    def op_link(self, i):
        _, _, _, path, link = self.oracle.read(i)
        self.oracle.begin(i)
        self.stage = "io"
        if link:
            os.unlink(self.m(link))
            self.commit(i, self.data[i], path)
        else:
            link = self.name(i) + ".ln"
            os.link(self.m(path), self.m(link))
            self.commit(i, self.data[i], path, link)

    def op_truncate(self, i):
        _, _, _, path, link = self.oracle.read(i)
        old = self.data[i]
        size = self.rng.randint(0, len(old) + 4096)
        self.oracle.begin(i)
        self.stage = "io"
        os.truncate(self.m(path), size)
        new = old[:size] + b"\0" * max(0, size - len(old))
        self.commit(i, new, path, link)

    def op_verify(self, i):
        _, size, digest, path, link = self.oracle.read(i)
        for p in (path, link) if link else (path,):
            self.stage = "open"
            fd = self.ropen("verify", self.m(p))
            self.stage = "read"
            try:
                b = self.read_all(fd, self.rng.random() < 0.2)
            finally:
                os.close(fd)
            if has_eicar(b):
                self.log.violation("eicar_served", path=p, n=len(b))
            if b != self.data[i]:
                self.log.violation("content", path=p, op="verify",
                                   want_size=size, got_size=len(b),
                                   first_diff=first_diff(b, self.data[i]))
            else:
                self.log.count("verified")

    def op_unlink(self, i):
        _, _, _, path, link = self.oracle.read(i)
        self.oracle.begin(i)
        self.stage = "io"
        os.unlink(self.m(path))
        if link:
            os.unlink(self.m(link))
        self.data.pop(i, None)
        self.oracle.clear(i)

    # -- trees -------------------------------------------------------------
    def run_tool(self, op, argv, cwd):
        t0 = time.time()
        try:
            r = subprocess.run(argv, cwd=cwd, capture_output=True,
                               timeout=300)
        except subprocess.TimeoutExpired:
            self.log.violation("deadline", op=op, seconds=300,
                               limit=300, args=" ".join(argv))
            return False
        if r.returncode != 0:
            self.log.put({"k": "error", "op": op, "path": cwd, "t0": t0,
                          "t1": time.time(), "stage": "tool",
                          "errno": tool_errno(r.stderr),
                          "stderr": r.stderr.decode(errors="replace")[-400:]})
            self.log.count(f"err_{op}")
            return False
        self.log.count(op)
        return True

    def op_tree(self):
        self.n += 1
        base = self.m(self.dir)
        name = f"t{self.log.pid}.{self.n}"
        files = {}
        try:
            for d in ("a", "a/b", "c"):
                os.makedirs(os.path.join(base, name, d))
                for k in range(self.rng.randint(1, 4)):
                    rel = f"{d}/x{k}"
                    b = self.content(self.rng.choice((0, 10, 3000, 20000)))
                    with open(os.path.join(base, name, rel), "wb") as f:
                        f.write(b)
                    files[rel] = b
            ok = self.run_tool("cp", ["cp", "-r", name, name + ".cp"], base)
            if ok:
                self.check_tree(os.path.join(base, name + ".cp"), files)
            os.mkdir(os.path.join(base, name + ".x"))
            ok = self.run_tool("tar", ["bash", "-o", "pipefail", "-c",
                                       f"tar -cf - {name} | "
                                       f"tar -C {name}.x -xf -"], base)
            if ok:
                self.check_tree(os.path.join(base, name + ".x", name), files)
        finally:
            for d in (name, name + ".cp", name + ".x"):
                shutil.rmtree(os.path.join(base, d), ignore_errors=True)

    def check_tree(self, root, files):
        for rel, want in files.items():
            p = os.path.join(root, rel)
            try:
                fd = self.ropen("read", p)
                try:
                    b = self.read_all(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                self.log.error("tree_read", p, e.errno, e.t0 if hasattr(
                    e, "t0") else time.time(), "open")
                continue
            if b != want:
                self.log.violation("content", path=p, op="tree",
                                   want_size=len(want), got_size=len(b))
            else:
                self.log.count("verified")

    def op_dirs(self):
        self.n += 1
        base = self.m(self.dir)
        d = os.path.join(base, f"d{self.log.pid}.{self.n}")
        try:
            os.makedirs(os.path.join(d, "p", "q", "r"))
            for sub in ("p", "p/q", "p/q/r"):
                with open(os.path.join(d, sub, "n"), "wb") as f:
                    f.write(sub.encode())
            os.rename(d, d + ".r")
            got = sorted(os.listdir(os.path.join(d + ".r", "p")))
            if got != ["n", "q"]:
                self.log.violation("readdir", path=d + ".r/p", got=got)
            os.rename(os.path.join(d + ".r", "p", "q"),
                      os.path.join(d + ".r", "q2"))
        finally:
            for p in (d, d + ".r"):
                shutil.rmtree(p, ignore_errors=True)
        self.log.count("dirs")

    # -- the loop ----------------------------------------------------------
    OPS = (("write", 30), ("append", 10), ("pwrite", 8), ("mmap", 6),
           ("rename", 8), ("link", 5), ("truncate", 5), ("verify", 20),
           ("unlink", 3), ("tree", 3), ("dirs", 3))

    def step(self):
        names = [o for o, _ in self.OPS]
        op = self.rng.choices(names, [w for _, w in self.OPS])[0]
        if op in ("tree", "dirs"):
            t0 = time.time()
            try:
                getattr(self, "op_" + op)()
            except OSError as e:
                self.log.error(op, "", e.errno, t0, "io")
            return
        i = self.rng.randrange(self.first, self.first + self.count)
        if i not in self.data:
            op = "write"
        elif op == "write" and self.rng.random() < 0.5 and self.data[i]:
            op = self.rng.choice(("append", "verify", "mmap"))
        path = self.oracle.read(i)[3]
        self.cur_op = op
        self.stage = "open"
        t0 = time.time()
        t0m = time.monotonic()
        try:
            getattr(self, "op_" + op)(i)
            self.log.count(op)
        except OSError as e:
            code = "SIGBUS" if isinstance(e, MappedSigbus) else e.errno
            self.log.error(op, path, code, getattr(e, "t0", t0), self.stage)
            if self.stage == "open" and i in self.data:
                # nothing was changed: the committed version stands
                _, _, _, p, link = self.oracle.read(i)
                self.commit(i, self.data[i], p, link)
            elif self.stage != "read":
                self.drop(i)
        dt = time.monotonic() - t0m
        self.log.lat(op, dt)
        if dt > self.deadline:
            self.log.violation("deadline", op=op, seconds=round(dt, 3),
                               limit=self.deadline, path=path)

    def run(self):
        self.recover()
        while not self.stop:
            self.step()
            self.log.flush()
        self.log.flush(force=True)


class Reader(Proc):
    def __init__(self, a):
        super().__init__(a, "reader")
        self.nslots = a.nslots

    def read_slot(self, i):
        g, size, digest, path, link = self.oracle.read(i)
        if g % 2 or not path:
            self.log.count("busy")
            return
        p = self.rng.choice((path, link)) if link else path
        t0 = time.time()
        try:
            fd = self.ropen("read", self.m(p))
            try:
                # no mmap here: the owner may truncate the file under the
                # mapping (SIGBUS); owners read their own files by mmap
                b = self.read_all(fd)
            finally:
                os.close(fd)
        except OSError as e:
            if self.oracle.gen(i) != g:
                self.log.count("raced")
                return
            self.log.error("read", p, e.errno, getattr(e, "t0", t0),
                           "open" if getattr(e, "at_open", False) else "read")
            return
        if has_eicar(b):
            self.log.violation("eicar_served", path=p, n=len(b))
        if self.oracle.gen(i) != g:
            self.log.count("raced")
            return
        if len(b) != size or sha(b) != digest:
            self.log.violation("content", path=p, op="read", want_size=size,
                               got_size=len(b), gen=g, slot=i,
                               got_sha=sha(b).hex()[:12],
                               want_sha=digest.hex()[:12])
        else:
            self.log.count("verified")

    def try_eicar(self):
        d = self.m("eicar")
        try:
            names = [n for n in os.listdir(d) if not n.startswith(".")]
        except OSError as e:
            self.log.error("eicar_list", d, e.errno, time.time())
            return
        if not names:
            return
        p = os.path.join(d, self.rng.choice(names))
        t0 = time.time()
        try:
            fd = self.ropen("eicar_open", p)
        except OSError as e:
            if e.errno == errno.EACCES:
                self.log.count("eicar_refused")
            elif e.errno != errno.ENOENT:
                self.log.error("eicar_open", p, e.errno, t0, "open")
            return
        try:
            b = os.read(fd, 4096)
        finally:
            os.close(fd)
        self.log.violation("eicar_opened", path=p, n=len(b),
                           eicar=has_eicar(b))

    def run(self):
        while not self.stop:
            if self.rng.random() < 0.15:
                self.timed("eicar", self.try_eicar)
            else:
                i = self.rng.randrange(self.nslots)
                self.timed("read", self.read_slot, i)
            self.log.flush()
        self.log.flush(force=True)


def first_diff(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return min(len(a), len(b))


def tool_errno(stderr):
    s = stderr.decode(errors="replace")
    for name, text in (("EIO", "Input/output error"),
                       ("ENOSPC", "No space left"),
                       ("EACCES", "Permission denied"),
                       ("ENOENT", "No such file"),
                       ("EINTR", "Interrupted")):
        if text in s:
            return name
    return "tool"


def main(a):
    cls = Writer if a.role == "writer" else Reader
    cls(a).run()
