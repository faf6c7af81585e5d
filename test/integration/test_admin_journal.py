# SPDX-License-Identifier: GPL-2.0-or-later
# What an administrator reads in the log of a clamfs run by systemd:
# with stderr as journald's stream (JOURNAL_STREAM names it) entries go to
# the journal's native socket with fields of their own (MESSAGE_ID per
# kind of event, SIGNATURE, FILE_PATH, USER_ID...), read back here from
# the datagrams as journald would get them; where that socket refuses, each
# line carries its syslog priority as a "<N>" prefix on stderr, so
# `journalctl -p warning` shows detections and failures only. Never a
# doubled "clamfs[pid]: clamfs:" prefix. A JOURNAL_STREAM that names another
# file (inherited from a service's shell) changes nothing. Every line names
# its mount, a detection ends in clamd's "PATH: SIGNATURE FOUND" form.
# clamd going away and coming back is logged once each (err, then notice),
# not per open, also when the outage is shorter than version_check, and a
# mount whose clamd does not answer says so at start.
import os
import socket
import struct
import subprocess
import time

from adminutil import wait_log
from clamfstest.env import SLOW, clamfs_bin
from clamfstest.mount import Mount
from clamfstest.wait import let_time_pass
from scanutil import put, try_read
from clamfstest.clamd import EICAR_SIGNATURE

CLEAN = b"clean\n"


LOG_ID_INFECTED = "5ddbdbc828e740efa598eb9ccbaf622b"
LOG_ID_CLAMD_DOWN = "135ccadf8b5f4fc28e8c7deab16098f8"
LOG_ID_CLAMD_UP = "ff83acc91d79408abd5c7c05038989f9"


def start_with_stderr(admin, b, mnt, opts, journal, journal_socket=None):
    """clamfs -f with stderr a file; journal: JOURNAL_STREAM names that
    file (True), another file (False) or is unset (None). The journal's
    native socket is journal_socket, by default one nobody listens on (so
    never the host's journal)."""
    # each open's own scan is what these tests watch: no walk beside it
    if not any(o.split("=")[0] == "scan_ahead_dirs" for o in opts):
        opts = list(opts) + ["scan_ahead_dirs=no"]
    argv = [clamfs_bin(), "-f", b, mnt, "-o", ",".join(opts)]
    m = Mount(b, mnt, argv, admin.tempdir("clamfs-w"), True)
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    env["CLAMFS_JOURNAL_SOCKET"] = journal_socket or os.path.join(
        admin.tempdir("nojournal"), "socket")
    with open(m.stderr_path, "wb") as errf, \
            open(m.stdout_path, "wb") as outf:
        if journal is not None:
            st = os.fstat(errf.fileno() if journal else outf.fileno())
            env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        m.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=outf, stderr=errf, env=env)
    m.pid = m.proc.pid
    admin.mounts.append(m)
    admin.wait_mounted(m)
    return m


def lines_of(m):
    return [l for l in m.stderr_text().splitlines() if l.strip()]


def test_journal_stream_priorities(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "e"), clamd.eicar)
    put(os.path.join(b, "c"), CLEAN)
    m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"], True)
    assert try_read(m.m("e")) == ("err", "EACCES")
    assert try_read(m.m("c")) == ("ok", CLEAN)
    det = wait_log(m, "infected path=")
    assert len(det) == 1, m.stderr_text()
    # journald puts "clamfs[pid]: " in front: no "clamfs: " of ours
    assert det[0].startswith("<4>infected path=\"e\""), det
    started = wait_log(m, "mounted ")
    assert started and started[0].startswith("<6>mounted "), \
        m.stderr_text()
    # every line has a priority: journald would store the rest at info
    for line in lines_of(m):
        assert line[0] == "<" and line[2] == ">" and line[1] in "34567", \
            line


def test_no_prefix_without_the_journal(admin, clamd):
    for journal in (False, None):
        base, b, mnt = admin.dirs_bm()
        put(os.path.join(b, "e"), clamd.eicar)
        m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"],
                              journal)
        assert try_read(m.m("e")) == ("err", "EACCES")
        det = wait_log(m, "clamfs: infected ")
        assert len(det) == 1 and det[0].startswith("clamfs: infected "), \
            (journal, det)


def test_every_line_names_the_mount(admin, clamd):
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "e"), clamd.eicar)
    m = start_with_stderr(admin, b, mnt, [f"clamd={clamd.socket}"], None)
    assert try_read(m.m("e")) == ("err", "EACCES")
    wait_log(m, "clamfs: infected ")
    lines = lines_of(m)
    assert lines, m.stderr_text()
    for line in lines:
        if line.startswith("clamfs: infected "):
            # then clamd's own form, which rules written for it match
            assert line.endswith(f' mount="{mnt}": {mnt}/e: '
                                 f'{EICAR_SIGNATURE}.UNOFFICIAL FOUND'), line
            assert line.count("FOUND") == 1, line
        else:
            assert line.endswith(f' mount="{mnt}"'), line


def test_clamd_down_and_up_logged_once_each(admin, clamd_factory):
    c = clamd_factory()
    base, b, mnt = admin.dirs_bm()
    for i in range(5):
        put(os.path.join(b, f"f{i}"), CLEAN)
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "version_check=1", "racy_window=0",
                                          "scan_timeout=5"], None)
    assert try_read(m.m("f0")) == ("ok", CLEAN)
    c.stop()
    down = wait_log(m, "clamd stopped answering", timeout=10)
    assert len(down) == 1, m.stderr_text()
    # opens fail closed meanwhile; the change is not logged again
    for i in range(1, 5):
        assert try_read(m.m(f"f{i}")) == ("err", "EIO")
    let_time_pass(2.5, "two checks of the database watch (version_check=1) "
                  "log nothing new", scaled=True)
    assert len(wait_log(m, "clamd stopped answering", timeout=0)) == 1
    c.start()
    up = wait_log(m, "clamd answers again", timeout=15)
    assert len(up) == 1, m.stderr_text()
    assert try_read(m.m("f1")) == ("ok", CLEAN)
    let_time_pass(2.5, "two checks of the database watch (version_check=1) "
                  "log nothing new", scaled=True)
    assert len(wait_log(m, "clamd answers again", timeout=0)) == 1
    assert len(wait_log(m, "clamd stopped answering", timeout=0)) == 1


def test_mount_without_clamd_says_so_at_start(admin, clamd_factory):
    c = clamd_factory(start=False)
    base, b, mnt = admin.dirs_bm()
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "clamd_wait=0"], True)
    lines = wait_log(m, "clamd is not answering", timeout=10)
    assert len(lines) == 1, m.stderr_text()
    assert lines[0].startswith("<3>clamd is not answering"), lines
    assert "refused" in lines[0], lines


def test_mount_without_clamd_or_watch_says_so(admin, clamd_factory):
    """version_check=0 turns the watch off: the start still checks once."""
    c = clamd_factory(start=False)
    base, b, mnt = admin.dirs_bm()
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "clamd_wait=0", "version_check=0"],
                          None)
    lines = wait_log(m, "clamd is not answering", timeout=10)
    assert len(lines) == 1, m.stderr_text()


def test_debug_level_tells_each_decision(admin, clamd):
    """log_level=debug says, per gated open, what was decided without a
    detection: a fresh clean scan with its duration, a cached verdict, an
    empty file, an oversize file. At the default level none of it."""
    base, b, mnt = admin.dirs_bm()
    put(os.path.join(b, "clean"), CLEAN)
    put(os.path.join(b, "empty"), b"")
    put(os.path.join(b, "big"), b"x" * 4096)
    opts = [f"clamd={clamd.socket}", "racy_window=0", "max_scan_size=1024",
            "oversize=deny"]
    m = start_with_stderr(admin, b, mnt, opts + ["log_level=debug"], None)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("clean")) == ("ok", CLEAN)
    assert try_read(m.m("empty")) == ("ok", b"")
    assert try_read(m.m("big"))[0] == "err"
    fresh = wait_log(m, "decision=allowed-scanned-clean")
    assert len(fresh) == 1 and 'path="clean"' in fresh[0], fresh
    assert " scan_ms=" in fresh[0], fresh
    cached = wait_log(m, "decision=allowed-cached-clean")
    assert len(cached) == 1 and 'path="clean"' in cached[0], cached
    assert 'path="empty"' in wait_log(m, "decision=allowed-empty")[0]
    assert 'path="big"' in wait_log(m, "decision=denied-oversize")[0]

    base2, b2, mnt2 = admin.dirs_bm()
    put(os.path.join(b2, "clean"), CLEAN)
    quiet = start_with_stderr(admin, b2, mnt2, opts, None)
    assert try_read(quiet.m("clean")) == ("ok", CLEAN)
    assert try_read(quiet.m("clean")) == ("ok", CLEAN)
    # a decision is logged before the open is answered: none can come now
    assert "decision=" not in quiet.stderr_text()


def parse_native(data):
    """One datagram of journald's native protocol: {NAME: bytes}."""
    fields, pos = {}, 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        line = data[pos:nl]
        if b"=" in line:
            name, value = line.split(b"=", 1)
            pos = nl + 1
        else:
            name = line
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            value = data[nl + 9:nl + 9 + n]
            assert data[nl + 9 + n:nl + 10 + n] == b"\n", data
            pos = nl + 10 + n
        assert name.decode().isupper() or "_" in name.decode(), name
        fields[name.decode()] = value
    return fields


class JournalReader:
    """A socket where clamfs sends what journald would get."""
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.entries = []

    def drain(self, timeout=0.2):
        self.sock.settimeout(timeout)
        try:
            while True:
                self.entries.append(parse_native(self.sock.recv(1 << 20)))
        except socket.timeout:
            pass
        return self.entries

    def wait(self, pred, timeout=10):
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            hits = [e for e in self.drain() if pred(e)]
            if hits:
                return hits
        return []


def test_journal_entries_carry_fields(admin, clamd):
    """Under systemd each entry has its fields: a detection MESSAGE_ID,
    SIGNATURE, FILE_PATH (the name's bytes as they are, a newline
    included), USER_ID, PRIORITY; the text is escaped and ends in clamd's
    FOUND form; nothing goes to stderr meanwhile."""
    from fsutil import UID_A, GID_A, run_as
    base, b, mnt = admin.dirs_bm()
    name = "bad\nname: x FOUND"
    put(os.path.join(b, name), clamd.eicar)
    os.chmod(os.path.join(b, name), 0o644)
    journal = JournalReader(os.path.join(admin.tempdir("journal"), "sock"))
    m = start_with_stderr(admin, b, mnt,
                          [f"clamd={clamd.socket}", "allow_other"], True,
                          journal_socket=journal.sock.getsockname())
    opener = run_as(UID_A, GID_A, None, """
try:
    open(ARGS["path"], "rb").read()
    emit("read")
except OSError as e:
    emit(errno.errorcode[e.errno])
""", "/", args={"path": os.path.join(mnt, name)})
    assert opener == "EACCES"
    hits = journal.wait(lambda e: e.get("MESSAGE_ID") ==
                        LOG_ID_INFECTED.encode())
    assert len(hits) == 1, journal.entries
    e = hits[0]
    sig = f"{EICAR_SIGNATURE}.UNOFFICIAL".encode()
    assert e["SIGNATURE"] == sig
    assert e["FILE_PATH"] == f"{mnt}/{name}".encode()
    assert e["USER_ID"] == str(UID_A).encode()
    assert e["PRIORITY"] == b"4"
    assert e["SYSLOG_IDENTIFIER"] == b"clamfs"
    assert e["CLAMFS_MOUNT"] == mnt.encode()
    assert e["CLAMFS_ACTION"] == b"deny" and e["CLAMFS_EVENT"] == b"open"
    assert int(e["PROCESS_ID"]) > 0
    msg = e["MESSAGE"].decode()
    assert "\n" not in msg and not msg.startswith("clamfs:"), msg
    assert msg.startswith('infected path="bad\\x0aname: x FOUND" '), msg
    # one FOUND form, at the end, whatever the name holds
    assert msg.endswith(f": {mnt}/bad\\x0aname: x FOUND: "
                        f"{sig.decode()} FOUND"), msg
    # every entry names the mount and has a priority; none on stderr
    mounted_ = [x for x in journal.entries
                if x["MESSAGE"].startswith(b"mounted ")]
    assert mounted_ and mounted_[0]["PRIORITY"] == b"6", journal.entries
    for x in journal.entries:
        assert x["CLAMFS_MOUNT"] == mnt.encode(), x
        assert x["PRIORITY"] in (b"3", b"4", b"5", b"6", b"7"), x
    assert "infected" not in m.stderr_text(), m.stderr_text()


def test_short_outage_told_at_err_then_notice(admin, clamd_factory):
    """An outage the version check never sees (version_check=3600): the
    first open it refuses logs at err, once, and the first scan after it
    at notice, so `journalctl -p warning` shows it and `-p err` alerts."""
    c = clamd_factory()
    base, b, mnt = admin.dirs_bm()
    for i in range(6):
        put(os.path.join(b, f"f{i}"), CLEAN + bytes([i]))
    m = start_with_stderr(admin, b, mnt, [f"clamd={c.socket}",
                                          "version_check=3600",
                                          "racy_window=0", "scan_timeout=5"],
                          True)
    assert try_read(m.m("f0"))[0] == "ok"
    c.stop()
    for i in range(1, 4):
        assert try_read(m.m(f"f{i}")) == ("err", "EIO")
    down = wait_log(m, "clamd is not answering")
    assert len(down) == 1, m.stderr_text()
    assert down[0].startswith("<3>clamd is not answering"), down
    assert "refused" in down[0], down
    # the per-open lines are warnings, rate-limited
    failed = wait_log(m, "scan failed ")
    assert failed and all(l.startswith("<4>") for l in failed), failed
    c.start()
    assert try_read(m.m("f4"))[0] == "ok"
    up = wait_log(m, "clamd answers again")
    assert len(up) == 1 and up[0].startswith("<5>"), m.stderr_text()
    assert try_read(m.m("f5"))[0] == "ok"
    # a second outage is told again
    c.stop()
    assert try_read(m.m("f1")) == ("err", "EIO")
    assert len(wait_log(m, "clamd is not answering", count=2)) == 2
    assert len(wait_log(m, "clamd answers again", timeout=0)) == 1
