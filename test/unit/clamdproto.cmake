# SPDX-License-Identifier: GPL-2.0-or-later
# clamdproto unit tests: reply parser, framing, addresses, versions, the
# fleet's selection and health decisions, the STATS thread figures, the
# command codec and connection I/O against a socketpair fake clamd, the TLS
# client against an in-process OpenSSL server.
foreach(t test_cdp_reply test_cdp_frame test_cdp_addr test_cdp_version
	test_cdp_fleet test_cdp_stats test_cdp_codec test_cdp_tls)
	clamfs_unit_test(${t})
	target_link_libraries(${t} PRIVATE clamdproto)
	target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/clamdproto)
endforeach()
