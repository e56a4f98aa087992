/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * cc_illinois.h - TCP-Illinois (S. Liu, T. Basar, R. Srikant, "TCP-Illinois: A
 * Loss- and Delay-Based Congestion Control Algorithm for High-Speed
 * Networks", Performance Evaluation 65(6-7), 2008), portable core, with the
 * behaviour of Linux's tcp_illinois.c.
 *
 * Reno's AIMD with an additive step alpha and a decrease factor beta set
 * once per RTT from the queueing delay, d_a = average RTT of the last round
 * - base RTT, against d_m = max RTT - base RTT:
 *
 *   alpha = alpha_max                     d_a <= d_1 = d_m / 100
 *         = k1 / (k2 + d_a)               above (alpha_max at d_1 down to
 *                                         alpha_min at d_m)
 *   beta  = beta_min                      d_a <= d_2 = d_m / 10
 *         = linear                        between
 *         = beta_max                      d_a >= d_3 = 8 d_m / 10
 *
 * with alpha in [0.3, 10], beta in [1/8, 1/2]; below ILL_WIN_THRESH packets,
 * or after an RTO, alpha = 1 and beta = 1/2 (Reno).  Once d_a has been above
 * d_1, alpha returns to alpha_max only after ILL_THETA rounds below it.
 *
 *   round end (ack past end_seq): alpha, beta <- f(d_a, d_m)
 *   CA, per ACK: cnt += pkts acked; W += alpha * cnt / W once that is >= 1
 *   loss: ssthresh = max(W - W * beta, 2)      RTO: alpha = 1, beta = 1/2
 *
 * As Linux: the increase takes the acknowledged-packet count of the latest
 * RTT sample for the first ACK after it and 1 for the ACKs that carry no
 * sample; the RTT samples are clamped to ILL_RTT_MAX_US so that alpha's
 * products fit 32 bits.
 *
 * Fixed point: alpha Q7 (ILL_ALPHA_UNIT = 1.0), beta Q6 (ILL_BETA_UNIT).
 * Overflow: d <= ILL_RTT_MAX_US = 2^32 / ILL_ALPHA_MAX (3.3 s), so
 * d * ILL_ALPHA_MAX and d * (ILL_ALPHA_MAX - ILL_ALPHA_MIN) fit 32 bits (done
 * in 64 here anyway); the sum of RTTs of one round is u64.
 */
#ifndef CC_ILLINOIS_H
#define CC_ILLINOIS_H

#include "cc_common.h"

#define ILL_ALPHA_SHIFT		7
#define ILL_ALPHA_UNIT		(1U << ILL_ALPHA_SHIFT)		/* 1.0 */
#define ILL_ALPHA_MIN		(ILL_ALPHA_UNIT * 3 / 10)	/* 0.3 */
#define ILL_ALPHA_MAX		(ILL_ALPHA_UNIT * 10)		/* 10.0 */
#define ILL_BETA_SHIFT		6
#define ILL_BETA_UNIT		(1U << ILL_BETA_SHIFT)		/* 1.0 */
#define ILL_BETA_MIN		(ILL_BETA_UNIT / 8)		/* 0.125 */
#define ILL_BETA_MAX		(ILL_BETA_UNIT / 2)		/* 0.5 */
#define ILL_RTT_MAX_US		(0xffffffffU / ILL_ALPHA_MAX)
#define ILL_WIN_THRESH		15U	/* packets: Reno below (Linux's win_thresh) */
#define ILL_THETA		5U	/* good rounds before alpha_max again */

struct illinois {
	u64 sum_rtt_us;		/* RTT samples of this round, summed */
	u32 cnt_rtt;		/* ... and counted */
	u32 base_rtt_us;	/* smallest RTT seen */
	u32 max_rtt_us;		/* largest RTT seen */
	u32 end_seq;		/* snd_nxt when the round began */
	u32 alpha;		/* Q7 */
	u32 beta;		/* Q6 */
	u32 cnt;		/* acknowledged packets towards the next increase */
	u16 acked;		/* packets of the latest RTT sample */
	u8 rtt_above;		/* d_a went above d_1 */
	u8 rtt_low;		/* rounds below d_1 since */
	u32 win_thresh;		/* packets */
	u32 theta;		/* rounds */
};

static CC_INLINE void ill_round_reset(struct illinois *c, u32 snd_nxt)
{
	c->end_seq = snd_nxt;
	c->cnt_rtt = 0;
	c->sum_rtt_us = 0;
}

static CC_INLINE void ill_init(struct illinois *c, u32 snd_nxt, u32 win_thresh,
			       u32 theta)
{
	c->alpha = ILL_ALPHA_MAX;
	c->beta = ILL_BETA_MAX;
	c->base_rtt_us = 0x7fffffff;
	c->max_rtt_us = 0;
	c->cnt = 0;
	c->acked = 0;
	c->rtt_low = 0;
	c->rtt_above = 0;
	c->win_thresh = win_thresh;
	c->theta = theta;
	ill_round_reset(c, snd_nxt);
}

/* pkts_acked: one ACK's sample (rtt_us < 0: none, a DUPACK). */
static CC_INLINE void ill_sample(struct illinois *c, u32 pkts_acked, s32 rtt_us)
{
	u32 rtt;

	c->acked = (u16)CC_MIN(pkts_acked, 0xffffU);
	if (rtt_us < 0)
		return;
	rtt = CC_MIN((u32)rtt_us, ILL_RTT_MAX_US);
	c->base_rtt_us = CC_MIN(c->base_rtt_us, rtt);
	c->max_rtt_us = CC_MAX(c->max_rtt_us, rtt);
	c->cnt_rtt++;
	c->sum_rtt_us += rtt;
}

/* alpha from the average and maximum queueing delay (us); moves rtt_above
 * and rtt_low. */
static CC_INLINE u32 ill_alpha(struct illinois *c, u32 da, u32 dm)
{
	u32 d1 = dm / 100;

	if (da <= d1) {
		if (!c->rtt_above)
			return ILL_ALPHA_MAX;
		if (++c->rtt_low < c->theta)
			return c->alpha;	/* wait for theta good rounds */
		c->rtt_low = 0;
		c->rtt_above = 0;
		return ILL_ALPHA_MAX;
	}
	c->rtt_above = 1;
	/* k1 / (k2 + da) rewritten over dm' = dm - d1, da' = da - d1 */
	dm -= d1;
	da -= d1;
	return (u32)CC_DIV64((u64)dm * ILL_ALPHA_MAX,
			     dm + CC_DIV64((u64)da * (ILL_ALPHA_MAX - ILL_ALPHA_MIN),
					   ILL_ALPHA_MIN));
}

/* beta: 1/8 up to d_2, 1/2 from d_3, the line between them. */
static CC_INLINE u32 ill_beta(u32 da, u32 dm)
{
	u32 d2 = dm / 10, d3 = (u32)(((u64)dm * 8) / 10);

	if (da <= d2)
		return ILL_BETA_MIN;
	if (da >= d3 || d3 <= d2)
		return ILL_BETA_MAX;
	return (u32)(((u64)ILL_BETA_MIN * d3 + (u64)(ILL_BETA_MAX - ILL_BETA_MIN) * da
		      - (u64)ILL_BETA_MAX * d2) / (d3 - d2));
}

/* Start of cong_avoid, on every call: at the end of a round (ack past
 * end_seq) set alpha and beta for the next one. */
static CC_INLINE void ill_on_ack(struct illinois *c, u32 ack, u32 snd_nxt,
				 u32 cwnd)
{
	u32 dm, da;

	if (cc_time_delta(ack, c->end_seq) <= 0)
		return;
	if (cwnd < c->win_thresh) {
		c->alpha = ILL_ALPHA_UNIT;
		c->beta = ILL_BETA_MAX;
	} else if (c->cnt_rtt > 0) {
		dm = c->max_rtt_us - c->base_rtt_us;
		da = (u32)CC_DIV64(c->sum_rtt_us, c->cnt_rtt) - c->base_rtt_us;
		c->alpha = ill_alpha(c, da, dm);
		c->beta = ill_beta(da, dm);
	}
	ill_round_reset(c, snd_nxt);
}

/* Congestion avoidance, one ACK: W += alpha / W per packet, in whole
 * packets once the credit reaches one (the remainder is dropped, as Linux). */
static CC_INLINE void ill_increase(struct illinois *c, u32 *cwnd, u32 clamp)
{
	u32 w = *cwnd ? *cwnd : 1;
	u64 delta;

	c->cnt += c->acked;
	c->acked = 1;
	delta = ((u64)c->cnt * c->alpha) >> ILL_ALPHA_SHIFT;
	if (delta >= w) {
		*cwnd = (u32)CC_MIN((u64)w + CC_DIV64(delta, w),
				    (u64)CC_MIN(clamp, CC_MAX_CWND));
		c->cnt = 0;
	}
}

/* Loss: W - W * beta, at least 2. */
static CC_INLINE u32 ill_ssthresh(const struct illinois *c, u32 cwnd)
{
	u32 w = CC_MIN(cwnd, CC_MAX_CWND);

	return CC_MAX(w - ((w * c->beta) >> ILL_BETA_SHIFT), CC_MIN_SSTHRESH);
}

/* An RTO (the stack enters TCP_CA_Loss): back to Reno's alpha and beta. */
static CC_INLINE void ill_on_rto(struct illinois *c, u32 snd_nxt)
{
	c->alpha = ILL_ALPHA_UNIT;
	c->beta = ILL_BETA_MAX;
	c->rtt_low = 0;
	c->rtt_above = 0;
	ill_round_reset(c, snd_nxt);
}

#endif /* CC_ILLINOIS_H */
