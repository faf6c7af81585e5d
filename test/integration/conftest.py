# SPDX-License-Identifier: GPL-2.0-or-later
# Shared pytest fixtures: a private clamd (clamd_fixture.py) and real FUSE
# mounts of clamfs (mount_fixture.py).
pytest_plugins = ["clamd_fixture", "mount_fixture"]
