# SPDX-License-Identifier: GPL-2.0-or-later
# A reload runs on the daemon's service thread, never on the FUSE worker
# that received `clamfs --reload` (issue 25): with a single worker thread,
# a reload that waits, here for its configuration file (a FIFO nobody
# writes yet), leaves the mount serving, and the command still returns
# only once the new configuration is in force; a SIGUSR1 meanwhile drops
# the verdict cache at once, not after the reload. (The kernel holds the
# mount root's lock for the command's setxattr meanwhile: names in the
# root wait for it, so the test reads below a directory already known.)
import errno
import os
import signal
import subprocess

from adminutil import ini, wait_log
from clamfstest.env import SLOW, clamfs_bin
from clamfstest.wait import wait_for
from scanutil import put, try_read

CLEAN = b"a clean file\n"


def config_text(path, b, mnt, clamd_socket, on_infected):
    ini(path, [("fuse", [("backend", b), ("mountpoint", mnt),
                         ("options", "allow_other"), ("threads", "1")]),
               ("clamd", [("clamd", clamd_socket)]),
               ("scan", [("scan_ahead_dirs", "no")]),
               ("action", [("on_infected", on_infected)])])
    with open(path) as f:
        return f.read()


def writer_when_read(fifo):
    """An fd writing into fifo once somebody has it open for reading
    (until then, a non-blocking open for writing fails with ENXIO)."""
    def try_open():
        try:
            return [os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)]
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            return None
    fd = wait_for(try_open, 20)
    assert fd is not None, "the reload never opened its configuration"
    return fd[0]


def test_reload_waiting_for_its_file_leaves_the_worker_free(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "share.ini")
    config_text(cfg, b, mnt, clamd.socket, "deny")
    os.mkdir(os.path.join(b, "sub"))
    put(os.path.join(b, "sub", "clean"), CLEAN)
    put(os.path.join(b, "e"), clamd.eicar)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert os.path.isdir(m.m("sub"))  # known before the root is locked
    new = config_text(cfg + ".new", b, mnt, clamd.socket, "log")
    os.unlink(cfg)
    os.mkfifo(cfg, 0o600)
    reload = subprocess.Popen([clamfs_bin(), "--reload", mnt],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    fd = None
    try:
        fd = writer_when_read(cfg)
        # the reload waits in the daemon; its only FUSE worker serves on
        r = subprocess.run(["stat", "-c", "%s", m.m("sub", "clean")],
                           capture_output=True, text=True,
                           timeout=10 * SLOW)
        assert r.stdout.strip() == str(len(CLEAN)), r
        r = subprocess.run(["cat", m.m("sub", "clean")], capture_output=True,
                           timeout=10 * SLOW)
        assert r.stdout == CLEAN, r
        # a signature update's SIGUSR1 does not wait for the reload
        os.kill(m.pid, signal.SIGUSR1)
        assert wait_log(m, "SIGUSR1: verdict cache dropped"), m.stderr_text()
        assert reload.poll() is None, "returned before its reload ended"
        os.write(fd, new.encode())
    finally:
        if fd is not None:
            os.close(fd)
        else:
            reload.kill()
    out, err = reload.communicate(timeout=30 * SLOW)
    assert reload.returncode == 0, (out, err)
    assert "on_infected deny->log" in out, (out, err)
    assert try_read(m.m("e")) == ("ok", clamd.eicar)
