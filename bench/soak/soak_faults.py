# SPDX-License-Identifier: GPL-2.0-or-later
"""The soak's fault driver and EICAR dropper (threads of the soak's main
process).

FaultDriver picks a fault at random intervals and records when it began and
ended: clamd restarted, killed, told to RELOAD, stopped (SIGSTOP) for longer
than scan_timeout; clamfs given a changed configuration by SIGHUP or by
`clamfs --reload`, its cache dropped by SIGUSR1 or `clamfs --drop-cache`;
the backend filled to ENOSPC and freed; a reader or writer killed. The
windows in which clamd could not answer, or the backend was full, are what
the soak later allows EIO on opens, and ENOSPC, in. A clamd outage is judged
by observation, not by the schedule: it ends when a probe scan sent straight
to clamd is answered again (after a stop, clamd first works through every
command queued meanwhile, which takes longer the busier the machine is).

Dropper puts EICAR files into eicar/ directly on the backend and through the
mount (also by turning a clean file, already scanned and cached, into EICAR
in place) and opens each once through the mount: the open must be refused.
"""
import errno
import os
import signal
import struct
import threading
import time

from soak_oracle import eicar_bytes, has_eicar

# Seconds between the daemon's VERSION checks (its clamd_up).
VERSION_CHECK = 5

# Settings a reload can change live, and the values the driver picks from.
CONFIG_CHOICES = {
    "cache_ttl": ("3600", "0", "20"),
    "cache_entries": ("100000", "64"),
    "transport": ("unix", "tcp"),
    "racy_window": ("2", "1"),
}


def write_config(ctx, settings):
    """The mount's configuration file with these settings; atomically."""
    s = settings
    if s["transport"] == "tcp":
        clamd = f"clamd = {ctx.clamd.tcp_addr}\n"
        mode = "scan_mode = stream\n"
    else:
        clamd = f"clamd = {ctx.clamd.socket}\n"
        mode = "scan_mode = fdpass\n"
    text = ("; written by bench/soak/run\n[fuse]\n"
            f"backend = {ctx.backend}\nmountpoint = {ctx.mnt}\n"
            "options = allow_other\n\n[clamd]\n" + clamd +
            f"version_check = {VERSION_CHECK}\n\n[scan]\n" + mode +
            f"scan_timeout = {ctx.scan_timeout}\nscan_threads = 4\n\n"
            f"[cache]\ncache_ttl = {s['cache_ttl']}\n"
            f"cache_entries = {s['cache_entries']}\n"
            f"racy_window = {s['racy_window']}\n")
    tmp = ctx.config + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, ctx.config)


class FaultDriver(threading.Thread):
    FAULTS = (("clamd_restart", 2), ("clamd_kill", 1), ("clamd_reload", 2),
              ("clamd_hang", 2), ("sighup", 2), ("reload_cmd", 2),
              ("sigusr1", 1), ("drop_cache", 1), ("enospc", 2),
              ("kill_worker", 4))

    def __init__(self, ctx, rng, interval):
        super().__init__(name="faults", daemon=True)
        self.ctx, self.rng, self.interval = ctx, rng, interval
        self.stopping = threading.Event()
        self.events = []   # every fault: name, t0, t1, ok, detail
        # (kind, t0, t1, t_ok): "clamd" or "enospc"; t1 when the fault
        # ended, t_ok when clamd was seen scanning again (enospc: t1)
        self.windows = []
        self.settings = {k: v[0] for k, v in CONFIG_CHOICES.items()}

    def run(self):
        names = [n for n, _ in self.FAULTS]
        weights = [w for _, w in self.FAULTS]
        while not self.stopping.wait(self.rng.uniform(*self.interval)):
            name = self.rng.choices(names, weights)[0]
            ev = {"fault": name, "t0": time.time(), "ok": True}
            try:
                detail = getattr(self, "f_" + name)()
                if detail:
                    ev["detail"] = detail
            except Exception as e:  # a fault that could not be made
                ev["ok"] = False
                ev["detail"] = f"{type(e).__name__}: {e}"
                self.ctx.problem("fault_failed", fault=name,
                                 detail=ev["detail"])
                self.ctx.ensure_clamd()
            ev["t1"] = time.time()
            self.events.append(ev)

    def stop(self):
        self.stopping.set()
        self.join()

    # -- clamd -------------------------------------------------------------
    def f_clamd_restart(self):
        t0 = time.time()
        try:
            self.ctx.clamd.stop()
            time.sleep(self.rng.uniform(0.5, 3))
            self.ctx.clamd.start()
        finally:
            self.clamd_window(t0)

    def f_clamd_kill(self):
        t0 = time.time()
        try:
            self.ctx.clamd.kill()
            time.sleep(self.rng.uniform(0.5, 2))
            self.ctx.clamd.start()
        finally:
            self.clamd_window(t0)

    PROBE = b"clamfs soak probe: clean\n"

    def clamd_window(self, t0):
        """Records a clamd outage from t0 to the first probe scan clamd
        answers: the outage lasts as long as clamd does not scan, also
        after the fault itself has ended."""
        from clamfstest.clamd import command  # bench/soak/run put it on the path
        t1 = time.time()
        t_ok = None
        end = t1 + 120
        req = (b"zINSTREAM\0" + struct.pack(">I", len(self.PROBE)) +
               self.PROBE + struct.pack(">I", 0))
        while t_ok is None and time.time() < end:
            try:
                if command(self.ctx.clamd.socket, req,
                           self.ctx.scan_timeout) == b"stream: OK\0":
                    t_ok = time.time()
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if t_ok is None:
            self.ctx.problem("clamd_not_scanning", seconds=end - t1)
            t_ok = time.time()
        self.windows.append(("clamd", t0, t1, t_ok))
        return t_ok - t1

    def f_clamd_reload(self):
        # RELOAD is no outage: no window is opened for it.
        self.ctx.clamd.reload()

    def f_clamd_hang(self):
        pid = self.ctx.clamd.proc.pid
        hang = self.ctx.scan_timeout + self.rng.uniform(1, 3)
        t0 = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(hang)
        finally:
            os.kill(pid, signal.SIGCONT)
            late = self.clamd_window(t0)
        return f"stopped {hang:.1f}s, scanning again {late:.1f}s later"

    # -- clamfs --------------------------------------------------------------
    def new_settings(self):
        key = self.rng.choice(sorted(CONFIG_CHOICES))
        vals = [v for v in CONFIG_CHOICES[key] if v != self.settings[key]]
        self.settings[key] = self.rng.choice(vals)
        write_config(self.ctx, self.settings)
        return f"{key}={self.settings[key]}"

    def f_sighup(self):
        what = self.new_settings()
        os.kill(self.ctx.daemon_pid, signal.SIGHUP)
        return what

    def f_reload_cmd(self):
        what = self.new_settings()
        r = self.ctx.clamfs_cmd("--reload")
        if r.returncode != 0:
            self.ctx.problem("reload_failed", rc=r.returncode,
                             out=(r.stdout + r.stderr)[-600:], change=what)
        return f"{what} rc={r.returncode}"

    def f_sigusr1(self):
        os.kill(self.ctx.daemon_pid, signal.SIGUSR1)

    def f_drop_cache(self):
        r = self.ctx.clamfs_cmd("--drop-cache")
        if r.returncode != 0:
            self.ctx.problem("drop_cache_failed", rc=r.returncode,
                             out=(r.stdout + r.stderr)[-600:])
        return f"rc={r.returncode}"

    # -- backend and workers ---------------------------------------------
    def f_enospc(self):
        path = os.path.join(self.ctx.backend, ".fill")
        t0 = time.time()
        filled = 0
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                chunk = b"\0" * (1 << 20)
                while True:
                    try:
                        filled += os.write(fd, chunk)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
            finally:
                os.close(fd)
            time.sleep(self.rng.uniform(1, 4))
        finally:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            t1 = time.time()
            self.windows.append(("enospc", t0, t1, t1))
        return f"filled {filled >> 20} MiB"

    def f_kill_worker(self):
        return self.ctx.kill_random_worker(self.rng)


class Dropper(threading.Thread):
    """Drops EICAR files and checks the mount refuses them."""

    KEEP = 24

    def __init__(self, ctx, rng, log):
        super().__init__(name="dropper", daemon=True)
        self.ctx, self.rng, self.log = ctx, rng, log
        self.stopping = threading.Event()
        self.n = 0
        self.names = []

    def stop(self):
        self.stopping.set()
        self.join()

    def run(self):
        kinds = ("backend", "mount", "flip_mount", "flip_backend")
        while not self.stopping.wait(self.rng.uniform(0.3, 1.5)):
            kind = self.rng.choice(kinds)
            t0 = time.time()
            try:
                self.drop(kind)
                self.log.count(f"eicar_drop_{kind}")
            except OSError as e:
                self.log.error("eicar_" + kind, "", e.errno, t0, "io")
            while len(self.names) > self.KEEP:
                name = self.names.pop(0)
                # through the mount: a file deleted behind it keeps its
                # inode (and clamfs's O_PATH fd) until the kernel forgets
                # it, which would read as an fd leak
                try:
                    os.unlink(os.path.join(self.ctx.mnt, "eicar", name))
                except OSError as e:
                    self.log.error("eicar_unlink", name, e.errno, t0, "io")
            self.log.flush()
        self.log.flush(force=True)

    def put(self, path, data, flags=os.O_CREAT | os.O_EXCL):
        fd = os.open(path, os.O_WRONLY | flags, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def drop(self, kind):
        self.n += 1
        name = f"{kind[0]}{kind[-1]}{self.n}.com"
        b = os.path.join(self.ctx.backend, "eicar")
        m = os.path.join(self.ctx.mnt, "eicar")
        stage = f".{name}.stage"
        if kind == "backend":
            self.put(os.path.join(b, stage), eicar_bytes())
            os.rename(os.path.join(b, stage), os.path.join(b, name))
        elif kind == "mount":
            self.put(os.path.join(m, stage), eicar_bytes())
            os.rename(os.path.join(m, stage), os.path.join(m, name))
        else:
            # a clean file, scanned and cached clean, then made EICAR in
            # place (larger first: the size changes, as does the ctime)
            clean = self.rng.randbytes(200)
            self.put(os.path.join(m, stage), clean)
            self.open_through_mount(os.path.join(m, stage), clean)
            root = m if kind == "flip_mount" else b
            self.put(os.path.join(root, stage), eicar_bytes(), os.O_TRUNC)
            os.rename(os.path.join(root, stage), os.path.join(root, name))
        self.names.append(name)
        self.open_through_mount(os.path.join(m, name), None)

    def open_through_mount(self, path, clean):
        """clean: the bytes the file must give; None: it is EICAR and the
        open must be refused."""
        t0 = time.time()
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            key = errno.errorcode.get(e.errno, str(e.errno))
            self.log.count(f"ropen_{key}")
            if clean is None and e.errno == errno.EACCES:
                self.log.count("eicar_refused")
            else:
                self.log.error("eicar_open" if clean is None else "read",
                               path, e.errno, t0, "open")
            return
        self.log.count("ropen_ok")
        try:
            got = os.read(fd, 4096)
        finally:
            os.close(fd)
        if clean is None:
            self.log.violation("eicar_opened", path=path, n=len(got),
                               eicar=has_eicar(got))
        elif got != clean:
            self.log.violation("content", path=path, op="dropper",
                               want_size=len(clean), got_size=len(got))
        else:
            self.log.count("verified")
