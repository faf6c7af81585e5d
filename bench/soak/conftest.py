# SPDX-License-Identifier: GPL-2.0-or-later
"""The soak's own tests (test_soak_*.py, run by ctest as py_test_soak_*):
the shared test package (test/clamfstest) on sys.path, and every test
skipped without root or /dev/fuse, as in test/integration. The soak uses
the test package; nothing under test/ uses the soak."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                "..", "..", "test")))

from clamfstest import skipall  # noqa: E402

pytest_collection_modifyitems = skipall.pytest_collection_modifyitems
pytest_report_header = skipall.pytest_report_header
pytest_terminal_summary = skipall.pytest_terminal_summary
pytest_sessionfinish = skipall.pytest_sessionfinish
