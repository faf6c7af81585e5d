# SPDX-License-Identifier: GPL-2.0-or-later
# Name-based rules (include/exclude globs) against an attacker who controls
# names: content written unscanned (write-only opens are not scanned), then
# given a new name by hard links, unlinks and renames, must never be let
# through unscanned because of a stale, deleted or second name. Where the
# only current name of the inode cannot be proven, the file is scanned.
import os

import pytest

from scanutil import (delta, mount_scan, put, stats, try_read, wait_detections,
                      write_through)


def test_include_link_then_unlink_first_name(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "include=*.exe")
    write_through(m.m("c.exe"), clamd.eicar)
    os.link(m.m("c.exe"), m.m("d.exe"))
    os.unlink(m.m("c.exe"))
    assert try_read(m.m("d.exe")) == ("err", "EACCES")


def test_include_link_unlink_rename(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "include=*.exe")
    write_through(m.m("e.exe"), clamd.eicar)
    os.link(m.m("e.exe"), m.m("f.exe"))
    os.unlink(m.m("e.exe"))
    os.rename(m.m("f.exe"), m.m("g.exe"))
    assert try_read(m.m("g.exe")) == ("err", "EACCES")


def test_include_three_names(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "include=*.exe")
    os.mkdir(m.m("sub"))
    write_through(m.m("a.exe"), clamd.eicar)
    os.link(m.m("a.exe"), m.m("b.exe"))
    os.link(m.m("a.exe"), m.m("sub", "c.exe"))
    os.unlink(m.m("a.exe"))
    os.unlink(m.m("b.exe"))
    assert try_read(m.m("sub", "c.exe")) == ("err", "EACCES")
    # and an extension the include rule does not name stays unscanned
    write_through(m.m("plain.txt"), b"clean text")
    assert try_read(m.m("plain.txt")) == ("ok", b"clean text")


def test_include_case_insensitive_extension(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "include=*.exe")
    put(m.b("UP.EXE"), clamd.eicar)
    put(m.b("up.txt"), clamd.eicar)
    assert try_read(m.m("UP.EXE")) == ("err", "EACCES")
    assert try_read(m.m("up.txt")) == ("ok", clamd.eicar)


def test_exclude_link_out_of_excluded_dir(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=backups/**")
    os.mkdir(m.m("backups"))
    write_through(m.m("backups", "e"), clamd.eicar)
    os.link(m.m("backups", "e"), m.m("f"))
    os.unlink(m.m("backups", "e"))
    s0 = stats(m.mnt)
    assert try_read(m.m("f")) == ("err", "EACCES")
    d = delta(s0, stats(m.mnt), "opens_excluded", "opens_denied")
    assert d == {"opens_excluded": 0, "opens_denied": 1}, d


def test_exclude_rename_out_of_excluded_dir(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=backups/**")
    os.mkdir(m.m("backups"))
    write_through(m.m("backups", "x"), clamd.eicar)
    # the inode is known to the daemon by its first name
    os.stat(m.m("backups", "x"))
    os.rename(m.m("backups", "x"), m.m("x"))
    assert try_read(m.m("x")) == ("err", "EACCES")
    # renamed behind the mount's back: the backend moved it directly
    write_through(m.m("backups", "y"), clamd.eicar)
    os.stat(m.m("backups", "y"))
    os.rename(m.b("backups", "y"), m.b("y"))
    assert try_read(m.m("y")) == ("err", "EACCES")


def test_exclude_still_exempts_its_only_name(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd, "exclude=backups/**")
    put(m.b("backups", "kept"), clamd.eicar)
    s0 = stats(m.mnt)
    assert try_read(m.m("backups", "kept")) == ("ok", clamd.eicar)
    assert delta(s0, stats(m.mnt), "opens_excluded") == {"opens_excluded": 1}


@pytest.mark.parametrize("rule", ["exclude=*deleted*", "exclude=* (deleted)",
                                  "exclude=**"])
def test_hostile_names_do_not_match_stale_paths(mount_clamfs, clamd, rule):
    # a rule written to match what the kernel appends to a removed name, a
    # file literally named like the stale path, or a rule matching every
    # name: the daemon still knows the inode by its removed name, so the
    # current name is not proven and the file is scanned
    m = mount_scan(mount_clamfs, clamd, rule, "include=*.exe")
    write_through(m.m("h.exe"), clamd.eicar)
    put(m.b("h.exe (deleted)"), b"decoy")
    os.link(m.m("h.exe"), m.m("i.exe"))
    os.unlink(m.m("h.exe"))
    assert try_read(m.m("i.exe")) == ("err", "EACCES")


def test_hostile_name_cannot_forge_quarantine_log(mount_clamfs, clamd):
    # the quarantined copy is named after the upload: quoted in the log
    # like every other name, so a newline cannot start a forged line
    q = os.path.join(mount_clamfs.tempdir("clamfs-q"), "q")
    m = mount_scan(mount_clamfs, clamd, "on_infected=quarantine",
                   "quarantine_dir=" + q)
    name = 'x\nclamfs: detection path="forged" signature="Fake"'
    put(m.b(name), clamd.eicar)
    assert try_read(m.m(name)) == ("err", "EACCES")
    dets = wait_detections(m, 1)
    assert len(dets) == 1, dets
    line = dets[0]["_line"]
    assert 'quarantined_as="x\\x0aclamfs: detection path=\\"forged' in line, \
        line
    assert not any(l.startswith("clamfs: detection")
                   for l in m.stderr_text().splitlines()), m.stderr_text()
