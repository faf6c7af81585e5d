# SPDX-License-Identifier: GPL-2.0-or-later
# What an administrator reads in the log of a clamfs run by systemd:
# with stderr as journald's stream (JOURNAL_STREAM names it) every line
# carries its syslog priority as a "<N>" prefix, so `journalctl -p warning`
# shows detections; a JOURNAL_STREAM that names another file (inherited
# from a service's shell) changes nothing. Every line names its mount.
# clamd going away and coming back is logged once each, not per open, and
# a mount whose clamd does not answer says so at start.
import os
import subprocess
import time

from clamfstest.mountinfo import mounted
from adminutil import admin, wait_log  # noqa: F401
from clamfstest.env import SLOW, clamfs_bin
from clamfstest.mount import Mount
from scanutil import put, try_read

CLEAN = b"clean\n"


def start_with_stderr(admin, b, mnt, opts, journal):
    """clamfs -f with stderr a file; journal: JOURNAL_STREAM names that
    file (True), another file (False) or is unset (None)."""
    argv = [clamfs_bin(), "-f", b, mnt, "-o", ",".join(opts)]
    m = Mount(b, mnt, argv, admin.tempdir("clamfs-w"), True)
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    with open(m.stderr_path, "wb") as errf, \
            open(m.stdout_path, "wb") as outf:
        if journal is not None:
            st = os.fstat(errf.fileno() if journal else outf.fileno())
            env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        m.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=outf, stderr=errf, env=env)
    m.pid = m.proc.pid
    admin.mounts.append(m)
    admin.wait_mounted(m)
    return m


def lines_of(m):
    return [l for l in m.stderr_text().splitlines() if l.strip()]


def test_journal_stream_priorities(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "c"), CLEAN)
    m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"], True)
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("c")) == ("ok", CLEAN)
    det = wait_log(m, "clamfs: infected ")
    assert len(det) == 1, m.stderr_text()
    assert det[0].startswith("<4>clamfs: infected path=\"e\""), det
    started = wait_log(m, "clamfs: mounted ")
    assert started and started[0].startswith("<6>"), m.stderr_text()
    # every line has a priority: journald would store the rest at info
    for line in lines_of(m):
        assert line[0] == "<" and line[2] == ">" and line[1] in "34567", \
            line


def test_no_prefix_without_the_journal(admin, clamd):
    for journal in (False, None):
        base, b, mnt = admin.dirs_bm()
        put(os.path.join(b, "e"), clamd.eicar)
        m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"],
                              journal)
        assert try_read(m.m("e")) == ("err", "EACCES")
        det = wait_log(m, "clamfs: infected ")
        assert len(det) == 1 and det[0].startswith("clamfs: infected "), \
            (journal, det)


def test_every_line_names_the_mount(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "e"), clamd.eicar)
    m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"], None)
    assert try_read(m.m("e")) == ("err", "EACCES")
    wait_log(m, "clamfs: infected ")
    lines = lines_of(m)
    assert lines, m.stderr_text()
    for line in lines:
        assert line.endswith(f' mount="{mnt}"'), line


def test_clamd_down_and_up_logged_once_each(admin, clamd_factory):
    c = clamd_factory()
    base, b, mnt = admin.dirs_bm()
    for i in range(5):
        put(os.path.join(b, f"f{i}"), CLEAN)
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "version_check=1", "racy_window=0",
                                          "scan_timeout=5"], None)
    assert try_read(m.m("f0")) == ("ok", CLEAN)
    c.stop()
    down = wait_log(m, "clamd stopped answering", timeout=10)
    assert len(down) == 1, m.stderr_text()
    # opens fail closed meanwhile; the change is not logged again
    for i in range(1, 5):
        assert try_read(m.m(f"f{i}")) == ("err", "EIO")
    time.sleep(2.5 * SLOW)
    assert len(wait_log(m, "clamd stopped answering", timeout=0)) == 1
    c.start()
    up = wait_log(m, "clamd answers again", timeout=15)
    assert len(up) == 1, m.stderr_text()
    assert try_read(m.m("f1")) == ("ok", CLEAN)
    time.sleep(2.5 * SLOW)
    assert len(wait_log(m, "clamd answers again", timeout=0)) == 1
    assert len(wait_log(m, "clamd stopped answering", timeout=0)) == 1


def test_mount_without_clamd_says_so_at_start(admin, clamd_factory):
    c = clamd_factory(start=False)
    base, b, mnt = admin.dirs_bm()
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "clamd_wait=0"], True)
    lines = wait_log(m, "clamd is not answering", timeout=10)
    assert len(lines) == 1, m.stderr_text()
    assert lines[0].startswith("<3>clamfs: "), lines
    assert "refused" in lines[0], lines


def test_mount_without_clamd_or_watch_says_so(admin, clamd_factory):
    """version_check=0 turns the watch off: the start still checks once."""
    c = clamd_factory(start=False)
    base, b, mnt = admin.dirs_bm()
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "clamd_wait=0", "version_check=0"],
                          None)
    lines = wait_log(m, "clamd is not answering", timeout=10)
    assert len(lines) == 1, m.stderr_text()


def test_debug_level_tells_each_decision(admin, clamd):
    """log_level=debug says, per gated open, what was decided without a
    detection: a fresh clean scan with its duration, a cached verdict, an
    empty file, an oversize file. At the default level none of it."""
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "clean"), CLEAN)
    put(os.path.join(b, "empty"), b"")
    put(os.path.join(b, "big"), b"x" * 4096)
    opts = [f"clamd={clamd.socket}", "racy_window=0", "max_scan_size=1024",
            "oversize=deny"]
    m = start_with_stderr(admin, b, mnt, opts + ["log_level=debug"], None)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("empty")) == ("ok", b"")
    assert try_read(m.m("big"))[0] == "err"
    fresh = wait_log(m, "decision=allowed-scanned-clean")
    assert len(fresh) == 1 and 'path="clean"' in fresh[0], fresh
    assert " scan_ms=" in fresh[0], fresh
    cached = wait_log(m, "decision=allowed-cached-clean")
    assert len(cached) == 1 and 'path="clean"' in cached[0], cached
    assert 'path="empty"' in wait_log(m, "decision=allowed-empty")[0]
    assert 'path="big"' in wait_log(m, "decision=denied-oversize")[0]

    base2, b2, mnt2 = admin.dirs_bm()
    put(os.path.join(b2, "clean"), CLEAN)
    quiet = start_with_stderr(admin, b2, mnt2, opts, None)
    assert try_read(quiet.m("clean")) == ("ok", CLEAN)
    assert try_read(quiet.m("clean")) == ("ok", CLEAN)
    time.sleep(0.2)
    assert "decision=" not in quiet.stderr_text()
