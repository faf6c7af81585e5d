# SPDX-License-Identifier: GPL-2.0-or-later
# NFS-Ganesha in front of clamfs (doc/deploy.md, "NFS-Ganesha instead of
# the kernel server"), end to end with a userspace NFS client: a private
# ganesha.nfsd (Debian's nfs-ganesha and its FSAL_VFS plugin, which
# scripts/deps only unpacks; its own configuration, log, pid file and
# recovery directory, NFSv4 only, no rpcbind, NLM or RQUOTA; no system
# ganesha is touched) exports a clamfs mount with the EXPORT block the page
# shows, and libnfs's nfs-cat and nfs-cp, as a non-root NFS user (AUTH_SYS
# uid and gid from the URL), read a clean file byte for byte, are refused
# an EICAR file put into the backend directly, write a file that lands in
# the backend, and cannot read back an EICAR file they wrote.
#
# What ganesha cannot give clamfs, asserted so the page's claim is tested:
# ganesha opens every file itself, as root, so clamfs logs each detection
# with uid=0 and process "ganesha.nfsd", never the NFS user.
#
# ganesha runs in a network namespace of its own (`unshare --net`, only
# loopback up): it unregisters and registers its RPC programs with an
# rpcbind at start, and there it finds none, whatever the host runs; the
# client joins that namespace with nsenter. Its D-Bus address names a
# socket that does not exist, so it never talks to the host's bus.
import glob
import os
import shutil
import signal
import subprocess

import pytest


from clamfstest.clamd import free_tcp_port
from clamfstest.env import PYTHON, SLOW
from clamfstest.wait import wait_for
from scanutil import detections, put, wait_detections

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(SRC, "doc", "deploy.md")
DEPS = "/var/cache/clamfs-deps"
NFS_UID = 47112  # the NFS user, an id the host is unlikely to use

# Brings loopback up in the new network namespace, then becomes ganesha.
LO_UP = r'''
import fcntl, os, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifr = struct.pack("16sH22x", b"lo", 0)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifr))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
s.close()
os.execv(sys.argv[1], sys.argv[1:])
'''

# The test's own settings around the page's configuration.
CORE = """\
    NFS_Port = {port};
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Plugins_Dir = "{plugins}";
"""
EXTRA = """
NFSv4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = "{d}/recovery";
}}
NFS_KRB5 {{
    Active_krb5 = false;
    CCacheDir = "{d}/ccache";
}}
"""


def doc_conf():
    """The ganesha.conf the page shows (its one ```conf block)."""
    with open(DOC) as f:
        text = f.read()
    sec = text.split("## NFS-Ganesha instead of the kernel server", 1)
    assert len(sec) == 2, "doc/deploy.md has no NFS-Ganesha section"
    body = sec[1].split("\n## ", 1)[0]
    blocks = body.split("```conf\n")[1:]
    assert len(blocks) == 1, "the section shows one ```conf block"
    return blocks[0].split("```", 1)[0]


def unavailable(why):
    msg = (why + ": scripts/deps installs libnfs-utils and unpacks "
           "nfs-ganesha and nfs-ganesha-vfs")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def find_ganesha():
    """(ganesha.nfsd, its library directory, the FSAL plugin directory):
    the private unpack of scripts/deps, else the host's programs (run as
    programs only, their service untouched)."""
    for root in (os.path.join(DEPS, "nfs-ganesha"), "/"):
        nfsd = os.path.join(root, "usr", "bin", "ganesha.nfsd")
        if os.access(nfsd, os.X_OK):
            break
    else:
        unavailable("no ganesha.nfsd")
    libdir = os.path.join(root, "usr", "lib", "ganesha")
    plugins = [os.path.dirname(p) for d in
               (os.path.join(DEPS, "nfs-ganesha-vfs"), "/")
               for p in glob.glob(os.path.join(d, "usr", "lib*", "*",
                                               "ganesha", "libfsalvfs.so"))]
    if not plugins:
        unavailable("no FSAL_VFS plugin (libfsalvfs.so)")
    for tool in ("nfs-cat", "nfs-cp", "unshare", "nsenter"):
        if not shutil.which(tool):
            unavailable(f"no {tool}")
    return nfsd, libdir, plugins[0]


def knows_io_flusher_option(libdir):
    """Whether this ganesha has allow_set_io_flusher_fail (5.0 and later;
    4.3's configuration parser refuses what it does not know)."""
    for lib in glob.glob(os.path.join(libdir, "libganesha_nfsd.so*")):
        with open(lib, "rb") as f:
            if b"allow_set_io_flusher_fail" in f.read().lower():
                return True
    return False


def listening(pid, port):
    """Whether a TCP socket listens on port in the network namespace of
    pid (where only loopback exists)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = [l.split() for l in f.readlines()[1:]]
        except OSError:
            return False
        if any(r[1].endswith(f":{port:04X}") and r[3] == "0A"
               for r in rows):
            return True
    return False


class Ganesha:
    """A private ganesha.nfsd exporting `mnt`, in the foreground."""

    def __init__(self, base, mnt):
        self.nfsd, libdir, plugins = find_ganesha()
        self.dir = os.path.join(base, "ganesha")
        os.makedirs(os.path.join(self.dir, "recovery"))
        self.port = free_tcp_port()
        self.conf = os.path.join(self.dir, "ganesha.conf")
        self.log = os.path.join(self.dir, "ganesha.log")
        self.pidfile = os.path.join(self.dir, "ganesha.pid")
        conf = doc_conf()
        assert "Path = /srv/share;" in conf, conf
        conf = conf.replace("/srv/share", mnt)
        head = "NFS_CORE_PARAM {\n"
        assert conf.startswith(head), conf
        core = CORE.format(port=self.port, plugins=plugins)
        if knows_io_flusher_option(libdir):
            # ganesha 5 and later make themselves an I/O flusher, which
            # needs CAP_SYS_RESOURCE: a container's root (CI, the Debian
            # 13 lane) may lack it, a server's root has it
            core += "    allow_set_io_flusher_fail = true;\n"
        conf = head + core + conf[len(head):] + EXTRA.format(d=self.dir)
        with open(self.conf, "w") as f:
            f.write(conf)
        self.env = dict(os.environ, LD_LIBRARY_PATH=libdir,
                        DBUS_SYSTEM_BUS_ADDRESS="unix:path="
                        + os.path.join(self.dir, "no-dbus"))
        self.proc = None

    def start(self):
        argv = ["unshare", "--net", PYTHON, "-c", LO_UP, self.nfsd, "-F",
                "-f", self.conf, "-L", self.log, "-p", self.pidfile,
                "-N", "NIV_EVENT"]
        with open(os.path.join(self.dir, "stdout"), "wb") as out:
            self.proc = subprocess.Popen(
                argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        up = wait_for(lambda: self.proc.poll() is not None
                      or listening(self.proc.pid, self.port), 60)
        assert up and self.proc.poll() is None, \
            f"ganesha does not listen on {self.port}:\n{self.logs()}"

    def stop(self):
        """Ends ganesha (SIGTERM, then SIGKILL); returns its status."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(60 * SLOW)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "killed"

    def client(self, tool, *args, uid=NFS_UID):
        """Runs a libnfs tool in ganesha's network namespace as NFS user
        uid (group uid); the URL argument is written NFS:path."""
        url = (f"nfs://127.0.0.1/share/{{}}?version=4&nfsport={self.port}"
               f"&uid={uid}&gid={uid}")
        argv = [url.format(a[4:]) if a.startswith("NFS:") else a
                for a in args]
        r = subprocess.run(
            ["nsenter", f"--net=/proc/{self.proc.pid}/ns/net", tool]
            + argv, capture_output=True, timeout=60 * SLOW,
            stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout, r.stderr.decode(errors="replace")

    def logs(self):
        out = []
        for n in ("stdout", "ganesha.log"):
            try:
                with open(os.path.join(self.dir, n), errors="replace") as f:
                    out.append(f"--- ganesha {n}:\n{f.read()[-4000:]}")
            except OSError:
                pass
        return "\n".join(out)


@pytest.fixture
def ganesha_mount(admin, clamd):
    """(clamfs Mount, Ganesha exporting it); ganesha is stopped before the
    admin fixture unmounts clamfs."""
    base, b, mnt = admin.dirs_bm()
    os.chown(b, NFS_UID, NFS_UID)
    g = Ganesha(base, mnt)
    m = admin.start(["-f", "-o", f"backend={b},allow_other,"
                     f"clamd={clamd.socket}", mnt], mnt, backend=b)
    try:
        yield m, g
    finally:
        g.stop()


def test_ganesha_exports_clamfs(ganesha_mount, clamd):
    m, g = ganesha_mount
    clean = os.urandom(300 * 1024)
    put(m.b("clean.bin"), clean)
    put(m.b("invoice.pdf.exe"), clamd.eicar)
    local = os.path.join(g.dir, "local")
    os.mkdir(local)
    up_src, up_bad = os.path.join(local, "up.src"), \
        os.path.join(local, "up.bad")
    # libnfs 4.0 (Debian 12) sends no NFSv4 WRITE of more than about
    # 3.8 KB (its request buffer is 4 KB; libnfs pull request 319)
    upload = os.urandom(3000)
    put(up_src, upload)
    put(up_bad, clamd.eicar)

    g.start()
    rc, out, err = g.client("nfs-cat", "NFS:clean.bin")
    assert rc == 0, err + g.logs() + m.stderr_text()
    assert out == clean

    # an infected file put into the backend directly
    rc, out, err = g.client("nfs-cat", "NFS:invoice.pdf.exe")
    assert rc != 0 and out == b"", (rc, out[:80], err)
    assert wait_detections(m, 1), m.stderr_text()

    # a file written through NFS lands in the backend, owned by the NFS
    # user, and reads back
    rc, out, err = g.client("nfs-cp", up_src, "NFS:upload.bin")
    assert rc == 0, err + g.logs() + m.stderr_text()
    with open(m.b("upload.bin"), "rb") as f:
        assert f.read() == upload
    assert os.stat(m.b("upload.bin")).st_uid == NFS_UID
    rc, out, err = g.client("nfs-cat", "NFS:upload.bin")
    assert rc == 0 and out == upload, err

    # ganesha checks permissions itself, as the NFS user: root is squashed
    # (Root_Squash) and may not create in the user's directory
    rc, out, err = g.client("nfs-cp", up_src, "NFS:root.bin", uid=0)
    assert rc != 0 and not os.path.exists(m.b("root.bin")), (rc, err)

    # an infected file written through NFS: stored (writes are not
    # scanned), its read refused
    rc, out, err = g.client("nfs-cp", up_bad, "NFS:upload.com")
    assert rc == 0, err + g.logs() + m.stderr_text()
    with open(m.b("upload.com"), "rb") as f:
        assert f.read() == clamd.eicar
    rc, out, err = g.client("nfs-cat", "NFS:upload.com")
    assert rc != 0 and out == b"", (rc, out[:80], err)
    wait_for(lambda: any(d.get("path") == "upload.com"
                         for d in detections(m)), 10)

    status = g.stop()
    assert status == 0, f"ganesha exited {status}:\n{g.logs()}"

    # what ganesha cannot attribute: every detection is ganesha's, as root
    det = detections(m)
    for name in ("invoice.pdf.exe", "upload.com"):
        mine = [d for d in det if d.get("path") == name]
        assert mine, f"no detection of {name}:\n{m.stderr_text()}"
        for d in mine:
            assert d["uid"] == "0" and d["process"] == "ganesha.nfsd", \
                d["_line"]
            assert d["signature"].startswith("Eicar-Test"), d["_line"]
    assert not [d for d in det if d.get("path") in ("clean.bin",
                                                    "upload.bin")], det
    assert not [d for d in det if d.get("uid") == str(NFS_UID)], det
