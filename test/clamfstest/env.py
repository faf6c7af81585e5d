# SPDX-License-Identifier: GPL-2.0-or-later
"""The build under test and the run's conditions, from the environment.

CLAMFS_BIN / CLAMFS_SCAN_BIN name programs; CLAMFS_BUILD_DIR is the build
tree they are otherwise found in (by default the source tree's build/, the
one README.md's commands make); CLAMFS_SANITIZE says the build has
ASan+UBSan (timeouts then scale by SLOW); CLAMFS_TEST_OPTS adds -o
options to every mount.
"""
import os
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
SANITIZE = os.environ.get("CLAMFS_SANITIZE", "").lower() in ("1", "on",
                                                              "true")
# Everything in a sanitizer build's daemon is 2-3x slower.
SLOW = 3.0 if SANITIZE else 1.0

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:",
                     "LeakSanitizer", "ERROR: UndefinedBehaviorSanitizer",
                     "WARNING: ThreadSanitizer")


class MissingProgram(AssertionError):
    """A program of the build is not there (an AssertionError, so that a
    test needing it fails rather than errors)."""


def build_dir():
    """CLAMFS_BUILD_DIR, else the source tree's build/ if there is one
    (so that one test runs with no variable set), else None."""
    bd = os.environ.get("CLAMFS_BUILD_DIR")
    if bd:
        return bd
    bd = os.path.join(SRC, "build")
    return bd if os.path.isdir(bd) else None


def built_binary(env_var, *rel):
    """The program named by env_var, else build_dir()/rel..."""
    b = os.environ.get(env_var)
    if not b:
        bd = build_dir()
        if bd:
            b = os.path.join(bd, *rel)
    if not b or not os.access(b, os.X_OK):
        raise MissingProgram(f"{env_var} not set or not executable: {b!r}")
    return b


def clamfs_bin():
    return built_binary("CLAMFS_BIN", "clamfs", "clamfs")


def extra_test_opts():
    """-o options every mount of the suite gets, from CLAMFS_TEST_OPTS
    (comma-separated), e.g. to point the daemon at a test clamd."""
    return [o for o in os.environ.get("CLAMFS_TEST_OPTS", "").split(",") if o]


def sanitizer_lines(text):
    return [l for l in text.splitlines()
            if any(mk in l for mk in SANITIZER_MARKERS)]


def sanitizer_env(prefix, base=None):
    """The environment with sanitizer reports going to files prefix.PID (a
    daemonized clamfs has no stderr left to report on)."""
    env = dict(os.environ if base is None else base)
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                "TSAN_OPTIONS"):
        cur = env.get(var, "")
        env[var] = (cur + ":" if cur else "") + f"log_path={prefix}"
    return env


def cannot_mount():
    """Why this process cannot run the suite (it mounts FUSE filesystems
    with allow_other, starts clamd as root, switches users), or None."""
    if os.geteuid() != 0:
        return f"needs root (running as uid {os.geteuid()})"
    if not os.path.exists("/dev/fuse"):
        return "needs /dev/fuse (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "needs read/write access to /dev/fuse"
    return None
