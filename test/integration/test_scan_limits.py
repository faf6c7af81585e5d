# SPDX-License-Identifier: GPL-2.0-or-later
# clamd giving up on a file at one of its scan limits is not a detection.
# With AlertExceedsMax (which deploy.md recommends, so that files past
# MaxFileSize are not passed as clean) clamd answers such a file as
# Heuristics.Limits.Exceeded.MaxFiles and the like: a clean archive of
# many members must not be quarantined or deleted for it.
import io
import os
import zipfile

import pytest

from clamfstest.env import clamfs_bin
from scanutil import delta, detections, log_lines, mount_scan, stats

MAX_FILES = 10


@pytest.fixture(scope="module")
def limited_clamd(tmp_path_factory):
    from clamfstest.clamd import Clamd
    c = Clamd(options={"AlertExceedsMax": "yes",
                       "MaxFiles": str(MAX_FILES)})
    c.start()
    c.wait_pong()
    yield c
    c.cleanup()


def many_member_zip(n=MAX_FILES + 5):
    """A clean archive with more members than clamd's MaxFiles."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i in range(n):
            z.writestr("m%03d.txt" % i, "member %d\n" % i)
    return buf.getvalue()


def put_zip(m, name):
    data = many_member_zip()
    with open(m.b(name), "wb") as f:
        f.write(data)
    return data


def read(path):
    try:
        with open(path, "rb") as f:
            return ("ok", f.read())
    except OSError as e:
        return ("err", e.errno)


@pytest.mark.parametrize("on_infected", ["delete", "quarantine"])
def test_limits_refuse_and_keep_the_file(mount_clamfs, limited_clamd,
                                         on_infected, tmp_path):
    """The default: refused with EIO, nothing moved or deleted, logged as
    limits (not as infected), counted, and the cached verdict answers the
    next open the same way without a scan."""
    opts = ["on_infected=" + on_infected]
    if on_infected == "quarantine":
        opts.append("quarantine_dir=%s" % (tmp_path / "q"))
    m = mount_scan(mount_clamfs, limited_clamd, *opts)
    data = put_zip(m, "archive.zip")
    s0 = stats(m.mnt)
    assert read(m.m("archive.zip")) == ("err", 5)  # EIO
    assert read(m.m("archive.zip")) == ("err", 5)
    d = delta(s0, stats(m.mnt), "scans", "limits_exceeded", "infected",
              "opens_denied", "deleted", "quarantined", "opens_cache_hit")
    assert d == {"scans": 1, "limits_exceeded": 2, "infected": 0,
                 "opens_denied": 0, "deleted": 0, "quarantined": 0,
                 "opens_cache_hit": 1}, d
    with open(m.b("archive.zip"), "rb") as f:
        assert f.read() == data  # still there, untouched
    lines = log_lines(m, "limits")
    assert len(lines) == 2, m.stderr_text()
    assert lines[0]["signature"].startswith(
        "Heuristics.Limits.Exceeded.MaxFiles"), lines[0]
    assert lines[0]["action"] == "deny" and lines[0]["path"] == "archive.zip"
    assert detections(m) == []


def test_limits_allow(mount_clamfs, limited_clamd):
    m = mount_scan(mount_clamfs, limited_clamd, "on_limits=allow",
                   "on_infected=delete")
    data = put_zip(m, "archive.zip")
    assert read(m.m("archive.zip")) == ("ok", data)
    assert stats(m.mnt)["limits_exceeded"] == 1
    assert log_lines(m, "limits")[0]["action"] == "allow"
    # a real detection is still one
    with open(m.b("eicar.com"), "wb") as f:
        f.write(limited_clamd.eicar)
    assert read(m.m("eicar.com")) == ("err", 13)
    assert not os.path.exists(m.b("eicar.com"))  # on_infected=delete


def test_limits_as_infected_keeps_the_old_rule(mount_clamfs, limited_clamd):
    """on_limits=infected: the administrator wants the heuristic treated
    as a detection, so on_infected=delete applies."""
    m = mount_scan(mount_clamfs, limited_clamd, "on_limits=infected",
                   "on_infected=delete")
    put_zip(m, "archive.zip")
    assert read(m.m("archive.zip")) == ("err", 13)
    assert not os.path.exists(m.b("archive.zip"))
    assert stats(m.mnt)["limits_exceeded"] == 0
    assert [d["signature"].split(".")[:3] for d in detections(m)] == \
        [["Heuristics", "Limits", "Exceeded"]]


def test_check_says_what_becomes_of_files_clamd_gives_up_on(limited_clamd):
    import subprocess
    r = subprocess.run([clamfs_bin(), "--check", "-o",
                        "clamd=" + limited_clamd.socket + ",on_limits=allow"],
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert "AlertExceedsMax yes" in out and "on_limits=allow" in out, out
    assert "Heuristics.Limits.Exceeded" in out, out
