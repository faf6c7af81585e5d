# SPDX-License-Identifier: GPL-2.0-or-later
"""The short soak (issue 13): `bench/soak --short` (2 minutes of mixed
workload and faults through a real mount, bench/soak's docstring) must end
with every invariant holding. Under the ASan+UBSan build (CLAMFS_SANITIZE)
it is the sanitizer soak: bench/soak then also fails on any sanitizer
report of the daemon."""
import json
import os
import subprocess

from clamfstest.env import SANITIZE, clamfs_bin

SOAK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "bench", "soak")


def run_soak(tmp_path, *args, timeout=280):
    out = tmp_path / "report"
    env = dict(os.environ, CLAMFS_BIN=clamfs_bin())
    r = subprocess.run([SOAK, *args, "--out", str(out)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    report_path = out / "report.json"
    assert report_path.exists(), f"no report:\n{r.stdout}\n{r.stderr}"
    report = json.loads(report_path.read_text())
    return r, report


def check(r, report, mode):
    broken = {k: v["detail"] for k, v in report["invariants"].items()
              if not v["ok"]}
    assert not broken, (f"broken invariants: {json.dumps(broken, indent=1)}\n"
                        f"violations: {report['violations'][:5]}\n"
                        f"unexpected errors: "
                        f"{report['errors_unexpected'][:5]}\n{r.stdout}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["mode"] == mode
    assert report["ok"] is True
    # the workload and the faults really ran
    assert report["counts"]["verified"] > 100
    assert report["counts"]["eicar_refused"] > 10
    assert sum(report["faults"].values()) >= 5
    assert report["final_sweep"]["checked"] > 0
    assert report["stats_final"]["clamd_up"] == "1"


def test_soak_short(tmp_path):
    r, report = run_soak(tmp_path, "--short")
    check(r, report, "asan" if SANITIZE else "plain")
