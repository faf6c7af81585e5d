# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the on-access scanning tests (test_scan_*.py).

- mount_scan(): a clamfs mount scanning against a given clamd.
- stats()/delta(): the live counters of trusted.clamfs.stats.
- try_read()/try_open(): outcome of an open/read through the mount.
- detections()/scan_failures(): parsed daemon log lines.
- daemon_files()/released(): the backend files the daemon holds open (a
  writer's until its release, a background scan's until its verdict is
  in), and a wait until there are none.
- SlowClamd: a fake clamd (built on fakeclamd.FakeClamd) that answers
  PING/VERSION but never answers (or answers late to) scans.
- Marker signatures: MARKER is detected anywhere in a file once
  ensure_marker_signature(clamd) has added an .ndb line for it.
The EICAR string is never written here: it comes from the clamd fixture.
"""
import os
import re
import stat
import subprocess
import threading

from clamfstest.env import PYTHON, SLOW
from clamfstest.errnames import errname
from clamfstest.stats import read_stats
from clamfstest.wait import let_time_pass, wait_for
from fakeclamd import FakeClamd

# The live counters of a mount, for the tests that import them from here.
stats = read_stats

# Detected anywhere in a file (an .ndb body signature) once added; harmless
# bytes otherwise.
MARKER = b"clamfs-scan-suite:exec-marker:6b1d0e9a42"
MARKER_SIG = "Clamfs-Exec-Marker"
EICAR_SIG = "Eicar-Test.UNOFFICIAL"

_marker_added = set()


def ensure_marker_signature(clamd):
    """Adds the MARKER body signature to this clamd once (RELOAD)."""
    key = clamd.workdir
    if key not in _marker_added:
        clamd.add_signature(MARKER_SIG, MARKER)
        _marker_added.add(key)


def mount_scan(mount_clamfs, addr, *opts, backend=None, **kw):
    """A foreground clamfs (allow_other) scanning against clamd at addr
    (a socket path, "tcp://..." or a Clamd object's socket).

    These suites write a file and open it at once; under the default
    racy_window (2 s) every such open is a fresh scan, since a rewrite in
    the same timestamp tick could not be told apart. So the window is 0
    here unless a test sets it: test_sec_racy.py covers the default.
    They count the scans opens ask for, so files they write through the
    mount, or that sit beside a file an open waits for, are not scanned
    ahead in the background unless a test says so: test_scan_ahead.py and
    test_scan_ahead_dirs.py cover those defaults."""
    if hasattr(addr, "socket"):
        addr = addr.socket
    o = [] if addr is None else ["clamd=" + addr]
    if not any(x.startswith("racy_window=") for x in opts):
        o.append("racy_window=0")
    for key in ("scan_ahead", "scan_ahead_dirs"):
        if not any(x.split("=")[0] == key for x in opts):
            o.append(key + "=no")
    o += list(opts)
    return mount_clamfs(backend=backend, opts=o, **kw)


def put(path, data, mode=0o644):
    """Writes a file (directly, not through the mount), making parents."""
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def write_through(path, data):
    """Writes a file through the mount, write-only (such an open is not
    gated: nothing is scanned for it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def try_read(path):
    """('ok', bytes) or ('err', 'EACCES')."""
    try:
        with open(path, "rb") as f:
            return ("ok", f.read())
    except OSError as e:
        return ("err", errname(e.errno))


def read_all(mnt, names, threads=8, after=None):
    """Reads every file once through the mount with `threads` readers;
    after=(count, fn): fn() runs, in a thread of its own, once count reads
    are done (a fault in mid-run). Returns the failures as (name, error)."""
    failures, done = [], [0]
    lock = threading.Lock()
    it = iter(names)
    due = threading.Event()
    count, fn = after or (0, None)

    def reader():
        while True:
            with lock:
                name = next(it, None)
            if name is None:
                return
            r = try_read(os.path.join(mnt, name))
            with lock:
                done[0] += 1
                if r[0] != "ok":
                    failures.append((name, r[1]))
                if fn and done[0] >= count:
                    due.set()

    fault = threading.Thread(target=lambda: due.wait() and fn()) \
        if fn else None
    if fault:
        fault.start()
    ts = [threading.Thread(target=reader) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if fault:
        due.set()
        fault.join()
    return failures


def try_open(path, flags, mode=0o644):
    """('ok', None) (the fd is closed again) or ('err', name)."""
    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        return ("err", errname(e.errno))
    os.close(fd)
    return ("ok", None)


def delta(before, after, *names):
    """{name: after - before}; a counter the daemon lacks is a KeyError."""
    return {n: after[n] - before[n] for n in names}


# --- log lines ---------------------------------------------------------------

_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def _unquote(s):
    """Undoes the daemon's quoting: \\" \\\\ and \\xNN."""
    return re.sub(r'\\(x[0-9a-fA-F]{2}|.)',
                  lambda mt: chr(int(mt.group(1)[1:], 16))
                  if len(mt.group(1)) == 3 else mt.group(1), s)


def parse_kv(text):
    out = {}
    for k, v in _KV.findall(text):
        if v.startswith('"'):
            v = _unquote(v[1:-1])
        out[k] = v
    return out


def log_lines(m, kind):
    """Parsed `clamfs: <kind> k=v ...` lines of the daemon's stderr. The
    raw line is kept as '_line'."""
    out = []
    prefix = f"clamfs: {kind} "
    for line in m.stderr_text().splitlines():
        if line.startswith(prefix):
            d = parse_kv(line[len(prefix):])
            d["_line"] = line
            out.append(d)
    return out


def detections(m):
    return log_lines(m, "infected")


def scan_failures(m):
    return log_lines(m, "scan failed")


def wait_detections(m, n, timeout=5):
    wait_for(lambda: len(detections(m)) >= n, timeout)
    return detections(m)


O_PATH = 0o10000000


def daemon_files(m):
    """The backend's regular files the daemon of mount m holds open to
    read or write (not its O_PATH handles on inodes, not directories, not
    its own log files): a writer's file from its open to its release
    (which the kernel sends after close() returned), a file being scanned
    on close or ahead until its verdict is in (stored in the cache,
    counted, acted on)."""
    under = os.path.realpath(m.backend) + "/"
    out = []
    for n in os.listdir(f"/proc/{m.pid}/fd"):
        try:
            with open(f"/proc/{m.pid}/fdinfo/{n}") as f:
                flags = next(int(l.split()[1], 8) for l in f
                             if l.startswith("flags:"))
            if flags & O_PATH or \
                    not stat.S_ISREG(os.stat(f"/proc/{m.pid}/fd/{n}").st_mode):
                continue
            path = os.readlink(f"/proc/{m.pid}/fd/{n}")
            if path.startswith(under):
                out.append(path)
        except (OSError, StopIteration):
            continue  # closed meanwhile
    return out


def released(m, timeout=10):
    """Waits until the daemon holds no file open: every release of a
    writer closed through the mount has come, and every scan one asked
    for has ended."""
    assert wait_for(lambda: not daemon_files(m), timeout), daemon_files(m)


# --- processes ---------------------------------------------------------------

def spawn_opener(path, extra=""):
    """A python3 child that opens and reads path; prints 'ok N' or the
    errno name, and the time open() took."""
    code = (
        "import errno, os, sys, time\n"
        "t = time.monotonic()\n"
        + extra +
        "try:\n"
        "    fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "    n = len(os.read(fd, 1 << 20))\n"
        "    print('ok', n, time.monotonic() - t, flush=True)\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno], time.monotonic() - t, flush=True)\n")
    return subprocess.Popen([PYTHON, "-c", code, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def opener_result(p, timeout):
    """(outcome, seconds open() took) of a spawn_opener child; ("hung",
    inf) when it did not finish in time (it is left to the caller)."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return ("hung", float("inf"))
    words = out.split()
    assert words, err
    if words[0] == "ok":
        return ("ok", float(words[2]))
    return (words[0], float(words[1]))


def reap(procs):
    """Kills the children still running and waits for all of them."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


# A child that opens with libc's open() directly (no PEP 475 retry) after
# installing a SIGINT handler without SA_RESTART: a FUSE open answered with
# EINTR shows up as EINTR here.
RAW_OPEN_CHILD = r"""
import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
signal.siginterrupt(signal.SIGINT, True)
print("ready", flush=True)
t = time.monotonic()
fd = libc.open(os.fsencode(sys.argv[1]), os.O_RDONLY)
e = ctypes.get_errno()
dt = time.monotonic() - t
if fd >= 0:
    print("opened", dt, flush=True)
else:
    print(errno.errorcode.get(e, str(e)), dt, flush=True)
"""


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def proc_wchan(pid):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return ""


# --- a clamd that does not answer scans --------------------------------------

class SlowClamd:
    """A fake clamd on a UNIX socket: PONG to PING, "ClamAV 1.4.6" to
    VERSION, and for scans either OK (while .hang is clear), silence (while
    .hang is set; delay=None) or OK after `delay` seconds.
    .scans counts scan commands received."""

    SCAN_COMMANDS = (b"zFILDES", b"zINSTREAM", b"zSCAN", b"zCONTSCAN",
                     b"zMULTISCAN", b"nFILDES", b"nINSTREAM", b"nSCAN")

    def __init__(self, hang=True, delay=None):
        self.hang = threading.Event()
        if hang:
            self.hang.set()
        self.delay = delay
        self.scan_event = threading.Event()
        self.lock = threading.Lock()
        self.scans = 0
        self.fake = FakeClamd(self._behaviour)
        self.socket = self.fake.socket

    def _behaviour(self, ctx):
        cmd = ctx.command
        if cmd.endswith(b"PING"):
            return ("reply", "PONG")
        if cmd.endswith(b"VERSION"):
            return ("reply", "ClamAV 1.4.6")
        with self.lock:
            self.scans += 1
        self.scan_event.set()
        what = "stream" if cmd.endswith(b"INSTREAM") else "fd[1]"
        if self.hang.is_set():
            if self.delay is None:
                return ("silent",)
            let_time_pass(self.delay, "clamd takes this long to scan")
        return ("reply", f"{what}: OK")

    def wait_scans(self, n, timeout=10):
        return wait_for(lambda: self.scans >= n, timeout)

    def close(self):
        self.hang.clear()
        self.fake.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def run_clamfs_expect_fail(binary, backend, mnt, opts, timeout=20):
    """Runs `clamfs -f backend mnt -o opts` that must refuse to start;
    returns the CompletedProcess (kills and unmounts if it did start)."""
    argv = [binary, "-f", backend, mnt, "-o", ",".join(opts)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        out, err = p.communicate(timeout=30)
        raise AssertionError(f"{argv} started although it must not:\n{err}")
    return subprocess.CompletedProcess(argv, p.returncode, out, err)
