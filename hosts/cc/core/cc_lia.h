/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * cc_lia.h - the Linked Increases Algorithm (C. Raiciu, M. Handley, D. Wischik,
 * "Coupled Congestion Control for Multipath Transport Protocols", IETF RFC
 * 6356, 2011), portable core: the coupled MPTCP increase the MPTCPW paper
 * (Le, Hong, Huh, "Coordinated TCP Westwood Congestion Control for Multiple
 * Paths over Wireless Networks", §V) compares against.
 *
 * RFC 6356 §3, per subflow i of one connection, windows in packets:
 *
 *   alpha = W_total * max_r(w_r / rtt_r^2) / (sum_r w_r / rtt_r)^2
 *   per acknowledged packet on i:  w_i += min(alpha / W_total, 1 / w_i)
 *   per loss on i:                 w_i /= 2        (Reno)
 *
 * (the RFC counts bytes: bytes_acked * MSS_i / cwnd_total with cwnds in
 * bytes, the same per packet when the subflows share one MSS.)  alpha is
 * recomputed on every ACK from the current (w_r, rtt_r) of the live
 * subflows, which the shells keep in the table of core/mptcpw.h.
 *
 * Rewritten without the squares, with q_r = (w_r/rtt_r) / sum(w/rtt) each
 * path's share of the rate and p_j = w_j / W_total its share of the window:
 *
 *   alpha = max_r(q_r / rtt_r) / sum_j(p_j / rtt_j)
 *
 * (both sums over W_total: sum(w/rtt) = W_total sum_j p_j / rtt_j.)
 * and the increase as delta_i / w_i, delta_i = min(alpha * p_i, 1), which
 * is what cc_frac_increase takes.  One path: alpha = 1, Reno.
 *
 * Fixed point: alpha, q, p and delta Q16 (LIA_UNIT); q / rtt and p / rtt
 * are Q16 << LIA_SHARE_SHIFT per us, each < 2^40, their sum over 8 paths
 * < 2^43 and the max << 16 < 2^56.  RTTs are clamped to LIA_RTT_MAX_US
 * (2^28 us, 268 s); only a share under 2^-12 of a path with an RTT near
 * that rounds to 0.
 * alpha is capped at LIA_ALPHA_MAX (alpha <= n for n paths: 8 suffices).
 */
#ifndef CC_LIA_H
#define CC_LIA_H

#include "mptcpw.h"

#define LIA_SCALE		MPTCPW_SCALE
#define LIA_UNIT		(1U << LIA_SCALE)
#define LIA_RTT_MAX_US		(1U << 28)
#define LIA_SHARE_SHIFT		24
#define LIA_ALPHA_MAX		(MPTCPW_MAX_PATHS * LIA_UNIT)

static CC_INLINE int lia_live(const struct mptcpw_conn *c, u32 i)
{
	return (c->used & (1U << i)) && c->path[i].cwnd && c->path[i].rtt_us;
}

/* RFC 6356's alpha over the live slots, Q16; 1.0 when none is usable. */
static CC_INLINE u32 lia_alpha_q16(const struct mptcpw_conn *c)
{
	u64 x[MPTCPW_MAX_PATHS], sum_x = 0, sum_w = 0, best = 0, h = 0, q, p;
	u32 rtt[MPTCPW_MAX_PATHS], w[MPTCPW_MAX_PATHS], i;

	/* one reading of each slot: the peers write theirs on every ACK, and
	 * a window read twice could change between the sums and the shares */
	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		x[i] = 0;
		rtt[i] = 1;
		w[i] = 0;
		if (!lia_live(c, i))
			continue;
		rtt[i] = CC_MIN(c->path[i].rtt_us, LIA_RTT_MAX_US);
		w[i] = CC_MIN(c->path[i].cwnd, CC_MAX_CWND);
		x[i] = CC_DIV64((u64)w[i] << MPTCPW_RATE_SHIFT, rtt[i]);
		sum_x += x[i];
		sum_w += w[i];
	}
	if (!sum_x || !sum_w)
		return LIA_UNIT;
	/* best = max_r q_r / rtt_r, h = sum_j p_j / rtt_j, both Q16 << 24 */
	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		if (!x[i])
			continue;
		q = CC_DIV64(x[i] << LIA_SCALE, sum_x);
		p = CC_DIV64((u64)w[i] << LIA_SCALE, sum_w);
		best = CC_MAX(best, CC_DIV64(q << LIA_SHARE_SHIFT, rtt[i]));
		h += CC_DIV64(p << LIA_SHARE_SHIFT, rtt[i]);
	}
	if (!h)
		return LIA_UNIT;
	return (u32)CC_MIN(CC_DIV64(best << LIA_SCALE, h), (u64)LIA_ALPHA_MAX);
}

/* delta_i = min(alpha * w_i / W_total, 1), Q16: the increase on subflow
 * self is delta_i / w_i per packet.  1.0 (Reno) when uncoupled. */
static CC_INLINE u32 lia_delta_q16(const struct mptcpw_conn *c, u32 self)
{
	u64 sum_w = 0, d;
	u32 i;

	if (!c || self >= MPTCPW_MAX_PATHS || !lia_live(c, self))
		return LIA_UNIT;
	for (i = 0; i < MPTCPW_MAX_PATHS; i++)
		if (lia_live(c, i))
			sum_w += CC_MIN(c->path[i].cwnd, CC_MAX_CWND);
	d = CC_DIV64((u64)lia_alpha_q16(c) *
		     CC_MIN(c->path[self].cwnd, CC_MAX_CWND), sum_w);
	return (u32)CC_MIN(d, (u64)LIA_UNIT);
}

struct lia {
	u64 acc;	/* increase accumulator, Q16 packets x W */
	u32 delta;	/* last delta_i, Q16 */
	u32 slot;	/* slot in the shared table, ~0U = none */
};

static CC_INLINE void lia_init(struct lia *l)
{
	l->acc = 0;
	l->delta = LIA_UNIT;
	l->slot = ~0U;
}

/* Every ACK: this subflow's (cwnd, srtt) into its slot of c (NULL when
 * uncoupled), in recovery too, so that the peers see the window the loss
 * left. */
static CC_INLINE void lia_on_ack(const struct lia *l, struct mptcpw_conn *c,
				 u32 cwnd, u32 srtt_us)
{
	u32 slot = l->slot & (MPTCPW_MAX_PATHS - 1);	/* bound */

	if (c && l->slot < MPTCPW_MAX_PATHS) {
		c->path[slot].cwnd = cwnd;
		c->path[slot].rtt_us = srtt_us;
	}
}

/* Congestion avoidance, one ACK covering acked packets. */
static CC_INLINE void lia_increase(struct lia *l, const struct mptcpw_conn *c,
				   u32 *cwnd, u32 acked)
{
	l->delta = LIA_UNIT;
	if (c && l->slot < MPTCPW_MAX_PATHS)
		l->delta = lia_delta_q16(c, l->slot & (MPTCPW_MAX_PATHS - 1));
	cc_frac_increase(cwnd, &l->acc, l->delta, acked, LIA_SCALE);
}

/* Loss: Reno's halving, at least 2. */
static CC_INLINE u32 lia_ssthresh(struct lia *l, u32 cwnd)
{
	l->acc = 0;
	return CC_MAX(cwnd >> 1, CC_MIN_SSTHRESH);
}

#endif /* CC_LIA_H */
