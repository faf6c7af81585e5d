# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes and reads through a shared mapping, made in a child process: a
page fault the filesystem cannot back (a hole of a full tmpfs, reached
directly with kernel passthrough, where the mapping is the backend file's
own; tmpfs allocates a page even to read a hole through a mapping) is
SIGBUS, as on the backend itself, and must fail that operation, not the
caller. Used by the ENOSPC tests and the soak's writers; imports only the
standard library, so the soak's workload processes can run it from a
copy."""
import errno
import faulthandler
import mmap
import os
import signal


class MappedSigbus(OSError):
    """The access through the mapping ended in SIGBUS (errno EFAULT)."""


def _reap(pid, what):
    """Waits for the child that made the access; raises as it ended."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        cls = MappedSigbus if sig == signal.SIGBUS else OSError
        raise cls(errno.EFAULT, f"{what}: signal {sig}")
    code = os.WEXITSTATUS(status)
    if code:
        raise OSError(code, os.strerror(code))


def mapped_write(fd, size, off, data):
    """Writes data at off through a shared mapping of fd's first size bytes
    and msyncs it. Raises OSError as msync gave it, MappedSigbus for
    SIGBUS, or OSError(EFAULT) naming any other signal."""
    pid = os.fork()
    if pid == 0:
        code = 0
        faulthandler.disable()  # a SIGBUS here is an outcome, not a crash
        try:
            with mmap.mmap(fd, size) as mm:
                mm[off:off + len(data)] = data
                mm.flush()
        except OSError as e:
            code = e.errno if e.errno and e.errno < 256 else 255
        finally:
            os._exit(code)
    _reap(pid, "mapped write")


def mapped_read(fd, size):
    """The first size bytes of fd, read through a shared read-only
    mapping. Raises MappedSigbus for SIGBUS, OSError(EFAULT) naming any
    other signal, OSError as mmap gave it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        faulthandler.disable()  # a SIGBUS here is an outcome, not a crash
        try:
            os.close(r)
            with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) as mm:
                data = bytes(mm)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except OSError as e:
            code = e.errno if e.errno and e.errno < 256 else 255
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    try:
        while True:
            b = os.read(r, 1 << 20)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
    _reap(pid, "mapped read")
    return b"".join(chunks)
