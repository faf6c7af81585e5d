# SPDX-License-Identifier: GPL-2.0-or-later
# Writes carried out for a user must meet the limits the user meets
# natively: the daemon runs as root, but without CAP_SYS_RESOURCE (quota
# hard limits, the blocks ext4 reserves for root).
import os

from scanutil import mount_scan


def test_daemon_has_no_sys_resource(mount_clamfs, clamd):
    m = mount_scan(mount_clamfs, clamd)
    CAP_SYS_RESOURCE = 24
    for tid in os.listdir(f"/proc/{m.pid}/task"):
        with open(f"/proc/{m.pid}/task/{tid}/status") as f:
            caps = {l.split(":")[0]: int(l.split(":")[1], 16)
                    for l in f if l.startswith("Cap")}
        for kind in ("CapEff", "CapPrm", "CapInh", "CapBnd"):
            assert not caps[kind] & (1 << CAP_SYS_RESOURCE), (tid, kind)
