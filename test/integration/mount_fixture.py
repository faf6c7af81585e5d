# SPDX-License-Identifier: GPL-2.0-or-later
# pytest plugin: real FUSE mounts of clamfs. `mount_clamfs` is a factory
# (backend, mountpoint, extra -o options and arguments, foreground or
# daemon); `fs` is one foreground mount of a fresh backend. Teardown unmounts,
# checks the daemon exited 0 without sanitizer reports and that nothing is
# left mounted.
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from fsutil import SANITIZE, SLOW

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:",
                     "LeakSanitizer", "ERROR: UndefinedBehaviorSanitizer",
                     "WARNING: ThreadSanitizer")


def built_binary(env_var, *rel):
    """The program named by env_var, else CLAMFS_BUILD_DIR/rel...; the test
    fails when it is not there."""
    b = os.environ.get(env_var)
    if not b:
        bd = os.environ.get("CLAMFS_BUILD_DIR")
        if bd:
            b = os.path.join(bd, *rel)
    if not b or not os.access(b, os.X_OK):
        pytest.fail(f"{env_var} not set or not executable: {b!r}")
    return b


def clamfs_bin():
    return built_binary("CLAMFS_BIN", "clamfs", "clamfs")


def extra_test_opts():
    """-o options every mount of the suite gets, from CLAMFS_TEST_OPTS
    (comma-separated), e.g. to point the daemon at a test clamd."""
    return [o for o in os.environ.get("CLAMFS_TEST_OPTS", "").split(",") if o]


def _unescape(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


class MountEntry:
    def __init__(self, line):
        parts = line.split()
        sep = parts.index("-")
        self.mount_id = int(parts[0])
        self.mountpoint = _unescape(parts[4])
        self.mount_opts = parts[5].split(",")
        self.fstype = parts[sep + 1]
        self.source = _unescape(parts[sep + 2])
        self.super_opts = parts[sep + 3].split(",") if len(parts) > sep + 3 else []

    def __repr__(self):
        return (f"<{self.source} on {self.mountpoint} type {self.fstype} "
                f"({','.join(self.mount_opts)}; {','.join(self.super_opts)})>")


def mounts():
    with open("/proc/self/mountinfo") as f:
        return [MountEntry(l) for l in f if l.strip()]


def fuse_mounts_at(path):
    # abspath, not realpath: realpath would lstat the mountpoint, i.e. send
    # the new mount a GETATTR and fill the kernel's attribute cache.
    path = os.path.abspath(path)
    return [m for m in mounts()
            if m.mountpoint == path and m.fstype.startswith("fuse")]


def sanitizer_lines(text):
    return [l for l in text.splitlines()
            if any(mk in l for mk in SANITIZER_MARKERS)]


def find_daemon_pids(binary, mnt):
    """Pids of processes running `binary` with `mnt` among their arguments."""
    pids = []
    real = os.path.realpath(binary)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{d}/exe")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if exe.replace(" (deleted)", "") != real:
            continue
        if os.fsencode(mnt) in argv:
            pids.append(int(d))
    return pids


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


class Mount:
    """One running clamfs. .backend .mnt .proc (foreground) .pid"""

    def __init__(self, backend, mnt, argv, workdir, foreground):
        self.backend = backend
        self.mnt = mnt
        self.argv = argv
        self.workdir = workdir
        self.foreground = foreground
        self.proc = None
        self.pid = None
        self.returncode = None
        self.stderr_path = os.path.join(workdir, "clamfs.stderr")
        self.stdout_path = os.path.join(workdir, "clamfs.stdout")
        self.san_prefix = os.path.join(workdir, "sanitizer")
        self.torn_down = False

    # paths
    def m(self, *rel):
        return os.path.join(self.mnt, *rel)

    def b(self, *rel):
        return os.path.join(self.backend, *rel)

    def stderr_text(self):
        out = ""
        for p in [self.stderr_path] + self.sanitizer_logs():
            try:
                with open(p, errors="replace") as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def sanitizer_logs(self):
        d, base = os.path.split(self.san_prefix)
        try:
            return [os.path.join(d, n) for n in sorted(os.listdir(d))
                    if n.startswith(base + ".")]
        except OSError:
            return []

    def entries(self):
        return fuse_mounts_at(self.mnt)

    def is_mounted(self):
        return bool(self.entries())

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def threads(self):
        with open(f"/proc/{self.pid}/status") as f:
            for l in f:
                if l.startswith("Threads:"):
                    return int(l.split()[1])
        return 0

    def wait_exit(self, timeout):
        """Waits for the daemon to exit; returns its status (None if it is
        not our child and just vanished; raises on timeout)."""
        deadline = time.monotonic() + timeout
        if self.proc is not None:
            try:
                self.returncode = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"clamfs (pid {self.pid}) did not exit within {timeout}s")
            return self.returncode
        while time.monotonic() < deadline:
            if not pid_alive(self.pid):
                return None
            time.sleep(0.02)
        raise AssertionError(f"clamfs (pid {self.pid}) did not exit within {timeout}s")

    def unmount(self, method="fusermount3"):
        """Unmounts the way a user would; returns the command's result."""
        if method == "fusermount3":
            cmd = ["fusermount3", "-u", self.mnt]
        elif method == "umount":
            cmd = ["umount", self.mnt]
        else:
            raise ValueError(method)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30 * SLOW)

    def teardown(self, check=True):
        """Unmounts if still mounted, waits for the daemon and checks it ended
        well. Returns a list of problems (empty when all is fine)."""
        if self.torn_down:
            return []
        self.torn_down = True
        problems = []
        if self.is_mounted():
            ok = False
            for _ in range(25):
                r = self.unmount()
                if r.returncode == 0:
                    ok = True
                    break
                if not self.is_mounted():
                    ok = True
                    break
                time.sleep(0.2)
            if not ok:
                problems.append(f"fusermount3 -u {self.mnt} failed: {r.stderr.strip()}; "
                                "fell back to umount -l")
                subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        try:
            rc = self.wait_exit(20 * SLOW)
        except AssertionError as e:
            problems.append(str(e))
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            if self.proc is not None:
                self.proc.wait()
            rc = None
        if check and self.proc is not None and rc != 0 and not problems:
            problems.append(f"clamfs exited with status {rc}")
        san = sanitizer_lines(self.stderr_text())
        if san:
            problems.append("sanitizer report:\n" + "\n".join(san[:20]))
        left = self.entries()
        if left:
            problems.append(f"still mounted after teardown: {left}")
            for _ in left:
                subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        if problems:
            problems.append("daemon stderr (tail):\n" + self.stderr_text()[-4000:])
        return problems


def make_tree_dir(prefix="clamfs-t"):
    """A temp dir every test user can traverse (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(d, 0o755)
    return d


def sanitizer_env(m):
    env = dict(os.environ)
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
        cur = env.get(var, "")
        env[var] = (cur + ":" if cur else "") + f"log_path={m.san_prefix}"
    return env


def start_clamfs(backend, mnt, opts=(), args=(), foreground=True,
                 allow_other=True, backend_as_option=False, debug=False,
                 workdir=None, wait=True, timeout=10, preexec_fn=None):
    """Starts clamfs. foreground: `clamfs -f ...` as a child, waits (bounded)
    for the mount to show in mountinfo. Otherwise runs the daemonizing
    command, which must return 0 with the mount already up. preexec_fn runs
    in the child before exec (e.g. to set resource limits)."""
    binary = clamfs_bin()
    workdir = workdir or make_tree_dir("clamfs-w")
    o = (["allow_other"] if allow_other else []) + extra_test_opts() + list(opts)
    argv = [binary]
    if foreground:
        argv.append("-d" if debug else "-f")
    if backend_as_option:
        o.insert(0, f"backend={backend}")
        argv.append(mnt)
    else:
        argv += [backend, mnt]
    if o:
        argv += ["-o", ",".join(o)]
    argv += list(args)
    m = Mount(backend, mnt, argv, workdir, foreground)
    env = sanitizer_env(m) if not foreground else dict(os.environ)
    errf = open(m.stderr_path, "wb")
    outf = open(m.stdout_path, "wb")
    try:
        if foreground:
            m.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                      stdout=outf, stderr=errf, env=env,
                                      preexec_fn=preexec_fn)
            m.pid = m.proc.pid
        else:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=outf,
                               stderr=errf, env=env, timeout=timeout * SLOW,
                               preexec_fn=preexec_fn)
            m.launcher_rc = r.returncode
            m.up_on_return = bool(fuse_mounts_at(mnt))
            pids = find_daemon_pids(binary, mnt)
            m.pid = pids[0] if len(pids) == 1 else None
            if r.returncode != 0:
                raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: "
                                     f"{m.stderr_text()}")
            return m
    finally:
        errf.close()
        outf.close()
    if not wait:
        return m
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if fuse_mounts_at(mnt):
            return m
        if m.proc.poll() is not None:
            raise AssertionError(f"{' '.join(argv)} exited {m.proc.returncode} "
                                 f"before mounting:\n{m.stderr_text()}")
        time.sleep(0.01)
    m.proc.kill()
    m.proc.wait()
    raise AssertionError(f"{' '.join(argv)}: not mounted after {timeout * SLOW}s:\n"
                         f"{m.stderr_text()}")


class MountFactory:
    def __init__(self):
        self.mounts = []
        self.dirs = []

    def tempdir(self, prefix="clamfs-t"):
        d = make_tree_dir(prefix)
        self.dirs.append(d)
        return d

    def __call__(self, backend=None, mnt=None, opts=(), args=(), **kw):
        base = None
        if backend is None or mnt is None:
            base = self.tempdir()
        if backend is None:
            backend = os.path.join(base, "b")
            os.mkdir(backend, 0o755)
            os.chmod(backend, 0o755)
        if mnt is None:
            mnt = os.path.join(base, "m")
            os.mkdir(mnt, 0o755)
            os.chmod(mnt, 0o755)
        workdir = self.tempdir("clamfs-w")
        m = start_clamfs(backend, mnt, opts=opts, args=args, workdir=workdir, **kw)
        self.mounts.append(m)
        return m

    def finish(self):
        problems = []
        for m in reversed(self.mounts):
            for p in m.teardown():
                problems.append(f"[{m.mnt}] {p}")
        still = any(fuse_mounts_at(m.mnt) for m in self.mounts)
        if not still:
            for d in self.dirs:
                shutil.rmtree(d, ignore_errors=True)
        return problems


@pytest.fixture
def mount_clamfs():
    """Factory: mount_clamfs(backend=None, mnt=None, opts=(), args=(),
    foreground=True, allow_other=True, backend_as_option=False, debug=False)
    -> Mount. Every mount is torn down and checked after the test."""
    f = MountFactory()
    yield f
    problems = f.finish()
    if problems:
        pytest.fail("clamfs teardown:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def fs(mount_clamfs):
    """A foreground clamfs (allow_other, default options) of an empty
    backend."""
    return mount_clamfs()


@pytest.fixture
def tw(fs):
    """A Twin (see fsutil) on a fresh mount; checked again at the end."""
    from fsutil import Twin
    return Twin(fs)


@pytest.fixture
def session_clamd_opts(clamd, monkeypatch):
    """Points every mount of the test at the session's private clamd
    (through CLAMFS_TEST_OPTS, ahead of the test's own options, which win):
    the mirror tests then run with scanning on, as clamfs is deployed."""
    cur = os.environ.get("CLAMFS_TEST_OPTS", "")
    monkeypatch.setenv("CLAMFS_TEST_OPTS",
                       ",".join(o for o in ("clamd=" + clamd.socket, cur) if o))
