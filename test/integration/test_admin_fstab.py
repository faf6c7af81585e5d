# SPDX-License-Identifier: GPL-2.0-or-later
# clamfs from fstab, through mount(8) and mount.fuse3 exactly as at boot:
# a temporary fstab holds the documented lines
# (`BACKEND MNT fuse.clamfs allow_other,config=FILE,_netdev[,x-systemd...]`),
# `mount --fstab F MNT` and `mount --fstab F -a -t fuse.clamfs` mount them
# (the daemon goes to the background with the mount already up),
# /proc/mounts shows fuse.clamfs with the backend as source, scanning works,
# `clamfs --stats` reads the daemonized mount, `umount MNT` ends the daemon
# and leaves nothing mounted, a sanitizer build writes no report from the
# daemonized process, and a broken configuration makes `mount` fail with
# clamfs's one line.
#
# Finding `clamfs`: mount(8) drops PATH from the environment of its helpers
# (measured: util-linux 2.38), so mount.fuse3's `/bin/sh -c clamfs ...` uses
# sh's default PATH, /usr/local/sbin first, where `cmake --install` puts the
# daemon. A prepended PATH would run whatever `clamfs` is on the default PATH
# (on this machine class Debian's unrelated ClamFS 1.2.0 in /usr/bin). So each
# test runs in a mount namespace of its own (UNSHARE_MOUNT) where a tmpfs over
# /usr/local/sbin holds `clamfs` -> $CLAMFS_BIN: the install layout, without
# touching the host. The steps run inside by a small driver; the test asserts
# on what it recorded.
import json
import os
import subprocess

from adminutil import asan_env, clamfs_pids, ini
from clamfstest.env import PYTHON, SANITIZE, SLOW, clamfs_bin
from clamfstest.mountinfo import UNSHARE_MOUNT
from scanutil import put

CLEAN = b"clean via fstab\n"

DRIVER = r'''
import errno, json, os, signal, subprocess, sys, time
cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg["testdir"])
from clamfstest.procs import pids_of
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "clamfs-sbin",
                "/usr/local/sbin"], check=True)
os.symlink(cfg["bin"], "/usr/local/sbin/clamfs")
env = dict(os.environ)
env.update(cfg["env"])
real = os.path.realpath(cfg["bin"])

def mounts(mnt):
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            src, point, fstype, opts = line.split()[:4]
            if point == mnt:
                out.append([src, fstype, opts.split(",")])
    return out

def pids(token):
    return pids_of(real, token, exact=False)

results = []
for step in cfg["steps"]:
    kind = step[0]
    try:
        if kind == "run":
            r = subprocess.run(step[1], capture_output=True, text=True,
                               env=env, stdin=subprocess.DEVNULL,
                               timeout=cfg["timeout"])
            results.append({"rc": r.returncode, "out": r.stdout,
                            "err": r.stderr})
        elif kind == "mounts":
            results.append(mounts(step[1]))
        elif kind == "read":
            try:
                with open(step[1], "rb") as f:
                    results.append(["ok", f.read().hex()])
            except OSError as e:
                results.append(["err", errno.errorcode[e.errno]])
        elif kind == "pids":
            results.append(pids(step[1]))
        elif kind == "wait_gone":
            end = time.monotonic() + step[2]
            while pids(step[1]) and time.monotonic() < end:
                time.sleep(0.02)
            results.append(pids(step[1]) == [])
        else:
            results.append(f"unknown step {kind}")
    except Exception as e:
        results.append(f"step {step!r} raised {e!r}")
# leave nothing behind, whatever happened
for mnt in cfg["mnts"]:
    if mounts(mnt):
        subprocess.run(["umount", "-l", mnt], capture_output=True)
for p in pids(cfg["base"]):
    try:
        os.kill(p, signal.SIGTERM)
    except OSError:
        pass
print(json.dumps(results))
'''


def in_namespace(base, steps, mnts, env):
    """Runs the steps in a private mount namespace; returns their results."""
    cfg = {"bin": clamfs_bin(), "env": env, "steps": steps, "mnts": mnts,
           "testdir": os.path.dirname(os.path.dirname(
               os.path.abspath(__file__))),
           "base": base, "timeout": 60 * SLOW}
    r = subprocess.run([*UNSHARE_MOUNT,
                        PYTHON, "-c", DRIVER, json.dumps(cfg)],
                       capture_output=True, text=True, timeout=300 * SLOW)
    assert r.returncode == 0, f"namespace driver failed:\n{r.stdout}\n{r.stderr}"
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == len(steps)
    return results


def sanitizer_env_for(base):
    env = asan_env(os.path.join(base, "asan"))
    return {k: env[k] for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS",
                                "LSAN_OPTIONS")}


def check_no_reports(base):
    reports = sorted(n for n in os.listdir(base) if n.startswith("asan."))
    if SANITIZE:
        texts = []
        for n in reports:
            with open(os.path.join(base, n), errors="replace") as f:
                texts.append(f"{n}:\n{f.read()[:3000]}")
        assert reports == [], "sanitizer reports:\n" + "\n".join(texts)


def test_fstab_mount_and_mount_a(admin, clamd):
    base = admin.tempdir()
    cfg = ini(os.path.join(base, "share.ini"),
              [("clamd", [("clamd", clamd.socket)]),
               # it counts scans: no walk beside a waited open
               ("scan", [("scan_ahead_dirs", "no")]),
               ("action", [("on_infected", "deny")]),
               ("log", [("log_level", "info")])])
    dirs = {}
    for name in ("one", "two"):
        b = os.path.join(base, f"srv-{name}")
        mnt = os.path.join(base, f"mnt-{name}")
        os.mkdir(b, 0o755)
        os.mkdir(mnt, 0o755)
        put(os.path.join(b, "clean"), CLEAN)
        put(os.path.join(b, "e"), clamd.eicar)
        dirs[name] = (b, mnt)
    fstab = os.path.join(base, "fstab")
    with open(fstab, "w") as f:
        f.write("# a temporary fstab\n")
        f.write(f"{dirs['one'][0]} {dirs['one'][1]} fuse.clamfs "
                f"allow_other,config={cfg},_netdev 0 0\n")
        # the documented boot-order option too (etc/fstab.example)
        f.write(f"{dirs['two'][0]}\t{dirs['two'][1]}\tfuse.clamfs\t"
                f"allow_other,config={cfg},_netdev,"
                f"x-systemd.requires=clamav-daemon.service\t0 0\n")
    one, two = dirs["one"][1], dirs["two"][1]
    steps = [
        ["run", ["mount", "--fstab", fstab, one]],                 # 0
        ["mounts", one], ["mounts", two],                          # 1 2
        ["run", ["mount", "--fstab", fstab, "-a", "-t",
                 "fuse.clamfs"]],                                  # 3
    ]
    per = {}
    for name, (b, mnt) in dirs.items():
        per[name] = len(steps)
        steps += [
            ["mounts", mnt],                                       # +0
            ["pids", mnt],                                         # +1
            ["read", os.path.join(mnt, "clean")],                  # +2
            ["read", os.path.join(mnt, "e")],                      # +3
            ["run", ["/usr/local/sbin/clamfs", "--stats", mnt]],    # +4
        ]
    for name, (b, mnt) in dirs.items():
        steps += [["run", ["umount", mnt]],                        # +5
                  ["wait_gone", mnt, 20 * SLOW],                   # +6
                  ["mounts", mnt]]                                 # +7
    res = in_namespace(base, steps, [one, two], sanitizer_env_for(base))

    assert res[0]["rc"] == 0, f"mount {one}: {res[0]}"
    assert len(res[1]) == 1, f"not mounted when mount returned: {res[1]}"
    assert res[2] == [], "mount MNT mounted the other entry too"
    assert res[3]["rc"] == 0, f"mount -a: {res[3]}"
    tail = per["two"] + 5
    for k, name in enumerate(("one", "two")):
        b, mnt = dirs[name]
        i = per[name]
        pm = res[i]
        assert len(pm) == 1, (name, pm)
        src, fstype, opts = pm[0]
        assert fstype == "fuse.clamfs", pm
        assert src == b, f"fsname is not the backend: {pm}"
        assert "allow_other" in opts, pm
        assert len(res[i + 1]) == 1, f"daemon of {mnt}: {res[i + 1]}"
        assert res[i + 2] == ["ok", CLEAN.hex()], res[i + 2]
        assert res[i + 3] == ["err", "EACCES"], res[i + 3]
        st = res[i + 4]
        assert st["rc"] == 0, st
        s = dict(l.split("=", 1) for l in st["out"].splitlines())
        assert (s["scans"], s["infected"], s["opens_denied"]) == \
            ("2", "1", "1"), s
        um, gone, after = res[tail + 3 * k: tail + 3 * k + 3]
        assert um["rc"] == 0, f"umount {mnt}: {um}"
        assert gone, f"clamfs of {mnt} still running after umount"
        assert after == [], after
    assert clamfs_pids(base) == []
    check_no_reports(base)


def test_fstab_bad_config_fails_mount(admin, clamd):
    """A broken configuration makes `mount` fail with clamfs's one line,
    instead of a mount that refuses every open."""
    base = admin.tempdir()
    cfg = os.path.join(base, "bad.ini")
    with open(cfg, "w") as f:
        f.write(f"[clamd]\nclamd = {clamd.socket}\n[cache]\ncache_ttl = x\n")
    b = os.path.join(base, "srv")
    mnt = os.path.join(base, "mnt")
    os.mkdir(b, 0o755)
    os.mkdir(mnt, 0o755)
    fstab = os.path.join(base, "fstab")
    with open(fstab, "w") as f:
        f.write(f"{b} {mnt} fuse.clamfs allow_other,config={cfg},_netdev 0 0\n")
    res = in_namespace(base, [["run", ["mount", "--fstab", fstab, mnt]],
                              ["mounts", mnt], ["pids", base]],
                       [mnt], sanitizer_env_for(base))
    assert res[0]["rc"] != 0, res[0]
    err = res[0]["err"] + res[0]["out"]
    assert f"clamfs: {cfg}:4: cache_ttl" in err, err
    assert res[1] == [] and res[2] == [], res
    assert clamfs_pids(base) == []
    check_no_reports(base)
