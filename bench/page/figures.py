# SPDX-License-Identifier: GPL-2.0-or-later
"""What bench/page measures and its page shows, shared by the measuring
script (run) and the renderer (render.py): units, the bonnie++ fields, the
allocation modes, the contenders and the original ClamFS's configuration."""

MiB = 1 << 20
GiB = 1 << 30


# ClamFS 1.2: fdpass like clamfs; maximal-size is a C int (2 GB at most);
# no whitelist/blacklist; log only warnings, to stdout (our log file).
CLAMFS12_XML = """<?xml version="1.0" encoding="UTF-8"?>
<clamfs>
  <clamd socket="%(socket)s" mode="fdpass" check="yes" />
  <filesystem root="%(root)s" mountpoint="%(mnt)s" public="yes" />
  <file maximal-size="2000000000" />
  %(cache)s
  <log method="stdout" verbose="no" />
  <debug threads="no" fork="no" />
</clamfs>
"""


BONNIE_FIELDS = [  # (key, csv index, label)
    ("put_block", 11, "block write"),
    ("rewrite", 13, "rewrite"),
    ("get_block", 17, "block read"),
    ("seeks", 19, "random seeks"),
    ("seq_create", 26, "seq create"),
    ("seq_stat", 28, "seq stat"),
    ("seq_del", 30, "seq delete"),
    ("ran_create", 32, "random create"),
    ("ran_stat", 34, "random stat"),
    ("ran_del", 36, "random delete"),
]


FALLOC_MODES = [("fallocate", "posix_fallocate"), ("mmap", "mmap writes"),
                ("write4k", "4 KiB write()s"), ("write8k", "8 KiB write()s"),
                ("write1m", "1 MiB write()s")]


ALL_CONTENDERS = ["native", "clamfs", "clamfs-pt-off", "clamfs-nocache",
                  "clamfs-1.2", "clamfs-1.2-nocache", "passthrough_ll",
                  "passthrough_hp"]
