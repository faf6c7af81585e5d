# SPDX-License-Identifier: GPL-2.0-or-later
# `clamfs --stats MOUNTPOINT [--prometheus]`: the live counters of a running
# mount match exactly the opens this test performed; the Prometheus text
# format parses (TYPE before each sample, valid names, one mount label,
# numbers) and carries the same values plus clamfs_clamd_info; a directory
# that is not a clamfs mount, a missing argument, and a user who is not
# root get exit status 1 and one line.
import os
import re
import subprocess

from fsutil import SLOW, UID_A, GID_A
from mount_fixture import clamfs_bin
from scanutil import mount_scan, put, try_read

CLEAN_A = b"first clean file\n" * 100
CLEAN_B = b"second clean file\n"

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def run_stats(*args, prefix=()):
    return subprocess.run(list(prefix) + [clamfs_bin(), "--stats"] +
                          list(args), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30 * SLOW)


def parse_plain(text):
    out = {}
    for line in text.splitlines():
        assert "=" in line, f"not name=value: {line!r}"
        k, v = line.split("=", 1)
        assert k not in out, f"{k} twice"
        out[k] = v
    return out


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
    got = {k: int(s[k]) if k in s else None for k in EXPECTED}
    assert got == EXPECTED
    errs = {k: v for k, v in s.items() if k.startswith("errors_")}
    assert errs and all(v == "0" for v in errs.values()), errs
    assert s["clamd_engine"] == "1.4.6", s
    assert int(s["uptime_seconds"]) >= 0
    p50, p90, p99 = (int(s[f"scan_latency_p{q}_us"]) for q in (50, 90, 99))
    assert 0 < p50 <= p90 <= p99, s
    assert p99 < 10_000_000 * SLOW, s


def parse_prometheus(text, mnt):
    """{metric: (type, value, labels)}; asserts the format as it goes."""
    types = {}
    samples = {}
    label_re = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        assert line == line.strip() and line, f"blank/space: {line!r}"
        if line.startswith("#"):
            parts = line.split()
            if parts[1] == "TYPE":
                assert len(parts) == 4, line
                assert NAME.match(parts[2]), line
                assert parts[3] in ("counter", "gauge"), line
                assert parts[2] not in types, f"TYPE twice: {line}"
                types[parts[2]] = parts[3]
            else:
                assert parts[1] == "HELP", line
            continue
        mt = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$", line)
        assert mt, f"not a sample: {line!r}"
        name, labels_s, value = mt.groups()
        assert name.startswith("clamfs_"), line
        assert name in types, f"sample before its TYPE line: {line}"
        assert name not in samples, f"{name} twice"
        labels = dict(label_re.findall(labels_s))
        assert ",".join(f'{k}="{v}"' for k, v in labels.items()) == \
            labels_s, line
        assert labels.get("mount") == mnt, line
        float(value)  # a number
        samples[name] = (types[name], value, labels)
    assert set(types) == set(samples), "TYPE without samples"
    return samples


def test_stats_prometheus(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    do_opens(m, clamd)
    r = run_stats(m.mnt, "--prometheus")
    assert r.returncode == 0, r
    assert r.stderr == ""
    samples = parse_prometheus(r.stdout, m.mnt)
    plain = parse_plain(run_stats(m.mnt).stdout)
    for k, v in EXPECTED.items():
        assert samples[f"clamfs_{k}"][1] == str(v), (k, samples.get(k))
    # every numeric plain counter is exported with the same name
    # (names sanitized: "errors_size-limit" becomes errors_size_limit)
    for k, v in plain.items():
        if v.isdigit():
            name = "clamfs_" + re.sub(r"[^a-zA-Z0-9_]", "_", k)
            assert name in samples, k
            if k != "uptime_seconds":
                assert samples[name][1] == v, (k, v, samples[name])
    for k in ("opens_checked", "scans", "infected", "cache_hits"):
        assert samples[f"clamfs_{k}"][0] == "counter", k
    for k in ("cache_entries", "uptime_seconds", "clamd_up",
              "scan_latency_p50_us"):
        assert samples[f"clamfs_{k}"][0] == "gauge", k
    info = samples["clamfs_clamd_info"]
    assert info[0] == "gauge" and info[1] == "1"
    assert info[2]["engine"] == "1.4.6", info


def test_stats_prometheus_escapes_mount_label(mount_clamfs, clamd):
    base = mount_clamfs.tempdir()
    mnt = os.path.join(base, 'we"ird\\ mnt')
    os.mkdir(mnt, 0o755)
    m = mount_clamfs(mnt=mnt, opts=[f"clamd={clamd.socket}"])
    r = run_stats(m.mnt, "--prometheus")
    assert r.returncode == 0, r
    samples = parse_prometheus(r.stdout, mnt.replace("\\", "\\\\")
                               .replace('"', '\\"'))
    assert "clamfs_opens_checked" in samples


def test_stats_refusals(mount_clamfs, clamd, tmp_path):
    m = mount_scan(mount_clamfs, clamd)
    # not a clamfs mount
    r = run_stats(str(tmp_path))
    assert r.returncode == 1, r
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and \
        r.stderr.startswith("clamfs: "), r.stderr
    assert str(tmp_path) in r.stderr
    # a missing path
    r = run_stats(str(tmp_path / "nope"))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r
    # no argument
    r = run_stats()
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r
    # root only: an unprivileged user gets nothing
    r = run_stats(m.mnt, prefix=["setpriv", f"--reuid={UID_A}",
                                 f"--regid={GID_A}", "--clear-groups", "--"])
    assert r.returncode == 1, r
    assert r.stdout == "", r.stdout
    assert len(r.stderr.splitlines()) == 1 and \
        r.stderr.startswith("clamfs: "), r.stderr
    r = run_stats(m.mnt, "--prometheus",
                  prefix=["setpriv", f"--reuid={UID_A}", f"--regid={GID_A}",
                          "--clear-groups", "--"])
    assert r.returncode == 1 and r.stdout == "", r
    # while root still gets them
    assert run_stats(m.mnt).returncode == 0
