# SPDX-License-Identifier: GPL-2.0-or-later
"""POSIX ACLs through the acl package's setfacl."""
import subprocess


def setfacl(*args, check=True):
    """Runs `setfacl ARGS` and returns its exit status; with check (the
    default) a failure raises with setfacl's message."""
    r = subprocess.run(["setfacl"] + list(args), capture_output=True,
                       text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"setfacl {' '.join(args)}: {r.stderr.strip()}")
    return r.returncode
