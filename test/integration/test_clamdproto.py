# SPDX-License-Identifier: GPL-2.0-or-later
"""clamdproto against a real private clamd: every mode over UNIX and TCP,
StreamMaxLength, a file clamd may not open, 100 threads on one pool, a
session clamd timed out, clamd stopped and restarted, tricky file names,
PING/VERSION, and valgrind on the CLI."""
import os
import shutil
import subprocess
import threading

import pytest

from clamfstest.clamd import CLAMD, UNPRIVILEGED
from cdputil import run_scan, run_stress, scan_bin
from clamfstest.env import SANITIZE
from clamfstest.wait import wait_for

SIG = "Eicar-Test.UNOFFICIAL"


@pytest.fixture
def files(tmp_path, clamd):
    clean = tmp_path / "clean.txt"
    clean.write_bytes(os.urandom(4096))
    bad = tmp_path / "eicar.com"
    bad.write_bytes(clamd.eicar)
    return clean, bad


def addr_of(clamd, transport):
    return clamd.socket if transport == "unix" else clamd.tcp_addr


@pytest.mark.parametrize("transport", ["unix", "tcp"])
@pytest.mark.parametrize("mode", ["fdpass", "stream", "path"])
def test_clean_and_infected(clamd, files, transport, mode):
    clean, bad = files
    before = clamd.wait_scan_count(clamd.scan_count())  # settled
    p = run_scan("--mode", mode, "--clamd", addr_of(clamd, transport),
                 clean, bad)
    if mode == "fdpass" and transport == "tcp":
        assert p.returncode == 2
        for f in (clean, bad):
            assert f"{f}: ERROR local: fdpass (FILDES) needs a UNIX socket" \
                in p.stdout
        assert clamd.wait_scan_count(before) == before
        return
    assert p.stdout.splitlines() == [f"{clean}: OK", f"{bad}: {SIG} FOUND"]
    assert p.returncode == 1
    # clamd really looked at both files.
    assert clamd.wait_scan_count(before + 2) == before + 2
    p = run_scan("--mode", mode, "--clamd", addr_of(clamd, transport), clean)
    assert p.stdout == f"{clean}: OK\n" and p.returncode == 0


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_stream_over_limit_is_never_clean(clamd, tmp_path, transport):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024))  # StreamMaxLength is 1M
    for chunk in ("4096", "262144", "1048576"):
        p = run_scan("--mode", "stream", "--chunk-size", chunk, "--clamd",
                     addr_of(clamd, transport), big)
        assert p.stdout == \
            f"{big}: ERROR size-limit: INSTREAM size limit exceeded\n", chunk
        assert p.returncode == 2
    # Just under the limit is scanned in full.
    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(1024 * 1024 - 1))
    p = run_scan("--mode", "stream", "--clamd", addr_of(clamd, transport),
                 small)
    assert p.stdout == f"{small}: OK\n"


def test_fdpass_is_not_bound_by_stream_limit(clamd, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024))  # over StreamMaxLength
    p = run_scan("--mode", "fdpass", "--clamd", clamd.socket, big)
    assert p.stdout == f"{big}: OK\n"


def test_scan_fails_fildes_works(clamd_factory, tmp_path):
    """clamd running as an unprivileged user cannot open a root-only file
    by path, but scans the descriptor we pass it."""
    c = clamd_factory(user=UNPRIVILEGED)
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    f = secret_dir / "eicar.com"
    f.write_bytes(c.eicar)
    g = secret_dir / "clean.txt"
    g.write_bytes(b"nothing to see\n")
    os.chmod(secret_dir, 0o700)
    os.chmod(tmp_path, 0o755)
    p = run_scan("--mode", "path", "--clamd", c.socket, f, g)
    assert p.returncode == 2
    for x in (f, g):
        assert f"{x}: ERROR clamd: " in p.stdout
    assert "Permission denied" in p.stdout
    assert SIG not in p.stdout
    p = run_scan("--mode", "fdpass", "--clamd", c.socket, f, g)
    assert p.stdout.splitlines() == [f"{f}: {SIG} FOUND", f"{g}: OK"]
    p = run_scan("--mode", "stream", "--clamd", c.socket, f, g)
    assert p.stdout.splitlines() == [f"{f}: {SIG} FOUND", f"{g}: OK"]


def test_tricky_names(clamd, tmp_path):
    """The verdict comes from the end of clamd's reply, not the path."""
    a = tmp_path / "x: Eicar FOUND"
    a.write_bytes(b"harmless\n")
    b = tmp_path / "y: OK"
    b.write_bytes(clamd.eicar)
    c = tmp_path / "new\nline: OK"
    c.write_bytes(clamd.eicar)
    d = tmp_path / "z: Permission denied. ERROR"
    d.write_bytes(b"harmless\n")
    for mode in ("fdpass", "stream", "path"):
        p = run_scan("--mode", mode, "--clamd", clamd.socket, a, b, c, d)
        assert p.stdout == (f"{a}: OK\n{b}: {SIG} FOUND\n"
                            f"{c}: {SIG} FOUND\n{d}: OK\n"), mode
        assert p.returncode == 1


def test_directory_and_special_files(clamd, tmp_path):
    sub = tmp_path / "dir"
    sub.mkdir()
    (sub / "a").write_bytes(b"fine")
    (sub / "b").write_bytes(clamd.eicar)
    p = run_scan("--mode", "path", "--clamd", clamd.socket, sub)
    assert p.stdout == f"{sub}: {SIG} FOUND\n" and p.returncode == 1
    p = run_scan("--mode", "fdpass", "--clamd", clamd.socket, "/dev/null")
    assert p.stdout == "/dev/null: ERROR clamd: Not a regular file\n"
    assert p.returncode == 2
    p = run_scan("--mode", "path", "--clamd", clamd.socket, "/dev/null")
    assert p.stdout.startswith("/dev/null: ERROR clamd: ")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for mode in ("fdpass", "stream", "path"):
        p = run_scan("--mode", mode, "--clamd", clamd.socket, empty)
        assert p.stdout == f"{empty}: OK\n", mode


@pytest.mark.parametrize("mode", ["fdpass", "stream", "buf"])
def test_hundred_threads_one_pool(clamd, files, mode):
    clean, bad = files
    before = clamd.wait_scan_count(clamd.scan_count())  # settled
    _, kv = run_stress("--clamd", clamd.socket, "--mode", mode,
                       "--threads", 100, "--iterations", 3,
                       "--max-conns", 8, bad)
    assert kv["threads"] == "100"
    assert (kv["infected"], kv["clean"], kv["error"]) == ("300", "0", "0")
    assert kv["first_sig"] == SIG
    _, kv = run_stress("--clamd", clamd.socket, "--mode", mode,
                       "--threads", 100, "--iterations", 3,
                       "--max-conns", 8, clean)
    assert (kv["clean"], kv["infected"], kv["error"]) == ("300", "0", "0")
    # Clean sessions are kept: 300 scans on at most 8 connections, and
    # the other 92 threads had to wait for one.
    assert int(kv["connects"]) <= 8
    assert int(kv["reuses"]) >= 300 - 8
    assert int(kv["waits"]) > 0
    assert int(kv["open"]) <= 8
    assert clamd.wait_scan_count(before + 600) == before + 600


def test_hundred_threads_tcp(clamd, files):
    clean, _ = files
    _, kv = run_stress("--clamd", clamd.tcp_addr, "--mode", "stream",
                       "--threads", 100, "--iterations", 2,
                       "--max-conns", 10, clean)
    assert (kv["clean"], kv["error"]) == ("200", "0")
    assert int(kv["connects"]) <= 10


def test_idle_session_closed_by_clamd(clamd_factory, files):
    """clamd 1.4.6 closes an idle IDSESSION after ReadTimeout (saying
    COMMAND READ TIMED OUT): the next scan must notice and reconnect."""
    c = clamd_factory(options={"ReadTimeout": "2", "IdleTimeout": "2",
                               "CommandReadTimeout": "2"})
    clean, bad = files
    for f in (clean, bad):
        _, kv = run_stress("--clamd", c.socket, "--mode", "fdpass",
                           "--iterations", 2, "--sleep-ms", 3500, f)
        scans = kv["scans_list"]
        assert len(scans) == 2
        expect = "clean" if f == clean else "infected"
        assert [s["verdict"] for s in scans] == [expect, expect]
        assert kv["error"] == "0"
        if f == clean:
            # The first session was dropped, a second one opened.
            assert kv["connects"] == "2"
            assert int(kv["discards"]) >= 1
    # Without the sleep the session is reused.
    _, kv = run_stress("--clamd", c.socket, "--mode", "fdpass",
                       "--iterations", 5, clean)
    assert kv["connects"] == "1" and kv["reuses"] == "4"


def test_clamd_stopped_then_restarted(clamd_factory, files):
    c = clamd_factory()
    clean, bad = files
    assert run_scan("--clamd", c.socket, clean).returncode == 0
    c.stop()
    for addr in (c.socket, c.tcp_addr):
        p = run_scan("--mode", "stream", "--clamd", addr, bad)
        assert p.returncode == 2
        assert p.stdout.startswith(f"{bad}: ERROR connect: cannot connect"),\
            p.stdout
    c.start()
    p = run_scan("--clamd", c.socket, clean, bad)
    assert p.stdout == f"{clean}: OK\n{bad}: {SIG} FOUND\n"

    # One pool across a restart: its idle session dies with the old clamd.
    # The restart comes after the first scan, in the 3 s before the next.
    scanned = c.scan_count()

    def restart():
        wait_for(lambda: c.scan_count() > scanned, 10)
        c.restart()

    t = threading.Thread(target=restart)
    t.start()
    _, kv = run_stress("--clamd", c.socket, "--mode", "fdpass",
                       "--iterations", 2, "--sleep-ms", 3000, bad)
    t.join()
    assert [s["verdict"] for s in kv["scans_list"]] == ["infected"] * 2
    assert kv["connects"] == "2"


def test_new_signature_after_reload(clamd_factory, tmp_path):
    c = clamd_factory()
    f = tmp_path / "marked"
    marker = b"CDP-RELOAD-MARK-" + os.urandom(6).hex().encode()
    f.write_bytes(b"prefix " + marker + b" suffix")
    p = run_scan("--clamd", c.socket, f)
    assert p.stdout == f"{f}: OK\n"
    c.add_signature("Cdp.Reload.Mark", marker)
    for mode in ("fdpass", "stream", "path"):
        p = run_scan("--mode", mode, "--clamd", c.socket, f)
        assert p.stdout == f"{f}: Cdp.Reload.Mark.UNOFFICIAL FOUND\n", mode


def test_ping_version_stats(clamd):
    for addr in (clamd.socket, clamd.tcp_addr):
        p = run_scan("--clamd", addr, "--ping")
        assert (p.stdout, p.returncode) == ("PONG\n", 0)
        p = run_scan("--clamd", addr, "--version")
        engine = subprocess.run([CLAMD, "-c", clamd.conf, "--version"],
                                capture_output=True, text=True
                                ).stdout.split()[1].split("/")[0]
        # Only custom signatures: the short form, no database version.
        assert p.stdout == f"ClamAV {engine}\nengine: {engine}\n"
        p = run_scan("--clamd", addr, "--stats")
        assert p.returncode == 0
        assert "STATE: VALID PRIMARY" in p.stdout
        assert p.stdout.rstrip().endswith("END")


def test_cli_usage_errors(clamd, files):
    clean, _ = files
    assert run_scan().returncode == 2
    assert run_scan("--mode", "bogus", clean).returncode == 2
    p = run_scan("--clamd", "tcp://[::1", clean)
    assert p.returncode == 2 and "bad clamd address" in p.stderr
    p = run_scan("--help")
    assert p.returncode == 0 and "Usage: clamfs-scan" in p.stdout
    p = run_scan("--clamd", clamd.socket, clean, "/nonexistent/file")
    assert p.stdout == (f"{clean}: OK\n/nonexistent/file: ERROR local: "
                        "cannot open: No such file or directory\n")
    assert p.returncode == 2


def test_file_offset_untouched(clamd, files):
    clean, _ = files
    # cdp-stress reports an error when the scan moved the file offset.
    for mode in ("fdpass", "stream"):
        _, kv = run_stress("--clamd", clamd.socket, "--mode", mode, clean)
        assert kv["clean"] == "1" and kv["error"] == "0"


@pytest.mark.skipif(SANITIZE, reason="valgrind does not run ASan builds")
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
def test_cli_valgrind_clean(clamd, files, tmp_path):
    clean, bad = files
    big = tmp_path / "big"
    big.write_bytes(os.urandom(2 * 1024 * 1024))
    for args in (["--mode", "fdpass", clean, bad, "/dev/null"],
                 ["--mode", "stream", "-j", "4", clean, bad, big],
                 ["--mode", "path", clean, bad, "/nonexistent"],
                 ["--version"], ["--stats"]):
        p = subprocess.run(["valgrind", "--leak-check=full",
                            "--show-leak-kinds=all", "--errors-for-leak-kinds=all",
                            "--error-exitcode=99", scan_bin(),
                            "--clamd", clamd.socket, *map(str, args)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode in (0, 1, 2), p.stderr
        assert "ERROR SUMMARY: 0 errors" in p.stderr, p.stderr
        assert "All heap blocks were freed" in p.stderr, p.stderr
