# SPDX-License-Identifier: GPL-2.0-or-later
"""Real FUSE mounts: Mount is one running daemon (clamfs, or any FUSE
program a benchmark compares it with) and checks its end; start_clamfs()
and launch() start one; MountFactory keeps a test's mounts and their
directories and tears them all down. Teardown unmounts, checks the daemon
exited 0 without sanitizer reports and that nothing is left mounted."""
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time

from .env import SLOW, clamfs_bin, extra_test_opts, sanitizer_env, \
    sanitizer_lines
from .mountinfo import fuse_mounts_at, holders
from .procs import pid_alive, pids_of, stacks, threads


class Mount:
    """One running FUSE daemon (clamfs, or a program compared with it):
    .backend .mnt .argv .workdir (its stdout/stderr and sanitizer logs)
    .proc (when it is our child) .pid"""

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
        return threads(self.pid)

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
        devs = [e.dev for e in self.entries()]
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
            held = [h for d in devs for h in holders(d)]
            if held:
                problems.append("its mount lives on in other mount "
                                "namespaces (pid, command, mountpoint): "
                                f"{held}")
            problems.append("its threads:\n" + stacks(self.pid))
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


    def close(self, check=True):
        """Teardown for a program that is not a test (bench/, the demo):
        raises RuntimeError with the problems instead of returning them."""
        problems = self.teardown(check)
        if problems:
            raise RuntimeError(f"{self.argv[0]} on {self.mnt}:\n" +
                               "\n".join(problems))


def make_tree_dir(prefix="clamfs-t"):
    """A temp dir every test user can traverse (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(d, 0o755)
    return d


def test_nofile():
    """A preexec_fn giving a daemon the file limit CLAMFS_TEST_NOFILE
    (soft and hard), or None: with a few hundred, clamfs's inode table is
    always short of fds and parks every file it can, so that a suite run
    so has every request on a file meet a parked one (ctest's py_parked)."""
    n = int(os.environ.get("CLAMFS_TEST_NOFILE", "0"))
    if not n:
        return None

    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return pre


def launch(argv, backend, mnt, workdir=None, timeout=10, wait=True,
           env=None, preexec_fn=None, pass_fds=()):
    """Starts a FUSE daemon that stays in the foreground (argv holds -f or
    the like) as a child, stdout and stderr to files in workdir, and waits
    (bounded) for its mount to show in mountinfo. Returns the Mount."""
    workdir = workdir or make_tree_dir("clamfs-w")
    m = Mount(backend, mnt, argv, workdir, True)
    with open(m.stderr_path, "wb") as errf, \
            open(m.stdout_path, "wb") as outf:
        m.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=outf, stderr=errf, env=env,
                                  preexec_fn=preexec_fn or test_nofile(),
                                  pass_fds=pass_fds)
    m.pid = m.proc.pid
    m.t_launch = time.monotonic()
    if wait:
        wait_mounted(m, timeout)
    return m


def wait_mounted(m, timeout=10):
    """Waits until m's mount shows in mountinfo; raises with the daemon's
    stderr when it exits first or does not mount in time."""
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if fuse_mounts_at(m.mnt):
            m.t_mounted = time.monotonic()
            return m
        if m.proc.poll() is not None:
            raise AssertionError(f"{' '.join(m.argv)} exited "
                                 f"{m.proc.returncode} before mounting:\n"
                                 f"{m.stderr_text()}")
        time.sleep(0.01)
    m.proc.kill()
    m.proc.wait()
    raise AssertionError(f"{' '.join(m.argv)}: not mounted after "
                         f"{timeout * SLOW}s:\n{m.stderr_text()}")


def clamfs_argv(backend, mnt, opts=(), args=(), foreground=True,
                allow_other=True, backend_as_option=False, debug=False,
                binary=None):
    """The clamfs command line; every mount also gets CLAMFS_TEST_OPTS."""
    o = (["allow_other"] if allow_other else []) + extra_test_opts() + \
        list(opts)
    argv = [binary or clamfs_bin()]
    if foreground:
        argv.append("-d" if debug else "-f")
    if backend_as_option:
        o.insert(0, f"backend={backend}")
        argv.append(mnt)
    else:
        argv += [backend, mnt]
    if o:
        argv += ["-o", ",".join(o)]
    return argv + list(args)


def start_clamfs(backend, mnt, opts=(), args=(), foreground=True,
                 allow_other=True, backend_as_option=False, debug=False,
                 workdir=None, wait=True, timeout=10, preexec_fn=None,
                 binary=None):
    """Starts clamfs (binary, default the build's). foreground: `clamfs -f
    ...` as a child, waits (bounded) for the mount to show in mountinfo.
    Otherwise runs the daemonizing command, which must return 0 with the
    mount already up. preexec_fn runs in the child before exec (e.g. to
    set resource limits)."""
    argv = clamfs_argv(backend, mnt, opts, args, foreground, allow_other,
                       backend_as_option, debug, binary)
    if foreground:
        return launch(argv, backend, mnt, workdir, timeout, wait,
                      preexec_fn=preexec_fn)
    workdir = workdir or make_tree_dir("clamfs-w")
    m = Mount(backend, mnt, argv, workdir, False)
    with open(m.stderr_path, "wb") as errf, \
            open(m.stdout_path, "wb") as outf:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=outf,
                           stderr=errf, env=sanitizer_env(m.san_prefix),
                           timeout=timeout * SLOW,
                           preexec_fn=preexec_fn or test_nofile())
    m.launcher_rc = r.returncode
    m.up_on_return = bool(fuse_mounts_at(mnt))
    pids = pids_of(argv[0], mnt)
    m.pid = pids[0] if len(pids) == 1 else None
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: "
                             f"{m.stderr_text()}")
    return m


class MountFactory:
    prefix = "clamfs-t"  # of the temporary directories it makes

    def __init__(self):
        self.mounts = []
        self.dirs = []

    def tempdir(self, prefix=None):
        d = make_tree_dir(prefix or self.prefix)
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
