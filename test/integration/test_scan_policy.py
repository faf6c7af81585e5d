# SPDX-License-Identifier: GPL-2.0-or-later
# Scan policy: include/exclude globs on mount-relative paths, exempt uids
# and gids (as real other users through an allow_other mount), the size
# limit with oversize=allow|deny, and clamd's stream limit in stream mode:
# a file over StreamMaxLength (1M in the fixture) is never reported clean.
import os


from fsutil import GID_A, GID_B, GID_OTHER, UID_A, UID_B, run_as
from scanutil import (MARKER, delta, ensure_marker_signature, mount_scan, put,
                      scan_failures, stats, try_read, wait_detections)

READ_SNIPPET = """
def rd(p):
    with open(p, 'rb') as f:
        return len(f.read())
emit({n: outcome(rd, P(n)) for n in ARGS})
"""


def test_exclude_globs(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=*.ISO", "exclude=backups/**")
    excluded = ["x.iso", "Y.Iso", "deep/er/z.ISO", "backups/a/b.txt",
                "backups/c"]
    scanned = ["x.txt", "x.iso.txt", "iso", "backupsX/c.txt", "a/backups/d",
               "xiso"]
    for n in excluded + scanned:
        put(m.b(n), clamd.eicar)
    s0 = stats(m.mnt)
    scans0 = clamd.scan_count()
    for n in excluded:
        assert try_read(m.m(n)) == ("ok", clamd.eicar), n
    for n in scanned:
        assert try_read(m.m(n)) == ("err", "EACCES"), n
    d = delta(s0, stats(m.mnt), "opens_excluded", "scans", "opens_denied")
    assert d == {"opens_excluded": len(excluded), "scans": len(scanned),
                 "opens_denied": len(scanned)}, d
    assert clamd.wait_scan_count(scans0 + len(scanned)) == \
        scans0 + len(scanned)
    assert sorted(x["path"] for x in wait_detections(m, len(scanned))) == \
        sorted(scanned)


def test_include_globs(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "include=*.exe", "include=docs/**")
    scanned = ["a.exe", "b/C.EXE", "docs/x", "docs/y/z.txt"]
    skipped = ["a.txt", "exe", "docsX/x", "b/a.exe.bak"]
    for n in scanned + skipped:
        put(m.b(n), clamd.eicar)
    s0 = stats(m.mnt)
    for n in scanned:
        assert try_read(m.m(n)) == ("err", "EACCES"), n
    for n in skipped:
        assert try_read(m.m(n)) == ("ok", clamd.eicar), n
    d = delta(s0, stats(m.mnt), "opens_excluded", "scans")
    assert d == {"opens_excluded": len(skipped), "scans": len(scanned)}, d


def test_exempt_uid_and_gid(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, f"exempt_uid={UID_A}",
                   f"exempt_gid={GID_OTHER}")
    put(m.b("pub", "eicar"), clamd.eicar, 0o644)
    put(m.b("pub", "clean"), b"clean", 0o644)
    names = ["pub/eicar", "pub/clean"]
    s0 = stats(m.mnt)
    # the exempt user (e.g. a backup user) reads everything unscanned
    r = run_as(UID_A, GID_A, [], READ_SNIPPET, m.mnt, args=names)
    assert r == {"pub/eicar": ["ok", len(clamd.eicar)],
                 "pub/clean": ["ok", 5]}, r
    d = delta(s0, stats(m.mnt), "opens_excluded", "scans")
    assert d == {"opens_excluded": 2, "scans": 0}, d
    # another user is scanned and refused
    r = run_as(UID_B, GID_B, [], READ_SNIPPET, m.mnt, args=names)
    assert r == {"pub/eicar": ["err", "EACCES"], "pub/clean": ["ok", 5]}, r
    # the same user with the exempt primary group
    s1 = stats(m.mnt)
    r = run_as(UID_B, GID_OTHER, [], READ_SNIPPET, m.mnt, args=names)
    assert r["pub/eicar"] == ["ok", len(clamd.eicar)], r
    assert delta(s1, stats(m.mnt), "opens_excluded")["opens_excluded"] == 2
    # root is not exempt
    assert try_read(m.m("pub", "eicar")) == ("err", "EACCES")


def test_max_scan_size_allow(mount_clamfs, clamd):
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd, "max_scan_size=1K", "oversize=allow")
    big = MARKER + b"\0" * 2048  # detected if it were scanned
    at_limit = MARKER + b"\0" * (1024 - len(MARKER))
    put(m.b("big"), big)
    put(m.b("limit"), at_limit)
    put(m.b("small"), clamd.eicar)
    s0 = stats(m.mnt)
    scans0 = clamd.scan_count()
    assert try_read(m.m("big")) == ("ok", big)
    assert try_read(m.m("limit")) == ("err", "EACCES")  # 1024 is not over
    assert try_read(m.m("small")) == ("err", "EACCES")
    d = delta(s0, stats(m.mnt), "opens_oversize_allowed",
              "opens_oversize_denied", "scans")
    assert d == {"opens_oversize_allowed": 1, "opens_oversize_denied": 0,
                 "scans": 2}, d
    assert clamd.wait_scan_count(scans0 + 2) == scans0 + 2


def test_max_scan_size_deny(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "max_scan_size=2K", "oversize=deny",
                   "deny_errno=EPERM")
    put(m.b("big"), b"clean but big\n" * 200)
    put(m.b("ok"), b"clean and small\n")
    assert try_read(m.m("big")) == ("err", "EPERM")
    assert try_read(m.m("ok")) == ("ok", b"clean and small\n")
    s = stats(m.mnt)
    assert s["opens_oversize_denied"] == 1
    # write-only opens of an oversize file are not affected
    fd = os.open(m.m("big"), os.O_WRONLY | os.O_APPEND)
    os.close(fd)


def test_max_scan_size_zero_is_unlimited(mount_clamfs, clamd):
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd, "max_scan_size=0", "oversize=deny")
    put(m.b("f"), os.urandom(3 * 1024 * 1024) + MARKER)
    assert try_read(m.m("f")) == ("err", "EACCES")
    assert stats(m.mnt)["opens_oversize_denied"] == 0


def test_stream_over_clamd_limit_never_clean(mount_clamfs, clamd):
    """clamd's StreamMaxLength is 1M: a bigger file cannot be scanned by
    INSTREAM. It must not be reported clean: EIO with on_error=deny, and
    the error is logged with its category."""
    m = mount_scan(mount_clamfs, clamd.tcp_addr)  # stream: TCP default
    clean_big = os.urandom(1536 * 1024)
    put(m.b("big"), clean_big)
    put(m.b("small"), b"fits")
    assert try_read(m.m("big")) == ("err", "EIO")
    assert try_read(m.m("big")) == ("err", "EIO")  # not cached either
    assert try_read(m.m("small")) == ("ok", b"fits")
    s = stats(m.mnt)
    assert s["opens_error_denied"] == 2
    fails = scan_failures(m)
    assert len(fails) == 2, m.stderr_text()
    assert all(f["path"] == "big" and f["open"] == "denied-EIO" for f in fails)
    assert fails[0]["error"] == "size-limit", fails[0]["_line"]


def test_stream_over_limit_with_eicar_at_start(mount_clamfs, clamd):
    """The detectable part fits in the first megabyte: whatever the daemon
    does at the limit, the file must not be opened."""
    ensure_marker_signature(clamd)
    m = mount_scan(mount_clamfs, clamd.tcp_addr, "scan_mode=stream",
                   "on_error=deny")
    put(m.b("big"), MARKER + os.urandom(1536 * 1024))
    r = try_read(m.m("big"))
    assert r[0] == "err" and r[1] in ("EACCES", "EIO"), r[0]
