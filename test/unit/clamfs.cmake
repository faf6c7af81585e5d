# SPDX-License-Identifier: GPL-2.0-or-later
# Unit tests of the daemon's modules, each linked with the lowest layer
# (clamfs/CMakeLists.txt) that holds what it tests: only the command
# line's and the daemon's tests see libfuse, only test_prom expat.
function(clamfs_layer_tests layer)
	foreach(t ${ARGN})
		clamfs_unit_test(${t})
		target_link_libraries(${t} PRIVATE clamfs_${layer})
	endforeach()
endfunction()
clamfs_layer_tests(util test_mountpoint test_log test_creds test_waitlist
	test_fileid test_groupfree test_fanwatch)
clamfs_layer_tests(inode test_inode test_inode_park test_nodeid)
clamfs_layer_tests(scan test_vcache test_policy test_action test_scanq
	test_scanq_run test_scanq_background test_qrecord test_writers
	test_tsgrain test_vstore test_escape)
# the scan queue's tests share a fake scanner and the queue's hooks
foreach(t test_scanq test_scanq_run test_scanq_background)
	target_sources(${t} PRIVATE scanq_fake.c)
endforeach()
# the option table against the man pages and the sample INI, and the
# clamd address rules the daemon and --check share
clamfs_layer_tests(config test_optable test_poolcfg test_clamdconf)
clamfs_layer_tests(mount test_generation test_gate)
# -o and the INI file through the command line's parser
clamfs_layer_tests(fuse test_opts test_inifile)
clamfs_layer_tests(daemon test_fdlimit)
# the Prometheus table and renderer against what stats.c emits
clamfs_layer_tests(admin test_prom)
target_link_libraries(test_prom PRIVATE clamfs_scan)
# switching identity, giving files to other users: root; 77 says skipped
set_tests_properties(test_creds test_action PROPERTIES SKIP_RETURN_CODE 77)
target_compile_definitions(test_optable PRIVATE
	CLAMFS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# the database watch over a fleet: clamd's VERSION and the backends'
# health are the test's (-Wl,--wrap), no clamd runs
clamfs_unit_test(test_dbwatch)
target_link_libraries(test_dbwatch PRIVATE clamfs_scan)
target_link_options(test_dbwatch PRIVATE -Wl,--wrap=cdp_version_cancel
	-Wl,--wrap=cdp_fleet_backend_stats -Wl,--wrap=log_err)
# the verdict store on a slow disk: its commits are the test's
target_link_options(test_vstore PRIVATE -Wl,--wrap=mdb_txn_commit)
