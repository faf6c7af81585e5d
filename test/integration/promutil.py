# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the tests of `clamfs --stats --prometheus`.

- parse_exposition(): a strict reader of the text format 0.0.4 as clamfs
  writes it (asserts as it goes) into {family: Family}.
- promtool(): the argv of scripts/promtool, or a pytest skip when Debian's
  prometheus package cannot be fetched (a failure under CI, which has the
  archive).
- run_stats(): runs `clamfs --stats ARGS...`.
"""
import os
import re
import subprocess

import pytest

from clamfstest.env import SLOW, SRC, clamfs_bin

PROMTOOL = os.path.join(SRC, "scripts", "promtool")

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def run_stats(*args, prefix=()):
    return subprocess.run(list(prefix) + [clamfs_bin(), "--stats"] +
                          list(args), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30 * SLOW)


def unescape(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n"
                  else m.group(1), v)


class Family:
    def __init__(self, name, help_text):
        self.name = name
        self.help = help_text
        self.type = None
        self.samples = []  # (sample name, {label: value}, value string)

    def series(self, suffix="", **labels):
        """Values of the samples named family+suffix whose labels include
        labels."""
        return [v for n, lb, v in self.samples if n == self.name + suffix
                and all(lb.get(k) == x for k, x in labels.items())]

    def value(self, suffix="", **labels):
        vals = self.series(suffix, **labels)
        assert len(vals) == 1, (self.name, suffix, labels, self.samples)
        return float(vals[0])


def parse_exposition(text):
    """{family: Family}. Every family has HELP then TYPE, once, before its
    samples, which are contiguous; every sample carries mountpoint first;
    no sample twice."""
    fams = {}
    cur = None
    seen = set()
    for line in text.splitlines():
        assert line and line == line.strip(), f"blank/space: {line!r}"
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert NAME.match(name), line
            assert name not in fams, f"family twice: {line}"
            assert help_text, f"empty HELP: {line}"
            cur = fams[name] = Family(name, help_text)
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            assert len(parts) == 4 and cur and parts[2] == cur.name, \
                f"TYPE not right after its HELP: {line}"
            assert cur.type is None and not cur.samples, line
            assert parts[3] in ("counter", "gauge", "histogram", "summary"), \
                line
            cur.type = parts[3]
            continue
        assert not line.startswith("#"), f"stray comment: {line}"
        m = SAMPLE.match(line)
        assert m, f"not a sample: {line!r}"
        name, labels_s, value = m.groups()
        assert cur and cur.type, f"sample before HELP/TYPE: {line}"
        suffixes = {"histogram": ("_bucket", "_sum", "_count"),
                    "summary": ("_sum", "_count")}.get(cur.type, ("",))
        assert any(name == cur.name + s for s in suffixes), \
            f"{name} outside its family {cur.name}"
        pairs = LABEL.findall(labels_s)
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == labels_s, line
        labels = {k: unescape(v) for k, v in pairs}
        assert pairs and pairs[0][0] == "mountpoint", line
        assert len(labels) == len(pairs), f"label twice: {line}"
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, f"series twice: {line}"
        seen.add(key)
        float(value)
        cur.samples.append((name, labels, value))
    for f in fams.values():
        assert f.type and f.samples, f"family without TYPE/samples: {f.name}"
    return fams


def promtool():
    """argv prefix that runs promtool (fetched once by scripts/promtool)."""
    r = subprocess.run([PROMTOOL, "--version"], capture_output=True,
                       text=True, timeout=600)
    if r.returncode == 77:
        msg = ("promtool unavailable: Debian's prometheus package could "
               "not be downloaded: " + r.stderr.strip())
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    assert r.returncode == 0, r
    return [PROMTOOL]


def promtool_check(tool, text):
    """Runs `promtool check metrics` on text; asserts it is clean."""
    r = subprocess.run(tool + ["check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", \
        f"promtool: rc {r.returncode}\n{r.stdout}{r.stderr}\n---\n{text}"
