# SPDX-License-Identifier: GPL-2.0-or-later
"""pytest plugin: a private clamd for every integration test.

Fixtures:
  clamd          session-scoped clamdlib.Clamd, running as root, with its own
                 UNIX socket (clamd.socket), a TCP port on 127.0.0.1
                 (clamd.tcp_addr), StreamMaxLength 1M, LogClean yes and a
                 database detecting the EICAR test file (clamd.eicar) as
                 "Eicar-Test.UNOFFICIAL".  Tests must leave it running; to
                 stop, kill or reconfigure a clamd, use clamd_factory.
  clamd_factory  function-scoped factory: clamd_factory(user="root",
                 stream_max="1M", options={...}, start=True) returns a new
                 started Clamd; all are cleaned up after the test.
  eicar_bytes    the EICAR test file's bytes.
At teardown each clamd is stopped with SIGTERM; a crash on exit or a process
left behind fails the run.
"""
import pytest

from clamdlib import Clamd, eicar_bytes as _eicar_bytes

__all__ = ["Clamd"]


@pytest.fixture(scope="session")
def clamd():
    c = Clamd()
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


@pytest.fixture
def clamd_factory():
    made = []

    def make(user="root", stream_max="1M", options=None, start=True):
        c = Clamd(user=user, stream_max=stream_max, options=options)
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    errors = []
    for c in made:
        try:
            c.cleanup()
        except Exception as e:  # report all, fail once
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture(scope="session")
def eicar_bytes():
    return _eicar_bytes()
