# SPDX-License-Identifier: GPL-2.0-or-later
# glob_case: include/exclude globs are case-sensitive by default (as they
# always were; "*.EXT" rules never are), case-insensitive with
# glob_case=insensitive (what Samba users expect), in -o, in the INI and
# after a reload.
import os
import signal

from adminutil import ini, wait_log
from scanutil import mount_scan, put, try_read


def outcomes(m, eicar, names):
    for n in names:
        put(m.b(n), eicar)
    return {n: try_read(m.m(n))[0] for n in names}


NAMES = ["Backups/a", "backups/b", "BACKUPS/c", "Uploads/d", "uploads/e"]


def test_default_is_case_sensitive(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=Backups/**")
    assert outcomes(m, clamd.eicar, NAMES[:3]) == {
        "Backups/a": "ok", "backups/b": "err", "BACKUPS/c": "err"}


def test_insensitive_option(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=Backups/**",
                   "glob_case=insensitive")
    assert outcomes(m, clamd.eicar, NAMES[:3]) == {
        "Backups/a": "ok", "backups/b": "ok", "BACKUPS/c": "ok"}


def test_insensitive_in_ini_and_reload(mount_clamfs, clamd):
    base = mount_clamfs.tempdir("clamfs-ini")
    cfg = os.path.join(base, "c.ini")

    def write(case):
        ini(cfg, [("scan", [("include", "uploads/*"),
                            ("glob_case", case)])])

    write("insensitive")
    m = mount_scan(mount_clamfs, clamd, f"config={cfg}")
    # only uploads/ is scanned: in any case
    assert outcomes(m, clamd.eicar, NAMES) == {
        "Backups/a": "ok", "backups/b": "ok", "BACKUPS/c": "ok",
        "Uploads/d": "err", "uploads/e": "err"}
    write("sensitive")
    os.kill(m.pid, signal.SIGHUP)
    assert wait_log(m, "reloaded: glob_case insensitive->sensitive"), \
        m.stderr_text()
    assert try_read(m.m("Uploads/d")) == ("ok", clamd.eicar)
    assert try_read(m.m("uploads/e")) == ("err", "EACCES")
