/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcpw.h - TCP Westwood with faster recovery (TCPW), portable core.
 *
 * Spec: MPTCPW paper §III and
 *       TCPW faster-recovery slides (slide 6).
 *
 * Bandwidth estimate from the ACK stream, b_k = d_k / (t_k - t_{k-1}),
 * smoothed by the Tustin (bilinear) discretisation of a first-order
 * low-pass filter with cut-off 1/tau (§III):
 *
 *   b^_k = (2tau - D_k)/(2tau + D_k) * b^_{k-1} + (b_k + b_{k-1}) D_k/(2tau + D_k)
 *
 * Loss (slide 6): 3 DUPACKs -> ssthresh = BWE*RTTmin/MSS, cwnd = min(cwnd,
 * ssthresh); RTO -> the same ssthresh and cwnd = 1.  Increase is Reno's.
 *
 * Three implementation choices the papers leave open, written down:
 *  - ACKs that arrive within TCPW_MIN_SAMPLE_US of the previous sample are
 *    merged into one sample (GRO/ACK bursts give D_k ~ 0 and a meaningless
 *    b_k); d_k is then the sum of their AckedCount values.
 *  - D_k is clamped to 2*tau: beyond it the first coefficient would go
 *    negative; at D_k = 2*tau the filter output is the mean of the last two
 *    samples, the natural limit for a long silence.
 *  - tau is not given in the supplied papers; TCPW_TAU_US_DEFAULT (0.5 s)
 *    is a tunable.
 *
 * Units: bw in bytes/s (u64, <= CC_MAX_BW_BPS), times in microseconds.
 * Overflow: (2tau + D) * b <= 2^24 * 2^36 = 2^60 for tau <= TCPW_TAU_US_MAX.
 */
#ifndef CC_TCPW_H
#define CC_TCPW_H

#include "cc_common.h"
#include "ackcount.h"

#define TCPW_TAU_US_DEFAULT	500000U		/* 0.5 s */
#define TCPW_TAU_US_MAX		(1U << 22)	/* 4.19 s */
#define TCPW_MIN_SAMPLE_US	1000U		/* merge ACKs closer than 1 ms */

struct tcpw_bwe {
	u64 bw;			/* b^_k, filtered estimate, bytes/s */
	u64 b_prev;		/* b_{k-1}, last raw sample, bytes/s */
	u32 t_last;		/* t_{k-1}, us */
	u32 pending;		/* bytes counted since t_{k-1} */
	u32 tau_us;		/* filter time constant, us */
	u32 rtt_min_us;		/* RTTmin over the connection, ~0U = none */
};

struct tcpw {
	struct tcpw_bwe e;
	struct cc_ackcnt ac;
	u32 prior_cwnd;		/* cwnd when ssthresh was last computed */
};

static CC_INLINE void tcpw_bwe_init(struct tcpw_bwe *e, u32 now_us, u32 tau_us)
{
	e->bw = 0;
	e->b_prev = 0;
	e->t_last = now_us;
	e->pending = 0;
	e->tau_us = CC_MIN(CC_MAX(tau_us, 1U), TCPW_TAU_US_MAX);
	e->rtt_min_us = ~0U;
}

/* One step of the Tustin filter (§III) with sample b over interval dt_us. */
static CC_INLINE u64 tcpw_tustin(u64 bw_prev, u64 b, u64 b_prev, u32 dt_us,
				 u32 tau_us)
{
	u64 two_tau = 2ULL * tau_us;
	u64 dt = CC_MIN((u64)dt_us, two_tau);

	return CC_DIV64((two_tau - dt) * bw_prev + (b + b_prev) * dt,
			two_tau + dt);
}

/* Feed the bytes one ACK reports (AckedCount output) at time now_us.
 * Returns 1 when the estimate was updated. */
static CC_INLINE int tcpw_bwe_ack(struct tcpw_bwe *e, u32 now_us, u32 bytes)
{
	s32 dt = cc_time_delta(now_us, e->t_last);
	u64 b;

	e->pending += bytes;
	if (dt < (s32)TCPW_MIN_SAMPLE_US)
		return 0;
	b = cc_rate_Bps(e->pending, (u32)dt);
	e->bw = tcpw_tustin(e->bw, b, e->b_prev, (u32)dt, e->tau_us);
	e->b_prev = b;
	e->t_last = now_us;
	e->pending = 0;
	return 1;
}

static CC_INLINE void tcpw_bwe_rtt(struct tcpw_bwe *e, u32 rtt_us)
{
	if (rtt_us && rtt_us < e->rtt_min_us)
		e->rtt_min_us = rtt_us;
}

static CC_INLINE void tcpw_state_init(struct tcpw *w, u32 now_us, u32 snd_una,
				u32 tau_us)
{
	tcpw_bwe_init(&w->e, now_us, tau_us);
	cc_ackcnt_init(&w->ac, snd_una);
	w->prior_cwnd = 0;
}

/* Every ACK (including DUPACKs): snd_una after it, the MSS, the time. */
static CC_INLINE int tcpw_on_ack(struct tcpw *w, u32 now_us, u32 snd_una,
				 u32 mss)
{
	return tcpw_bwe_ack(&w->e, now_us, cc_acked_count(&w->ac, snd_una, mss));
}

/* ssthresh on 3 DUPACKs or RTO: BWE * RTTmin / MSS (slide 6, §III). */
static CC_INLINE u32 tcpw_loss_ssthresh(struct tcpw *w, u32 cwnd, u32 mss)
{
	w->prior_cwnd = cwnd;
	return cc_bdp_pkts(w->e.bw, w->e.rtt_min_us, mss);
}

/* cwnd after 3 DUPACKs: min(cwnd, ssthresh) (slide 6). */
static CC_INLINE u32 tcpw_recovery_cwnd(u32 cwnd, u32 ssthresh)
{
	return CC_MIN(cwnd, ssthresh);
}

#endif /* CC_TCPW_H */
