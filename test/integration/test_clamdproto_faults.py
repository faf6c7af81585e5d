# SPDX-License-Identifier: GPL-2.0-or-later
"""clamdproto against a fault-injecting fake clamd: silence, byte-by-byte
replies, hang-ups mid-reply, garbage, a megabyte without terminator, wrong
session numbers, premature OK, a session closed as it is reused, and
cancellation of a scan clamd never answers."""
import os
import time

import pytest

from cdputil import run_scan, run_stress
from fakeclamd import FakeClamd


@pytest.fixture
def target(tmp_path):
    f = tmp_path / "file.bin"
    f.write_bytes(os.urandom(10000))
    return f


def name_for(ctx):
    return "stream" if ctx.command == b"zINSTREAM" else "fd[7]"


def framed(ctx, text):
    prefix = f"{ctx.id}: " if ctx.id is not None else ""
    return (prefix + text).encode()


MODES = [("fdpass", []), ("stream", []), ("fdpass", ["--no-session"]),
         ("stream", ["--no-session"])]


@pytest.mark.parametrize("mode,extra", MODES)
def test_bytewise_reply_is_reassembled(target, mode, extra):
    def infected(ctx):
        return ("bytewise",
                framed(ctx, f"{name_for(ctx)}: Some.Sig-1.UNOFFICIAL FOUND")
                + b"\0", 0.002)

    with FakeClamd(infected) as fk:
        p = run_scan("--mode", mode, "--clamd", fk.socket, *extra, target)
    assert p.stdout == f"{target}: Some.Sig-1.UNOFFICIAL FOUND\n"
    assert p.returncode == 1

    def clean(ctx):
        return ("bytewise", framed(ctx, f"{name_for(ctx)}: OK") + b"\0",
                0.002)

    with FakeClamd(clean) as fk:
        p = run_scan("--mode", mode, "--clamd", fk.socket, *extra, target)
    assert p.stdout == f"{target}: OK\n" and p.returncode == 0


@pytest.mark.parametrize("mode,extra", MODES)
def test_silent_clamd_times_out(target, mode, extra):
    with FakeClamd(lambda ctx: ("silent",)) as fk:
        t0 = time.monotonic()
        p = run_scan("--mode", mode, "--clamd", fk.socket, "--timeout", 2,
                     *extra, target)
        dt = time.monotonic() - t0
    assert p.stdout.startswith(f"{target}: ERROR timeout: ")
    assert p.returncode == 2
    assert 1.9 <= dt < 4.0, dt


@pytest.mark.parametrize("reply", [
    b"fd[7]: O",                        # cut mid-word
    b"fd[7]: OK",                       # cut just before the terminator
    b"fd[7]: Sig FOUN",
    b"",                                # nothing at all
])
@pytest.mark.parametrize("session", [True, False])
def test_close_mid_reply_is_protocol_error(target, reply, session):
    def act(ctx):
        return ("close", framed(ctx, "") + reply if reply else b"")

    extra = [] if session else ["--no-session"]
    with FakeClamd(act) as fk:
        p = run_scan("--mode", "fdpass", "--clamd", fk.socket, *extra,
                     target)
    assert p.stdout.startswith(f"{target}: ERROR protocol: "), p.stdout
    assert p.returncode == 2


@pytest.mark.parametrize("text", [
    "garbage",
    "fd[7]: OK but not really",
    "fd[7]: OKAY",
    "OK",
    ": OK",
    "fd[7]: FOUND",
    "stream: OK",            # answer about another object
    "fd[x]: OK",
    "fd[7]: Sig FOUND trailing",
    "PONG",
])
def test_garbage_is_protocol_error(target, text):
    with FakeClamd(lambda ctx: ("reply", text)) as fk:
        p = run_scan("--mode", "fdpass", "--clamd", fk.socket, target)
    assert p.stdout.startswith(f"{target}: ERROR protocol: "), p.stdout
    assert p.returncode == 2


def test_binary_garbage_is_protocol_error(target):
    junk = bytes(b for b in os.urandom(3000) if b not in (0,)) + b"\0"
    with FakeClamd(lambda ctx: ("raw", junk)) as fk:
        p = run_scan("--mode", "stream", "--clamd", fk.socket, target)
    assert p.stdout.startswith(f"{target}: ERROR protocol: ")


@pytest.mark.parametrize("mode", ["fdpass", "stream"])
def test_megabyte_without_terminator(target, mode):
    flood = b"A" * (1024 * 1024)
    with FakeClamd(lambda ctx: ("raw", flood)) as fk:
        t0 = time.monotonic()
        p = run_scan("--mode", mode, "--clamd", fk.socket, "--timeout", 30,
                     target)
        dt = time.monotonic() - t0
    assert p.stdout == (f"{target}: ERROR protocol: reading clamd's reply: "
                        "reply longer than 4095 bytes\n"), p.stdout
    assert dt < 10


def test_oversized_but_terminated_reply(target):
    long_sig = "S" * 5000
    with FakeClamd(lambda ctx: ("reply", f"fd[7]: {long_sig} FOUND")) as fk:
        p = run_scan("--mode", "fdpass", "--clamd", fk.socket, target)
    assert p.stdout.startswith(f"{target}: ERROR protocol: ")
    # Long but within the bound: kept whole.
    sig = "Long." + "x" * 3000 + ".UNOFFICIAL"
    with FakeClamd(lambda ctx: ("reply", f"fd[7]: {sig} FOUND")) as fk:
        p = run_scan("--mode", "fdpass", "--clamd", fk.socket, target)
    assert p.stdout == f"{target}: {sig} FOUND\n"


def test_wrong_session_number(target):
    def act(ctx):
        return ("raw", f"{ctx.id + 1}: fd[7]: OK\0".encode())

    with FakeClamd(act) as fk:
        p = run_scan("--mode", "fdpass", "--clamd", fk.socket, target)
    assert p.stdout == (f"{target}: ERROR protocol: reply for command 2, "
                        "expected 1\n")


def test_premature_ok_for_unsent_stream(tmp_path):
    """A server that says OK and hangs up before it received the data must
    not make the library report clean.  The file is larger than the socket
    buffers, so the client cannot have handed all of it to the kernel."""
    target = tmp_path / "big.bin"
    target.write_bytes(os.urandom(16 * 1024 * 1024))
    with FakeClamd(lambda ctx: ("reply", "stream: OK"),
                   instream_early=b"stream: OK\0") as fk:
        for extra in ([], ["--no-session"]):
            p = run_scan("--mode", "stream", "--chunk-size", 4096,
                         "--clamd", fk.socket, *extra, target)
            assert p.stdout.startswith(f"{target}: ERROR protocol: "), \
                p.stdout
    with FakeClamd(lambda ctx: ("reply", "x"),
                   instream_early=b"INSTREAM size limit exceeded. ERROR\0"
                   ) as fk:
        p = run_scan("--mode", "stream", "--no-session", "--chunk-size",
                     4096, "--clamd", fk.socket, target)
    assert p.stdout == \
        f"{target}: ERROR size-limit: INSTREAM size limit exceeded\n"


@pytest.mark.parametrize("how", ["close", "timed-out"])
def test_session_dead_on_reuse_is_not_retried(target, how):
    """The session passes the idle check but dies when the second command
    arrives: the library does not retry (the caller owns retries, see
    scanq.h), says so as a connect error, and the next command connects
    afresh."""
    def act(ctx):
        if ctx.conn_no == 1 and ctx.nth == 2:
            if how == "close":
                return ("close", b"")
            return ("close", b"COMMAND READ TIMED OUT\n")
        return ("reply", f"{name_for(ctx)}: OK")

    with FakeClamd(act) as fk:
        _, kv = run_stress("--clamd", fk.socket, "--mode", "fdpass",
                           "--iterations", 3, target)
        conns = fk.connections
    assert [s["verdict"] for s in kv["scans_list"]] == \
        ["clean", "error", "clean"]
    assert kv["dead_sessions"] == "1" and kv["cat_connect"] == "1"
    assert kv["connects"] == "2" and conns == 2


def test_no_retry_in_the_library(target):
    """Every connection dies at its second command: the dead session is an
    error of its own (no retry here), a fresh connection that fails too."""
    def act(ctx):
        return ("close", b"") if ctx.nth >= 2 or ctx.conn_no >= 2 else \
            ("reply", "fd[7]: OK")

    with FakeClamd(act) as fk:
        _, kv = run_stress("--clamd", fk.socket, "--mode", "fdpass",
                           "--iterations", 3, target)
    assert [s["verdict"] for s in kv["scans_list"]] == \
        ["clean", "error", "error"]
    assert kv["dead_sessions"] == "1"
    assert kv["cat_connect"] == "1" and kv["cat_protocol"] == "1"


@pytest.mark.parametrize("mode", ["fdpass", "stream", "buf"])
@pytest.mark.parametrize("extra", [[], ["--no-session"]])
def test_cancel_while_clamd_is_silent(target, mode, extra):
    with FakeClamd(lambda ctx: ("silent",)) as fk:
        _, kv = run_stress("--clamd", fk.socket, "--mode", mode,
                           "--timeout-ms", 60000, "--cancel-after-ms", 300,
                           *extra, target)
    (scan,) = kv["scans_list"]
    assert (scan["verdict"], scan["cat"]) == ("error", "cancelled")
    assert 250 <= int(scan["ms"]) < 800, scan
    assert kv["open"] == "0"  # the cancelled connection was not kept


def test_cancel_while_waiting_for_a_slot(target):
    """Two threads, one connection: the second waits for the slot and is
    cancelled there; the first is cancelled on the socket."""
    with FakeClamd(lambda ctx: ("silent",)) as fk:
        _, kv = run_stress("--clamd", fk.socket, "--mode", "fdpass",
                           "--threads", 2, "--max-conns", 1,
                           "--timeout-ms", 60000, "--cancel-after-ms", 300,
                           target)
        conns = fk.connections
    assert [s["cat"] for s in kv["scans_list"]] == ["cancelled"] * 2
    assert all(int(s["ms"]) < 800 for s in kv["scans_list"])
    assert kv["waits"] == "1" and conns == 1


def test_slot_wait_honours_deadline(target):
    with FakeClamd(lambda ctx: ("silent",)) as fk:
        _, kv = run_stress("--clamd", fk.socket, "--mode", "fdpass",
                           "--threads", 3, "--max-conns", 1,
                           "--timeout-ms", 700, target)
    cats = sorted(s["cat"] for s in kv["scans_list"])
    assert cats == ["timeout"] * 3
    assert int(kv["max_scan_ms"]) < 1500


def test_connect_refused_and_missing_socket(tmp_path, target):
    p = run_scan("--clamd", str(tmp_path / "nope.sock"), target)
    assert p.stdout.startswith(f"{target}: ERROR connect: cannot connect to "
                               f"clamd at {tmp_path}/nope.sock: No such file")
    import socket as s
    probe = s.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    p = run_scan("--mode", "stream", "--clamd", f"tcp://127.0.0.1:{port}",
                 target)
    assert p.stdout == (f"{target}: ERROR connect: cannot connect to clamd "
                        f"at tcp://127.0.0.1:{port}: Connection refused\n")


def test_clamd_side_errors_are_categorised(target):
    for text, want in [
            ("UNKNOWN COMMAND", "clamd: UNKNOWN COMMAND"),
            ("COMMAND UNAVAILABLE", "clamd: COMMAND UNAVAILABLE"),
            ("fd[7]: Can't allocate memory ERROR",
             "clamd: Can't allocate memory"),
            ("fd[7]: Not a regular file ERROR", "clamd: Not a regular file"),
            ("INSTREAM size limit exceeded. ERROR",
             "size-limit: INSTREAM size limit exceeded")]:
        with FakeClamd(lambda ctx: ("reply", text)) as fk:
            p = run_scan("--mode", "fdpass", "--clamd", fk.socket, target)
        assert p.stdout == f"{target}: ERROR {want}\n", text
