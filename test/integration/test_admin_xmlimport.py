# SPDX-License-Identifier: GPL-2.0-or-later
# clamfs --import-clamfs-xml: the sample configuration Debian's clamfs
# package (ClamFS 1.2) ships converts into an INI that clamfs --check
# accepts; hostile values (newlines, quotes, inline comments, globs) never
# become settings nor break the file; malformed XML is a clear error.
import glob
import gzip
import os
import re
import subprocess

import pytest

from clamfstest.env import clamfs_bin

CACHE = os.environ.get("CLAMFS_TEST_CACHE", "/var/tmp/clamfs-test-cache")


def imp(path):
    return subprocess.run([clamfs_bin(), "--import-clamfs-xml", path],
                          capture_output=True, text=True, timeout=60)


def check(ini_path, clamd, tmp):
    """clamfs --check on the converted file, with the paths and the clamd
    of this machine put over the file's (-o wins over the file)."""
    b, mp = os.path.join(tmp, "b"), os.path.join(tmp, "mp")
    os.makedirs(b, exist_ok=True)
    os.makedirs(mp, exist_ok=True)
    return subprocess.run([clamfs_bin(), "--check", "-o", f"config={ini_path}",
                           "-o", f"clamd={clamd.socket}", "-o", f"backend={b}",
                           "-o", f"mountpoint={mp}"],
                          capture_output=True, text=True, timeout=60)


def debian_sample():
    """The clamfs-sample.xml of Debian's clamfs package, downloaded once
    into CACHE (never installed: it conflicts with this clamfs)."""
    os.makedirs(CACHE, exist_ok=True)
    debs = glob.glob(os.path.join(CACHE, "clamfs_*.deb"))
    if not debs:
        r = subprocess.run(["apt-get", "download", "clamfs"], cwd=CACHE,
                           capture_output=True, text=True, timeout=300)
        debs = glob.glob(os.path.join(CACHE, "clamfs_*.deb"))
        if r.returncode != 0 or not debs:
            pytest.skip("Debian's clamfs package cannot be downloaded "
                        f"(archive unreachable?): {r.stderr.strip()[-300:]}")
    ex = os.path.join(CACHE, "x")
    subprocess.run(["dpkg-deb", "-x", sorted(debs)[-1], ex], check=True)
    found = glob.glob(os.path.join(ex, "usr/share/doc/clamfs/*.xml*"))
    assert found, "no sample XML in Debian's clamfs package"
    data = open(found[0], "rb").read()
    if found[0].endswith(".gz"):
        data = gzip.decompress(data)
    return data


def ini_lines(text):
    """Checks every line is a comment, a section or `key = value` short
    enough for inih, and returns the (key, value) pairs."""
    pairs = []
    for line in text.splitlines():
        assert len(line) < 199, line
        if not line or line.startswith(";"):
            continue
        if re.fullmatch(r"\[\w+\]", line):
            continue
        m = re.fullmatch(r"(\w+) = (\S(?:.*\S)?)", line)
        assert m, f"not a setting: {line!r}"
        assert not re.search(r"\s;", m.group(2)), line
        pairs.append((m.group(1), m.group(2)))
    return pairs


def test_debian_sample(clamd, tmp_path):
    xml = tmp_path / "clamfs-sample.xml"
    xml.write_bytes(debian_sample())
    r = imp(str(xml))
    assert r.returncode == 0, r.stderr
    pairs = ini_lines(r.stdout)
    d = dict(pairs)
    assert d["backend"] == "/tmp" and d["mountpoint"] == "/clamfs/tmp"
    assert d["options"] == "allow_other"  # public="yes"
    assert d["clamd"] == "/var/run/clamav/clamd.ctl"
    assert d["scan_mode"] == "fdpass"
    assert d["max_scan_size"] == "67108864" and d["oversize"] == "allow"
    assert d["cache_entries"] == "65536" and d["cache_ttl"] == "10800"
    excludes = [v for k, v in pairs if k == "exclude"]
    assert "*.dat" in excludes and "*.pst" in excludes
    assert "include" not in d  # the blacklist is no include list
    assert "; not supported: <blacklist>" in r.stdout
    assert re.search(r"^; not supported: <stats ", r.stdout, re.M)
    out = tmp_path / "converted.ini"
    out.write_text(r.stdout)
    c = check(str(out), clamd, str(tmp_path))
    assert c.returncode == 0, c.stdout + c.stderr
    assert f"config {out}: ok" in c.stdout


HOSTILE = """<?xml version="1.0"?>
<clamfs>
  <clamd socket="/run/x.sock&#10;[scan]&#10;exempt_uid = 0" mode="fname" />
  <filesystem root="/srv/share ;comment" mountpoint="{mp}" public="no"
              readonly="yes" nonempty="yes" />
  <file maximal-size="10M" />
  <whitelist>
    <exclude extension="iso" />
    <exclude extension="*" />
    <exclude extension="x/../y" />
    <exclude extension="a&#10;exclude = *" />
  </whitelist>
  <cache entries="10" expire="1500" />
  <log method="file" filename="/var/log/c&#13;&#10;x" verbose="yes" />
  <mail server="localhost" to="root@localhost" />
  <unknown-thing a="b" />
  <filesystem mountpoint2="{long}" />
</clamfs>
"""


def test_hostile_values(clamd, tmp_path):
    mp = str(tmp_path / 'm"q\'uote')
    os.makedirs(mp)
    xml = tmp_path / "h.xml"
    xml.write_text(HOSTILE.format(mp=mp.replace('"', "&quot;")
                                  .replace("'", "&apos;"),
                                  long="xxx" + "\u00e9" * 200 + "&#10;"))
    r = imp(str(xml))
    assert r.returncode == 0, r.stderr
    pairs = ini_lines(r.stdout)
    d = dict(pairs)
    # quotes are fine in a value: kept
    assert d["mountpoint"] == mp
    # a newline, an inline comment: no setting, an escaped comment
    assert "clamd" not in d and "backend" not in d and "exempt_uid" not in d
    assert '<clamd socket="/run/x.sock\\x0a[scan]\\x0aexempt_uid = 0">' \
        in r.stdout
    assert '<filesystem root="/srv/share ;comment">' in r.stdout
    assert d["scan_mode"] == "path"
    assert d["options"] == "ro"
    assert [v for k, v in pairs if k == "exclude"] == ["*.iso"]
    # "10M" is no ClamFS number
    assert "max_scan_size" not in d and "oversize" not in d
    assert d["cache_ttl"] == "2" and d["log_level"] == "debug"
    for what in ("<mail server=", "<unknown-thing a=", "<log method=",
                 "<log filename=\"/var/log/c\\x0d\\x0ax\">",
                 "<filesystem nonempty=", "<filesystem mountpoint2=\"xxx"):
        assert "; not supported: " + what in r.stdout, what
    # a long value is cut between characters, and each line stays short
    # and one line (split on newlines only, not on what str.splitlines()
    # also takes for line ends)
    lines = r.stdout.encode().split(b"\n")
    for line in lines:
        assert len(line) < 190, line
    cut = [line.decode() for line in lines if b"mountpoint2" in line]
    assert len(cut) == 1 and '\u00e9\u00e9..."' in cut[0], cut
    out = tmp_path / "converted.ini"
    out.write_text(r.stdout)
    c = check(str(out), clamd, str(tmp_path))
    assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.parametrize("text,message", [
    ("<clamfs><clamd socket='/x'></clamfs>", "malformed XML: mismatched tag"),
    ("<clamfs><clamd socket='/x' />", "malformed XML: no element found"),
    ("", "malformed XML: no element found"),
    ("<config><x/></config>", "not a ClamFS configuration"),
    ("<?xml version='1.0'?><!DOCTYPE clamfs [<!ENTITY a 'aaaa'>"
     "<!ENTITY b '&a;&a;&a;&a;'>]><clamfs><clamd socket='&b;'/></clamfs>",
     "a DOCTYPE is not accepted"),
])
def test_malformed(tmp_path, text, message):
    xml = tmp_path / "bad.xml"
    xml.write_text(text)
    r = imp(str(xml))
    assert r.returncode == 2, r
    assert r.stdout == ""
    assert r.stderr.startswith(f"clamfs: {xml}:") and message in r.stderr, \
        r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_usage(tmp_path):
    r = imp(str(tmp_path / "missing.xml"))
    assert r.returncode == 2 and "No such file" in r.stderr
    r = subprocess.run([clamfs_bin(), "--import-clamfs-xml"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr


def test_declared_encoding(tmp_path):
    """A file in ISO-8859-1 that says so is read as such; the INI is
    UTF-8."""
    xml = tmp_path / "l1.xml"
    xml.write_bytes(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n'
                    b'<clamfs><filesystem root="/srv/caf\xe9" /></clamfs>\n')
    r = subprocess.run([clamfs_bin(), "--import-clamfs-xml", str(xml)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"backend = /srv/caf\xc3\xa9\n" in r.stdout
