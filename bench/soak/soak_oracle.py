# SPDX-License-Identifier: GPL-2.0-or-later
"""The soak's oracle: what every completed write left in each file.

A file in shared memory (mmap'd by every process of the soak, whatever its
uid) holds one slot per file a writer owns. Each slot has one owner (one
writer process id), so only that writer ever changes it, and it does so as a
seqlock: the generation goes odd before the file is touched and even again
once the new version is complete (closed and fsync'ed), together with the
content's size and SHA-256 and the file's names (a second name while it has
a hard link). A reader that sees the same even generation before opening the
file and after reading it all has read a version that was complete and not
touched meanwhile: every byte must then match, exactly. Anything else (odd
or changed generation) is a race with the owner and only counted.

EICAR: the bytes are assembled here from parts (never one literal in the
repository); `has_eicar` is how every reader looks for them in what it got.
"""
import mmap
import os
import struct

SLOT = struct.Struct("<QQ32s96s96s")  # gen, size, sha256, path, link
PATH_MAX_LEN = 95

_E = (b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$", b"EICAR-STANDARD-ANTIVIRUS",
      b"-TEST-FILE!$H+H*")


def eicar_bytes():
    """The 68-byte EICAR anti-virus test file, built at run time."""
    return _E[0] + _E[1] + _E[2]


# Any read buffer holding this is EICAR served (our own content is random
# bytes or ASCII names and cannot contain it).
EICAR_MARK = _E[1] + _E[2][:10]


def has_eicar(data):
    return EICAR_MARK in data or data[:20] == eicar_bytes()[:20]


class Oracle:
    """nslots slots in the file at path (created by the soak's main
    process with create=True, mapped by the others)."""

    def __init__(self, path, nslots, create=False):
        self.path = path
        self.nslots = nslots
        size = nslots * SLOT.size
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
            os.fchmod(fd, 0o666)
            os.ftruncate(fd, size)
        else:
            fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED)
        finally:
            os.close(fd)

    def _raw(self, i):
        return SLOT.unpack_from(self.mm, i * SLOT.size)

    def read(self, i):
        """(gen, size, sha, path, link) of slot i; path '' when empty."""
        g, size, sha, path, link = self._raw(i)
        return (g, size, sha, path.rstrip(b"\0").decode(),
                link.rstrip(b"\0").decode())

    def gen(self, i):
        return struct.unpack_from("<Q", self.mm, i * SLOT.size)[0]

    def begin(self, i):
        """Owner: the file of slot i is about to change (generation odd)."""
        g = self.gen(i)
        if g % 2 == 0:
            struct.pack_into("<Q", self.mm, i * SLOT.size, g + 1)

    def commit(self, i, size, sha, path, link=""):
        """Owner: the version described is complete (generation even). The
        fields are written while the generation is still odd, then the
        generation last (x86 keeps stores in order)."""
        g = self.gen(i)
        if g % 2 == 0:
            g += 1
            struct.pack_into("<Q", self.mm, i * SLOT.size, g)
        for s in (path, link):
            if len(s.encode()) > PATH_MAX_LEN:
                raise ValueError(f"oracle path too long: {s}")
        struct.pack_into("<Q32s96s96s", self.mm, i * SLOT.size + 8, size,
                         sha, path.encode(), link.encode())
        struct.pack_into("<Q", self.mm, i * SLOT.size, g + 1)

    def clear(self, i):
        """Owner: slot i holds no file any more."""
        self.commit(i, 0, b"", "", "")
