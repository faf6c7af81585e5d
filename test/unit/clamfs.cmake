# SPDX-License-Identifier: GPL-2.0-or-later
# Unit tests of the daemon's FUSE-free modules.
foreach(t test_opts test_inode test_nodeid test_mountpoint test_vcache
		test_policy test_action test_inifile test_log test_scanq test_creds
		test_clamdconf test_qrecord test_escape test_writers test_tsgrain
		test_vstore test_fdlimit test_generation)
	clamfs_unit_test(${t})
	target_link_libraries(${t} PRIVATE clamfs_core)
endforeach()
# switching identity, giving files to other users: root; 77 says skipped
set_tests_properties(test_creds test_action PROPERTIES SKIP_RETURN_CODE 77)
# the Prometheus table and renderer against what stats.c emits
clamfs_unit_test(test_prom)
target_link_libraries(test_prom PRIVATE clamfs_core)
# the option table against the man pages and the sample INI, and the
# clamd address rules the daemon and --check share
foreach(t test_optable test_poolcfg)
	clamfs_unit_test(${t})
	target_link_libraries(${t} PRIVATE clamfs_core)
endforeach()
target_compile_definitions(test_optable PRIVATE
	CLAMFS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# the database watch over a fleet: clamd's VERSION and the backends'
# health are the test's (-Wl,--wrap), no clamd runs
clamfs_unit_test(test_dbwatch)
target_link_libraries(test_dbwatch PRIVATE clamfs_core)
target_link_options(test_dbwatch PRIVATE -Wl,--wrap=cdp_version_cancel
	-Wl,--wrap=cdp_fleet_backend_stats -Wl,--wrap=log_err)
