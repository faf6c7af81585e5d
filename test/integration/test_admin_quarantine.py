# SPDX-License-Identifier: GPL-2.0-or-later
# clamfs-quarantine against a real mount and a real clamd: the record the
# daemon writes beside a quarantined file (signature, original path, owner,
# the opener), `list`, `restore` (original place, owner, mode, mtime; never
# replacing; never outside the share, whatever the record says), `purge`
# by age, and owner and mode kept when the quarantine is on another
# filesystem than the backend.
import os
import stat
import subprocess
import time

import pytest

from clamfstest.env import PYTHON, built_binary
from fsutil import setpriv_prefix
from scanutil import mount_scan, put, try_read, wait_detections

UID, GID = 61234, 61235  # no passwd/group entries: shown as numbers
MTIME_NS = 1_600_000_000_123_456_789


def qtool(*args):
    return subprocess.run(
        [built_binary("CLAMFS_QUARANTINE_BIN", "clamfs", "clamfs-quarantine")]
        + [str(a) for a in args], capture_output=True, text=True, timeout=60)


def listing(q):
    r = qtool("list", q)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def read_record(q, qid):
    out = {}
    with open(os.path.join(q, qid + ".clamfs")) as f:
        for line in f.read().splitlines():
            k, v = line.split("=", 1)
            assert k not in out, line
            out[k] = v
    return out


def open_as(uid, gid, path):
    """Opens path as uid/gid; returns 'ok' or the errno name."""
    code = ("import errno, os, sys\n"
            "try:\n"
            "    os.close(os.open(sys.argv[1], os.O_RDONLY)); print('ok')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    r = subprocess.run(setpriv_prefix(uid, gid) + [PYTHON, "-c", code, path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def plant(m, eicar, *rel):
    """An infected file in the backend with a known owner, mode, mtime."""
    p = m.b(*rel)
    put(p, eicar, mode=0o640)
    os.chown(p, UID, GID)
    os.chmod(p, 0o4750)  # set-id bits survive the owner change too
    os.utime(p, ns=(MTIME_NS, MTIME_NS))
    return p


def check_original(p, eicar):
    st = os.lstat(p)
    assert (st.st_uid, st.st_gid) == (UID, GID)
    assert stat.S_IMODE(st.st_mode) == 0o4750
    assert st.st_mtime_ns == MTIME_NS
    with open(p, "rb") as f:
        assert f.read() == eicar


def quarantine_mount(mount_clamfs, clamd, q, backend=None):
    return mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                      "quarantine_dir=" + q, "entry_timeout=0",
                      "attr_timeout=0", backend=backend)


def test_list_restore_purge(mount_clamfs, clamd):
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "quarantine")
    m = quarantine_mount(mount_clamfs, clamd, q)
    plant(m, clamd.eicar, "up", "dir", "x.txt")
    t0 = int(time.time())
    assert open_as(UID, GID, m.m("up", "dir", "x.txt")) == "EACCES"
    assert not os.path.lexists(m.b("up", "dir", "x.txt"))
    sig = wait_detections(m, 1)[0]["signature"]

    rows = listing(q)
    assert len(rows) == 1, rows
    when, qid, lsig, path, owner, opener = rows[0]
    assert qid.startswith("up/dir/x.txt.")
    assert (lsig, path, owner, opener) == (sig, "up/dir/x.txt",
                                           f"{UID}:{GID}", str(UID))
    assert when.endswith("Z") and "T" in when
    rec = read_record(q, qid)
    assert rec["share"] == os.path.realpath(m.backend)
    assert rec["signature"] == sig and rec["path"] == "up/dir/x.txt"
    assert abs(int(rec["epoch"]) - t0) <= 60
    assert (rec["uid"], rec["gid"], rec["mode"]) == (str(UID), str(GID),
                                                     "4750")
    assert rec["size"] == str(len(clamd.eicar))
    assert rec["opener_uid"] == str(UID)
    assert time.strftime("%Y-%m-%dT%H:%M:%SZ",
                         time.gmtime(int(rec["epoch"]))) == rec["time"] == when

    # restore never replaces what is there now
    put(m.b("up", "dir", "x.txt"), b"the user's new file")
    r = qtool("restore", q, qid)
    assert r.returncode == 1 and "exists" in r.stderr, r
    with open(m.b("up", "dir", "x.txt"), "rb") as f:
        assert f.read() == b"the user's new file"
    assert len(listing(q)) == 1

    # elsewhere in the share with --to, then at its own place
    os.unlink(m.b("up", "dir", "x.txt"))
    r = qtool("restore", q, qid)
    assert r.returncode == 0, r.stderr
    check_original(m.b("up", "dir", "x.txt"), clamd.eicar)
    assert listing(q) == []
    assert not os.path.exists(os.path.join(q, qid + ".clamfs"))

    # still infected: the next open scans it and quarantines it again
    assert try_read(m.m("up", "dir", "x.txt")) == ("err", "EACCES")
    rows = listing(q)
    assert len(rows) == 1 and rows[0][5] == "root", rows
    qid = rows[0][1]
    os.makedirs(m.b("elsewhere"))
    r = qtool("restore", q, qid, "--to", "elsewhere/y.txt")
    assert r.returncode == 0, r.stderr
    check_original(m.b("elsewhere", "y.txt"), clamd.eicar)

    # purge by age: a record younger than the limit stays
    assert try_read(m.m("elsewhere", "y.txt")) == ("err", "EACCES")
    qid = listing(q)[0][1]
    now = int(time.time())
    r = qtool("purge", q, "--older-than", 2, "--now", now + 86400)
    assert r.returncode == 0 and r.stdout == "", r
    assert len(listing(q)) == 1
    r = qtool("purge", q, "--older-than", 2, "--now", now + 3 * 86400)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"purged {qid}\n"
    assert listing(q) == []
    assert not os.path.lexists(os.path.join(q, qid))
    assert not os.path.lexists(os.path.join(q, qid + ".clamfs"))
    # --older-than 0: everything
    put(m.b("z"), clamd.eicar)
    assert try_read(m.m("z")) == ("err", "EACCES")
    assert len(listing(q)) == 1
    assert qtool("purge", q, "--older-than", 0).returncode == 0
    assert listing(q) == []


def test_hostile_name(mount_clamfs, clamd):
    """A name with a newline and a tab cannot forge record fields or list
    columns, and is restored under its exact name."""
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "quarantine")
    m = quarantine_mount(mount_clamfs, clamd, q)
    name = "evil\nsignature=Clean\nshare=etc\npath=passwd\tx"
    plant(m, clamd.eicar, name)
    assert try_read(m.m(name)) == ("err", "EACCES")
    rows = listing(q)
    assert len(rows) == 1 and len(rows[0]) == 6, rows
    assert rows[0][3] == "evil\\x0asignature=Clean\\x0ashare=etc" \
        "\\x0apath=passwd\\x09x"
    assert rows[0][2] != "Clean"
    qname = [n for n in os.listdir(q) if not n.endswith(".clamfs")][0]
    rec = read_record(q, qname)
    assert rec["share"] == os.path.realpath(m.backend)
    assert rec["signature"] != "Clean"
    assert qtool("restore", q, qname).returncode == 0
    check_original(m.b(name), clamd.eicar)


def write_record(q, qid, share, path):
    with open(os.path.join(q, qid), "wb") as f:
        f.write(b"infected")
    with open(os.path.join(q, qid + ".clamfs"), "w") as f:
        f.write(f"version=1\npath={path}\nshare={share}\nsignature=S\n"
                "epoch=1\nuid=0\ngid=0\nmode=0644\nsize=8\n"
                "mtime=1.000000000\n")


def test_restore_stays_in_the_share(mount_clamfs):
    base = mount_clamfs.tempdir("clamfs-q")
    q, share, outside = (os.path.join(base, d)
                         for d in ("q", "share", "outside"))
    for d in (q, share, outside):
        os.mkdir(d)
    os.symlink(outside, os.path.join(share, "link"))
    os.mkdir(os.path.join(share, "sub"))
    cases = {
        "dotdot": "../outside/x",
        "deep-dotdot": "sub/../../outside/x",
        "absolute": outside + "/x",
        "symlink-dir": "link/x",
        "symlink-last": "link",
        "empty": "",
    }
    for qid, path in cases.items():
        write_record(q, qid, share, path)
        r = qtool("restore", q, qid)
        assert r.returncode == 1, (qid, r)
        assert os.listdir(outside) == [], qid
        assert os.path.exists(os.path.join(q, qid)), qid
    # --to is held to the same rule
    write_record(q, "ok", share, "sub/x")
    for to in ("../outside/x", "link/x", "/tmp/x"):
        r = qtool("restore", q, "ok", "--to", to)
        assert r.returncode == 1, (to, r)
    assert os.listdir(outside) == []
    # a symlinked ID in the quarantine is not followed either
    os.symlink(os.path.join(q, "ok"), os.path.join(q, "alias"))
    write_record(q, "alias-rec", share, "sub/y")
    os.rename(os.path.join(q, "alias-rec.clamfs"),
              os.path.join(q, "alias.clamfs"))
    assert qtool("restore", q, "alias").returncode == 1
    assert not os.path.exists(os.path.join(share, "sub", "y"))
    # IDs that are no plain relative path are usage errors
    for bad in ("../q/ok", "/etc/passwd", "ok.clamfs"):
        assert qtool("restore", q, bad).returncode == 2, bad
    assert qtool("restore", q, "ok").returncode == 0
    with open(os.path.join(share, "sub", "x"), "rb") as f:
        assert f.read() == b"infected"
    # usage
    assert qtool().returncode == 2
    assert qtool("purge", q).returncode == 2
    assert qtool("purge", q, "--older-than", "-1").returncode == 2
    assert qtool("list", os.path.join(base, "missing")).returncode == 1


def test_restore_trusts_only_root(mount_clamfs):
    """A record names the owner and mode the restored file gets: restore
    refuses records and quarantine directories anyone but root could have
    written, and a restore that fails leaves the quarantined file as it
    was."""
    base = mount_clamfs.tempdir("clamfs-q")
    q, share = os.path.join(base, "q"), os.path.join(base, "share")
    os.mkdir(q, 0o700)
    os.mkdir(share)

    def record(qid, path, uid=61234, mode="4755"):
        os.makedirs(os.path.dirname(os.path.join(q, qid)), exist_ok=True)
        write_record(q, qid, share, path)
        rec = os.path.join(q, qid + ".clamfs")
        with open(rec) as f:
            text = f.read().replace("uid=0\n", f"uid={uid}\n")
        with open(rec, "w") as f:
            f.write(text.replace("mode=0644", "mode=" + mode))
        os.chmod(os.path.join(q, qid), 0o600)

    def refused(qid, why):
        r = qtool("restore", q, qid)
        assert r.returncode == 1 and why in r.stderr, r
        assert os.listdir(share) == []
        st = os.lstat(os.path.join(q, qid))
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)

    record("a", "a")
    os.chmod(q, 0o770)
    refused("a", "not root's alone")
    os.chmod(q, 0o702)
    refused("a", "not root's alone")
    os.chmod(q, 0o700)

    record("d/b", "b")
    os.chown(os.path.join(q, "d"), UID, GID)
    refused("d/b", "not root's alone")
    os.chown(os.path.join(q, "d"), 0, 0)
    os.chmod(os.path.join(q, "d"), 0o777)
    refused("d/b", "not root's alone")
    os.chmod(os.path.join(q, "d"), 0o700)

    os.chown(os.path.join(q, "a.clamfs"), UID, GID)
    refused("a", "record is not root's")
    os.chown(os.path.join(q, "a.clamfs"), 0, 0)
    os.chmod(os.path.join(q, "a.clamfs"), 0o666)
    refused("a", "record is not root's")
    os.chmod(os.path.join(q, "a.clamfs"), 0o600)

    # the target exists: nothing changes on the quarantined file
    put(os.path.join(share, "a"), b"new")
    r = qtool("restore", q, "a")
    assert r.returncode == 1 and "exists" in r.stderr, r
    st = os.lstat(os.path.join(q, "a"))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    os.unlink(os.path.join(share, "a"))

    for qid, path in (("a", "a"), ("d/b", "b")):
        r = qtool("restore", q, qid)
        assert r.returncode == 0, r.stderr
        st = os.lstat(os.path.join(share, path))
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (61234, 0o4755)


def test_directory_named_like_a_record(mount_clamfs):
    """A share's directory whose name ends in the record suffix is listed
    and purged like any other."""
    base = mount_clamfs.tempdir("clamfs-q")
    q, share = os.path.join(base, "q"), os.path.join(base, "share")
    os.makedirs(os.path.join(q, "mail.clamfs"))
    os.mkdir(share)
    write_record(q, "mail.clamfs/x.20260101T000000Z", share, "mail.clamfs/x")
    rows = listing(q)
    assert [r[1] for r in rows] == ["mail.clamfs/x.20260101T000000Z"], rows
    r = qtool("purge", q, "--older-than", 0)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "purged mail.clamfs/x.20260101T000000Z\n"
    assert os.listdir(os.path.join(q, "mail.clamfs")) == []


@pytest.fixture
def two_tmpfs():
    """Two fresh tmpfs mounts (torn down after the clamfs mounts on them)."""
    base = tempfile_dir()
    dirs = []
    try:
        for n in ("b", "q"):
            d = os.path.join(base, n)
            os.mkdir(d)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755",
                            "clamfs-test", d], check=True)
            dirs.append(d)
        yield dirs
    finally:
        for d in dirs:
            subprocess.run(["umount", "-l", d], check=False)
        subprocess.run(["rm", "-rf", "--one-file-system", base], check=False)


def tempfile_dir():
    import tempfile
    d = tempfile.mkdtemp(prefix="clamfs-fs2", dir="/tmp")
    os.chmod(d, 0o755)
    return d


def test_across_filesystems(two_tmpfs, mount_clamfs, clamd):
    backend, qfs = two_tmpfs
    q = os.path.join(qfs, "quarantine")
    m = quarantine_mount(mount_clamfs, clamd, q, backend=backend)
    assert os.stat(backend).st_dev != os.stat(qfs).st_dev
    plant(m, clamd.eicar, "d", "x")
    assert open_as(UID, GID, m.m("d", "x")) == "EACCES"
    assert not os.path.lexists(m.b("d", "x"))
    rows = listing(q)
    assert len(rows) == 1, rows
    qid = rows[0][1]
    # the copy on the other filesystem is the original's in all but place
    check_original(os.path.join(q, qid), clamd.eicar)
    assert rows[0][4] == f"{UID}:{GID}"
    # and back across
    assert qtool("restore", q, qid).returncode == 0
    check_original(m.b("d", "x"), clamd.eicar)
    assert [n for n in os.listdir(m.b("d")) if n.startswith(".")] == []
    assert listing(q) == []
