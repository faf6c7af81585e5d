# SPDX-License-Identifier: GPL-2.0-or-later
# The clamfs command line: --help/--version, both command forms, the fstab
# form through mount.fuse3, daemon mode, bad input (one line, exit 1,
# nothing mounted), mounting over the backend itself, unmounting by
# fusermount3/umount/SIGTERM/SIGINT, and the options that must really apply
# (threads, -s, timeouts, ro, fsname/subtype, default_permissions).
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from clamfstest.env import PYTHON, SLOW, clamfs_bin, extra_test_opts
from fsutil import UID_A, GID_A, outcome, run_as
from clamfstest.mount import make_tree_dir
from clamfstest.mountinfo import UNSHARE_MOUNT, fuse_mounts_at, holders, mounts
from clamfstest.wait import let_time_pass, wait_for
from clamfstest.procs import pids_of, wait_gone

# Mirror tests run with scanning on, against the private clamd.
pytestmark = pytest.mark.usefixtures("session_clamd_opts")

HERE = os.path.dirname(os.path.abspath(__file__))


def run_clamfs(args, tmpdir, timeout=30, env=None):
    """Runs clamfs with stdout/stderr in files (a daemon child holding a pipe
    open would hang us). Returns (rc, stdout, stderr)."""
    out, err = os.path.join(tmpdir, "out"), os.path.join(tmpdir, "err")
    with open(out, "wb") as o, open(err, "wb") as e:
        r = subprocess.run([clamfs_bin()] + args, stdin=subprocess.DEVNULL, stdout=o,
                           stderr=e, timeout=timeout * SLOW, env=env)
    with open(out, errors="replace") as o, open(err, errors="replace") as e:
        return r.returncode, o.read(), e.read()


@pytest.fixture
def tmp():
    d = make_tree_dir("clamfs-cli")
    yield d
    for m in fuse_mounts_at(os.path.join(d, "m")):
        subprocess.run(["umount", "-l", m.mountpoint])
    subprocess.run(["rm", "-rf", d])


def dirs(tmp):
    b, m = os.path.join(tmp, "b"), os.path.join(tmp, "m")
    for d in (b, m):
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
    return b, m


# --- help and version -------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_lists_every_option(tmp, flag):
    rc, out, err = run_clamfs([flag], tmp)
    assert rc == 0, err
    text = out + err
    for opt in ("backend=", "threads=", "clone_fd", "attr_timeout=", "entry_timeout=",
                "negative_timeout=", "no_default_permissions", "-f", "-d", "-s",
                "--version", "--help", "allow_other"):
        assert opt in text, f"--help does not mention {opt}"
    assert re.search(r"BACKEND\s+MOUNTPOINT", text), "usage line missing"


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(tmp, flag):
    rc, out, err = run_clamfs([flag], tmp)
    assert rc == 0, err
    with open(os.path.join(HERE, "..", "..", "CMakeLists.txt")) as f:
        ver = re.search(r"project\(clamfs\s+VERSION\s+([0-9.]+)", f.read()).group(1)
    text = out + err
    assert "clamfs" in text and ver in text, text
    assert re.search(r"FUSE.*3\.\d+", text), "libfuse version not printed"


# --- bad input ---------------------------------------------------------------------

def _bad_cases(tmp):
    b, m = dirs(tmp)
    f = os.path.join(tmp, "a-file")
    with open(f, "w") as fh:
        fh.write("x")
    missing = os.path.join(tmp, "no-such-dir")
    return {
        "missing backend": ([missing, m], [missing]),
        "missing backend -o": (["-o", f"backend={missing}", m], [missing]),
        "backend not a dir": ([f, m], [f]),
        "missing mountpoint": ([b, missing], [missing]),
        "mountpoint is a file": ([b, f], [f]),
        "unknown option": ([b, m, "-o", "bogus_option_xyz"], ["bogus_option_xyz"]),
        "unknown flag": ([b, m, "--bogus-flag"], ["bogus-flag"]),
        "threads=abc": ([b, m, "-o", "threads=abc"], ["threads"]),
        "threads=0": ([b, m, "-o", "threads=0"], ["threads"]),
        "threads=-3": ([b, m, "-o", "threads=-3"], ["threads"]),
        "attr_timeout=abc": ([b, m, "-o", "attr_timeout=abc"], ["attr_timeout"]),
        "entry_timeout=-1": ([b, m, "-o", "entry_timeout=-1"], ["entry_timeout"]),
        "negative_timeout=x": ([b, m, "-o", "negative_timeout=x"], ["negative_timeout"]),
        "no mountpoint": ([b], ["mountpoint", "MOUNTPOINT", "usage", "missing"]),
        "no arguments": ([], ["mountpoint", "MOUNTPOINT", "usage", "missing", "backend"]),
        "backend twice": (["-o", f"backend={b}", b, m], ["backend", b, m]),
        "too many args": ([b, m, os.path.join(tmp, "third")], ["third", "argument"]),
    }


BAD = ["missing backend", "missing backend -o", "backend not a dir", "missing mountpoint",
       "mountpoint is a file", "unknown option", "unknown flag", "threads=abc", "threads=0",
       "threads=-3", "attr_timeout=abc", "entry_timeout=-1", "negative_timeout=x",
       "no mountpoint", "no arguments", "backend twice", "too many args"]


# clamfs(8) EXIT STATUS: 2 usage/configuration, 4 backend/mountpoint/mount
MOUNT_CASES = {"missing backend", "missing backend -o", "backend not a dir",
               "missing mountpoint", "mountpoint is a file"}


def assert_one_line_error(rc, out, err, words, fuse_ok=False, status=2):
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == status, f"exit status {rc}, stderr: {err!r}"
    assert len(lines) == 1, f"want one line on stderr, got {lines!r}"
    prefixes = ("clamfs: ", "fuse: ") if fuse_ok else ("clamfs: ",)
    assert lines[0].startswith(prefixes), lines[0]
    assert any(w in lines[0] for w in words), f"{lines[0]!r} does not name {words}"


@pytest.mark.parametrize("mode", ["foreground", "daemon"])
@pytest.mark.parametrize("case", BAD)
def test_bad_invocation(tmp, case, mode):
    args, words = _bad_cases(tmp)[case]
    if mode == "foreground":
        args = ["-f"] + args
    before = {m.mountpoint for m in _all_fuse()}
    rc, out, err = run_clamfs(args, tmp)
    assert_one_line_error(rc, out, err, words,
                          fuse_ok=case in ("unknown option", "unknown flag"),
                          status=4 if case in MOUNT_CASES else 2)
    let_time_pass(0.05, "a daemon left behind would mount within this",
                  scaled=True)
    assert {m.mountpoint for m in _all_fuse()} == before, "something got mounted"
    assert not pids_of(clamfs_bin(), os.path.join(tmp, "m")), "daemon left running"


def _all_fuse():
    from clamfstest.mountinfo import mounts
    return [m for m in mounts() if m.fstype.startswith("fuse")]


@pytest.mark.parametrize("mode", ["foreground", "daemon"])
def test_mountpoint_already_mounted(mount_clamfs, tmp, mode):
    fs = mount_clamfs()
    with open(fs.m("probe"), "w") as f:
        f.write("first")
    other = os.path.join(tmp, "other")
    os.mkdir(other)
    args = ([other, fs.mnt] if mode == "daemon" else ["-f", other, fs.mnt])
    rc, out, err = run_clamfs(args, tmp)
    assert_one_line_error(rc, out, err, [fs.mnt], status=4)
    assert len(fuse_mounts_at(fs.mnt)) == 1
    with open(fs.m("probe")) as f:
        assert f.read() == "first"  # the first mount still serves


# --- command forms and mount options ------------------------------------------------

def _proc_mounts_line(mnt):
    with open("/proc/mounts") as f:
        for l in f:
            p = l.split()
            if p[1] == mnt:
                return p
    return None


@pytest.mark.parametrize("form", ["positional", "backend_option"])
def test_command_forms_and_proc_mounts(mount_clamfs, form):
    fs = mount_clamfs(backend_as_option=(form == "backend_option"))
    p = _proc_mounts_line(fs.mnt)
    assert p is not None
    assert p[0] == fs.backend and p[2] == "fuse.clamfs", p
    opts = p[3].split(",")
    assert "allow_other" in opts and "default_permissions" in opts, opts
    with open(fs.m("x"), "w") as f:
        f.write("hello")
    with open(fs.b("x")) as f:
        assert f.read() == "hello"


def test_no_default_permissions_and_fsname_subtype(mount_clamfs):
    fs = mount_clamfs(opts=("no_default_permissions", "fsname=myshare", "subtype=special"))
    p = _proc_mounts_line(fs.mnt)
    assert p[0] == "myshare" and p[2] == "fuse.special", p
    assert "default_permissions" not in p[3].split(",")


def test_read_only_mount(mount_clamfs):
    b = mount_clamfs.tempdir()
    with open(os.path.join(b, "f"), "w") as f:
        f.write("ro")
    fs = mount_clamfs(backend=b, opts=("ro",))
    e = fs.entries()[0]
    assert "ro" in e.mount_opts
    with open(fs.m("f")) as f:
        assert f.read() == "ro"
    assert outcome(open, fs.m("f"), "w") == ("err", "EROFS")
    assert outcome(os.mkdir, fs.m("d")) == ("err", "EROFS")
    assert outcome(os.unlink, fs.m("f")) == ("err", "EROFS")
    assert outcome(os.chmod, fs.m("f"), 0o600) == ("err", "EROFS")
    assert outcome(os.setxattr, fs.m("f"), "user.x", b"1") == ("err", "EROFS")


def test_without_allow_other_users_are_refused(mount_clamfs):
    fs = mount_clamfs(allow_other=False)
    os.chmod(fs.backend, 0o755)
    with open(fs.b("f"), "w") as f:
        f.write("x")
    os.chmod(fs.b("f"), 0o644)
    r = run_as(UID_A, GID_A, [], 'emit(outcome(os.stat, P("f")))', fs.mnt)
    assert r == ["err", "EACCES"]
    with open(fs.m("f")) as f:
        assert f.read() == "x"


def test_fstab_form_via_mount_fuse3(tmp):
    """An fstab line `BACKEND MNT fuse.clamfs allow_other,noatime 0 0` makes
    mount(8) run `mount.fuse3 BACKEND MNT -t fuse.clamfs -o ...`, which runs
    `clamfs BACKEND MNT -o ...` from PATH; clamfs daemonizes; umount ends it.
    (mount(8) itself would reset PATH, so the helper is called directly.)"""
    b, m = dirs(tmp)
    with open(os.path.join(b, "f"), "w") as f:
        f.write("fstab")
    bindir = os.path.join(tmp, "bin")
    os.mkdir(bindir)
    os.symlink(clamfs_bin(), os.path.join(bindir, "clamfs"))
    env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        env[var] = (env.get(var, "") + ":" if env.get(var) else "") + \
            f"log_path={os.path.join(tmp, 'san')}"
    opts = ",".join(["allow_other", "noatime"] + extra_test_opts())
    r = subprocess.run(["mount.fuse3", b, m, "-t", "fuse.clamfs", "-o", opts],
                       env=env, capture_output=True, text=True, timeout=30 * SLOW)
    assert r.returncode == 0, r.stderr
    try:
        p = _proc_mounts_line(m)
        assert p and p[0] == b and p[2] == "fuse.clamfs", p
        assert "noatime" in p[3].split(","), p
        with open(os.path.join(m, "f")) as f:
            assert f.read() == "fstab"
        pids = pids_of(os.path.join(bindir, "clamfs"), m) or \
            pids_of(clamfs_bin(), m)
        assert len(pids) == 1, pids
    finally:
        r = subprocess.run(["umount", m], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    wait_gone(pids[0])
    assert not fuse_mounts_at(m)
    _assert_no_sanitizer_logs(tmp)


def _assert_no_sanitizer_logs(tmp):
    logs = [n for n in os.listdir(tmp) if n.startswith("san.")]
    text = ""
    for n in logs:
        with open(os.path.join(tmp, n), errors="replace") as f:
            text += f.read()
    assert not text.strip(), text[:4000]


# --- daemon mode, unmounting ----------------------------------------------------------

@pytest.mark.parametrize("form", ["positional", "backend_option"])
def test_daemon_mode(mount_clamfs, form):
    fs = mount_clamfs(foreground=False, backend_as_option=(form == "backend_option"))
    assert fs.launcher_rc == 0
    assert fs.up_on_return, "the command returned before the mount was up"
    assert fs.pid and fs.alive()
    with open(fs.m("f"), "w") as f:
        f.write("daemon")
    with open(fs.b("f")) as f:
        assert f.read() == "daemon"
    r = fs.unmount("fusermount3")
    assert r.returncode == 0, r.stderr
    fs.wait_exit(15 * SLOW)
    assert not fs.is_mounted()


@pytest.mark.parametrize("how", ["fusermount3", "umount", "SIGTERM", "SIGINT"])
def test_unmount_ends_daemon_cleanly(mount_clamfs, how):
    fs = mount_clamfs()
    with open(fs.m("f"), "w") as f:
        f.write("before unmount")
    if how in ("SIGTERM", "SIGINT"):
        fs.proc.send_signal(getattr(signal, how))
    else:
        r = fs.unmount(how)
        assert r.returncode == 0, r.stderr
    rc = fs.proc.wait(15 * SLOW)
    assert rc == 0, fs.stderr_text()
    assert not fs.is_mounted()
    with open(fs.b("f")) as f:
        assert f.read() == "before unmount"


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_while_busy(mount_clamfs, sig):
    """A signal while files are open and requests are in flight still
    unmounts and exits 0 (lazily: open files keep working until closed is
    not required, but the daemon must not hang or crash)."""
    fs = mount_clamfs()
    with open(fs.b("big"), "wb") as f:
        f.write(os.urandom(4 << 20))
    stop = threading.Event()
    reads = [0, 0, 0]

    def reader(k):
        while not stop.is_set():
            try:
                with open(fs.m("big"), "rb") as f:
                    while f.read(1 << 20):
                        reads[k] += 1
            except OSError:
                return
    ts = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    # every reader is at it: files open, requests in flight
    assert wait_for(lambda: all(reads), 10), reads
    fs.proc.send_signal(getattr(signal, sig))
    try:
        rc = fs.proc.wait(20 * SLOW)
    finally:
        stop.set()
        for t in ts:
            t.join(20 * SLOW)
    assert rc == 0, fs.stderr_text()
    assert not fs.is_mounted()


def test_busy_unmount_refused_then_works(mount_clamfs):
    fs = mount_clamfs()
    os.mkdir(fs.m("d"))
    fd = os.open(fs.m("d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        r = fs.unmount("fusermount3")
        assert r.returncode != 0
        assert fs.is_mounted() and fs.alive()
        assert os.listdir(fd) == []
    finally:
        os.close(fd)
    r = fs.unmount("fusermount3")
    assert r.returncode == 0, r.stderr
    assert fs.proc.wait(15 * SLOW) == 0


def in_new_mount_namespace(fs, unshare):
    """A process (sleep) in a mount namespace made by the unshare argv,
    once it runs there, with its copy of fs's mount."""
    dev = fs.entries()[0].dev
    mine = os.stat("/proc/self/ns/mnt").st_ino
    p = subprocess.Popen([*unshare, "sleep", "120"])

    def running():
        try:
            with open(f"/proc/{p.pid}/comm") as f:
                return f.read().strip() == "sleep" and \
                    os.stat(f"/proc/{p.pid}/ns/mnt").st_ino != mine
        except OSError:
            return False
    assert wait_for(running, 10), "no sleep in a namespace of its own"
    return p, dev


def test_unmount_ends_daemon_with_a_namespace_of_the_test_tools(mount_clamfs):
    """The tests' and the Debian 13 lane's mount namespaces
    (UNSHARE_MOUNT, scripts/new-mount-namespace) start with a copy of every
    mount: they must drop their copies of FUSE mounts, or a daemon unmounted
    meanwhile serves on for as long as that namespace lives (the soak's
    "hung at exit", whose namespace was CI's Debian 13 lane)."""
    fs = mount_clamfs()
    p, dev = in_new_mount_namespace(fs, UNSHARE_MOUNT)
    try:
        r = fs.unmount("fusermount3")
        assert r.returncode == 0, r.stderr
        assert fs.proc.wait(15 * SLOW) == 0, (holders(dev), fs.stderr_text())
        assert "no longer mounted here" not in fs.stderr_text()
    finally:
        p.kill()
        p.wait()


def test_private_namespace_copy_keeps_the_daemon_and_is_named(mount_clamfs):
    """What clamfs.8 says of unmounting: a mount copied into a namespace
    with private propagation stays in use there, so the daemon serves on,
    says so in its log (once, within its 10 s status tick), and ends when
    the last copy goes. holders() names who keeps it."""
    fs = mount_clamfs()
    # in two pieces: the guard below finds every other such command
    p, dev = in_new_mount_namespace(
        fs, ["un" "share", "--mount", "--propagation", "private"])
    assert any(m.dev == dev for m in mounts(p.pid))
    said = "no longer mounted here, but the mount is still in use"
    try:
        r = fs.unmount("fusermount3")
        assert r.returncode == 0, r.stderr
        assert not fs.is_mounted()
        assert wait_for(lambda: said in fs.stderr_text(), 15), \
            fs.stderr_text()
        assert fs.alive(), "the copy in the other namespace is still in use"
        assert [h[0] for h in holders(dev)] == [p.pid]
    finally:
        p.kill()
        p.wait()
    assert fs.proc.wait(15 * SLOW) == 0, fs.stderr_text()
    assert fs.stderr_text().count(said) == 1


def test_tree_makes_no_namespace_that_keeps_fuse_mounts():
    """Siblings of the above: the project's scripts, tests and benchmarks
    make no mount namespace with unshare(1)'s mount flags, only with
    scripts/new-mount-namespace."""
    top = os.path.dirname(os.path.dirname(HERE))
    # in two pieces, so that this line is not a finding of its own; -m
    # anywhere in a cluster of short options (-m, -Um, -mpf) or --mount
    making = re.compile("un" "share"
                        r"""\b.*(["'\s]-[A-Za-z]*m[A-Za-z]*\b|--mount)""")
    bad = []
    for sub in ("scripts", "test", "bench", ".ci"):
        for d, dirs, names in os.walk(os.path.join(top, sub)):
            # compiled Python holds the two pieces above joined
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for n in names:
                path = os.path.join(d, n)
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if b"\0" in data:
                    continue  # not source
                lines = data.decode(errors="replace").splitlines()
                for i, line in enumerate(lines, 1):
                    if making.search(line):
                        bad.append(f"{os.path.relpath(path, top)}:{i}: "
                                   f"{line.strip()}")
    assert not bad, "mount namespaces that keep the host's FUSE mounts " \
        "(use clamfstest.mountinfo.UNSHARE_MOUNT):\n" + "\n".join(bad)


def test_debug_flag_stays_in_foreground(mount_clamfs):
    fs = mount_clamfs(debug=True)  # -d without -f
    with open(fs.m("f"), "w") as f:
        f.write("debug")
    # the requests are served once the daemon would have daemonized: its
    # parent, the process started here, would then exit
    let_time_pass(0.2, "a daemonizing parent would exit within this",
                  scaled=True)
    assert fs.alive(), "-d must imply -f"
    assert len(fs.stderr_text().splitlines()) > 3, "-d printed no debug log"


# --- mounting over the backend itself ---------------------------------------------

@pytest.mark.parametrize("form", ["positional", "backend_option"])
def test_mount_in_place(mount_clamfs, form):
    d = os.path.join(mount_clamfs.tempdir(), "share")
    os.mkdir(d, 0o755)
    with open(os.path.join(d, "existing"), "w") as f:
        f.write("was here before")
    os.mkdir(os.path.join(d, "sub"))
    under = os.open(d, os.O_RDONLY | os.O_DIRECTORY)  # the backend, under the mount
    try:
        ino_before = os.stat(os.path.join(d, "existing")).st_ino
        fs = mount_clamfs(backend=d, mnt=d, backend_as_option=(form == "backend_option"))
        assert fs.is_mounted()
        p = _proc_mounts_line(d)
        assert p[0] == d and p[2] == "fuse.clamfs"
        assert os.stat(os.path.join(d, "existing")).st_ino == ino_before
        with open(os.path.join(d, "existing")) as f:
            assert f.read() == "was here before"
        with open(os.path.join(d, "sub", "new"), "w") as f:
            f.write("written through the mount")
        # It went to the directory underneath, not somewhere else.
        fd = os.open("sub/new", os.O_RDONLY, dir_fd=under)
        assert os.read(fd, 100) == b"written through the mount"
        os.close(fd)
        assert sorted(os.listdir(under)) == sorted(os.listdir(d))
        r = fs.unmount("fusermount3")
        assert r.returncode == 0, r.stderr
        assert fs.proc.wait(15 * SLOW) == 0
        assert not fs.is_mounted()
        with open(os.path.join(d, "sub", "new")) as f:
            assert f.read() == "written through the mount"
    finally:
        os.close(under)


# --- options that must really apply -------------------------------------------------

LOAD = r"""
import os, sys, time
root, tag, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
p = os.path.join(root, tag)
end = time.monotonic() + secs
i = 0
while time.monotonic() < end:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, b"x" * 65536, (i % 16) * 65536)
    os.fsync(fd)
    os.close(fd)
    os.stat(root)
    i += 1
"""


def _max_threads_under_load(fs, nproc=12, secs=2.0):
    procs = [subprocess.Popen([PYTHON, "-c", LOAD, fs.mnt, f"l{i}", str(secs * SLOW)])
             for i in range(nproc)]
    seen = 0
    while any(p.poll() is None for p in procs):
        seen = max(seen, fs.threads())
        time.sleep(0.01)
    for p in procs:
        assert p.returncode == 0
    return seen


def test_thread_cap_applies(mount_clamfs):
    few = mount_clamfs(opts=("threads=2",))
    os.listdir(few.mnt)
    base_few = few.threads()
    seen_few = _max_threads_under_load(few)
    many = mount_clamfs(opts=("threads=12",))
    os.listdir(many.mnt)
    base_many = many.threads()
    seen_many = _max_threads_under_load(many)
    # libfuse: the main thread plus up to N workers; anything else the
    # daemon runs is in the idle baseline already.
    assert seen_few <= base_few + 2, (base_few, seen_few)
    # The load really is parallel: without a low cap, more threads appear.
    assert seen_many > base_many + 2, (base_many, seen_many)
    assert seen_many <= base_many + 12, (base_many, seen_many)


def test_single_threaded_flag(mount_clamfs):
    fs = mount_clamfs(args=("-s",))
    os.listdir(fs.mnt)
    base = fs.threads()
    seen = _max_threads_under_load(fs, nproc=6, secs=1.0)
    assert seen == base, (base, seen)


def test_clone_fd(mount_clamfs):
    fs = mount_clamfs(opts=("clone_fd", "threads=4"))
    seen = _max_threads_under_load(fs, nproc=6, secs=1.0)
    assert seen >= 1
    assert sorted(os.listdir(fs.mnt)) == sorted(os.listdir(fs.backend))


def test_negative_timeout(mount_clamfs):
    fs = mount_clamfs(opts=("negative_timeout=3",))
    assert outcome(os.stat, fs.m("late")) == ("err", "ENOENT")
    t0 = time.monotonic()
    with open(fs.b("late"), "w") as f:
        f.write("x")
    assert outcome(os.stat, fs.m("late")) == ("err", "ENOENT"), "negative entry not cached"
    while outcome(os.stat, fs.m("late"))[0] == "err":
        assert time.monotonic() - t0 < 6, "negative entry cached far too long"
        time.sleep(0.1)
    assert time.monotonic() - t0 > 2.0


def test_default_negative_timeout_is_zero(fs):
    assert outcome(os.stat, fs.m("late")) == ("err", "ENOENT")
    with open(fs.b("late"), "w") as f:
        f.write("x")
    assert outcome(os.stat, fs.m("late"))[0] == "ok"


@pytest.mark.parametrize("timeout", [0, 3])
def test_attr_timeout(mount_clamfs, timeout):
    # entry_timeout too: revalidating a name also refreshes the attributes.
    fs = mount_clamfs(opts=(f"attr_timeout={timeout}", f"entry_timeout={timeout}"))
    with open(fs.b("f"), "w") as f:
        f.write("0123456789")
    assert os.stat(fs.m("f")).st_size == 10
    t0 = time.monotonic()
    with open(fs.b("f"), "a") as f:
        f.write("more")
    first = os.stat(fs.m("f")).st_size
    if timeout == 0:
        assert first == 14
        return
    assert first == 10, "attributes not cached for attr_timeout"
    while os.stat(fs.m("f")).st_size != 14:
        assert time.monotonic() - t0 < timeout + 3
        time.sleep(0.1)
    assert time.monotonic() - t0 > timeout - 1


@pytest.mark.parametrize("timeout", [0, 3])
def test_entry_timeout(mount_clamfs, timeout):
    fs = mount_clamfs(opts=(f"entry_timeout={timeout}", "attr_timeout=0"))
    with open(fs.b("f"), "w") as f:
        f.write("old")
    old_ino = os.stat(fs.m("f")).st_ino
    t0 = time.monotonic()
    with open(fs.b("f.new"), "w") as f:
        f.write("new")
    os.rename(fs.b("f.new"), fs.b("f"))
    new_ino = os.stat(fs.b("f")).st_ino
    first = os.stat(fs.m("f")).st_ino
    if timeout == 0:
        assert first == new_ino
        return
    assert first == old_ino, "name lookup not cached for entry_timeout"
    while os.stat(fs.m("f")).st_ino != new_ino:
        assert time.monotonic() - t0 < timeout + 3
        time.sleep(0.1)
    with open(fs.m("f")) as f:
        assert f.read() == "new"
