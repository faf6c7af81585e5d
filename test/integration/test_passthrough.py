# SPDX-License-Identifier: GPL-2.0-or-later
# Kernel FUSE passthrough (libfuse >= 3.17, Linux >= 6.9): allowed opens
# are served by the kernel from the backend file, no READ or WRITE reaches
# the daemon, and every scanning guarantee still holds although writes no
# longer pass the daemon. Where the build or the kernel lacks passthrough
# (Debian 12's libfuse 3.14), the mount says so and every open goes
# through the daemon: the same tests then check the fallback.
import mmap
import os
import re
import stat
import subprocess
import threading
import time

import pytest

from fsutil import GID_B, UID_B, LoopFs, run_as
from clamfstest.env import clamfs_bin
from clamfstest.wait import let_time_pass
from scanutil import MARKER, SlowClamd, delta, detections, \
    ensure_marker_signature, mount_scan, put, \
    run_clamfs_expect_fail, stats, try_read, wait_for


def _libfuse_version():
    r = subprocess.run(["pkg-config", "--modversion", "fuse3"],
                       capture_output=True, text=True)
    return tuple(int(x) for x in re.findall(r"\d+", r.stdout)[:2]) \
        if r.returncode == 0 else (0, 0)


def _kernel_version():
    return tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])


# What this machine should get: the build has the API from libfuse 3.17,
# the kernel the feature from 6.9 (CONFIG_FUSE_PASSTHROUGH on every
# Debian kernel that has it).
HAVE_LIBFUSE = _libfuse_version() >= (3, 17)
EXPECTED = HAVE_LIBFUSE and _kernel_version() >= (6, 9)
needs_passthrough = pytest.mark.skipif(
    not EXPECTED, reason="libfuse < 3.17 or kernel < 6.9: no passthrough")

CLEAN = bytes(range(256)) * 4096  # 1 MiB


def test_state_reported(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    s = stats(m.mnt)
    if EXPECTED:
        assert s["passthrough"] == "on", s["passthrough"]
    elif not HAVE_LIBFUSE:
        assert s["passthrough"] == "off (built with libfuse < 3.17)"
    else:
        assert s["passthrough"] == "off (the kernel does not offer it)"
    assert re.search(r"passthrough (on|off)", m.stderr_text()), \
        "the choice is logged at mount"
    # and in two words for monitors
    assert (s["passthrough_state"], s["passthrough_reason"]) == (
        ("on", "none") if EXPECTED else
        ("off", "kernel" if HAVE_LIBFUSE else "libfuse"))
    off = mount_scan(mount_clamfs, clamd, "passthrough=off")
    s = stats(off.mnt)
    assert s["passthrough"] == "off (passthrough=off)"
    assert (s["passthrough_state"], s["passthrough_reason"]) == (
        "off", "option")


def test_bad_option_value(mount_clamfs, clamd):
    base = mount_clamfs.tempdir()
    b, mnt = os.path.join(base, "b"), os.path.join(base, "m")
    os.mkdir(b)
    os.mkdir(mnt)
    r = run_clamfs_expect_fail(clamfs_bin(), b, mnt,
                               [f"clamd={clamd.socket}",
                                "passthrough=sometimes"])
    assert r.returncode == 2, r
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "passthrough" in lines[0] and \
        "auto or off" in lines[0], r.stderr


@needs_passthrough
def test_no_daemon_io_for_passthrough_opens(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("f"), CLEAN)
    s0 = stats(m.mnt)
    with open(m.m("f"), "rb") as f:
        assert f.read() == CLEAN
    with open(m.m("f"), "rb") as f:
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            assert mm[:] == CLEAN
    fd = os.open(m.m("w"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for off in range(0, len(CLEAN), 4096):
        os.write(fd, CLEAN[off:off + 4096])
    os.close(fd)
    s1 = stats(m.mnt)
    d = delta(s0, s1, "daemon_reads", "daemon_writes", "opens_passthrough",
              "passthrough_failed")
    assert d == {"daemon_reads": 0, "daemon_writes": 0,
                 "opens_passthrough": 3, "passthrough_failed": 0}, d
    with open(m.b("w"), "rb") as f:
        assert f.read() == CLEAN


def test_passthrough_off_goes_through_daemon(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "passthrough=off")
    put(m.b("f"), CLEAN)
    s0 = stats(m.mnt)
    assert try_read(m.m("f")) == ("ok", CLEAN)
    with open(m.m("w"), "wb") as f:
        f.write(CLEAN)
    s1 = stats(m.mnt)
    d = delta(s0, s1, "daemon_reads", "daemon_writes", "opens_passthrough")
    assert d["opens_passthrough"] == 0 and d["daemon_reads"] > 0 and \
        d["daemon_writes"] > 0, d


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_eicar_refused_clean_identical(mount_clamfs, clamd, mode):
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("eicar.com"), clamd.eicar)
    put(m.b("clean.bin"), CLEAN)
    for _ in range(2):  # scanned, then from the verdict cache
        assert try_read(m.m("eicar.com")) == ("err", "EACCES")
        with pytest.raises(PermissionError):
            os.open(m.m("eicar.com"), os.O_RDWR)
        assert try_read(m.m("clean.bin")) == ("ok", CLEAN)
        with open(m.m("clean.bin"), "rb") as f:
            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
                assert mm[:] == CLEAN
    # write-only opens are allowed (nothing is read), as natively
    fd = os.open(m.m("eicar.com"), os.O_WRONLY)
    os.close(fd)


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_write_while_open_then_read_refused(mount_clamfs, clamd, mode):
    """A clean verdict is cached; a writer through the mount turns the
    file into EICAR of the same size and keeps it open: a reader in the
    same second must be scanned, not served from the cache. With
    passthrough the daemon never sees that write."""
    eicar = clamd.eicar
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("f"), b"c" * len(eicar))
    assert try_read(m.m("f")) == ("ok", b"c" * len(eicar))
    assert try_read(m.m("f")) == ("ok", b"c" * len(eicar))  # cached
    wfd = os.open(m.m("f"), os.O_WRONLY)
    try:
        assert os.pwrite(wfd, eicar, 0) == len(eicar)
        assert os.stat(m.b("f")).st_size == len(eicar)
        assert try_read(m.m("f")) == ("err", "EACCES")
    finally:
        os.close(wfd)
    assert try_read(m.m("f")) == ("err", "EACCES")


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_scan_overlapping_a_writer_is_not_cached(mount_clamfs, mode):
    """A writer opens, rewrites and closes the file while its scan runs,
    all within one timestamp tick (a backend with whole-second
    timestamps, no racy window): size, mtime and ctime are as the scan
    found them. The verdict must not be cached, though with passthrough
    no write reached the daemon: the next open is scanned again. (A scan
    ahead, made after the writer closed, would see the rewrite and
    rightly be kept: this is about the reader's scan, so it is off.)"""
    fake = SlowClamd(hang=True, delay=1.0)
    fs = LoopFs(mount_clamfs.tempdir("clamfs-tick"), 16,
                ["mkfs.ext4", "-q", "-F", "-I", "128"])
    try:
        m = mount_scan(mount_clamfs, fake.socket, f"passthrough={mode}",
                       "scan_ahead=no", backend=fs.path)
        for attempt in range(5):
            name = f"f{attempt}"
            t0 = time.time()
            if t0 % 1 > 0.3:  # start early in a second
                let_time_pass(1.02 - t0 % 1, "a second boundary")
            put(m.b(name), b"a" * 4096)
            before = os.stat(m.b(name))
            scans0 = fake.scans
            reader = threading.Thread(target=try_read, args=(m.m(name),))
            reader.start()
            assert fake.wait_scans(scans0 + 1)
            # write-only: not gated, so it does not wait for the scan
            w = os.open(m.m(name), os.O_WRONLY)
            os.pwrite(w, b"b" * 4096, 0)
            os.close(w)
            after = os.stat(m.b(name))
            reader.join(30)
            if (after.st_mtime_ns, after.st_ctime_ns) != \
                    (before.st_mtime_ns, before.st_ctime_ns):
                continue  # a second boundary fell in between: again
            scans1 = fake.scans
            assert try_read(m.m(name)) == ("ok", b"b" * 4096)
            assert fake.scans == scans1 + 1, \
                "a verdict taken while a writer was open was cached"
            break
        else:
            pytest.fail("no attempt stayed within one second")
        m.unmount()
    finally:
        fake.close()
        fs.close()


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_mapping_that_outlives_its_open(mount_clamfs, clamd, mode):
    """With passthrough the kernel maps the backend file itself: the
    release reaches the daemon at close while the mapping stays writable,
    and a store into an already dirty page moves no timestamp. A verdict
    taken meanwhile must not be cached, or that store would be served
    from the cache. (Kernels that keep the FUSE file as the mapping's
    file, 6.18 here, send the release only at munmap: there the writer
    count already covers it.)"""
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("f"), b"a" * 8192)
    fd = os.open(m.m("f"), os.O_RDWR)
    mm = mmap.mmap(fd, 8192)
    try:
        mm[0:1] = b"b"  # page 0 dirty from now on
        os.close(fd)
        assert try_read(m.m("f"))[0] == "ok"
        assert try_read(m.m("f"))[0] == "ok"
        mm[0:len(MARKER)] = MARKER

        assert try_read(m.m("f"))[0:2] == ("err", "EACCES")
    finally:
        mm.close()
    # once the mapping is gone the verdict cache works again
    put(m.b("g"), b"c" * 8192)
    s0 = stats(m.mnt)
    for _ in range(3):
        assert try_read(m.m("g"))[0] == "ok"
    assert delta(s0, stats(m.mnt), "scans")["scans"] == 1


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_mixed_opens(mount_clamfs, clamd, mode):
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("f"), CLEAN)
    # reader and writer on one inode, in both orders
    r = os.open(m.m("f"), os.O_RDONLY)
    w = os.open(m.m("f"), os.O_WRONLY)
    os.pwrite(w, b"X" * 4096, 0)
    assert os.pread(r, 4096, 0) == b"X" * 4096
    os.close(r)
    r = os.open(m.m("f"), os.O_RDONLY)
    assert os.pread(r, 8, 4096) == CLEAN[4096:4104]
    os.close(w)
    os.close(r)
    # a shared writable mapping and read() through another open
    rw = os.open(m.m("f"), os.O_RDWR)
    with mmap.mmap(rw, len(CLEAN)) as mm:
        mm[0:5] = b"MMAP!"
        mm.flush()
        r = os.open(m.m("f"), os.O_RDONLY)
        assert os.pread(r, 5, 0) == b"MMAP!"
        os.close(r)
    os.close(rw)
    # a private mapping sees the file, its writes stay private
    r = os.open(m.m("f"), os.O_RDONLY)
    with mmap.mmap(r, 4096, flags=mmap.MAP_PRIVATE,
                   prot=mmap.PROT_READ | mmap.PROT_WRITE) as mm:
        assert mm[0:5] == b"MMAP!"
        mm[0:5] = b"priv!"
    os.close(r)
    assert try_read(m.m("f"))[1][:5] == b"MMAP!"
    # O_DIRECT next to a buffered open, with an aligned buffer
    buffered = os.open(m.m("f"), os.O_RDONLY)
    direct = os.open(m.m("f"), os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    assert os.preadv(direct, [buf], 4096) == 4096
    assert buf[:] == CLEAN[4096:8192]
    assert os.pread(buffered, 4096, 4096) == CLEAN[4096:8192]
    os.close(direct)
    os.close(buffered)
    # many overlapping opens and closes of one inode: no odd errno
    errors = []

    def churn(flags):
        # O_DIRECT reads need an aligned buffer on most backends (ext4)
        aligned = mmap.mmap(-1, 4096)
        for _ in range(200):
            try:
                fd = os.open(m.m("f"), flags)
                os.preadv(fd, [aligned], 0)
                os.close(fd)
            except OSError as e:
                errors.append(e)
    ts = [threading.Thread(target=churn, args=(f,))
          for f in (os.O_RDONLY, os.O_RDWR, os.O_RDONLY | os.O_DIRECT)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_exec_from_mount(mount_clamfs, clamd, mode):
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("hello.sh"), b"#!/bin/sh\necho hello-from-mount\n", 0o755)
    r = subprocess.run([m.m("hello.sh")], capture_output=True, text=True)
    assert r.stdout == "hello-from-mount\n", r


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_scan_on_close_after_passthrough_writes(mount_clamfs, clamd, mode):
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}",
                   "scan_on_close", "on_infected=delete")
    fd = os.open(m.m("up.com"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, clamd.eicar)
    os.close(fd)
    assert wait_for(lambda: not os.path.exists(m.b("up.com")), 10), \
        "the close scan did not catch the upload"
    assert any(d.get("event") == "close" for d in detections(m))


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_write_clears_setuid(mount_clamfs, clamd, mode):
    """An unprivileged writer clears the set-user-ID bit, as natively:
    with passthrough the kernel writes with credentials the daemon chose
    for the backing file, which must not keep CAP_FSETID."""
    m = mount_scan(mount_clamfs, clamd, f"passthrough={mode}")
    put(m.b("suid"), b"#!/bin/sh\n", 0o4777)
    os.chmod(m.b("suid"), 0o4777)
    # the mount has the mode cached (attr_timeout): it must not go stale
    assert os.stat(m.m("suid")).st_mode & stat.S_ISUID
    mode_seen = run_as(UID_B, GID_B, [], """
fd = os.open(P("suid"), os.O_WRONLY | os.O_APPEND)
os.write(fd, b"echo changed\\n")
os.close(fd)
emit(os.stat(P("suid")).st_mode)
""", m.mnt)
    assert not os.stat(m.b("suid")).st_mode & stat.S_ISUID
    # what exec would judge by, right after the write
    assert not mode_seen & stat.S_ISUID, oct(mode_seen)
    assert not os.stat(m.m("suid")).st_mode & stat.S_ISUID


def test_stacked_backend_falls_back(mount_clamfs, clamd):
    """A backend on overlayfs cannot back passthrough (stacking depth):
    the mount says so and serves every open through the daemon."""
    base = mount_clamfs.tempdir("clamfs-ovl")
    lower, upper, work, ovl = (os.path.join(base, n)
                               for n in ("lower", "upper", "work", "ovl"))
    for d in (lower, upper, work, ovl):
        os.mkdir(d)
    put(os.path.join(lower, "f"), CLEAN)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={upper},workdir={work}",
                    ovl], check=True)
    try:
        m = mount_scan(mount_clamfs, clamd, backend=ovl)
        s0 = stats(m.mnt)
        assert try_read(m.m("f")) == ("ok", CLEAN)
        with open(m.m("g"), "wb") as f:
            f.write(CLEAN)
        assert try_read(m.m("g")) == ("ok", CLEAN)
        s1 = stats(m.mnt)
        d = delta(s0, s1, "opens_passthrough", "daemon_reads",
                  "passthrough_failed")
        assert d["opens_passthrough"] == 0 and d["daemon_reads"] > 0 and \
            d["passthrough_failed"] == 0, d
        if EXPECTED:
            assert s1["passthrough"] == "off (the backend is on overlayfs)"
    finally:
        subprocess.run(["fusermount3", "-u", "-z", m.mnt]
                       if "m" in locals() else ["true"])
        r = subprocess.run(["umount", "-l", ovl])
        assert r.returncode == 0


@needs_passthrough
def test_root_without_fsetid_clears_setuid(mount_clamfs, clamd):
    """With passthrough the mount lets the backend clear set-id bits
    (HANDLE_KILLPRIV_V2, no security.capability query per write): a root
    writer without CAP_FSETID must still clear them, as natively."""
    m = mount_scan(mount_clamfs, clamd)
    put(m.b("suid"), b"#!/bin/sh\n", 0o4755)
    os.chmod(m.b("suid"), 0o4755)
    r = subprocess.run(
        ["setpriv", "--inh-caps=-fsetid", "--bounding-set=-fsetid", "--",
         "sh", "-c", f"printf 'echo x\\n' >> '{m.m('suid')}'"],
        capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not os.stat(m.b("suid")).st_mode & stat.S_ISUID
    assert not os.stat(m.m("suid")).st_mode & stat.S_ISUID
