# SPDX-License-Identifier: GPL-2.0-or-later
"""pytest hooks for a folder of tests that need root and /dev/fuse: without
them every test is skipped with the reason, and the run exits 77, which
ctest reports as skipped rather than passed. A conftest.py takes them by
assignment (pytest finds hooks by name in its namespace):

    from clamfstest import skipall
    pytest_collection_modifyitems = skipall.pytest_collection_modifyitems
    ...
"""
import pytest

from clamfstest.env import cannot_mount

# ctest's SKIP_RETURN_CODE for the tests' directories (CMakeLists.txt).
EXIT_SKIPPED = 77

_CANNOT = cannot_mount()


def pytest_collection_modifyitems(config, items):
    if _CANNOT is None:
        return
    mark = pytest.mark.skip(reason="clamfs integration tests: " + _CANNOT)
    for item in items:
        item.add_marker(mark)


def pytest_report_header(config):
    if _CANNOT is not None:
        return "clamfs integration tests: skipping all: " + _CANNOT


def pytest_terminal_summary(terminalreporter):
    # -q hides the report header: say once why nothing ran.
    if _CANNOT is not None:
        terminalreporter.write_line("clamfs integration tests skipped: " +
                                    _CANNOT)


def pytest_sessionfinish(session, exitstatus):
    # Every test skipped for want of root or FUSE is not a pass: say so
    # with the exit status ctest maps to "skipped".
    if _CANNOT is not None and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = EXIT_SKIPPED
