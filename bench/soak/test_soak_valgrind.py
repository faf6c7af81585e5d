# SPDX-License-Identifier: GPL-2.0-or-later
"""The valgrind soak (issue 13): `bench/soak/run 75s --valgrind` runs the clamfs
daemon under valgrind memcheck through a shorter soak (valgrind is slow):
every invariant must hold, valgrind must report no error and no definite
leak. Not under the ASan+UBSan build (valgrind cannot run it)."""
import shutil

import pytest

from clamfstest.env import SANITIZE
from test_soak_short import check, run_soak


@pytest.mark.skipif(SANITIZE, reason="valgrind does not run ASan builds")
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
def test_soak_valgrind(tmp_path):
    r, report = run_soak(tmp_path, "75s", "--valgrind", timeout=280)
    check(r, report, "valgrind")
    assert report["invariants"]["memcheck_clean"]["ok"]
    assert report["valgrind"]["errors"] == 0
