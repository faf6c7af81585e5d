/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The real scanner behind the scan queue (scanq.h's scanq_scan_fn): what
 * one attempt of a scan does with the clamd fleet.
 */
#ifndef CLAMFS_SCANNER_CLAMD_H
#define CLAMFS_SCANNER_CLAMD_H

#include "clamdproto.h"
#include "scanq.h"

/*
 * Asks clamd through the backend s->fleet picks (not the previous
 * attempt's for a retry); fdpass or stream as that backend was
 * configured, in path mode too. A first attempt while another backend is
 * healthy gets only half of what is left, so that a stalled backend
 * leaves time for the retry elsewhere. A retry that goes to the same
 * address as the failed attempt (one clamd, or a balancer) first waits
 * 200 ms, at most a quarter of what is left, cut short by the cancel.
 */
void scanner_clamd_scan(const struct scanq_scan *s, struct cdp_result *res);

#endif
