#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Renders the benchmark page (doc/benchmarks.md and its charts) from the
results files bench/page/run saved; measures nothing.

    bench/page/render.py --from-json LANE1.json [--from-json LANE2.json]
                         [--out FILE] [--img DIR]

(bench/run --from-json ... does the same.) The page's prose is the
template page.md.in next to this file: the renderer fills in the figures,
tables and charts. Machine-specific paths of the measuring run (its build
and work directories, the private clamd's socket) are replaced by names
when the exact commands are shown.
"""
import argparse
import glob
import json
import os
import shutil
import string
import re
import statistics
import subprocess
import tempfile

from figures import (ALL_CONTENDERS, BONNIE_FIELDS, CLAMFS12_XML,
                     FALLOC_MODES, GiB, MiB)

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
TEMPLATE = os.path.join(HERE, "page.md.in")
# bench/fleet/run's results, one Markdown file a run: the newest is shown
FLEET_RESULTS = os.path.join(TOP, "bench", "fleet", "results-*.md")


def load_prose(path=TEMPLATE):
    """{block: text} of the template: a line '@@ NAME' starts a block,
    which runs to the next; '@@#' lines are comments. Paragraphs are
    separated by blank lines; ${name} is filled in by the renderer ($$ is
    a dollar sign)."""
    blocks, name = {}, None
    with open(path) as f:
        for line in f.read().split("\n"):
            if line.startswith("@@#"):
                continue
            if line.startswith("@@ "):
                name = line[3:].strip()
                blocks[name] = []
            elif name is not None:
                blocks[name].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in blocks.items()}


PROSE = load_prose()


def prose(name, **kw):
    """The template's block `name` filled in, as page lines: one line per
    paragraph, each followed by a blank line."""
    text = string.Template(PROSE[name]).substitute(kw)
    out = []
    for para in text.split("\n\n"):
        out += [para, ""]
    return out


# A results file records the measuring machine's paths (its checkout, the
# work directory, the private clamd's socket); the page names them instead.
_DEPATH = [
    (re.compile(r"(?<![\w/])/\S*?/(build-bench/)"), r"\1"),
    (re.compile(r"/tmp/cfs\w+/clamd\.sock"), "CLAMD_SOCKET"),
    (re.compile(r"/\S*?/clamfs-page\.\w+/"), "WORK/"),
]


def depath_cmd(cmd):
    for rx, to in _DEPATH:
        cmd = rx.sub(to, cmd)
    return cmd


def depath_backend(desc):
    """'ext4 /dev/vda[/var/tmp/x]' (findmnt's source) -> 'ext4'."""
    return desc.split(" ", 1)[0]


def run(argv, **kw):
    kw.setdefault("check", True)
    return subprocess.run(argv, **kw)


def lane_title(env):
    t = "Debian %s" % env["lane"].replace("debian", "")
    if env.get("codename"):
        t += " (%s)" % env["codename"]
    return "%s, libfuse %s, kernel %s" % (t, env["libfuse"], env["kernel"])


def med(v):
    return statistics.median(v) if v else float("nan")


def fmt_s(v):
    if v != v:
        return "n/a"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 0.1:
        return "%.2f" % v
    return "%.3f" % v


def cell(vals, base=None):
    """median [min-max] (ratio) of a list of seconds."""
    if not vals:
        return "n/a"
    m = med(vals)
    s = fmt_s(m)
    if len(vals) > 1:
        s += " [%s-%s]" % (fmt_s(min(vals)), fmt_s(max(vals)))
    if base:
        s += " **%.2fx**" % (m / base)
    return s


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join("---" for _ in header) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return out


GP_HEAD = """set terminal pngcairo noenhanced size 1000,520 font "DejaVu Sans,10"
set output "%s"
set title "%s"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set grid ytics
set xtics nomirror
set ylabel "%s"
"""


def gnuplot(work, name, title, ylabel, xlabels, series, img, extra=""):
    """series: [(legend, [(median, lo, hi) per xlabel])]; a series with
    no value at all (e.g. every run failed) is left out."""
    series = [(lg, v) for lg, v in series
              if any(x is not None and x[0] == x[0] for x in v)]
    name = CHART_PREFIX[0] + name
    if CHART_PREFIX[1]:
        title += "\\n" + CHART_PREFIX[1]
    dat = os.path.join(work, name + ".dat")
    with open(dat, "w") as f:
        f.write("# label " + " ".join(s[0].replace(" ", "_")
                                      for s in series) + "\n")
        for i, x in enumerate(xlabels):
            row = ['"%s"' % x]
            for _, vals in series:
                v = vals[i]
                if v is None or v[0] != v[0]:
                    row += ["NaN", "NaN", "NaN"]
                else:
                    row += ["%g" % v[0], "%g" % v[1], "%g" % v[2]]
            f.write(" ".join(row) + "\n")
    png = os.path.join(img, name + ".png")
    gp = GP_HEAD % (png, title, ylabel) + extra
    plots = []
    for j, (legend, _) in enumerate(series):
        c = 2 + 3 * j
        plots.append('"%s" using %d:%d:%d%s title "%s"' % (
            dat, c, c + 1, c + 2, ":xtic(1)" if j == 0 else "", legend))
    gp += "plot " + ", \\\n     ".join(plots) + "\n"
    gpf = os.path.join(work, name + ".gp")
    with open(gpf, "w") as f:
        f.write(gp)
    run(["gnuplot", gpf])
    return png


def trip(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return (med(vals), min(vals), max(vals))


CHART_PREFIX = ["", ""]   # file name prefix, lane line of the title


def charts(R, names, work, img, prefix="", lane=""):
    CHART_PREFIX[:] = [prefix, lane]
    os.makedirs(img, exist_ok=True)
    out = {}
    if "scancache" in R:
        sc = R["scancache"]
        passes = [("first", "pass 1 (empty cache)"), ("second", "pass 2"),
                  ("loop10", "10 passes")]
        out["scancache"] = gnuplot(
            work, "scancache", "ScanCache: 18 files 1 kB-2 MB, dd "
            "(median, min-max; lower is better)", "seconds (log)",
            [n for n in names if n in sc],
            [(lab, [trip(sc[n][k]) for n in names if n in sc])
             for k, lab in passes], img, "set logscale y\n")
    if "bonnie" in R:
        b = R["bonnie"]
        cs = [n for n in names if n in b and n != "native"]
        series = []
        for n in cs:
            vals = []
            for k, _, _ in BONNIE_FIELDS:
                nat = [v for v in b["native"][k] if v]
                nat = med(nat) if nat else native_floor(k)
                own = [v for v in b[n][k] if v]
                if not own or not nat:
                    vals.append(None)
                else:
                    sl = [nat / v for v in own]
                    vals.append((nat / med(own), min(sl), max(sl)))
            series.append((n, vals))
        out["bonnie"] = gnuplot(
            work, "bonnie", "bonnie++ 2.00: slowdown against native (native rate / "
            "contender rate; lower is better)\\nwhere native was +++++ (under "
            "0.5 s), the bar is a lower bound",
            "slowdown x (log)", [lab for _, _, lab in BONNIE_FIELDS], series,
            img, "set logscale y\nset xtics rotate by -25\n"
            "set arrow from graph 0, first 1 to graph 1, first 1 nohead "
            "dt 2 lc rgb 'black'\n")
    if "coldhot" in R:
        ch = R["coldhot"]
        cs = [n for n in names if n in ch]
        series = [(k.upper() if k != "pgcache" else "PGCACHE",
                   [trip(ch[n][k]) for n in cs])
                  for k in ("cold", "hot", "pgcache")]
        bare = med(ch["bare scan"]["cold"])
        out["coldhot"] = gnuplot(
            work, "coldhot", "cat of a %d MB file: COLD / HOT / PGCACHE "
            "(median, min-max; dashed: bare clamd scan, cold)"
            % (R["big"] // 1000000), "seconds (log)", cs, series, img,
            "set logscale y\nset arrow from graph 0, first %g to graph 1, "
            "first %g nohead dt 2 lc rgb 'red'\n" % (bare, bare))
    if "falloc" in R:
        fa = R["falloc"]
        cs = [n for n in names if n in fa]
        series = [(n, [trip(fa[n][k]) for k, _ in FALLOC_MODES]) for n in cs]
        out["falloc"] = gnuplot(
            work, "falloc", "Creating a %d MiB file (median, min-max; lower "
            "is better)" % (R["falloc_size"] // MiB), "seconds (log)",
            [lab for _, lab in FALLOC_MODES], series, img,
            "set logscale y\n")
    return out


ARGS = None   # the run's parameters (also when rendering from JSON)


def native_floor(k):
    """bonnie++ prints +++++ for a test done in under 0.5 s: the native
    rate was then at least this (None: unknown)."""
    if ARGS is None:
        return None
    if k.startswith(("seq_", "ran_")):
        return ARGS.bonnie_n * 1024 / 0.5
    if k in ("put_block", "rewrite", "get_block"):
        num, unit = ARGS.bonnie_size[:-1], ARGS.bonnie_size[-1].lower()
        kib = float(num) * {"k": 1, "m": 1024, "g": 1024 * 1024}[unit]
        return kib / 0.5
    return None


def bonnie_slowdown(b, n, k):
    """(slowdown, is_lower_bound) of contender n on test k."""
    own = [v for v in b[n][k] if v]
    if not own:
        return float("nan"), False
    nat = [v for v in b["native"][k] if v]
    if nat:
        return med(nat) / med(own), False
    f = native_floor(k)
    if f is None:
        return float("nan"), False
    return f / med(own), True


def ratio(a, b):
    if a is None or b is None or not b or a != a or b != b:
        return float("nan")
    return a / b


TARGETS = [  # (key, figure, limit with passthrough, higher is better)
    ("loop", "ScanCache warm loop (10 passes)", 1.2, False),
    ("pgcache", "PGCACHE re-read", 1.05, False),
    ("hot", "HOT read", 1.1, False),
    ("cold", "COLD read vs a bare clamd scan", 1.1, False),
    ("get_block", "bonnie++ block read", 1.2, False),
    ("put_block", "bonnie++ block write", 4.0, False),
    ("seq_create", "bonnie++ seq create", None, False),
    ("write1m", "1 MiB write()s", 1.3, False),
    ("write4k", "4 KiB write()s", 5.0, False),
    ("mmap", "mmap writes", 1.1, False),
    ("fallocate", "posix_fallocate", None, False),
    ("smb_put", "SMB upload, share / raw share", 0.9, True),
    ("smb_get", "SMB download, share / raw share", None, True),
    ("oneflight", "50 openers of one unscanned file: scans", 1, False),
]


PREVIOUS_D12 = {  # doc/benchmarks.md of 2026-11-30 00:26 UTC (Debian 12)
    "loop": 1.28, "pgcache": 2.26, "hot": 2.59, "cold": 1.02,
    "get_block": 6.42, "put_block": 14.62, "seq_create": 1.89,
    "fallocate": 0.66, "write4k": 24.84, "mmap": 1.11, "oneflight": 1,
}


def figure(R, n, key):
    """(value, is_lower_bound) of contender n for a target key."""
    nan = (float("nan"), False)
    try:
        if key == "loop":
            sc = R["scancache"]
            return ratio(med(sc[n]["loop10"]),
                         med(sc["native"]["loop10"])), False
        if key in ("pgcache", "hot"):
            ch = R["coldhot"]
            return ratio(med(ch[n][key]), med(ch["native"][key])), False
        if key == "cold":
            ch = R["coldhot"]
            return ratio(med(ch[n]["cold"]),
                         med(ch["bare scan"]["cold"])), False
        if key in [k for k, _, _ in BONNIE_FIELDS]:
            return bonnie_slowdown(R["bonnie"], n, key)
        if key in dict(FALLOC_MODES):
            fa = R["falloc"]
            return ratio(med(fa[n][key]), med(fa["native"][key])), False
        if key in ("smb_put", "smb_get"):
            sm, k = R["smb"], key[4:]
            return ratio(med([v for v in sm[n][k] if v]),
                         med([v for v in sm["native"][k] if v])), False
        if key == "oneflight":
            return float(max(R["oneflight"][n]["scans"])), False
    except (KeyError, ValueError, TypeError, ZeroDivisionError):
        pass
    return nan


def fig_text(key, v, bound=False):
    if v != v:
        return "n/a"
    if key == "oneflight":
        return "%d" % v
    return "%s%.2fx" % (">= " if bound else "", v)


def evaluate(J):
    """[(key, figure, value text, goal text, met?)] for clamfs on a lane."""
    R, env = J["R"], J["env"]
    pt = env.get("passthrough_lib")
    T = []
    for key, fig, lim, higher in TARGETS:
        v, bound = figure(R, "clamfs", key)
        if pt:
            goal = lim
        else:
            goal = PREVIOUS_D12.get(key)
        if key.startswith("write") or key in ("mmap", "fallocate"):
            fig = "%s %d MiB" % (fig, R.get("falloc_size", 0) // MiB)
        if goal is None or v != v:
            met = None
        elif higher:
            met = round(v, 2) >= goal
        else:   # as shown: the previous page's figures are rounded
            met = round(v, 2) <= goal
            if bound and met:
                met = None   # only a lower bound: cannot tell
        if goal is None:
            gt = "-"
        elif key == "oneflight":
            gt = "%d" % goal
        elif pt:
            gt = ("%s %.2fx" % (">=" if higher else "<=", goal))
        else:
            gt = "%s %.2fx (page of 2026-11-30)" % (
                ">=" if higher else "<=", goal)
        T.append((key, fig, fig_text(key, v, bound), gt, met))
    return T


def lane_short(env):
    return "Debian %s" % env["lane"].replace("debian", "")


MET = {True: "yes", False: "**missed**", None: "n/a"}




def floor_text(J, key):
    """The same figure for the contenders that do no scanning."""
    out = []
    for n in ("passthrough_hp", "passthrough_ll", "clamfs-pt-off"):
        if n in J["names"]:
            v, b = figure(J["R"], n, key)
            if v == v:
                out.append("%s %s" % (n, fig_text(key, v, b)))
    return ("Others in the same run: " + ", ".join(out) + ". ") if out \
        else ""


def why_for(env, key):
    kind = "pt" if env.get("passthrough_lib") else "nopt"
    for k in (key, "write" if key in ("put_block", "write4k", "write1m",
                                      "mmap") else
              "read" if key == "get_block" else None):
        if k and "why %s %s" % (kind, k) in PROSE:
            return PROSE["why %s %s" % (kind, k)]
    return ""




def fleet_section():
    """The newest results of bench/fleet/run (a page of its own, measured
    apart from the lanes) after the template's prose on them; nothing
    while there are none."""
    files = sorted(glob.glob(FLEET_RESULTS))
    if not files:
        return []
    with open(files[-1]) as f:
        body = f.read().splitlines()
    # its title goes, its sections become subsections of this one
    body = ["#" + l if l.startswith("## ") else l for l in body
            if not l.startswith("# ")]
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return (["## Scanning with a fleet of clamd backends", ""] +
            prose("fleet", results=os.path.relpath(files[-1], TOP)) +
            body + [""])


# bench/realwork/run's results, one Markdown file a run, named
# DATE-LANE.md for a run of every step, DATE-LANE-WHAT.md for a run of
# some: the newest full one of each lane is shown
REALWORK_RESULTS = os.path.join(TOP, "bench", "realwork", "results", "*.md")


# bench/store/run's results, DATE-LANE.md: the newest of each lane
STORE_RESULTS = os.path.join(TOP, "bench", "store", "results", "*.md")


def newest_per_lane(pattern, skip=None, full_only=False):
    """{lane: the newest DATE-LANE*.md file}; names holding skip are not
    counted, nor with full_only names with more than DATE-LANE.md. One
    name sorts after another of the same day only by what follows the
    lane, so keep one full result per lane and day."""
    newest = {}
    for path in sorted(glob.glob(pattern)):
        name = os.path.basename(path)
        if skip and skip in name:
            continue
        rest = name[len("YYYY-MM-DD-"):]
        lane = rest.split("-")[0].split(".")[0]
        if full_only and rest != lane + ".md":
            continue
        newest[lane] = path
    return newest


def section_head(title, name, newest):
    """A results section's title and the template's prose `name` on it,
    naming the results files shown."""
    return ["## " + title, ""] + prose(name, results=", ".join(
        "`%s`" % os.path.relpath(newest[k], TOP) for k in sorted(newest)))


def store_section():
    """The newest results of bench/store/run on each lane, after the
    template's prose; nothing while there are none."""
    newest = newest_per_lane(STORE_RESULTS)
    if not newest:
        return []
    L = section_head("Restarts: verdicts kept in the store", "store", newest)
    for lane in sorted(newest, reverse=True):
        with open(newest[lane]) as f:
            body = [l for l in f.read().splitlines()
                    if not l.startswith("<!--")]
        while body and not body[0].strip():
            body.pop(0)
        L += ["### %s" % lane.capitalize().replace("Debian", "Debian "),
              ""] + body + [""]
    return L


def titled_lane_results(newest):
    """Each lane's results file, newest lane name first, as a subsection
    titled by the file's own "# " line (comments left out)."""
    L = []
    for lane in sorted(newest, reverse=True):
        with open(newest[lane]) as f:
            body = f.read().splitlines()
        title = next((l[2:] for l in body if l.startswith("# ")), lane)
        body = [l for l in body if not l.startswith("# ") and
                not l.startswith("<!--")]
        while body and not body[0].strip():
            body.pop(0)
        while body and not body[-1].strip():
            body.pop()
        L += ["### %s: %s" % (lane.capitalize().replace("Debian", "Debian "),
                               title), ""] + body + [""]
    return L


# bench/dirs/run's results, DATE-LANE.md: the newest of each lane
DIRS_RESULTS = os.path.join(TOP, "bench", "dirs", "results", "*.md")


DIRS_PANELS = [("find", 0, "find -printf %s, pass 1"),
               ("find", 1, "find -printf %s, pass 2"),
               ("ls", 1, "ls -lR, pass 2")]


def dirs_chart(results_json, lane, work, img):
    """Seconds against tree size, log-log, one line a contender and one
    panel a walk and pass (bench/dirs/run's JSON next to its .md); a
    contender that failed at a size has no point there."""
    with open(results_json) as f:
        res = json.load(f)["results"]
    sizes = sorted(res, key=int)
    names = []
    for s in sizes:
        names += [n for n in res[s] if n not in names]
    name = "%s-dirs" % lane
    gp = ['set terminal pngcairo noenhanced size 1200,420 '
          'font "DejaVu Sans,10"',
          'set output "%s"' % os.path.join(img, name + ".png"),
          'set multiplot layout 1,%d title "Directory walks: seconds against '
          'files in the tree (median; log-log; lower is better)\\n%s"'
          % (len(DIRS_PANELS), lane_label(lane)),
          "set logscale xy", "set grid", "set key top left",
          'set xlabel "files"', 'set format x "%.0s%c"']
    for i, (walk, npass, title) in enumerate(DIRS_PANELS):
        plots = []
        for n in names:
            dat = os.path.join(work, "%s-%s-%d-%s.dat" % (name, walk, npass,
                                                           n))
            pts = 0
            with open(dat, "w") as f:
                for s in sizes:
                    runs = res[s].get(n, {}).get(walk, [])
                    ts = [r["t"][npass] for r in runs
                          if len(r["t"]) > npass and r["t"][npass] is not None]
                    if ts:
                        f.write("%s %g\n" % (s, med(ts)))
                        pts += 1
            if pts:
                plots.append('"%s" using 1:2 with linespoints lw 2 title "%s"'
                             % (dat, n))
        gp += ['set title "%s"' % title,
               'set ylabel "seconds"' if i == 0 else "unset ylabel",
               "plot " + ", ".join(plots) if plots else
               'plot NaN notitle']
    gp.append("unset multiplot")
    gpf = os.path.join(work, name + ".gp")
    with open(gpf, "w") as f:
        f.write("\n".join(gp) + "\n")
    os.makedirs(img, exist_ok=True)
    run(["gnuplot", gpf])
    return name + ".png"


def lane_label(lane):
    return lane.capitalize().replace("Debian", "Debian ")


def dirs_section(work, img, img_rel):
    """Directory walks at several tree sizes (bench/dirs/run), the newest
    of each lane after the template's prose, each with its chart of time
    against tree size; nothing while there are none."""
    newest = newest_per_lane(DIRS_RESULTS)
    if not newest:
        return []
    L = section_head("Directory walks at any size", "dirs", newest)
    for lane in sorted(newest, reverse=True):
        js = newest[lane][:-len(".md")] + ".json"
        if os.path.exists(js):
            png = dirs_chart(js, lane, work, img)
            L += ["![%s: directory walks against tree size](%s/%s)"
                  % (lane_label(lane), img_rel, png), ""]
    return L + titled_lane_results(newest)


# bench/writeback/run's results, DATE-LANE.md: the newest of each lane
WRITEBACK_RESULTS = os.path.join(TOP, "bench", "writeback", "results",
                                 "*.md")


def writeback_section():
    """The newest results of bench/writeback/run on each lane, after the
    template's prose; nothing while there are none."""
    newest = newest_per_lane(WRITEBACK_RESULTS)
    if not newest:
        return []
    return section_head(
        "Small writes without passthrough: the write-back cache",
        "writeback", newest) + titled_lane_results(newest)


def realwork_section():
    """The newest results of bench/realwork/run on each lane (measured
    apart from the lanes' page runs), after the template's prose on them;
    nothing while there are none. Quick runs (--quick) and runs of some
    steps (their results are quoted in the prose) are not shown."""
    newest = newest_per_lane(REALWORK_RESULTS, skip="quick", full_only=True)
    if not newest:
        return []
    return section_head("Real work: unpack, search, build, list, remove",
                        "realwork", newest) + titled_lane_results(newest)


# bench/smb/run's results, DATE-LANE.md, and bench/realwork/run's runs of
# a file server's load, DATE-LANE-readwrite*.md: the newest of each lane
SMB_RESULTS = os.path.join(TOP, "bench", "smb", "results", "*.md")
READWRITE_RESULTS = os.path.join(TOP, "bench", "realwork", "results",
                                 "*-readwrite*.md")


def fileserver_section():
    """A file server's own load: dbench as root and as nobody (bench/
    realwork/run, read-write opens) and smbtorture through a private
    smbd (bench/smb/run), the newest of each lane after the template's
    prose; nothing while there are none."""
    smb = newest_per_lane(SMB_RESULTS)
    rw = {}
    for path in sorted(glob.glob(READWRITE_RESULTS)):
        rw.setdefault(os.path.basename(path)[len("YYYY-MM-DD-"):]
                      .split("-")[0], []).append(path)
    if not smb and not rw:
        return []
    named = [p for lane in sorted(rw) for p in rw[lane]] + \
        [smb[k] for k in sorted(smb)]
    L = ["## A file server's load: dbench and smbtorture", ""] + prose(
        "fileserver", results=", ".join(
            "`%s`" % os.path.relpath(p, TOP) for p in named))
    for lane in sorted(set(rw) | set(smb), reverse=True):
        # the full run first, then the runs of some steps
        for p in sorted(rw.get(lane, []), key=len):
            L += titled_lane_results({lane: p})
        if lane in smb:
            L += titled_lane_results({lane: smb[lane]})
    return L


def render(lanes, img_rel, work, img):
    L = ["# clamfs benchmarks", ""]
    L += prose("intro", nlanes=len(lanes),
               lanes_s="s" if len(lanes) > 1 else "",
               from_json=" ".join("--from-json %s" % x for J in lanes
                                  for x in J.get("sources", [])
                                  if x.endswith(".json")))
    L += ["## Lanes", "",
          "| lane | system | libfuse | kernel | kernel FUSE passthrough | "
          "measured | runs | raw results |",
          "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for J in lanes:
        env, a = J["env"], J["args"]
        system = env["os"]
        if env.get("tree"):
            system += (", a debootstrapped tree (`scripts/lane-debian13`) on "
                       "the same machine, same kernel")
        pt = ("yes: clamfs passthrough=auto" + (
            ", passthrough_hp" if env.get("pthp") else "")
              if env.get("passthrough_lib") else
              "no (libfuse < 3.17): no contender has it")
        L.append("| %s | %s | %s (%s) | %s | %s | %s (%.0f min) | %d%s | %s |"
                 % (lane_short(env), system, env["libfuse"],
                    env["libfuse_pkg"], env["kernel"], pt, J["when"],
                    J["elapsed"] / 60, a.runs,
                    " (--quick)" if a.quick else "",
                    ", ".join("`%s`" % x for x in J.get("sources", []))
                    or "-"))
        for k, when, src in J.get("parts", []):
            L.append("| %s (%s) | run again on its own | | | | %s | 3 | "
                     "%s |" % (lane_short(env), k, when, ", ".join(
                         "`%s`" % x if x.startswith("bench/") else x
                         for x in src)))
    J0 = lanes[0]["env"]
    L += [""] + prose("machine", cpu=J0["cpu"], ncpu=J0["ncpu"],
                      mem="%.1f" % (J0["mem"] / GiB),
                      backend=depath_backend(J0["backend"]))[:-1]
    for J in lanes:
        env, R = J["env"], J["R"]
        v = R.get("versions", {})
        L.append("- %s: %s (git describe: %s); original ClamFS: "
                 "Debian package clamfs %s; %s; bonnie++ %s; samba %s; "
                 "passthrough_hp: %s" % (
                     lane_short(env), v.get("clamfs", "?"),
                     v.get("describe", "?"), env["pkgs"].get("clamfs"),
                     env["clamd"], env["pkgs"].get("bonnie++"),
                     env["pkgs"].get("samba"),
                     env.get("pthp") or "**not available**: " +
                     str(env.get("pthp_missing"))))
    L.append("")

    # targets, one column group per lane
    evs = [(J, evaluate(J)) for J in lanes]
    head = ["figure"]
    for J, _ in evs:
        ls = lane_short(J["env"])
        head += ["%s clamfs" % ls, "%s goal" % ls, "met"]
        if J["env"].get("passthrough_lib"):
            for n in ("clamfs-pt-off", "passthrough_hp"):
                if n in J["names"]:
                    head.append("%s %s" % (ls, n))
    L += ["## Targets", ""]
    L += prose("targets", this_page="; ".join(
        "%s `bonnie++ -s %s`, %d MiB allocation files, %d runs" % (
            lane_short(J["env"]), J["args"].bonnie_size,
            J["args"].falloc_size // MiB, J["args"].runs) for J in lanes))
    L += ["| " + " | ".join(head) + " |",
          "| " + " | ".join("---" for _ in head) + " |"]
    for i, (key, fig, _, _) in enumerate(TARGETS):
        row = [evs[0][1][i][1]]
        for J, T in evs:
            _, _, val, gt, met = T[i]
            row += [val, gt, MET[met]]
            if J["env"].get("passthrough_lib"):
                for n in ("clamfs-pt-off", "passthrough_hp"):
                    if n in J["names"]:
                        v, b = figure(J["R"], n, key)
                        row.append(fig_text(key, v, b))
        L.append("| " + " | ".join(row) + " |")
    L.append("")
    missed = [(J, t) for J, T in evs for t in T if t[4] is False]
    if missed:
        L += ["### Missed goals and why", ""]
        for J, (key, fig, val, gt, met) in missed:
            L.append("- **%s, %s**: %s (goal %s). %s%s" % (
                lane_short(J["env"]), fig, val, gt, floor_text(J, key),
                why_for(J["env"], key)))
        L.append("")

    # contenders
    head = ["contender", "what"] + [lane_short(J["env"]) for J in lanes]
    L += ["## Contenders", "", "| " + " | ".join(head) + " |",
          "| " + " | ".join("---" for _ in head) + " |"]
    for n in ALL_CONTENDERS:
        L.append("| %s | %s | %s |" % (n, PROSE.get("desc " + n, ""), " | ".join(
            J["verify"].get(n, "-") for J in lanes)))
    L += [""] + prose("contenders")
    for J in lanes:
        L += ["## %s lane: %s" % (lane_short(J["env"]), lane_title(J["env"])),
              ""]
        for k, e in J["R"].get("errors", {}).items():
            L += ["**Benchmark %s failed in this run: `%s`**" % (k, e), ""]
        L += sections(J, img_rel)
        L += ["### %s: exact commands" % lane_short(J["env"]), "", "```"]
        L.append("bench/run%s --runs %d   # as root; everything below is "
                 "run by it" % (" --quick" if J["args"].quick else "",
                                J["args"].runs))
        for what, c in J["cmds"]:
            L.append("%-16s %s" % (what + ":", depath_cmd(c)))
        L += ["```", ""]
    L += realwork_section()
    L += fileserver_section()
    L += dirs_section(work, img, img_rel)
    L += store_section()
    L += writeback_section()
    L += fleet_section()
    L += prose("clamfs12") + ["```xml",
          (CLAMFS12_XML % {"socket": "CLAMD_SOCKET", "root": "BACKEND",
                           "mnt": "MOUNTPOINT",
                           "cache": '<cache entries="65536" '
                                    'expire="10800000" />'}).strip(),
          "```", ""]
    return "\n".join(L) + "\n"


def sections(J, img_rel):
    a, R, names, pngs, env = J["args"], J["R"], J["names"], J["pngs"], J["env"]
    lane = lane_short(env)
    L = []

    def img(key, alt):
        if key in pngs:
            return ["", "![%s](%s/%s)" % (alt, img_rel,
                                          os.path.basename(pngs[key])), ""]
        return []

    if "scancache" in R:
        sc = R["scancache"]
        nat = {k: med(sc["native"][k]) for k in ("first", "second", "loop10")}
        L += ["### %s: 1. ScanCache" % lane, ""] + prose("scancache")
        rows = []
        for n in names:
            if n in sc:
                rows.append([n] + [cell(sc[n][k], nat[k]) for k in
                                   ("first", "second", "loop10")]
                            + ["%d" % med(sc[n]["scans"])])
        L += table(["contender", "pass 1 s", "pass 2 s", "10 passes s",
                    "clamd scans per run"], rows)
        L += img("scancache", "ScanCache passes")
    if "bonnie" in R:
        b = R["bonnie"]
        L += ["### %s: 2. bonnie++" % lane, ""] + prose(
            "bonnie", size=a.bonnie_size, ram=a.bonnie_ram, n=a.bonnie_n,
            mem="%.0f" % (env["mem"] / GiB))
        rows = []
        for k, _, lab in BONNIE_FIELDS:
            nat = [v for v in b["native"][k] if v]
            natm = med(nat) if nat else None
            row = [lab]
            for n in names:
                if n not in b:
                    continue
                vals = b[n][k]
                good = [v for v in vals if v]
                if not good:
                    nf = len(b[n].get("failed", []))
                    row.append("failed" if nf == len(vals) else
                               "fast (+++++)")
                    continue
                s = "%.0f" % med(good)
                if len(good) > 1:
                    s += " [%.0f-%.0f]" % (min(good), max(good))
                if len(good) < len(vals):
                    s += " (%d of %d timed)" % (len(good), len(vals))
                if n != "native":
                    sl, bound = bonnie_slowdown(b, n, k)
                    if sl == sl:
                        s += " **%s%.2fx**" % (">=" if bound else "", sl)
                row.append(s)
            rows.append(row)
        L += table(["test"] + [n for n in names if n in b], rows)
        if R.get("bonnie_clamfs_opts"):
            L += [""] + prose("bonnie_opts", opts=",".join(
                R["bonnie_clamfs_opts"]))[:-1]
        failed = ["%s (run %s)" % (n, ", ".join(str(x) for x in b[n]["failed"]))
                  for n in names if n in b and b[n].get("failed")]
        if failed:
            L += [""] + prose("bonnie_failed",
                              failed="; ".join(failed))[:-1]
        L += img("bonnie", "bonnie++ slowdown against native")
    if "coldhot" in R:
        ch = R["coldhot"]
        nat = {k: med(ch["native"][k]) for k in ("cold", "hot", "pgcache")}
        bare = ch["bare scan"]["cold"]
        L += ["### %s: 3. Cold, hot and page-cache reads of a %d MB file" % (
            lane, a.big // 1000000), ""] + prose("coldhot")
        rows = []
        for n in names:
            if n in ch:
                rows.append([n] + [cell(ch[n][k], nat[k])
                                   for k in ("cold", "hot", "pgcache")]
                            + [" ".join("%d" % x for x in ch[n]["scans"])])
        rows.append(["bare clamd scan (cold)", cell(bare), "", "", "1"])
        L += table(["contender", "COLD s", "HOT s", "PGCACHE s",
                    "clamd scans (each run)"], rows)
        L += ["", "COLD against the bare scan: " + ", ".join(
            "%s %.2fx" % (n, med(ch[n]["cold"]) / med(bare))
            for n in names if n in ch and n != "native") + "."]
        L += img("coldhot", "cold, hot and page-cache reads")
    if "falloc" in R:
        fa = R["falloc"]
        L += ["### %s: 4. File allocation" % lane, ""] + prose(
            "falloc", mib=a.falloc_size // MiB,
            mem="%.0f" % (env["mem"] / GiB))
        rows = []
        for k, lab in FALLOC_MODES:
            if k not in fa["native"]:
                continue
            natm = med(fa["native"][k])
            rows.append([lab] + [cell(fa[n][k], natm if n != "native"
                                      else None)
                                 for n in names if n in fa])
        L += table(["method (seconds)"] + [n for n in names if n in fa], rows)
        L += img("falloc", "file allocation")
    if "small" in R:
        sm = R["small"]
        natm = med(sm["native"]["time"])
        L += ["### %s: 5. Scanning under concurrency" % lane, "",
              "#### %d distinct 4 KiB files opened cold by 8 parallel readers"
              % a.small, ""] + prose("small")
        rows = []
        for n in names:
            if n in sm:
                m = med(sm[n]["time"])
                rows.append([n, cell(sm[n]["time"], natm if n != "native"
                                     else None),
                             "%.0f" % (a.small / m),
                             "%d" % med(sm[n]["scans"])])
        L += table(["contender", "seconds", "files/s", "clamd scans"], rows)
    if "oneflight" in R:
        of = R["oneflight"]
        L += ["", "#### 50 processes opening one unscanned 10 MB file at once",
              ""] + prose("oneflight")
        rows = []
        for n in names:
            if n in of:
                rows.append([n, cell(of[n]["time"]),
                             " ".join("%d" % s for s in of[n]["scans"]),
                             "%d" % sum(of[n]["fails"])])
        L += table(["contender", "seconds until all 50 have read",
                    "clamd scans (each run)", "failed opens"], rows)
        L.append("")
    if "smb" in R:
        sm = R["smb"]
        L += ["### %s: 6. SMB through a private smbd" % lane, ""] + prose(
            "smb", samba=env["pkgs"].get("samba", "?"),
            mib=R["smb_size"] // MiB)
        nat_get, nat_put = med(sm["native"]["get"]), med(sm["native"]["put"])
        rows = []
        for n in names:
            if n in sm:
                g, u = sm[n]["get"], sm[n]["put"]
                rows.append([
                    "raw backend" if n == "native" else n,
                    rate_cell(g, None if n == "native" else nat_get),
                    rate_cell(u, None if n == "native" else nat_put)])
        L += table(["share", "download MB/s", "upload MB/s"], rows)
        L.append("")
    st = R.get("stats") or {}
    if st:
        L += ["### %s: clamfs counters" % lane, ""] + prose("counters")
        rows = []
        for sect, per in st.items():
            if sect in ("verify", "build"):
                continue
            for n, lst in per.items():
                def tot(k):
                    try:
                        return "%d" % sum(int(x.get(k, 0)) for x in lst)
                    except ValueError:
                        return "?"
                pts = sorted({x.get("passthrough", "?") for x in lst})
                rows.append([sect, n, ", ".join(pts), tot("opens_passthrough"),
                             tot("daemon_reads"), tot("daemon_writes")])
        L += table(["benchmark", "contender", "passthrough", "opens_passthrough",
                    "daemon_reads", "daemon_writes"], rows)
        L.append("")
    return L


def rate_cell(vals, base=None):
    vals = [v for v in vals if v]
    if not vals:
        return "n/a"
    s = "%.0f" % med(vals)
    if len(vals) > 1:
        s += " [%.0f-%.0f]" % (min(vals), max(vals))
    if base:
        s += " **%.2fx**" % (med(vals) / base)
    return s


def print_summary(J):
    print("%-46s %12s %30s %8s" % ("figure", "clamfs", "goal", "met"))
    for key, fig, val, gt, met in evaluate(J):
        print("%-46s %12s %30s %8s" % (fig, val, gt, MET[met].strip("*")))


def load_lane(path):
    with open(path) as f:
        J = json.load(f)
    J["args"] = argparse.Namespace(**J["args"])
    J["cmds"] = [tuple(c) for c in J["cmds"]]
    p = os.path.abspath(path)
    J["sources"] = [os.path.relpath(x, TOP) if x.startswith(TOP + os.sep)
                    else x for x in (p, os.path.splitext(p)[0] + ".txt")]
    return J


BENCH_KEYS = ("scancache", "bonnie", "coldhot", "falloc", "small",
              "oneflight", "smb")


def merge_lanes(loaded):
    """Results files of the same lane (e.g. a benchmark run again on its
    own) make one lane: a later file's benchmarks replace the earlier
    file's, and its failure of them no longer shows."""
    lanes = []
    for J in loaded:
        prev = [x for x in lanes if x["env"]["lane"] == J["env"]["lane"]]
        if not prev:
            lanes.append(J)
            continue
        P = prev[0]
        for k in BENCH_KEYS:
            if k in J["R"]:
                P["R"][k] = J["R"][k]
                P["R"].get("errors", {}).pop(k, None)
                # counters belong to the run that is shown, or go
                P["R"].setdefault("stats", {}).pop(k, None)
                if k in J["R"].get("stats", {}):
                    P["R"]["stats"][k] = J["R"]["stats"][k]
                P.setdefault("parts", []).append((k, J["when"], J["sources"]
                                                  + ([J["reconstructed"]] if
                                                     J.get("reconstructed")
                                                     else [])))
        if "smb_size" in J["R"]:
            P["R"]["smb_size"] = J["R"]["smb_size"]
        P["elapsed"] += J["elapsed"]
        P["sources"] = P["sources"] + J["sources"]
        for c in J["cmds"]:
            if c not in P["cmds"]:
                P["cmds"].append(c)
    return lanes


def write_page(lanes, out, img):
    global ARGS
    work = tempfile.mkdtemp(prefix="clamfs-page.", dir="/tmp")
    try:
        for J in lanes:
            ARGS = J["args"]
            J["pngs"] = charts(J["R"], J["names"], work, img,
                               J["env"]["lane"] + "-", lane_title(J["env"]))
        text = render(lanes, os.path.relpath(img, os.path.dirname(out)),
                      work, img)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(out, "w") as f:
        f.write(text)
    print(text)
    for J in lanes:
        print("\n== %s" % lane_title(J["env"]))
        print_summary(J)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from-json", action="append", required=True,
                   help="a results file of one lane (or of a benchmark of "
                   "a lane run again on its own); may be given more than "
                   "once")
    p.add_argument("--out", help="page to write (default doc/benchmarks.md)")
    p.add_argument("--img", help="chart directory (default: img next to "
                   "the page)")
    a = p.parse_args()
    render_files(a.from_json, a.out, a.img)


def render_files(files, out=None, img=None):
    lanes = merge_lanes([load_lane(f) for f in files])
    out = os.path.abspath(out or os.path.join(TOP, "doc", "benchmarks.md"))
    img = os.path.abspath(img) if img else os.path.join(
        os.path.dirname(out), "img")
    write_page(lanes, out, img)


if __name__ == "__main__":
    main()
