# SPDX-License-Identifier: GPL-2.0-or-later
# `clamfs --stats MOUNTPOINT [--prometheus]`: the live counters of a running
# mount match exactly the opens this test performed; the Prometheus text
# format parses (HELP and TYPE once before each family, valid names, a
# mountpoint label on every series, numbers), carries the same values in
# conventional names plus clamfs_clamd_info, and exports every numeric key
# (test_admin_prometheus.py runs promtool on it); a directory
# that is not a clamfs mount, a missing argument, and a user who is not
# root get exit status 5 (2 for usage) and one line.
import re
import os
import time

from clamfstest.stats import parse_stats
from clamfstest.env import SLOW
from fsutil import UID_A, GID_A
from promutil import parse_exposition, run_stats
from scanutil import mount_scan, put, try_read

CLEAN_A = b"first clean file\n" * 100
CLEAN_B = b"second clean file\n"


def parse_plain(text):
    return parse_stats(text, strict=True)


def do_opens(m, clamd):
    """a x3, b x1, e (EICAR) x2, z (empty) x1 on a fresh mount."""
    put(m.b("a"), CLEAN_A)
    put(m.b("b"), CLEAN_B)
    put(m.b("e"), clamd.eicar)
    put(m.b("z"), b"")
    for _ in range(3):
        assert try_read(m.m("a")) == ("ok", CLEAN_A)
    assert try_read(m.m("b")) == ("ok", CLEAN_B)
    for _ in range(2):
        assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("z")) == ("ok", b"")


EXPECTED = {
    "opens_checked": 7, "opens_empty": 1, "opens_scanned": 3,
    "opens_cache_hit": 3, "infected": 2, "opens_denied": 2, "scans": 3,
    "cache_entries": 3, "cache_hits": 3, "cache_misses": 3,
    "cache_evictions": 0, "cache_clears": 0, "opens_excluded": 0,
    "opens_error_denied": 0, "opens_error_allowed": 0,
    "opens_interrupted": 0, "quarantined": 0, "deleted": 0,
    "scans_queued": 0, "scans_cancelled": 0, "scans_expired": 0,
    "scans_rejected": 0, "clamd_up": 1,
}


def test_stats_match_operations(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    c0 = clamd.scan_count()
    do_opens(m, clamd)
    assert clamd.wait_scan_count(c0 + 3) == c0 + 3
    r = run_stats(m.mnt)
    assert r.returncode == 0, r
    assert r.stderr == ""
    s = parse_plain(r.stdout)
    got = {k: s.get(k) for k in EXPECTED}
    assert got == EXPECTED
    errs = {k: v for k, v in s.items() if k.startswith("errors_")}
    assert errs and all(v == 0 for v in errs.values()), errs
    assert s["clamd_engine"] == "1.4.6", s
    assert s["uptime_seconds"] >= 0
    p50, p90, p99 = (s[f"scan_latency_p{q}_us"] for q in (50, 90, 99))
    assert 0 < p50 <= p90 <= p99, s
    assert p99 < 10_000_000 * SLOW, s


# The same operations as Prometheus series: family -> {labels: value}
# (labels besides mountpoint, as a sorted tuple).
EXPECTED_PROM = {
    "clamfs_opens_checked_total": 7, "clamfs_opens_empty_total": 1,
    "clamfs_opens_scanned_total": 3, "clamfs_opens_cache_hit_total": 3,
    "clamfs_infected_total": 2, "clamfs_opens_denied_total": 2,
    "clamfs_scans_total": 3, "clamfs_cache_entries": 3,
    "clamfs_cache_hits_total": 3, "clamfs_cache_misses_total": 3,
    "clamfs_cache_evictions_total": 0, "clamfs_cache_clears_total": 0,
    "clamfs_opens_excluded_total": 0, "clamfs_opens_interrupted_total": 0,
    "clamfs_quarantined_total": 0, "clamfs_deleted_total": 0,
    "clamfs_scans_queued": 0, "clamfs_scans_cancelled_total": 0,
    "clamfs_scans_expired_total": 0, "clamfs_scans_rejected_total": 0,
    "clamfs_clamd_up": 1,
}


def test_stats_prometheus(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    do_opens(m, clamd)
    r = run_stats(m.mnt, "--prometheus")
    assert r.returncode == 0, r
    assert r.stderr == ""
    fams = parse_exposition(r.stdout)
    mnt = os.path.realpath(m.mnt)
    for name, v in EXPECTED_PROM.items():
        assert fams[name].value(mountpoint=mnt) == v, (name, fams[name])
    assert fams["clamfs_opens_scan_error_total"].value(
        decision="denied") == 0
    assert set(fams["clamfs_scan_errors_total"].series()) == {"0"}
    for name in ("clamfs_opens_checked_total", "clamfs_scans_total",
                 "clamfs_infected_total", "clamfs_cache_hits_total"):
        assert fams[name].type == "counter", name
    for name in ("clamfs_cache_entries", "clamfs_start_time_seconds",
                 "clamfs_clamd_up", "clamfs_inodes"):
        assert fams[name].type == "gauge", name
    assert fams["clamfs_scan_duration_seconds"].type == "histogram"
    info = fams["clamfs_clamd_info"]
    assert info.type == "gauge" and info.value() == 1
    assert info.samples[0][1]["engine"] == "1.4.6", info.samples
    # every numeric key of the plain text is one series, save the human
    # quantiles: a key prom.c's table lacks would be missing here
    plain = parse_plain(run_stats(m.mnt).stdout)
    # uptime_seconds is for people too: the series is the start time;
    # a backend's last/avg/max latency too: the series is its sum/count
    numeric = [k for k, v in plain.items() if isinstance(v, int)
               and not k.startswith("scan_latency_p")
               and not re.fullmatch(r"backend_\d+_latency_(last|avg|max)_ms",
                                    k)
               and k != "uptime_seconds"]
    assert abs(plain["start_time_seconds"] + plain["uptime_seconds"]
               - time.time()) < 5, plain
    series = sum(len(f.samples) for f in fams.values()
                 if not f.name.endswith("_info"))
    assert series == len(numeric), (len(numeric), series)


def test_stats_prometheus_escapes_mount_label(mount_clamfs, clamd):
    base = mount_clamfs.tempdir()
    mnt = os.path.join(base, 'we"ird\\ mnt')
    os.mkdir(mnt, 0o755)
    m = mount_clamfs(mnt=mnt, opts=[f"clamd={clamd.socket}"])
    r = run_stats(m.mnt, "--prometheus")
    assert r.returncode == 0, r
    assert '{mountpoint="' + os.path.realpath(mnt).replace(
        "\\", "\\\\").replace('"', '\\"') + '"}' in r.stdout
    fams = parse_exposition(r.stdout)
    assert fams["clamfs_opens_checked_total"].samples[0][1] == {
        "mountpoint": os.path.realpath(mnt)}


def test_stats_refusals(mount_clamfs, clamd, tmp_path):
    m = mount_scan(mount_clamfs, clamd)
    # not a clamfs mount
    r = run_stats(str(tmp_path))
    assert r.returncode == 5, r
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and \
        r.stderr.startswith("clamfs: "), r.stderr
    assert str(tmp_path) in r.stderr
    # a missing path
    r = run_stats(str(tmp_path / "nope"))
    assert r.returncode == 5 and len(r.stderr.splitlines()) == 1, r
    # no argument
    r = run_stats()
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r
    # root only: an unprivileged user gets nothing
    r = run_stats(m.mnt, prefix=["setpriv", f"--reuid={UID_A}",
                                 f"--regid={GID_A}", "--clear-groups", "--"])
    assert r.returncode == 5, r
    assert r.stdout == "", r.stdout
    assert len(r.stderr.splitlines()) == 1 and \
        r.stderr.startswith("clamfs: "), r.stderr
    r = run_stats(m.mnt, "--prometheus",
                  prefix=["setpriv", f"--reuid={UID_A}", f"--regid={GID_A}",
                          "--clear-groups", "--"])
    assert r.returncode == 5 and r.stdout == "", r
    # while root still gets them
    assert run_stats(m.mnt).returncode == 0
