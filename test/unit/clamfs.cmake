# SPDX-License-Identifier: GPL-2.0-or-later
# Unit tests of the daemon's FUSE-free modules.
foreach(t test_opts test_inode test_mountpoint test_vcache test_policy
		test_action test_config test_log test_scanq)
	clamfs_unit_test(${t})
	target_link_libraries(${t} PRIVATE clamfs_core)
endforeach()
