# SPDX-License-Identifier: GPL-2.0-or-later
# Exemptions by user and group name: names resolved when the configuration
# is read (-o and INI alike; an unknown name is a configuration error), and
# exempt_gid honoured for the opener's supplementary groups, with real
# users and groups made for the test and real opens through the mount.
import os
import subprocess

import pytest

from adminutil import ini, run_fail
from clamfstest.env import PYTHON
from scanutil import mount_scan, put, try_read

TAG = f"{os.getpid() % 100000:05d}"
EXEMPT_GROUP = f"cfsxg{TAG}"
OTHER_GROUP = f"cfsog{TAG}"
MEMBER = f"cfsxm{TAG}"     # primary group OTHER, EXEMPT supplementary
OUTSIDER = f"cfsxo{TAG}"   # OTHER only
EXEMPT_USER = f"cfsxu{TAG}"  # exempt by name


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def accounts():
    made_users, made_groups = [], []
    try:
        for g in (EXEMPT_GROUP, OTHER_GROUP):
            _run("groupadd", g)
            made_groups.append(g)
        for u, extra in ((MEMBER, ["-G", EXEMPT_GROUP]), (OUTSIDER, []),
                         (EXEMPT_USER, [])):
            _run("useradd", "-M", "-N", "-g", OTHER_GROUP, "-s",
                 "/usr/sbin/nologin", *extra, u)
            made_users.append(u)
        yield
    finally:
        for u in made_users:
            subprocess.run(["userdel", u], capture_output=True)
        for g in made_groups:
            subprocess.run(["groupdel", g], capture_output=True)


def open_as(user, path):
    """Opens and reads path as user with the groups the group database
    gives it (as a login would): 'ok' or the errno name."""
    code = ("import errno, sys\n"
            "try:\n"
            "    open(sys.argv[1], 'rb').read(); print('ok')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    r = subprocess.run(["setpriv", f"--reuid={user}", f"--regid={OTHER_GROUP}",
                        "--init-groups", "--", PYTHON, "-c", code, path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def check_exemptions(m, eicar):
    put(m.b("x"), eicar)
    # the group is only a supplementary one of MEMBER
    assert open_as(MEMBER, m.m("x")) == "ok"
    assert open_as(EXEMPT_USER, m.m("x")) == "ok"
    assert open_as(OUTSIDER, m.m("x")) == "EACCES"
    assert try_read(m.m("x")) == ("err", "EACCES")  # root


def test_names_on_the_command_line(accounts, mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, f"exempt_gid={EXEMPT_GROUP}",
                   f"exempt_uid={EXEMPT_USER}")
    check_exemptions(m, clamd.eicar)


def test_names_in_the_ini(accounts, mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-ini")
    cfg = ini(os.path.join(base, "c.ini"),
              [("scan", [("exempt_gid", EXEMPT_GROUP),
                         ("exempt_uid", EXEMPT_USER)])])
    m = mount_scan(mount_clamfs, clamd, f"config={cfg}")
    check_exemptions(m, clamd.eicar)


def test_unknown_names_refused(accounts, mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-ini")
    b, mnt = os.path.join(base, "b"), os.path.join(base, "m")
    os.mkdir(b)
    os.mkdir(mnt)
    r = run_fail([b, mnt, "-f", "-o", f"clamd={clamd.socket},"
                  f"exempt_gid={EXEMPT_GROUP}x"], mnt=mnt)
    assert r.returncode != 0
    assert f"'exempt_gid={EXEMPT_GROUP}x': no such group" in r.stderr, \
        r.stderr
    cfg = ini(os.path.join(base, "c.ini"),
              [("clamd", [("clamd", clamd.socket)]),
               ("scan", [("exempt_uid", f"{EXEMPT_USER}x")])])
    r = run_fail(["--check", "-o", f"config={cfg}"])
    assert r.returncode != 0
    assert f"{cfg}:6:" in r.stderr and "no such user" in r.stderr, r.stderr
