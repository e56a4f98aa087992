/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mptcpw.h - coupled multipath TCP Westwood (MPTCPW), portable core.
 *
 * Spec: MPTCPW paper §IV.
 * Per subflow s, per ACK:        w_s <- w_s + min(delta_s / w_s, 1 / w_s)
 * on 3 DUPACKs (and RTO):        w_s <- B_s * RTTmin_s      (B_s: TCPW, §III)
 * with eq. (8), gamma = 1:
 *
 *   delta_s = w_s * max_r(w_r / RTT_r^2) / (sum_r w_r / RTT_r)^2
 *
 * Rewritten without the squares (which overflow in 64 bits) using each
 * path's share of the total rate, q_r = (w_r/RTT_r) / sum(w/RTT):
 *
 *   delta_s = q_s * max_r(q_r * RTT_s / RTT_r)
 *
 * (substitute w_r/RTT_r^2 = q_r S / RTT_r and w_s / S = q_s RTT_s).
 * One path gives delta = 1, i.e. plain TCPW; n equal paths give 1/n^2.
 *
 * The subflows of one connection share a table of MPTCPW_MAX_PATHS
 * (cwnd, RTT) slots; the shells keep it where all subflows see it (a BPF
 * hash map keyed by the MPTCP token).  Each subflow refreshes its slot on
 * every ACK (mptcpw_on_ack), in fast recovery too: the paper's eq. (8)
 * takes the current w_r and RTT_r of every path.  The loops below run over that fixed
 * size, so the verifier sees a constant bound.
 *
 * Fixed point: delta and q are Q16 (MPTCPW_UNIT = 1.0); rates x_r are
 * (w_r << 24) / RTT_r with w_r <= 2^20 and RTT_r >= 1 us, so x_r < 2^44,
 * the sum < 2^47 and x_r << 16 < 2^60.
 */
#ifndef CC_MPTCPW_H
#define CC_MPTCPW_H

#include "tcpw.h"

#define MPTCPW_SCALE		16
#define MPTCPW_UNIT		(1U << MPTCPW_SCALE)
#define MPTCPW_MAX_PATHS	8U
#define MPTCPW_RATE_SHIFT	24

struct mptcpw_path {
	u32 cwnd;		/* packets, 0 = free slot */
	u32 rtt_us;		/* smoothed RTT, us */
};

struct mptcpw_conn {
	struct mptcpw_path path[MPTCPW_MAX_PATHS];
	u32 used;		/* bit i: slot i belongs to a live subflow */
	u32 pad;
};

/* eq. (8) with gamma = 1, in Q16, capped at 1.0 (only min(delta, 1) is
 * ever used).  self: this subflow's slot.  Free or unmeasured slots are
 * skipped; with no usable peer this returns 1.0 (uncoupled TCPW). */
static CC_INLINE u32 mptcpw_delta_q16(const struct mptcpw_conn *c, u32 self)
{
	u64 x[MPTCPW_MAX_PATHS], sum = 0, best = 0, q_s, t, d;
	u32 i, rtt_s;

	if (self >= MPTCPW_MAX_PATHS)
		return MPTCPW_UNIT;
	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		x[i] = 0;
		if ((c->used & (1U << i)) && c->path[i].cwnd &&
		    c->path[i].rtt_us)
			x[i] = CC_DIV64((u64)CC_MIN(c->path[i].cwnd,
						    CC_MAX_CWND)
					<< MPTCPW_RATE_SHIFT,
					c->path[i].rtt_us);
		sum += x[i];
	}
	rtt_s = c->path[self].rtt_us;
	if (!sum || !x[self])
		return MPTCPW_UNIT;
	q_s = CC_DIV64(x[self] << MPTCPW_SCALE, sum);
	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		if (!x[i])
			continue;
		/* q_r * RTT_s / RTT_r: q_r <= 2^16, RTT_s < 2^32 */
		t = CC_DIV64(CC_DIV64(x[i] << MPTCPW_SCALE, sum) * rtt_s,
			     c->path[i].rtt_us);
		best = CC_MAX(best, t);
	}
	best = CC_MIN(best, (u64)MPTCPW_UNIT << MPTCPW_SCALE);
	d = (q_s * best) >> MPTCPW_SCALE;
	return (u32)CC_MIN(d, (u64)MPTCPW_UNIT);
}

struct mptcpw {
	struct tcpw w;		/* B_s, RTTmin_s: the TCPW estimator */
	u64 acc;		/* increase accumulator, Q16 packets x W */
	u32 delta;		/* last delta_s, Q16 */
	u32 slot;		/* slot in the shared table, ~0U = none */
};

static CC_INLINE void mptcpw_state_init(struct mptcpw *m, u32 now_us,
					     u32 snd_una, u32 tau_us)
{
	tcpw_state_init(&m->w, now_us, snd_una, tau_us);
	m->acc = 0;
	m->delta = MPTCPW_UNIT;
	m->slot = ~0U;
}

/*
 * Every ACK (in_ack_event), in recovery too where cong_avoid is not called:
 * the TCPW estimator, and this subflow's (cwnd, srtt) into the shared table
 * c (NULL when uncoupled), so that the peers' eq. (8) sees the window the
 * loss response left, not the one before the loss.  Returns 1 on a new
 * estimate.
 */
static CC_INLINE int mptcpw_on_ack(struct mptcpw *m, struct mptcpw_conn *c,
				   u32 now_us, u32 snd_una, u32 mss, u32 cwnd,
				   u32 srtt_us)
{
	u32 slot = m->slot & (MPTCPW_MAX_PATHS - 1);	/* bound */

	if (c && m->slot < MPTCPW_MAX_PATHS) {
		c->path[slot].cwnd = cwnd;
		c->path[slot].rtt_us = srtt_us;
	}
	return tcpw_on_ack(&m->w, now_us, snd_una, mss);
}

/* delta_s of eq. (8) for this subflow (1.0 when uncoupled), remembered. */
static CC_INLINE u32 mptcpw_delta(struct mptcpw *m,
				  const struct mptcpw_conn *c)
{
	m->delta = MPTCPW_UNIT;
	if (c && m->slot < MPTCPW_MAX_PATHS)
		m->delta = mptcpw_delta_q16(c, m->slot & (MPTCPW_MAX_PATHS - 1));
	return m->delta;
}

/* Increase of §IV, one ACK covering acked packets:
 * min(delta_s, 1) / w_s per packet. */
static CC_INLINE void mptcpw_increase(struct mptcpw *m, u32 *cwnd,
				       u32 acked, u32 delta_q16)
{
	m->delta = CC_MIN(delta_q16, MPTCPW_UNIT);
	cc_frac_increase(cwnd, &m->acc, m->delta, acked, MPTCPW_SCALE);
}

/* Decrease of §IV: w_s = B_s * RTTmin_s (at least 2). */
static CC_INLINE u32 mptcpw_loss_ssthresh(struct mptcpw *m, u32 cwnd,
					    u32 mss)
{
	return tcpw_loss_ssthresh(&m->w, cwnd, mss);
}

#endif /* CC_MPTCPW_H */
