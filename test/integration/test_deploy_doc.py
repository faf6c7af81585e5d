# SPDX-License-Identifier: GPL-2.0-or-later
# doc/deploy.md is followed by administrators step by step, so what it shows
# must work: its share configuration mounts a directory in place and scans
# (with only the clamd address and the directory changed for the test);
# its drop-in is the shipped one; its smb.conf share passes testparm; its
# fstab line is etc/fstab.example's; its /etc/exports line has the fsid=
# FUSE needs; and every file it points at under
# /usr/share/doc/clamfs-onaccess is one `cmake --install` puts there.
import os
import re
import shutil
import subprocess

import pytest


from clamfstest.env import SLOW, build_dir, clamfs_bin
from scanutil import put, try_read

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(SRC, "doc", "deploy.md")


def doc_text():
    with open(DOC) as f:
        return f.read()


def ini_blocks():
    return re.findall(r"```ini\n(.*?)```", doc_text(), re.S)


def directives(text):
    return [l.strip() for l in text.splitlines()
            if l.strip() and not l.strip().startswith("#")]


def test_share_ini_mounts_in_place(admin, clamd):
    conf = ini_blocks()[0]
    assert "backend = /srv/share" in conf
    assert "mountpoint = /srv/share" in conf
    base = admin.tempdir()
    share = os.path.join(base, "share")
    os.mkdir(share)
    put(os.path.join(share, "clean.txt"), b"clean\n")
    put(os.path.join(share, "eicar.com"), clamd.eicar)
    path = os.path.join(base, "share.ini")
    with open(path, "w") as f:
        f.write(conf.replace("/srv/share", share).replace(
            "/var/run/clamav/clamd.ctl", clamd.socket))
    r = subprocess.run([clamfs_bin(), "--check", "-o", f"config={path}"],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    m = admin.start(["-f", "-o", f"config={path}"], share, share)
    assert try_read(os.path.join(share, "clean.txt")) == ("ok", b"clean\n")
    assert try_read(os.path.join(share, "eicar.com")) == ("err", "EACCES")
    assert m.proc.poll() is None


def test_dropin_shown_is_shipped():
    shown = directives(ini_blocks()[1])
    for server in ("smbd", "nfs-server"):
        with open(os.path.join(SRC, "etc", "systemd", f"{server}.service.d",
                               "clamfs.conf")) as f:
            assert directives(f.read()) == shown, server


def test_smb_conf_share_passes_testparm(admin):
    if not shutil.which("testparm"):
        pytest.skip("testparm (samba-common-bin) is not installed")
    share = ini_blocks()[2]
    assert "path = /srv/share" in share
    d = admin.tempdir()
    conf = os.path.join(d, "smb.conf")
    with open(conf, "w") as f:
        f.write("[global]\n   server role = standalone server\n"
                f"   lock directory = {d}\n   state directory = {d}\n"
                f"   cache directory = {d}\n   private dir = {d}\n"
                + share.replace("/srv/share", d))
    r = subprocess.run(["testparm", "-s", "--suppress-prompt", conf],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[share]" in r.stdout and f"path = {d}" in r.stdout, r.stdout
    assert not re.search(r"(?i)unknown parameter|ignoring", r.stderr), \
        r.stderr


def test_fstab_line_is_the_example():
    with open(os.path.join(SRC, "etc", "fstab.example")) as f:
        example = [l.split() for l in f
                   if l.startswith("/srv/share ")]
    shown = [l.split() for l in doc_text().splitlines()
             if l.strip().startswith("/srv/share  /srv/share")]
    assert example and shown == example


def test_exports_line_has_fsid():
    lines = [l.split() for l in doc_text().splitlines()
             if l.strip().startswith("/srv/share 10.")]
    assert len(lines) == 1
    opts = re.match(r"[^(]+\((.*)\)$", lines[0][1]).group(1).split(",")
    assert "no_subtree_check" in opts and "sync" in opts
    fsid = [o for o in opts if o.startswith("fsid=")]
    assert len(fsid) == 1 and fsid[0] != "fsid=0"


def test_doc_paths_are_installed(admin):
    """`cmake --install` of this build into a scratch DESTDIR holds every
    /usr/share/doc/clamfs-onaccess/... path the page names (the package
    test checks /etc/clamfs/share.ini.example, installed to an absolute
    path fixed when the build was configured)."""
    dest = admin.tempdir()
    build = build_dir()
    r = subprocess.run(["cmake", "--install", build, "--prefix", "/usr"],
                       capture_output=True, text=True,
                       env=dict(os.environ, DESTDIR=dest),
                       timeout=120 * SLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    named = set(re.findall(r"(/usr/share/doc/clamfs-onaccess/[\w./@-]*\w)",
                           doc_text()))
    assert len(named) >= 3, named
    missing = [p for p in sorted(named)
               if not os.path.exists(dest + p)]
    assert missing == [], missing
