# SPDX-License-Identifier: GPL-2.0-or-later
"""errno numbers as the names tests compare (EACCES, not 13)."""
import errno


def errname(e):
    """The name of errno e (an int), or str(e) when it has none."""
    return errno.errorcode.get(e, str(e))
