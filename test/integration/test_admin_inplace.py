# SPDX-License-Identifier: GPL-2.0-or-later
# Protecting a directory in place (`-o backend=DIR DIR`) while something
# already works in it: a process that opened a file, mapped one or sits in
# a directory there before the mount keeps the raw backend (an smbd
# session from before, a shell cd'ed into the share) and reads EICAR
# unscanned; the mount cannot take that back. It names each such process
# at mount, as fuser(1) would, and none that uses the mount.
import os
import subprocess

from adminutil import wait_log
from clamfstest.env import PYTHON
from scanutil import put, try_read

HOLDER = r"""
import mmap, os, sys, time
f = open(sys.argv[1], "rb")                 # an open file
m = open(sys.argv[2], "rb")
mapped = mmap.mmap(m.fileno(), 0, prot=mmap.PROT_READ)
m.close()   # a mapping (Python's mmap keeps a dup of the descriptor)
print("ready", flush=True)
sys.stdin.readline()                        # the mount is in place now
f.seek(0)
print(f.read().hex(), flush=True)           # what it still reads
sys.stdin.readline()
"""


def test_in_place_mount_names_who_holds_the_raw_backend(admin, clamd):
    base, b, _ = admin.dirs_bm()
    os.mkdir(os.path.join(b, "sub"))
    put(os.path.join(b, "eicar"), clamd.eicar)
    put(os.path.join(b, "mapped"), b"clean\n" * 100)
    holder = subprocess.Popen(
        [PYTHON, "-c", HOLDER, os.path.join(b, "eicar"),
         os.path.join(b, "mapped")],
        cwd=os.path.join(b, "sub"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        m = admin.start(["-f", b, b, "-o", f"clamd={clamd.socket}"], b, b)
        # through the mount EICAR is refused...
        assert try_read(os.path.join(b, "eicar")) == ("err", "EACCES")
        # ...but the process from before still reads it raw
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert bytes.fromhex(holder.stdout.readline().strip()) == \
            clamd.eicar
        named = wait_log(m, "in-place mount: pid ")
        assert len(named) == 1, m.stderr_text()
        line = named[0]
        assert f"pid {holder.pid} process=\"python3\"" in line, line
        # the cwd; the open file and mmap's own dup; the mapping
        assert "directories=1 files=2 mappings=1" in line, line
        assert "restart it" in line, line
        total = wait_log(m, "in-place mount: 1 process opened")
        assert len(total) == 1, m.stderr_text()
        # the daemon itself, which holds the backend to serve it, is not
        assert f"pid {m.pid} " not in m.stderr_text()
    finally:
        holder.kill()
        holder.wait()


def test_nobody_named_when_nothing_holds_it(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "f"), b"clean\n")
    m = admin.start(["-f", b, b, "-o", f"clamd={clamd.socket}"], b, b)
    assert try_read(os.path.join(b, "f")) == ("ok", b"clean\n")
    assert not wait_log(m, "in-place mount:", timeout=1), m.stderr_text()
    # not in place: not looked for, whoever holds the backend
    b2 = os.path.join(base, "b2")
    os.mkdir(b2)
    put(os.path.join(b2, "f"), b"clean\n")
    with open(os.path.join(b2, "f"), "rb"):
        m2 = admin.start(["-f", b2, mnt, "-o", f"clamd={clamd.socket}"],
                         mnt, b2)
        assert try_read(os.path.join(mnt, "f")) == ("ok", b"clean\n")
        assert not wait_log(m2, "in-place mount:", timeout=1), \
            m2.stderr_text()
