# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared pytest fixtures: thin wrappers around the clamfstest package
(test/clamfstest), which this file puts on sys.path for every test module
and helper here.

Fixtures:
  clamd          session-scoped clamfstest.clamd.Clamd, running as root,
                 with its own UNIX socket (clamd.socket), a TCP port on
                 127.0.0.1 (clamd.tcp_addr), StreamMaxLength 1M, LogClean
                 yes and a database detecting the EICAR test file
                 (clamd.eicar) as "Eicar-Test.UNOFFICIAL". Tests must leave
                 it running; to stop, kill or reconfigure a clamd, use
                 clamd_factory.
  clamd_factory  clamd_factory(user="root", stream_max="1M", options={...},
                 start=True) returns a new started Clamd; all are stopped
                 (SIGTERM; a crash on exit or a leftover process fails the
                 test) after the test.
  eicar_bytes    the EICAR test file's bytes.
  mount_clamfs   factory: mount_clamfs(backend=None, mnt=None, opts=(),
                 args=(), foreground=True, allow_other=True,
                 backend_as_option=False, debug=False) -> Mount. Every mount
                 is torn down and checked after the test (exit status 0, no
                 sanitizer report, nothing left mounted).
  fs             one foreground mount of a fresh, empty backend.
  tw             a fsutil.Twin on a fresh mount.
  session_clamd_opts  points every mount of the test at the session clamd.

The suite mounts FUSE filesystems, runs clamd and switches users: without
root or /dev/fuse every test is skipped with the reason (and the run exits
77, which ctest reports as skipped rather than passed).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                "..")))

from clamfstest.clamd import Clamd, eicar_bytes as _eicar_bytes  # noqa: E402
from clamfstest import skipall  # noqa: E402
from clamfstest.mount import MountFactory  # noqa: E402
from adminutil import Admin  # noqa: E402

pytest_collection_modifyitems = skipall.pytest_collection_modifyitems
pytest_report_header = skipall.pytest_report_header
pytest_terminal_summary = skipall.pytest_terminal_summary
pytest_sessionfinish = skipall.pytest_sessionfinish


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


@pytest.fixture
def mount_clamfs():
    f = MountFactory()
    yield f
    problems = f.finish()
    if problems:
        pytest.fail("clamfs teardown:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def fs(mount_clamfs):
    return mount_clamfs()


@pytest.fixture
def tw(fs):
    from fsutil import Twin
    return Twin(fs)


@pytest.fixture
def session_clamd_opts(clamd, monkeypatch):
    """Mounts of the test use the session's private clamd (through
    CLAMFS_TEST_OPTS, ahead of the test's own options, which win): the
    mirror tests then run with scanning on, as clamfs is deployed."""
    cur = os.environ.get("CLAMFS_TEST_OPTS", "")
    monkeypatch.setenv("CLAMFS_TEST_OPTS",
                       ",".join(o for o in ("clamd=" + clamd.socket, cur) if o))


@pytest.fixture
def admin():
    """adminutil.Admin: daemons started as an administrator would, each
    checked and ended at teardown."""
    a = Admin()
    yield a
    problems = a.finish()
    if problems:
        pytest.fail("clamfs teardown:\n" + "\n".join(problems), pytrace=False)
