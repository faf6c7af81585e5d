# SPDX-License-Identifier: GPL-2.0-or-later
"""The Debian package: `dpkg-buildpackage -b -uc -us` builds it from the
tree, it installs with dpkg, the installed clamfs mounts, scans and
unmounts, and it removes cleanly."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG = "clamfs-onaccess"


def sanitized():
    return os.environ.get("CLAMFS_SANITIZE", "").upper() in ("1", "ON", "TRUE")


@pytest.fixture(scope="module")
def deb():
    if sanitized():
        pytest.skip("the package is built without sanitizers: the plain "
                    "run covers it")
    work = tempfile.mkdtemp(prefix="clamfs-deb.")
    src = os.path.join(work, "src")
    os.mkdir(src)
    files = subprocess.run(
        ["git", "-C", TOP, "ls-files", "-co", "--exclude-standard"],
        capture_output=True, text=True, check=True).stdout.split("\n")
    for f in files:
        if not f or f.startswith("build") or not os.path.exists(
                os.path.join(TOP, f)):
            continue
        os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
        shutil.copy2(os.path.join(TOP, f), os.path.join(src, f))
    r = subprocess.run(["dpkg-buildpackage", "-b", "-uc", "-us"], cwd=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = [f for f in os.listdir(work)
            if f.startswith(PKG + "_") and f.endswith(".deb")]
    assert len(debs) == 1, os.listdir(work)
    yield os.path.join(work, debs[0])
    subprocess.run(["dpkg", "-r", PKG], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


def test_package_contents(deb):
    names = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True,
                           text=True, check=True).stdout
    for path in ("./usr/sbin/clamfs", "./usr/bin/clamfs-scan",
                 "./usr/lib/systemd/system/clamfs@.service",
                 "./usr/share/man/man8/clamfs.8.gz",
                 "./usr/share/man/man5/clamfs.ini.5.gz",
                 "./usr/share/doc/clamfs/clamfs.ini"):
        assert path in names, path
    unit = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb],
                          capture_output=True, check=True).stdout
    assert b"ExecStart=/usr/sbin/clamfs -f" in unit


def test_install_mount_scan_remove(deb, clamd):
    r = subprocess.run(["dpkg", "-i", deb], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        v = subprocess.run(["/usr/sbin/clamfs", "--version"],
                           capture_output=True, text=True)
        assert v.returncode == 0 and "clamfs version" in v.stdout
        base = tempfile.mkdtemp(prefix="clamfs-deb-m.")
        b, m = os.path.join(base, "b"), os.path.join(base, "m")
        os.mkdir(b)
        os.mkdir(m)
        with open(os.path.join(b, "clean.txt"), "w") as f:
            f.write("clean\n")
        with open(os.path.join(b, "bad.com"), "wb") as f:
            f.write(clamd.eicar)
        r = subprocess.run(["/usr/sbin/clamfs", b, m, "-o",
                            "clamd=" + clamd.socket], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        try:
            with open(os.path.join(m, "clean.txt")) as f:
                assert f.read() == "clean\n"
            with pytest.raises(PermissionError):
                open(os.path.join(m, "bad.com"), "rb").read()
        finally:
            assert subprocess.run(["umount", m]).returncode == 0
        for _ in range(100):
            if not os.path.ismount(m):
                break
            time.sleep(0.05)
        assert not os.path.ismount(m)
        shutil.rmtree(base)
    finally:
        r = subprocess.run(["dpkg", "-r", PKG], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.exists("/usr/sbin/clamfs")
