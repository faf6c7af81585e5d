# SPDX-License-Identifier: GPL-2.0-or-later
"""The short soak (issue 13): `bench/soak/run --short` (2 minutes of mixed
workload and faults through a real mount, bench/soak/run's docstring) must end
with every invariant holding. Under the ASan+UBSan build (CLAMFS_SANITIZE)
it is the sanitizer soak: bench/soak/run then also fails on any sanitizer
report of the daemon."""
import errno
import json
import os
import subprocess
import sys
import tempfile

import pytest

from clamfstest.env import SANITIZE, clamfs_bin
from clamfstest.mapped import MappedSigbus, mapped_read, mapped_write

SOAK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")


def run_soak(tmp_path, *args, timeout=280):
    out = tmp_path / "report"
    env = dict(os.environ, CLAMFS_BIN=clamfs_bin())
    r = subprocess.run([SOAK, *args, "--out", str(out)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    report_path = out / "report.json"
    assert report_path.exists(), f"no report:\n{r.stdout}\n{r.stderr}"
    report = json.loads(report_path.read_text())
    # the compact copy to publish: the same report, one sample in ten
    summary = json.loads((out / "summary.json").read_text())
    rest = {k: v for k, v in summary.items()
            if k not in ("samples", "samples_every")}
    assert rest == {k: v for k, v in report.items() if k != "samples"}
    assert summary["samples_every"] == 10
    full, kept = report["samples"], summary["samples"]
    assert kept[:1] == full[:1] and kept[-1:] == full[-1:]
    assert len(kept) <= len(full) // 10 + 2
    return r, report


def faults_at_least(report):
    """How many faults the run makes even when every one is the longest: a
    pause of the interval's maximum, then a clamd hang of scan_timeout + 3 s
    and its recovery (about 2 s). At most 5: valgrind's 75 s with its 10 s
    timeout fit 3 (a CI run drew three hangs and an ENOSPC: 4)."""
    cfg = report["config"]
    longest = cfg["fault_interval_s"][1] + cfg["scan_timeout"] + 3 + 2
    return min(5, max(1, int(report["duration_s"] // longest)))


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
    assert sum(report["faults"].values()) >= faults_at_least(report)
    assert report["final_sweep"]["checked"] > 0
    assert report["stats_final"]["clamd_up"] == "1"


def test_soak_short(tmp_path):
    r, report = run_soak(tmp_path, "--short")
    check(r, report, "asan" if SANITIZE else "plain")


@pytest.fixture
def full_tmpfs():
    """A 1 MiB tmpfs holding a file with a hole (its third page), then
    filled to ENOSPC."""
    d = tempfile.mkdtemp(prefix="cfsigbus")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "cfsigbus", d],
                   check=True)
    try:
        p = os.path.join(d, "f")
        with open(p, "wb") as f:
            f.write(b"x" * 8192)
        os.truncate(p, 12288)
        with open(os.path.join(d, "fill"), "wb") as f:
            with pytest.raises(OSError) as e:
                while True:
                    f.write(b"y" * 65536)
                    f.flush()
            assert e.value.errno == errno.ENOSPC
        yield p
    finally:
        subprocess.run(["umount", d], check=True)
        os.rmdir(d)


def test_soak_mapped_write_into_a_hole_of_a_full_backend(full_tmpfs):
    """What crashed a soak writer in the Debian 13 lane: with kernel
    passthrough the writer's mapping is the backend file's own, and a write
    into a hole of the full tmpfs is SIGBUS, as on tmpfs itself (this test
    writes to tmpfs directly, where it always is). The soak's mapped write
    fails that one operation, which the judge allows inside a window of
    the backend being full, and only there and only for mmap."""
    fd = os.open(full_tmpfs, os.O_RDWR)
    try:
        with pytest.raises(MappedSigbus):
            mapped_write(fd, 12288, 8200, b"z" * 10)
        # a page the backend has: written
        mapped_write(fd, 12288, 100, b"z" * 10)
    finally:
        os.close(fd)
    with open(full_tmpfs, "rb") as f:
        assert f.read(110)[100:] == b"z" * 10
    sys.path.insert(0, os.path.dirname(SOAK))
    try:
        from soak_report import allowed
    finally:
        sys.path.pop(0)
    full = [("enospc", 100.0, 103.0, 103.0)]
    err = {"errno": "SIGBUS", "op": "mmap", "t0": 101.0, "t1": 101.2}
    assert allowed(err, full, 3)
    assert not allowed(dict(err, t0=120.0, t1=120.1), full, 3)
    # a writer's verify reads through a mapping: the same fault
    assert allowed(dict(err, op="verify"), full, 3)
    assert not allowed(dict(err, op="verify", t0=120.0, t1=120.1), full, 3)
    # readers never map
    assert not allowed(dict(err, op="read"), full, 3)


def test_soak_mapped_read_of_a_hole_of_a_full_backend(full_tmpfs):
    """What crashed a soak writer in the Debian 13 lane at stop 28: its
    verify read its file through a mapping, and with kernel passthrough a
    hole of the full tmpfs is SIGBUS even to read (tmpfs allocates the
    page), as on tmpfs itself, where this test reads. The read fails, the
    writer lives."""
    fd = os.open(full_tmpfs, os.O_RDONLY)
    try:
        with pytest.raises(MappedSigbus):
            mapped_read(fd, 12288)
        assert mapped_read(fd, 8192) == b"x" * 8192
    finally:
        os.close(fd)
