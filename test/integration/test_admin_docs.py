# SPDX-License-Identifier: GPL-2.0-or-later
# The documentation an administrator reads instead of the source: both man
# pages render with `man -l` without a single groff warning; every -o option
# that `clamfs --help` lists is in clamfs(8); every key of the sample
# etc/clamfs.ini is in clamfs.ini(5), is listed by --help, and is accepted
# by the daemon (--check and a real mount of a file enabling every key
# with the sample's value); every -o option of --help is a sample key.
import os
import re
import subprocess

import pytest

from clamfstest.mountinfo import mounted

from clamfstest.env import SLOW, clamfs_bin

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN8 = os.path.join(SRC, "clamfs", "clamfs.8")
MAN5 = os.path.join(SRC, "clamfs", "clamfs.ini.5")
SAMPLE = os.path.join(SRC, "etc", "clamfs.ini")

# Options of --help that are not configuration keys.
NOT_KEYS = {"config", "debug"}


def render(page, *extra):
    env = dict(os.environ, MANWIDTH="80", TERM="dumb", LC_ALL="C.UTF-8")
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    return subprocess.run(["man", "-P", "cat", *extra, "-l", page],
                          capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60 * SLOW)


@pytest.mark.parametrize("page", [MAN8, MAN5], ids=["clamfs.8", "clamfs.ini.5"])
def test_man_page_renders_without_warnings(page):
    r = render(page, "--warnings=w")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", f"groff/man warnings:\n{r.stderr}"
    assert len(r.stdout.splitlines()) > 50, r.stdout
    # the page is what it claims to be
    title = os.path.basename(page).rsplit(".", 1)
    assert r.stdout.lstrip().startswith(
        f"{title[0].upper()}({title[1]})"), r.stdout[:200]
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
        assert re.search(rf"^{section}$", r.stdout, re.M), section


def help_options():
    """The -o option names `clamfs --help` lists (its own part, before
    libfuse's)."""
    r = subprocess.run([clamfs_bin(), "--help"], capture_output=True,
                       text=True, timeout=30 * SLOW)
    assert r.returncode == 0, r
    own = r.stdout.split("FUSE options:")[0]
    names = re.findall(r"-o ([a-z_]+)", own)
    assert len(names) > 20, own
    return set(names)


def plain_page(page):
    """The rendered page, without hyphenation or justification, so that an
    option name is never split over two lines."""
    r = render(page, "--nh", "--nj")
    assert r.returncode == 0, r.stderr
    return r.stdout


def sample_keys():
    """[(section, key, value)] of the commented `;key = value` lines."""
    out = []
    section = None
    with open(SAMPLE) as f:
        for line in f:
            line = line.strip()
            mt = re.match(r"^\[(\w+)\]$", line)
            if mt:
                section = mt.group(1)
                continue
            # ";key = value" (no space after ';': "; text" is prose)
            mt = re.match(r"^;([a-z_]+)\s*=\s*(.*)$", line)
            if mt:
                out.append((section, mt.group(1), mt.group(2).strip()))
    assert len(out) > 25, out
    return out


def test_help_options_in_man8():
    text = plain_page(MAN8)
    missing = [o for o in sorted(help_options())
               if not re.search(rf"(?<![\w]){re.escape(o)}(?![\w])", text)]
    assert missing == [], f"--help options missing from clamfs(8): {missing}"


def test_sample_keys_documented_and_listed():
    text5 = plain_page(MAN5)
    keys = sorted({k for _, k, _ in sample_keys()})
    missing5 = [k for k in keys
                if not re.search(rf"(?<![\w]){re.escape(k)}(?![\w])", text5)]
    assert missing5 == [], f"sample keys missing from clamfs.ini(5): {missing5}"
    # the section each key sits in is the one clamfs.ini(5) puts it in
    # (section headings at column 0, each key's tag line indented 7:
    # "attr_timeout, entry_timeout, negative_timeout = sec")
    sections = {}
    cur = None
    for line in text5.splitlines():
        mt = re.match(r"^\[(\w+)\]$", line)
        if mt:
            cur = mt.group(1)
        elif re.match(r"^[A-Z]", line):
            cur = None  # EXAMPLE, SEE ALSO, ...
        elif cur and re.match(r"^ {7}[a-z]", line) and "=" in line:
            for k in re.findall(r"\b([a-z_]+)(?=\s*[=,])", line):
                sections.setdefault(k, cur)
    wrong = [(s, k, sections.get(k)) for s, k, _ in sample_keys()
             if sections.get(k) != s]
    assert wrong == [], f"sample section differs from clamfs.ini(5): {wrong}"
    # "every key has one name, the same in the file, with -o": --help
    # ("List every option") lists each one
    opts = help_options()
    unlisted = [k for k in keys if k not in opts]
    assert unlisted == [], f"sample keys not listed by --help: {unlisted}"
    # and every -o option of --help is a key of the sample
    notinsample = sorted(opts - set(keys) - NOT_KEYS)
    assert notinsample == [], f"-o options not in etc/clamfs.ini: {notinsample}"


def every_key_file(admin, clamd):
    """A configuration enabling every key of the sample with its value;
    paths are replaced by ones that exist here."""
    base, b, mnt = admin.dirs_bm()
    subst = {"backend": b, "mountpoint": mnt, "clamd": clamd.socket,
             "quarantine_dir": os.path.join(base, "quarantine"),
             "infected_cmd": "/bin/true"}
    lines, cur = [], None
    for section, key, value in sample_keys():
        if section != cur:
            lines.append(f"[{section}]")
            cur = section
        lines.append(f"{key} = {subst.get(key, value)}")
    path = os.path.join(base, "every.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, b, mnt


def test_every_sample_key_accepted(admin, clamd):
    path, b, mnt = every_key_file(admin, clamd)
    r = subprocess.run([clamfs_bin(), "--check", "-o", f"config={path}"],
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert r.returncode == 0, (r.stdout, r.stderr, open(path).read())
    assert "check passed" in r.stdout
    # and a real mount of it
    m = admin.start(["-f", "-o", f"config={path}"], mnt, b)
    assert mounted(mnt)
    with open(os.path.join(b, "x.exe"), "wb") as f:
        f.write(clamd.eicar)
    # include = *.exe in the sample: scanned and refused
    try:
        open(m.m("x.exe"), "rb").close()
        raise AssertionError("an infected .exe was readable")
    except PermissionError:
        pass
