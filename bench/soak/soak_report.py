# SPDX-License-Identifier: GPL-2.0-or-later
"""The soak's verdict: gathers what every process logged, judges each error
against the fault windows, fits the daemon's resources over time, checks
the invariants and writes report.json, summary.json (the same, one sample
in ten, compact: the copy to publish), report.md, samples.dat and
plot.png (gnuplot) into the output directory."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Opens decided by a scan: only these may fail with EIO, and only while
# clamd was down or hung.
SCANNED_OPENS = ("read", "verify", "mmap", "recover", "tree_read",
                 "eicar_open")

# Growth over the measured part of the run that still counts as flat.
TOLERANCE = {"fds_unheld": 64, "threads": 8, "rss_kb": 24 * 1024}
# Reported, not judged: the daemon holds one fd per inode the kernel
# remembers, so fds follow the workload's tree and the kernel's dentry
# cache (the run of 2026-12-01 at e253ab7: 197 -> 686 -> 198); the fds
# beyond the inodes held (fds_unheld) are what a leak would grow.
REPORTED = ("fds", "inodes")


def slope_per_min(points):
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 3:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return 0.0
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return sxy / sxx * 60.0


def read_logs(logdir):
    counts, lat, errors, violations = {}, {}, [], []
    for path in sorted(glob.glob(os.path.join(logdir, "*.jsonl"))):
        last = None
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a process killed in the middle of a line
                k = r.get("k")
                if k == "counters":
                    last = r
                elif k == "error":
                    errors.append(r)
                elif k == "violation":
                    violations.append(r)
        if last:
            for key, v in last["counts"].items():
                counts[key] = counts.get(key, 0) + v
            for op, v in last["lat_max"].items():
                lat[op] = max(lat.get(op, 0.0), v)
    return counts, lat, errors, violations


def in_window(err, windows, kind, grace):
    """Whether the operation overlapped a fault of this kind. A clamd
    outage ends when clamd was seen scanning again (t_ok, observed by the
    fault driver), with no grace: an open begun after that must not fail.
    A full backend ends when the driver freed it, plus grace for what the
    kernel and the workers still had in flight."""
    t0, t1 = err["t0"], err.get("t1", err["t0"])
    for k, w0, w_end, w_ok in windows:
        if k != kind:
            continue
        end = w_ok if kind == "clamd" else w_end + grace
        if w0 <= t1 and t0 <= end:
            return True
    return False


def allowed(err, windows, grace):
    """Whether the policy allows this error at this time, and why."""
    e, op = err["errno"], err["op"]
    if e == "ENOSPC" and in_window(err, windows, "enospc", grace):
        return "backend full"
    # a write through mmap into a hole of the full backend, or a read of
    # one (a writer verifies its file through a mapping; tmpfs allocates a
    # page for it): SIGBUS natively, and so with passthrough, where the
    # mapping is the backend's
    if e == "SIGBUS" and op in ("mmap", "verify") and \
            in_window(err, windows, "enospc", grace):
        return "backend full (SIGBUS on a mapped write)"
    if e == "EIO" and in_window(err, windows, "clamd", grace):
        if (op in SCANNED_OPENS and err.get("stage") == "open") or \
                err.get("stage") == "tool":
            return "clamd down or hung (fail closed)"
    if e == "tool" and (in_window(err, windows, "clamd", grace) or
                        in_window(err, windows, "enospc", grace)):
        return "tool failed during a fault window"
    return None


def judge(run):
    """run: a dict from the soak's main process. Returns the report."""
    counts, lat, errors, violations = read_logs(run["logdir"])
    violations += run["problems"]
    windows, grace = run["windows"], run["grace"]
    allowed_errs, bad_errs = {}, []
    for err in errors:
        why = allowed(err, windows, grace)
        key = f"{err['op']}:{err['errno']}"
        if why:
            allowed_errs[key] = allowed_errs.get(key, 0) + 1
        else:
            bad_errs.append(err)
    kinds = {}
    for v in violations:
        kinds.setdefault(v["kind"], []).append(v)

    samples = run["samples"]
    t_start = run["t_start"]
    warm = run["warmup"]
    resources = {}
    for key in tuple(TOLERANCE) + REPORTED:
        pts = [(s["t"] - t_start, s[key]) for s in samples
               if s["t"] - t_start >= warm and s.get(key) is not None]
        sl = slope_per_min(pts)
        span = (pts[-1][0] - pts[0][0]) / 60.0 if len(pts) > 1 else 0.0
        growth = sl * span
        tol = TOLERANCE.get(key)
        if tol and run["mode"] == "valgrind" and key == "rss_kb":
            tol *= 4
        resources[key] = {
            "slope_per_min": round(sl, 3), "growth_fitted": round(growth, 1),
            "first": pts[0][1] if pts else None,
            "last": pts[-1][1] if pts else None,
            "max": max((p[1] for p in pts), default=None),
            "tolerance": tol,
            # under ASan, RSS is the sanitizer allocator's (quarantine,
            # per-thread caches, shadow) and grew 16-27 MB/min in 2-minute
            # runs; leaks there are LeakSanitizer's job, at exit
            "flat": None if tol is None else bool(pts) and (
                growth <= tol or (run["mode"] == "asan" and
                                  key == "rss_kb"))}

    stats = run.get("stats_final") or {}
    refused = counts.get("eicar_refused", 0)
    eio = counts.get("ropen_EIO", 0)
    verdicts = counts.get("ropen_ok", 0) + counts.get("ropen_EACCES", 0) + eio
    stat_checks = {}
    if stats:
        def st(k):
            return int(stats.get(k, -1))
        stat_checks = {
            "infected >= EICAR opens refused": (st("infected"), refused),
            "opens_denied >= EICAR opens refused": (st("opens_denied"),
                                                    refused),
            "opens_error_denied >= EIO opens seen":
                (st("opens_error_denied"), eio),
            "opens_checked >= read opens seen": (st("opens_checked"),
                                                 verdicts),
        }
    stats_ok = bool(stats) and all(a >= b for a, b in stat_checks.values()) \
        and stats.get("clamd_up") == "1"

    inv = {}

    def put(name, ok, detail):
        inv[name] = {"ok": bool(ok), "detail": detail}

    fin = run["final"]
    put("completed_writes_intact",
        not kinds.get("content") and not fin["mismatch"],
        f"{counts.get('verified', 0)} reads verified byte-identical during "
        f"the run; final sweep: {fin['checked']} files, "
        f"{len(fin['mismatch'])} differ")
    eicar_bad = kinds.get("eicar_served", []) + kinds.get("eicar_opened", [])
    put("no_eicar_served", not eicar_bad and not fin["eicar_open"],
        f"{refused} EICAR opens through the mount refused; "
        f"{len(eicar_bad)} opened or served; final: {fin['eicar_checked']} "
        f"EICAR files, {len(fin['eicar_open'])} opened")
    lags = [w[3] - w[2] for w in windows if w[0] == "clamd"]
    put("errors_as_policy_says", not bad_errs,
        f"{sum(allowed_errs.values())} errors inside fault windows, "
        f"{len(bad_errs)} outside; {len(lags)} clamd outages, each ended "
        f"when clamd was seen scanning again, up to "
        f"{max(lags, default=0):.1f} s after the fault")
    put("daemon_resources_flat",
        all(r["flat"] for r in resources.values() if r["flat"] is not None),
        ", ".join(f"{k} {r['slope_per_min']:+}/min" for k, r in
                  resources.items()))
    put("no_request_past_deadline", not kinds.get("deadline"),
        f"deadline {run['deadline']} s; slowest: " +
        ", ".join(f"{k} {v:.2f}s" for k, v in sorted(lat.items())))
    put("mount_alive", not kinds.get("mount_dead") and run["exit_ok"],
        f"daemon exit: {run['exit_status']}")
    put("stats_consistent", stats_ok,
        "; ".join(f"{k}: {a} vs {b}" for k, (a, b) in stat_checks.items())
        or "no stats")
    crash = kinds.get("worker_crashed", [])
    fault_bad = [v for v in violations if v["kind"] in
                 ("fault_failed", "reload_failed", "drop_cache_failed")]
    put("faults_applied", not fault_bad and not crash,
        f"{len(run['faults'])} faults, {len(fault_bad)} failed; "
        f"{len(crash)} workload processes crashed")
    if run["mode"] == "valgrind":
        vg = run["valgrind"]
        put("memcheck_clean", vg.get("ok"), vg.get("summary"))
    if run["mode"] == "asan":
        put("sanitizers_clean", not run["sanitizer"],
            f"{len(run['sanitizer'])} sanitizer report lines")
    put("workload_ran", counts.get("verified", 0) > 0 and run["faults"],
        f"{counts.get('verified', 0)} verified reads, "
        f"{len(run['faults'])} faults")

    fault_counts = {}
    for f in run["faults"]:
        fault_counts[f["fault"]] = fault_counts.get(f["fault"], 0) + 1
    return {
        "ok": all(v["ok"] for v in inv.values()),
        "mode": run["mode"], "duration_s": round(run["t_end"] - t_start, 1),
        "config": run["config"], "invariants": inv,
        "counts": counts, "latency_max_s": lat,
        "errors_allowed": allowed_errs,
        "errors_unexpected": bad_errs[:50],
        "errors_unexpected_total": len(bad_errs),
        "violations": violations[:50], "violations_total": len(violations),
        "faults": fault_counts, "fault_events": run["faults"],
        "windows": windows, "resources": resources, "stats_final": stats,
        "final_sweep": fin, "valgrind": run.get("valgrind"),
        "sanitizer": run.get("sanitizer", [])[:40],
        "samples": samples,
    }


# summary.json keeps one resource sample in this many (one every 10 s):
# enough to plot and fit again, small enough for git.
SUMMARY_EVERY = 10


def summary(report, every=SUMMARY_EVERY):
    """The report with its samples thinned (the last one kept), for a copy
    published with a run (the dated runs' are in doc/soak's git
    history): report.json keeps them all."""
    samples = report["samples"]
    kept = samples[::every]
    if samples and kept[-1] is not samples[-1]:
        kept.append(samples[-1])
    return dict(report, samples=kept, samples_every=every)


def write_summary(report, path):
    with open(path, "w") as f:
        json.dump(summary(report), f, sort_keys=True, separators=(",", ":"))
        f.write("\n")


def write(report, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    write_summary(report, os.path.join(out, "summary.json"))
    dat = os.path.join(out, "samples.dat")
    write_samples(report, dat)
    png = os.path.join(out, "plot.png")
    plot(dat, png, report)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report, os.path.exists(png)))


def write_samples(report, dat):
    """The rates and resources over time, as gnuplot reads them."""
    t0 = report["samples"][0]["t"] if report["samples"] else 0
    prev = None
    with open(dat, "w") as f:
        f.write("# t_s opens_per_s scans_per_s rss_mib fds threads\n")
        for s in report["samples"]:
            if prev and s.get("opens") is not None and \
                    prev.get("opens") is not None:
                dt = max(s["t"] - prev["t"], 1e-3)
                f.write(f"{s['t'] - t0:.1f} "
                        f"{(s['opens'] - prev['opens']) / dt:.1f} "
                        f"{(s['scans'] - prev['scans']) / dt:.1f} "
                        f"{s['rss_kb'] / 1024:.1f} {s['fds']} "
                        f"{s['threads']}\n")
            prev = s


def plot(dat, png, report):
    if not shutil.which("gnuplot"):
        return
    marks = "".join(
        f"set arrow from {w[1] - report['samples'][0]['t']:.1f}, graph 0 "
        f"to {w[1] - report['samples'][0]['t']:.1f}, graph 1 nohead "
        f"lc rgb '{'#e0a0a0' if w[0] == 'clamd' else '#a0a0e0'}'\n"
        for w in report["windows"]) if report["samples"] else ""
    script = f"""
set terminal png size 900,900
set output '{png}'
set multiplot layout 4,1 title 'clamfs soak ({report['mode']}, \
{report['duration_s']:.0f} s): red lines clamd outages, blue ENOSPC'
set xlabel 't (s)'
set grid
{marks}
set ylabel 'opens/s'
plot '{dat}' using 1:2 with lines notitle
set ylabel 'scans/s'
plot '{dat}' using 1:3 with lines notitle
set ylabel 'RSS (MiB)'
plot '{dat}' using 1:4 with lines notitle
set ylabel 'fds, threads'
plot '{dat}' using 1:5 with lines title 'fds', '' using 1:6 with lines \
title 'threads'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script.encode(), check=False,
                   stderr=subprocess.DEVNULL)


def markdown(r, have_png):
    L = [f"# clamfs soak: {r['mode']}, {r['duration_s'] / 60:.1f} min",
         "", f"Result: **{'all invariants hold' if r['ok'] else 'BROKEN'}**",
         "", "Configuration: " + ", ".join(f"{k}={v}" for k, v in
                                          sorted(r["config"].items())),
         "", "| invariant | holds | figures |", "| --- | --- | --- |"]
    for name, v in r["invariants"].items():
        L.append(f"| {name} | {'yes' if v['ok'] else '**NO**'} | "
                 f"{v['detail']} |")
    L += ["", "## Faults", "", "| fault | times |", "| --- | --- |"]
    L += [f"| {k} | {v} |" for k, v in sorted(r["faults"].items())]
    L += ["", "## Daemon resources after warm-up", "",
          "| | first | last | max | slope per minute | fitted growth |"
          " tolerance |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for k, v in r["resources"].items():
        L.append(f"| {k} | {v['first']} | {v['last']} | {v['max']} | "
                 f"{v['slope_per_min']} | {v['growth_fitted']} | "
                 f"{v['tolerance'] or 'not judged'} |")
    c = r["counts"]
    ops = sorted(k for k in c if not k.startswith(("err_", "ropen_")))
    L += ["", "## Workload", "", "| operation | count |", "| --- | --- |"]
    L += [f"| {k} | {c[k]} |" for k in ops]
    L += ["", "Opens decided by a scan, by outcome: " +
          ", ".join(f"{k[6:]} {v}" for k, v in sorted(c.items())
                    if k.startswith("ropen_"))]
    L += ["", "## Errors inside fault windows (allowed)", ""]
    L += [f"- {k}: {v}" for k, v in sorted(r["errors_allowed"].items())] \
        or ["- none"]
    L += ["", f"## Errors outside the policy ({r['errors_unexpected_total']})",
          ""]
    L += [f"- `{json.dumps(e)}`" for e in r["errors_unexpected"][:20]] \
        or ["- none"]
    L += ["", f"## Broken invariants ({r['violations_total']})", ""]
    L += [f"- `{json.dumps(v)}`" for v in r["violations"][:20]] or ["- none"]
    L += ["", "## clamfs --stats at the end", "", "```"]
    L += [f"{k}={v}" for k, v in r["stats_final"].items()]
    L += ["```"]
    if have_png:
        L += ["", "![opens/s, scans/s, RSS, fds over time](plot.png)"]
    return "\n".join(L) + "\n"


def replot(summary_json, png):
    """The plot again from a published summary (summary.json)."""
    with open(summary_json) as f:
        report = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        dat = os.path.join(tmp, "samples.dat")
        write_samples(report, dat)
        plot(dat, png, report)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "--replot":
        sys.exit("usage: bench/soak/soak_report.py --replot SUMMARY.json PNG")
    replot(sys.argv[2], sys.argv[3])
