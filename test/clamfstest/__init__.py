# SPDX-License-Identifier: GPL-2.0-or-later
"""clamfstest: the Python side of clamfs's tests, benchmarks and demo.

One package, imported by test/integration (its conftest.py puts test/ on
sys.path), by bench/ and by scripts/demo (each inserts the one directory
test/ into sys.path). It imports nothing from pytest: the pytest fixtures
are thin wrappers in test/integration/conftest.py.

Modules:
  env        the build under test (CLAMFS_BIN, CLAMFS_BUILD_DIR,
             CLAMFS_SANITIZE, CLAMFS_TEST_OPTS), SLOW, PYTHON, sanitizer
             report markers; privileged(): why a run cannot mount.
  clamd      a private clamd (own socket, port, EICAR database), the
             EICAR bytes assembled from two halves, raw clamd commands.
  mount      Mount: one running FUSE daemon (clamfs or any other) and its
             teardown; start_clamfs(), launch(), MountFactory.
  mountinfo  /proc/self/mountinfo: entries, fuse_mounts_at(), mounted().
  procs      pids by program and argument, pid_alive(), proc_status().
  stats      the one parser of trusted.clamfs.stats / `clamfs --stats`.
  errnames   errname(): errno number to its name.
  wait       wait_for(): the one polling loop (timeouts scaled by SLOW).
  acl        setfacl().
  haproxy    a private HAProxy (unpacked by scripts/deps, never installed):
             HAProxy(config).start(), stop(), cleanup(); available().
  tlsca      ScratchCA: a CA and certificates made at run time with the
             openssl tool (expired ones too) for the TLS tests.
  mapped     mapped_write(): a write through mmap in a child, so that
             SIGBUS (a hole of a full backend) fails only that write.
"""
