# SPDX-License-Identifier: GPL-2.0-or-later
"""`cmake --install` from a source build: every file lands under the
prefix (a /usr/local install writes nothing to /lib or /etc), all systemd
units in one directory, and the installed unit starts the installed
program with the configuration where the sample was installed. Installed
into a DESTDIR (nothing on the host changes), from the build under test;
its list of files is what `xargs rm < install_manifest.txt` removes."""
import os
import re
import subprocess

from clamfstest.env import SLOW, build_dir


def cache_value(build, key):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(rf"^{key}:\w+=(.*)$", line.rstrip("\n"))
            if m:
                return m.group(1)
    return None


def test_install_stays_in_the_prefix(tmp_path):
    build = build_dir()
    prefix = cache_value(build, "CMAKE_INSTALL_PREFIX")
    assert prefix and prefix.startswith("/"), prefix
    dest = tmp_path / "dest"
    r = subprocess.run(["cmake", "--install", build],
                       env=dict(os.environ, DESTDIR=str(dest)),
                       capture_output=True, text=True, timeout=120 * SLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted("/" + os.path.relpath(os.path.join(d, n), dest)
                   for d, _, names in os.walk(dest) for n in names)
    assert files, r.stdout
    if prefix != "/usr":
        outside = [f for f in files if not f.startswith(prefix + "/")]
        assert outside == [], outside
    # the units together, where systemd reads them
    units = [f for f in files if f.endswith((".service", ".timer"))
             and "/doc/" not in f]
    assert {os.path.basename(u) for u in units} == {
        "clamfs@.service", "clamfs-prometheus@.service",
        "clamfs-prometheus@.timer"}, units
    assert len({os.path.dirname(u) for u in units}) == 1, units
    unitdir = os.path.dirname(units[0])
    if prefix != "/usr":
        assert unitdir == prefix + "/lib/systemd/system", unitdir
    # the unit runs the installed program on the installed configuration
    sample = [f for f in files if f.endswith("/clamfs/share.ini.example")]
    assert len(sample) == 1, files
    confdir = os.path.dirname(sample[0])
    with open(os.path.join(dest, unitdir.lstrip("/"), "clamfs@.service")) as f:
        unit = f.read()
    assert not re.search(r"@[A-Z_]+@", unit), "an unconfigured @VAR@"
    start = re.search(r"^ExecStart=(\S+) -f -o config=(\S+)/%i\.ini$", unit,
                      re.M)
    assert start, unit
    assert start.group(1) in files, (start.group(1), files)
    assert start.group(2) == confdir, (start.group(2), confdir)
    assert f"AssertPathExists={confdir}/%i.ini" in unit
    with open(os.path.join(dest, unitdir.lstrip("/"),
                           "clamfs-prometheus@.service")) as f:
        prom = f.read()
    assert re.search(r"^ExecStart=(\S+) --stats", prom, re.M).group(1) == \
        start.group(1), prom
    # programs and manuals
    for name in ("sbin/clamfs", "libexec/clamfs/clamfs-admin",
                 "share/man/man8/clamfs.8",
                 "share/man/man5/clamfs.ini.5"):
        assert any(f.endswith("/" + name) for f in files), name
    # what the manifest lists is what was installed: uninstalling by it
    # leaves nothing behind
    with open(os.path.join(build, "install_manifest.txt")) as f:
        manifest = sorted(re.sub("^" + re.escape(str(dest)), "", l.strip())
                          for l in f if l.strip())
    assert manifest == files, (manifest, files)
