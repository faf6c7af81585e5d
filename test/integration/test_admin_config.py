# SPDX-License-Identifier: GPL-2.0-or-later
# The configuration file as an administrator uses it: a full INI with every
# section mounts with `clamfs -f -o config=FILE` and nothing else (backend
# and mountpoint from the file); precedence defaults < file < -o, proved by
# behaviour (errno, audit mode, exclusion, cache); positional BACKEND
# MOUNTPOINT and -o backend= win over the file's; and every kind of mistake
# (unknown key, bad value, key in the wrong section, a line without '=', a
# missing file) stops clamfs before it mounts with exactly one line naming
# FILE:LINE and the key, exit status 2, no mount and no process left.
import os
import subprocess

import pytest

from clamfstest.mountinfo import mounted
from adminutil import clamfs_pids, ini, run_fail
from clamfstest.env import SLOW, clamfs_bin
from scanutil import put, stats, try_read, wait_detections

CLEAN = b"nothing to see here\n"


def full_config(path, backend, mnt, clamd_socket, **over):
    """Every section, with values that differ from the defaults where the
    test can see the difference."""
    sec = {
        "fuse": [("backend", backend), ("mountpoint", mnt),
                 ("options", "allow_other"), ("threads", "4"),
                 ("clone_fd", "no"), ("attr_timeout", "1"),
                 ("entry_timeout", "1"), ("negative_timeout", "0"),
                 ("no_default_permissions", "no")],
        "clamd": [("clamd", clamd_socket), ("clamd_connections", "2"),
                  ("version_check", "30"), ("clamd_wait", "0")],
        "scan": [("scan_mode", "fdpass"), ("scan_timeout", "20"),
                 ("scan_threads", "2"), ("max_scan_size", "10M"),
                 ("oversize", "allow"), ("exclude", "*.iso"),
                 ("exclude", "skip/**"), ("scan_on_close", "no")],
        "cache": [("cache_entries", "1000"), ("cache_ttl", "600")],
        "action": [("on_infected", "deny"), ("deny_errno", "EPERM"),
                   ("on_error", "deny"), ("infected_cmd_rate", "5")],
        "log": [("log_level", "info")],
    }
    for k, v in over.items():
        s, key = k.split("__")
        sec[s] = [(kk, vv) for kk, vv in sec[s] if kk != key] + [(key, v)]
    return ini(path, list(sec.items()))


def test_config_file_alone(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    cfg = full_config(os.path.join(base, "share.ini"), b, mnt, clamd.socket)
    put(os.path.join(b, "clean"), CLEAN)
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "x.ISO"), clamd.eicar)
    put(os.path.join(b, "skip", "deep", "e"), clamd.eicar)
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    e = m.entries()
    assert len(e) == 1
    assert e[0].fstype == "fuse.clamfs"
    assert e[0].source == b, "fsname is the backend from the file"
    assert "allow_other" in e[0].super_opts, "options= of the file applied"
    # [scan]/[action] of the file: EPERM (not the default EACCES),
    # exclusions by extension in any case and by directory
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("e")) == ("err", "EPERM")
    assert try_read(m.m("x.ISO")) == ("ok", clamd.eicar)
    assert try_read(m.m("skip", "deep", "e")) == ("ok", clamd.eicar)
    s = stats(m.mnt)
    assert s["opens_excluded"] == 2
    assert s["infected"] == 1 and s["opens_denied"] == 1
    dets = wait_detections(m, 1)
    assert dets[0]["action"] == "deny", dets
    # [clamd] and [log]: the mount line names the file's clamd
    up = [l for l in m.stderr_text().splitlines() if "mounted " in l]
    assert up and f"clamd={clamd.socket}" in up[0], m.stderr_text()
    assert "on_infected=deny" in up[0]


def test_precedence_defaults_file_options(admin, clamd):
    """defaults < file < -o: the file turns on audit mode (log), EPERM and
    no cache; -o on_infected=deny wins over the file's log, and the file's
    EPERM still wins over the default EACCES."""
    base, b, mnt = admin.dirs_bm()
    cfg = full_config(os.path.join(base, "p.ini"), b, mnt, clamd.socket,
                      action__on_infected="log", cache__cache_ttl="0")
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "clean"), CLEAN)
    # without -o the file's audit mode applies: the read succeeds, logged
    m1 = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert try_read(m1.m("e")) == ("ok", clamd.eicar)
    assert wait_detections(m1, 1)[0]["action"] == "log"
    # cache_ttl=0 from the file: every open is scanned
    for _ in range(3):
        assert try_read(m1.m("clean")) == ("ok", CLEAN)
    s = stats(m1.mnt)
    assert s["opens_cache_hit"] == 0 and s["scans"] == 4, s
    for p in m1.teardown():
        pytest.fail(p)
    # -o on the command line wins over the file
    m2 = admin.start(["-f", "-o", f"config={cfg},on_infected=deny"], mnt, b)
    assert try_read(m2.m("e")) == ("err", "EPERM")
    assert wait_detections(m2, 1)[0]["action"] == "deny"
    # the same with config= last in the list: its place does not matter
    for p in m2.teardown():
        pytest.fail(p)
    m3 = admin.start(["-f", "-o", "on_infected=deny,deny_errno=EACCES",
                      "-o", f"config={cfg}"], mnt, b)
    assert try_read(m3.m("e")) == ("err", "EACCES")


def test_positional_paths_override_file(admin, clamd):
    base, b_file, m_file = admin.dirs_bm()
    b_arg = os.path.join(base, "b2")
    m_arg = os.path.join(base, "m2")
    os.mkdir(b_arg, 0o755)
    os.mkdir(m_arg, 0o755)
    put(os.path.join(b_file, "from_file"), CLEAN)
    put(os.path.join(b_arg, "from_arg"), CLEAN)
    cfg = full_config(os.path.join(base, "c.ini"), b_file, m_file,
                      clamd.socket)
    # BACKEND MOUNTPOINT (mount.fuse3's form) win over both of the file's
    m = admin.start(["-f", b_arg, m_arg, "-o", f"config={cfg}"], m_arg, b_arg)
    assert not mounted(m_file)
    assert sorted(os.listdir(m_arg)) == ["from_arg"]
    assert m.entries()[0].source == b_arg
    for p in m.teardown():
        pytest.fail(p)
    # MOUNTPOINT alone: the backend still comes from the file
    m = admin.start(["-f", m_arg, "-o", f"config={cfg}"], m_arg, b_file)
    assert not mounted(m_file)
    assert sorted(os.listdir(m_arg)) == ["from_file"]
    for p in m.teardown():
        pytest.fail(p)
    # -o backend= wins over the file's backend
    m = admin.start(["-f", "-o", f"config={cfg},backend={b_arg}"], m_file,
                    b_arg)
    assert sorted(os.listdir(m_file)) == ["from_arg"]


# Each case: the file's lines after a valid [fuse] section (which starts
# at line 1 with 3 lines), the bad line's text, and what the message must
# name besides FILE:LINE.
ERROR_CASES = {
    "unknown_key": (["[cache]", "cache_ttl = 60", "on_infekted = deny"],
                    "on_infekted", ["unknown"]),
    "bad_value": (["[cache]", "cache_entries = 10", "cache_ttl = soon"],
                  "cache_ttl", ["soon"]),
    "bad_choice": (["[action]", "on_infected = shred"],
                   "on_infected", ["shred"]),
    "wrong_section": (["[scan]", "scan_timeout = 5", "on_infected = log"],
                      "on_infected", ["[action]"]),
    "no_equals": (["[scan]", "scan_timeout = 5", "scan_on_close"],
                  "scan_on_close", []),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_config_error(admin, clamd, case):
    lines, key, extra = ERROR_CASES[case]
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, f"bad-{case}.ini")
    head = ["[fuse]", f"backend = {b}", f"mountpoint = {mnt}",
            "; a comment and an empty line shift the line numbers", "",
            "[clamd]", f"clamd = {clamd.socket}"]
    text = head + lines + ["[log]", "log_level = info"]
    bad_line = len(head) + len(lines)  # the last of `lines`, 1-based
    with open(cfg, "w") as f:
        f.write("\n".join(text) + "\n")
    for argv in (["-f", "-o", f"config={cfg}"],
                 ["-o", f"config={cfg}"],          # would daemonize
                 ["--check", "-o", f"config={cfg}"]):
        r = run_fail(argv, mnt)
        err_lines = r.stderr.splitlines()
        assert r.returncode == 2, (argv, r)
        assert len(err_lines) == 1, (argv, r.stderr)
        msg = err_lines[0]
        assert msg.startswith("clamfs: "), msg
        assert f"{cfg}:{bad_line}:" in msg, msg
        assert key in msg, f"the key {key!r} is not named: {msg}"
        for x in extra:
            assert x in msg, msg
        assert not mounted(mnt)
        assert clamfs_pids(cfg) == [], "a clamfs process was left behind"


def test_config_missing_file(admin):
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "no-such.ini")
    for argv in (["-f", b, mnt, "-o", f"config={cfg}"],
                 ["--check", "-o", f"config={cfg}"]):
        r = run_fail(argv, mnt)
        assert r.returncode == 2, r
        err_lines = r.stderr.splitlines()
        assert len(err_lines) == 1, r.stderr
        assert err_lines[0].startswith("clamfs: ")
        assert cfg in err_lines[0]
        assert "No such file" in err_lines[0]
        assert not mounted(mnt)
        assert clamfs_pids(cfg) == []


def test_config_error_not_mounted_over_existing(admin, clamd):
    """A bad option after a good file: still one line, nothing mounted,
    and a -o error names the option."""
    base, b, mnt = admin.dirs_bm()
    cfg = full_config(os.path.join(base, "ok.ini"), b, mnt, clamd.socket)
    r = run_fail(["-f", "-o", f"config={cfg},cache_ttl=-1"], mnt)
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("clamfs: ") and "cache_ttl" in r.stderr
    assert not mounted(mnt)


def test_indented_key_not_swallowed(admin, clamd):
    """An indented `key = value` line (a common INI layout) is either a key
    of its own or an error naming it; it must not silently become part of
    the previous key's value (inih's multi-line continuation)."""
    base, b, mnt = admin.dirs_bm()
    cfg = os.path.join(base, "indented.ini")
    with open(cfg, "w") as f:
        f.write(f"[fuse]\nbackend = {b}\nmountpoint = {mnt}\n"
                f"[clamd]\nclamd = {clamd.socket}\n"
                "[scan]\n"
                "    exclude = *.iso\n"
                "    exclude = *.tmp\n")
    put(os.path.join(b, "x.tmp"), clamd.eicar)
    p = subprocess.run([clamfs_bin(), "--check", "-o", f"config={cfg}"],
                       capture_output=True, text=True, timeout=30 * SLOW)
    if p.returncode != 0:
        # refused: then the message names the indented line's key and line
        assert f"{cfg}:8:" in p.stderr, p.stderr
        assert "'exclude=exclude" not in p.stderr, \
            f"line 8 was read as the value of line 7's key: {p.stderr}"
        return
    m = admin.start(["-f", "-o", f"config={cfg}"], mnt, b)
    assert try_read(m.m("x.tmp")) == ("ok", clamd.eicar), \
        "the second (indented) exclude was silently not applied"
