/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * unmptcpw.h - uncoordinated multipath TCP Westwood (unMPTCPW), the
 * comparison of the MPTCPW paper (Le, Hong, Huh, "Coordinated TCP Westwood
 * Congestion Control for Multiple Paths over Wireless Networks", §V): each
 * subflow runs TCPW on its own, its increase scaled by the traffic-splitting
 * factor (1/2)^2, so that at a shared bottleneck each of two subflows gets
 * half of what a regular TCPW flow gets (AIMD's rate goes with the square
 * root of its increase).
 *
 *   per acknowledged packet:  w_s += split / w_s       (split = 1/4)
 *   on loss:                  w_s = B_s * RTTmin_s      (TCPW, as mptcpw)
 *
 * It is core/mptcpw.h with delta_s fixed at split and no shared table.
 * split is Q10 in the tunable (UNMPTCPW_SPLIT_X1024), Q16 inside.
 */
#ifndef CC_UNMPTCPW_H
#define CC_UNMPTCPW_H

#include "mptcpw.h"

#define UNMPTCPW_SPLIT_X1024	256U	/* (1/2)^2 for two paths */
#define UNMPTCPW_SPLIT_MAX	1024U	/* 1.0: plain TCPW */

/* split (Q10) as the increase's delta (Q16). */
static CC_INLINE u32 unmptcpw_delta_q16(u32 split_x1024)
{
	return CC_MIN(split_x1024, UNMPTCPW_SPLIT_MAX) << (MPTCPW_SCALE - 10);
}

#endif /* CC_UNMPTCPW_H */
