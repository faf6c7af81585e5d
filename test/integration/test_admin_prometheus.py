# SPDX-License-Identifier: GPL-2.0-or-later
# `clamfs --stats --prometheus [--output FILE] MOUNTPOINT...` against real
# mounts and a real clamd, checked by promtool (Prometheus' own linter,
# from Debian's prometheus package, extracted by scripts/promtool):
# - after a clean scan, a detection and a scan error the exposition passes
#   `promtool check metrics` and carries those events in conventional
#   names (…_total counters, categories and decisions as labels);
# - the scan duration histogram is cumulative in le order and its _count
#   equals clamfs_scans_total;
# - two mounts make one exposition that passes promtool, each family once,
#   every series once per mount with distinct mountpoint labels (the
#   backend labels name each mount's own clamd), and the plain text has a [mountpoint] line before each mount's lines;
# - --output replaces the file atomically: a reader polling it meanwhile
#   never sees it missing, empty or cut, no temporary file stays, the mode
#   is 0644 whatever the umask; a file that cannot be written fails with
#   one line; an unreadable mount among several is named and fails the
#   command while the others are still exported;
# - the shipped clamfs-prometheus@ service and timer pass
#   `systemd-analyze verify`, and the service's command, run as systemd
#   would for a mount, writes a textfile promtool accepts.
import os
import shlex
import stat
import subprocess
import threading
import time

import pytest

from clamfstest.env import SLOW, clamfs_bin
from promutil import (parse_exposition, promtool, promtool_check,
                      run_stats)
from scanutil import mount_scan, put, stats, try_read

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
CLEAN = b"a clean file\n" * 50
BIG = 1536 * 1024  # over the test clamd's StreamMaxLength of 1M


@pytest.fixture(scope="module")
def tool():
    return promtool()


def exercise(m, clamd):
    """One clean scan, one detection, one scan error (size-limit: the
    mount streams to clamd, whose StreamMaxLength is 1M)."""
    put(m.b("clean"), CLEAN)
    put(m.b("bad"), clamd.eicar)
    put(m.b("big"), os.urandom(BIG))
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("bad")) == ("err", "EACCES")
    assert try_read(m.m("big")) == ("err", "EIO")


def stream_mount(mount_clamfs, clamd):
    return mount_scan(mount_clamfs, clamd.tcp_addr, "scan_mode=stream")


def test_promtool_passes_after_scan_detection_and_error(mount_clamfs, clamd,
                                                        tool):
    m = stream_mount(mount_clamfs, clamd)
    exercise(m, clamd)
    r = run_stats("--prometheus", m.mnt)
    assert r.returncode == 0 and r.stderr == "", r
    promtool_check(tool, r.stdout)
    fams = parse_exposition(r.stdout)
    mnt = os.path.realpath(m.mnt)
    for f in fams.values():
        for _, labels, _ in f.samples:
            assert labels["mountpoint"] == mnt, (f.name, labels)
        # conventions promtool does not check all of
        assert f.name.startswith("clamfs_"), f.name
        assert f.name.endswith("_total") == (f.type == "counter"), f.name
        assert "_us" not in f.name and "latency" not in f.name, f.name
    assert fams["clamfs_opens_checked_total"].value() == 3
    assert fams["clamfs_infected_total"].value() == 1
    assert fams["clamfs_opens_denied_total"].value() == 1
    assert fams["clamfs_scans_total"].value() == 3
    errors = fams["clamfs_scan_errors_total"]
    assert errors.value(category="size-limit") == 1
    assert sum(float(v) for v in errors.series()) == 1
    assert {lb["category"] for _, lb, _ in errors.samples} >= {
        "connect", "timeout", "size-limit", "clamd", "local"}
    decided = fams["clamfs_opens_scan_error_total"]
    assert decided.value(decision="denied") == 1
    assert decided.value(decision="allowed") == 0
    assert fams["clamfs_clamd_up"].value() == 1
    assert fams["clamfs_clamd_info"].samples[0][1]["engine"] == "1.4.6"
    # a timestamp, not an uptime that changes at every scrape
    assert "clamfs_uptime_seconds" not in fams
    start = fams["clamfs_start_time_seconds"]
    assert start.type == "gauge"
    assert abs(start.value() - time.time()) < 600, start.value()
    build = fams["clamfs_build_info"].samples[0][1]
    assert build["version"] and build["libfuse"].startswith("3."), build
    assert fams["clamfs_cache_entries"].type == "gauge"


def test_histogram_cumulative_and_counts_scans(mount_clamfs, clamd, tool):
    m = stream_mount(mount_clamfs, clamd)
    exercise(m, clamd)
    for i in range(5):
        put(m.b(f"more{i}"), CLEAN + bytes([i]))
        assert try_read(m.m(f"more{i}"))[0] == "ok"
    r = run_stats("--prometheus", m.mnt)
    assert r.returncode == 0, r
    fams = parse_exposition(r.stdout)
    h = fams["clamfs_scan_duration_seconds"]
    assert h.type == "histogram"
    assert h.help.endswith(".")
    buckets = [(lb["le"], float(v)) for n, lb, v in h.samples
               if n.endswith("_bucket")]
    assert buckets[-1][0] == "+Inf"
    les = [float(le) for le, _ in buckets]
    assert les == sorted(les) and len(set(les)) == len(les), les
    counts = [c for _, c in buckets]
    assert counts == sorted(counts), f"not cumulative: {buckets}"
    scans = fams["clamfs_scans_total"].value()
    assert scans == 8
    assert h.value("_count") == buckets[-1][1] == scans
    assert 0 < h.value("_sum") < 60 * SLOW * scans
    # the plain text carries the same histogram, and the human quantiles
    s = stats(m.mnt)
    assert s["scan_duration_count"] == s["scans"] == scans
    assert s["scan_duration_le_+Inf"] == scans
    assert 0 < s["scan_latency_p50_us"] <= s["scan_latency_p99_us"]


def test_two_mounts_one_exposition(mount_clamfs, clamd, tool):
    a = stream_mount(mount_clamfs, clamd)
    b = mount_scan(mount_clamfs, clamd)  # fdpass over the UNIX socket
    exercise(a, clamd)
    put(b.b("x"), CLEAN)
    assert try_read(b.m("x")) == ("ok", CLEAN)
    r = run_stats("--prometheus", a.mnt, b.mnt)
    assert r.returncode == 0 and r.stderr == "", r
    promtool_check(tool, r.stdout)
    fams = parse_exposition(r.stdout)  # each family once
    ma, mb = os.path.realpath(a.mnt), os.path.realpath(b.mnt)
    assert ma != mb
    for f in fams.values():
        per = {}
        for name, labels, _ in f.samples:
            # each mount has its own clamd address: backend= differs
            rest = tuple(sorted((k, v) for k, v in labels.items()
                                if k not in ("mountpoint", "backend")))
            per.setdefault(labels["mountpoint"], set()).add((name, rest))
        assert set(per) == {ma, mb}, (f.name, per.keys())
        assert per[ma] == per[mb], f.name
    assert fams["clamfs_infected_total"].value(mountpoint=ma) == 1
    assert fams["clamfs_infected_total"].value(mountpoint=mb) == 0
    assert fams["clamfs_opens_checked_total"].value(mountpoint=mb) == 1
    # the plain text of several mounts: a [mountpoint] line before each
    r = run_stats(a.mnt, b.mnt)
    assert r.returncode == 0, r
    blocks = r.stdout.split("\n\n")
    assert [b_.splitlines()[0] for b_ in blocks] == [f"[{ma}]", f"[{mb}]"]
    assert all("scan_duration_count=" in b_ for b_ in blocks)
    # a mount given twice would make every series twice
    r = run_stats("--prometheus", a.mnt, a.mnt + "/")
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1, r.stderr


def test_output_is_replaced_atomically(mount_clamfs, clamd, tool, tmp_path):
    m = stream_mount(mount_clamfs, clamd)
    exercise(m, clamd)
    d = tmp_path / "textfile"
    d.mkdir()
    out = d / "clamfs.prom"
    last_family = "# TYPE clamfs_clamd_db_version gauge\n"
    bad = []
    reads = [0]
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                with open(out, "r") as f:
                    text = f.read()
            except FileNotFoundError:
                if reads[0]:  # once there, it must never go away
                    bad.append("missing")
                continue
            reads[0] += 1
            if last_family not in text or not text.endswith("\n"):
                bad.append(text[-200:])

    # a first complete file, then many replacements under a busy reader
    r = run_stats("--prometheus", "--output", str(out), m.mnt)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r
    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(40):
            r = subprocess.run(
                ["sh", "-c", 'umask 077; exec "$@"', "sh", clamfs_bin(),
                 "--stats", "--prometheus", "--output", str(out), m.mnt],
                capture_output=True, text=True, timeout=30 * SLOW)
            assert r.returncode == 0 and r.stderr == "", r
            try_read(m.m("clean"))
    finally:
        stop.set()
        t.join()
    assert reads[0] > 40, reads
    assert not bad, bad[:3]
    assert os.listdir(d) == ["clamfs.prom"], os.listdir(d)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    text = out.read_text()
    promtool_check(tool, text)
    assert parse_exposition(text)["clamfs_opens_checked_total"].value() > 40


def test_output_failures(mount_clamfs, clamd, tmp_path):
    m = stream_mount(mount_clamfs, clamd)
    # a directory that does not exist: one line, nothing left behind
    r = run_stats("--prometheus", "--output",
                  str(tmp_path / "nodir" / "x.prom"), m.mnt)
    assert r.returncode == 1 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1 and "x.prom" in r.stderr, r
    # --output without a file is a usage error
    r = run_stats("--prometheus", m.mnt, "--output")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r
    # a directory that is not a mount among the mounts: named, status 1,
    # and the mount's figures are still written
    out = tmp_path / "c.prom"
    r = run_stats("--prometheus", "--output", str(out), str(tmp_path),
                  m.mnt)
    assert r.returncode == 5, r
    assert len(r.stderr.splitlines()) == 1 and str(tmp_path) in r.stderr
    fams = parse_exposition(out.read_text())
    mnts = {lb["mountpoint"] for _, lb, _ in
            fams["clamfs_opens_checked_total"].samples}
    assert mnts == {os.path.realpath(m.mnt)}
    assert sorted(os.listdir(tmp_path)) == ["c.prom"]
    # the plain text keeps its [mountpoint] line with one mount left
    r = run_stats(str(tmp_path), m.mnt)
    assert r.returncode == 5, r
    assert r.stdout.splitlines()[0] == f"[{os.path.realpath(m.mnt)}]", r


def unit_keys(text):
    keys = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
    return keys


def test_shipped_timer_writes_textfile(mount_clamfs, clamd, tool, tmp_path):
    m = stream_mount(mount_clamfs, clamd)
    exercise(m, clamd)
    units = tmp_path / "units"
    units.mkdir()
    sbindir = os.path.dirname(os.path.realpath(clamfs_bin()))
    with open(os.path.join(SRC, "etc", "clamfs-prometheus@.service.in")) as f:
        service = f.read().replace("@CMAKE_INSTALL_FULL_SBINDIR@", sbindir)
    with open(os.path.join(SRC, "etc", "clamfs-prometheus@.timer")) as f:
        timer = f.read()
    (units / "clamfs-prometheus@.service").write_text(service)
    (units / "clamfs-prometheus@.timer").write_text(timer)
    mnt = os.path.realpath(m.mnt)
    inst = subprocess.run(["systemd-escape", "--path", mnt],
                          capture_output=True, text=True,
                          check=True).stdout.strip()
    r = subprocess.run(
        ["systemd-analyze", "verify", "--man=no",
         str(units / f"clamfs-prometheus@{inst}.service"),
         str(units / f"clamfs-prometheus@{inst}.timer")],
        capture_output=True, text=True, timeout=120 * SLOW, cwd=units)
    ours = [line for line in (r.stdout + r.stderr).splitlines()
            if "clamfs-prometheus@" in line]
    assert r.returncode == 0 and ours == [], r.stdout + r.stderr
    assert unit_keys(timer)["OnUnitActiveSec"] == ["15s"]
    assert unit_keys(timer)["WantedBy"] == ["timers.target"]
    keys = unit_keys(service)
    assert keys["Type"] == ["oneshot"]
    assert keys["ReadWritePaths"] == [TEXTFILE_DIR]
    # a host without the exporter skips it instead of failing every 15 s,
    # and the runs themselves do not fill the journal
    assert keys["ConditionPathIsDirectory"] == [TEXTFILE_DIR]
    assert keys["LogLevelMax"] == ["notice"]
    # the command as systemd runs it for this mount, into a private dir
    argv = shlex.split(keys["ExecStart"][0])
    out = tmp_path / "textfile"
    out.mkdir()
    argv = [a.replace(TEXTFILE_DIR, str(out)).replace("%i", inst)
            .replace("%f", mnt) for a in argv]
    r = subprocess.run(argv, capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r
    assert os.listdir(out) == [f"clamfs-{inst}.prom"]
    text = (out / f"clamfs-{inst}.prom").read_text()
    promtool_check(tool, text)
    fams = parse_exposition(text)
    assert fams["clamfs_infected_total"].value(mountpoint=mnt) == 1
