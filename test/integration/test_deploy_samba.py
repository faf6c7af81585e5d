# SPDX-License-Identifier: GPL-2.0-or-later
# Samba in front of clamfs, end to end with a real client: a private smbd
# (Debian's samba: its own smb.conf, passdb, state, lock, cache and pid
# directories, a free loopback port; no system smbd is touched) shares a
# directory that clamfs protects in place (`-o backend=DIR DIR`), and
# smbclient, logged in as a non-root Samba user, lists the share, downloads
# a clean file byte for byte, uploads a file and reads it back, is refused
# an EICAR file put into the backend directly (NT_STATUS_ACCESS_DENIED) and
# one it uploaded itself; clamfs logs each detection with that user's uid
# and name and smbd as the process.
#
# The Samba user needs a unix account that both smbd and clamfs resolve,
# and the host's /etc/passwd is not ours to change: clamfs and smbd run in
# a private mount namespace where copies of /etc/passwd and /etc/group with
# one more user are bound over the originals. The mount exists only there;
# outside it, the test sees the raw backend, as a direct backend writer
# would. smbclient connects from outside over loopback.
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from adminutil import asan_env
from clamfstest.clamd import free_tcp_port
from clamfstest.mountinfo import UNSHARE_MOUNT
from clamfstest.env import (PYTHON, SANITIZE, SLOW, clamfs_bin,
                            SANITIZER_MARKERS)

USER, UID = "cfssmb", 47110  # an id the host is unlikely to use
PASSWORD = "clamfs-Samba-1"
TOOLS = ("smbd", "smbclient", "smbpasswd")

SMB_CONF = """[global]
  server role = standalone server
  smb ports = {port}
  interfaces = lo
  bind interfaces only = yes
  private dir = {d}/private
  lock directory = {d}/lock
  state directory = {d}/state
  cache directory = {d}/cache
  pid directory = {d}/pid
  ncalrpc dir = {d}/ncalrpc
  log file = {d}/log/log.%m
  log level = 1
  passdb backend = tdbsam:{d}/private/passdb.tdb
  rpc start on demand helpers = no
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  disable netbios = yes
[share]
  path = {share}
  read only = no
  valid users = {user}
"""

# Runs in the private mount namespace: binds the account files, mounts
# clamfs in place, adds the Samba user, starts smbd, says "ready" on
# stdout, and on EOF of stdin stops smbd then clamfs (SIGTERM, as systemd
# would) and prints their exit statuses as JSON.
DRIVER = r'''
import json, os, signal, subprocess, sys, time
cfg = json.loads(sys.argv[1])
for name in ("passwd", "group"):
    subprocess.run(["mount", "--bind", cfg[name], "/etc/" + name], check=True)
env = dict(os.environ, **cfg["env"])
err = open(cfg["clamfs_log"], "wb")
clamfs = subprocess.Popen(cfg["clamfs"], stdin=subprocess.DEVNULL,
                          stdout=err, stderr=err, env=env)

def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(l.split()[4] == path and " - fuse" in l for l in f)

end = time.monotonic() + cfg["timeout"]
while not mounted(cfg["share"]):
    if clamfs.poll() is not None or time.monotonic() > end:
        print(json.dumps({"error": "clamfs did not mount",
                          "clamfs": clamfs.poll()}), flush=True)
        sys.exit(1)
    time.sleep(0.02)
pw = cfg["password"]
r = subprocess.run(["smbpasswd", "-c", cfg["conf"], "-s", "-a", cfg["user"]],
                   input=f"{pw}\n{pw}\n", capture_output=True, text=True)
smbd = None
if r.returncode == 0:
    smbd = subprocess.Popen(["smbd", "--foreground", "--no-process-group",
                             "--configfile=" + cfg["conf"]],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(cfg["smbd_log"], "wb"),
                            # its shutdown signals its whole process group
                            start_new_session=True)
    print(json.dumps({"ready": True}), flush=True)
else:
    print(json.dumps({"error": "smbpasswd: " + r.stdout + r.stderr}),
          flush=True)
sys.stdin.read()
out = {}
if smbd:
    smbd.send_signal(signal.SIGTERM)
    try:
        out["smbd"] = smbd.wait(30)
    except subprocess.TimeoutExpired:
        smbd.kill()
        out["smbd"] = "killed"
clamfs.send_signal(signal.SIGTERM)
try:
    out["clamfs"] = clamfs.wait(30)
except subprocess.TimeoutExpired:
    clamfs.kill()
    out["clamfs"] = "killed"
out["mounted"] = mounted(cfg["share"])
print(json.dumps(out), flush=True)
'''


def account_files(d):
    """Copies of the host's passwd and group with the Samba user added."""
    with open("/etc/passwd") as f:
        passwd = f.read()
    with open("/etc/group") as f:
        group = f.read()
    taken_u = {l.split(":")[2] for l in passwd.splitlines() if l.count(":") > 3}
    taken_g = {l.split(":")[2] for l in group.splitlines() if l.count(":") > 2}
    assert str(UID) not in taken_u and str(UID) not in taken_g, \
        f"uid/gid {UID} is in use on this host; pick another for the test"
    passwd += f"{USER}:x:{UID}:{UID}:clamfs Samba test:/nonexistent:" \
              "/usr/sbin/nologin\n"
    group += f"{USER}:x:{UID}:\n"
    paths = {}
    for name, text in (("passwd", passwd), ("group", group)):
        paths[name] = os.path.join(d, name)
        with open(paths[name], "w") as f:
            f.write(text)
        os.chmod(paths[name], 0o644)
    return paths


class SambaOverClamfs:
    def __init__(self, admin, clamd):
        self.base = admin.tempdir("clamfs-smb")
        os.chmod(self.base, 0o755)
        self.share = os.path.join(self.base, "share")
        self.samba = os.path.join(self.base, "samba")
        os.mkdir(self.share)
        os.chown(self.share, UID, UID)
        for sub in ("private", "lock", "state", "cache", "pid", "ncalrpc",
                    "log"):
            os.makedirs(os.path.join(self.samba, sub))
        self.port = free_tcp_port()
        self.conf = os.path.join(self.samba, "smb.conf")
        with open(self.conf, "w") as f:
            f.write(SMB_CONF.format(port=self.port, d=self.samba,
                                    share=self.share, user=USER))
        # smbclient reads no host configuration either
        self.client_conf = os.path.join(self.base, "client.conf")
        with open(self.client_conf, "w") as f:
            f.write("[global]\n  client min protocol = SMB2\n")
        self.clamfs_log = os.path.join(self.base, "clamfs.log")
        self.smbd_log = os.path.join(self.samba, "log", "smbd.stderr")
        self.clamd = clamd
        self.proc = None

    def backend(self, name):
        """The raw backend file: outside the namespace nothing is mounted
        over the share directory."""
        return os.path.join(self.share, name)

    def start(self):
        env = {}
        if SANITIZE:
            env = {k: v for k, v in asan_env(os.path.join(
                self.base, "asan")).items() if k.endswith("SAN_OPTIONS")}
        cfg = dict(account_files(self.base), share=self.share, conf=self.conf,
                   user=USER, password=PASSWORD, clamfs_log=self.clamfs_log,
                   smbd_log=self.smbd_log, env=env, timeout=20 * SLOW,
                   clamfs=[clamfs_bin(), "-f", "-o",
                           f"backend={self.share},allow_other,"
                           f"clamd={self.clamd.socket}", self.share])
        self.proc = subprocess.Popen(
            [*UNSHARE_MOUNT, PYTHON, "-c",
             DRIVER, json.dumps(cfg)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, start_new_session=True,
            stderr=open(os.path.join(self.base, "driver.err"), "w"))
        first = json.loads(self.proc.stdout.readline() or "{}")
        assert first.get("ready"), f"{first}\n{self.logs()}"
        end = time.monotonic() + 30 * SLOW
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                assert time.monotonic() < end, \
                    f"smbd does not listen on {self.port}:\n{self.logs()}"
                time.sleep(0.1)

    def stop(self):
        """Ends smbd then clamfs; returns their exit statuses."""
        if self.proc is None:
            return {}
        proc, self.proc = self.proc, None
        try:
            out, _ = proc.communicate("", timeout=90 * SLOW)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        lines = out.strip().splitlines()
        if not lines:
            with open(os.path.join(self.base, "driver.err")) as f:
                return {"driver": proc.returncode, "stderr": f.read()}
        return json.loads(lines[-1])

    def smbclient(self, *commands):
        r = subprocess.run(
            ["smbclient", "//127.0.0.1/share", "-p", str(self.port),
             f"--configfile={self.client_conf}", "-U", f"{USER}%{PASSWORD}",
             "-c", "; ".join(commands)],
            capture_output=True, text=True, timeout=60 * SLOW,
            stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout + r.stderr

    def log_text(self):
        with open(self.clamfs_log, errors="replace") as f:
            return f.read()

    def logs(self):
        out = [f"--- clamfs:\n{self.log_text()}"]
        logdir = os.path.join(self.samba, "log")
        for n in sorted(os.listdir(logdir)):
            if os.path.isfile(os.path.join(logdir, n)):
                with open(os.path.join(logdir, n), errors="replace") as f:
                    out.append(f"--- {n}:\n{f.read()[-3000:]}")
        return "\n".join(out)


@pytest.fixture
def samba(admin, clamd):
    missing = [t for t in TOOLS if not shutil.which(t, path="/usr/sbin:"
                                                     "/usr/bin:/sbin:/bin")]
    if missing:
        pytest.skip("Samba is not installed (no " + ", ".join(missing)
                    + "): scripts/deps installs samba and smbclient")
    s = SambaOverClamfs(admin, clamd)
    try:
        yield s
    finally:
        if s.proc is not None:
            s.stop()


def detections(text):
    return [l for l in text.splitlines() if "infected path=" in l]


def test_samba_share_over_clamfs(samba, clamd):
    clean = os.urandom(300 * 1024)
    with open(samba.backend("report.bin"), "wb") as f:
        f.write(clean)
    with open(samba.backend("invoice.pdf.exe"), "wb") as f:
        f.write(clamd.eicar)
    for n in ("report.bin", "invoice.pdf.exe"):
        os.chown(samba.backend(n), UID, UID)
    local = os.path.join(samba.base, "local")
    os.mkdir(local)
    up_src = os.path.join(local, "upload.src")
    up_bad = os.path.join(local, "upload.bad")
    upload = os.urandom(200 * 1024)
    with open(up_src, "wb") as f:
        f.write(upload)
    with open(up_bad, "wb") as f:
        f.write(clamd.eicar)

    samba.start()
    try:
        rc, out = samba.smbclient("ls")
        assert rc == 0, out + samba.logs()
        assert "report.bin" in out and "invoice.pdf.exe" in out, out

        got = os.path.join(local, "report.got")
        rc, out = samba.smbclient(f"get report.bin {got}")
        assert rc == 0, out + samba.logs()
        with open(got, "rb") as f:
            assert f.read() == clean

        back = os.path.join(local, "upload.back")
        rc, out = samba.smbclient(f"put {up_src} upload.bin",
                                  f"get upload.bin {back}")
        assert rc == 0, out + samba.logs()
        with open(back, "rb") as f:
            assert f.read() == upload
        st = os.stat(samba.backend("upload.bin"))
        assert (st.st_uid, st.st_size) == (UID, len(upload))

        # an infected file put into the backend directly
        bad_got = os.path.join(local, "invoice.got")
        rc, out = samba.smbclient(f"get invoice.pdf.exe {bad_got}")
        assert "NT_STATUS_ACCESS_DENIED" in out, out + samba.logs()
        assert not os.path.exists(bad_got) or os.path.getsize(bad_got) == 0

        # an infected file uploaded through the share: the upload is
        # stored (writes are not scanned), its download is refused
        rc, out = samba.smbclient(f"put {up_bad} upload.com")
        assert rc == 0, out + samba.logs()
        with open(samba.backend("upload.com"), "rb") as f:
            assert f.read() == clamd.eicar
        up_got = os.path.join(local, "upload.got")
        rc, out = samba.smbclient(f"get upload.com {up_got}")
        assert "NT_STATUS_ACCESS_DENIED" in out, out + samba.logs()
        assert not os.path.exists(up_got) or os.path.getsize(up_got) == 0
    finally:
        status = samba.stop()
    log = samba.log_text()
    assert status.get("clamfs") == 0, f"{status}\n{samba.logs()}"
    assert status.get("mounted") is False, status
    assert not [m for m in SANITIZER_MARKERS if m in log], log
    if SANITIZE:
        reports = [n for n in os.listdir(samba.base) if n.startswith("asan.")]
        assert reports == [], reports

    # each detection names the Samba user (uid and name) and smbd
    det = detections(log)
    for name in ("invoice.pdf.exe", "upload.com"):
        mine = [l for l in det if f'path="{name}"' in l]
        assert mine, f"no detection of {name}:\n{log}"
        for l in mine:
            assert f"uid={UID}" in l and f'user="{USER}"' in l, l
            assert 'process="smbd' in l or "process=smbd" in l, l
            assert 'signature="Eicar-Test' in l, l
    assert not [l for l in det if "report.bin" in l or "upload.bin" in l], det
