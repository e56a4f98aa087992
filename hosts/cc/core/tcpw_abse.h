/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcpw_abse.h - TCP Westwood with Adaptive Bandwidth Share Estimation.
 *
 * Spec: TCPW-ABSE paper §2.
 *   (1)  s^_k = a_k s^_{k-1} + (1 - a_k) s_k,  a_k = (2tau_k - dt_k)/(2tau_k + dt_k)
 *   (2)  s_k  = sum of d_j over t_j > t_k - T_k, divided by T_k
 *   (3)  Th^_k = eps Th^_{k-1} + (1 - eps) Th_k, eps = 0.6,
 *        Th_k = bytes acknowledged during the last RTT / RTT
 *   (4)  T_k = T_min if Th^_k * RTT > cwnd, else
 *        T_k = RTT * (cwnd - Th^_k * RTTmin) / cwnd
 *   (5)  U_k = beta U_{k-1} + (1 - beta) |s_k - s_{k-1}|, beta = 0.6
 *   (6)  tau_k = RTT + N * RTT * U_k / U_max
 *   §2.2 AckedCount for d_j (ackcount.h); §2 loss response as TCPW.
 *
 * Choices the paper leaves open, written down:
 *  - d_j is kept in ABSE_NBUCKETS time buckets of RTT/ABSE_NBUCKETS each.
 *    The buckets are half-open, [start, start + width), and a sample sums
 *    only complete ones: s_k = bytes of the newest T_k/width complete
 *    buckets over T_k.  Eq. (2) as written, (t_k - T_k, t_k], ends at the
 *    ACK that triggers it and so counts half an ACK too many on average
 *    (+g/(2 T_k) for ACK gap g: +35 % at 10 Mbit/s, 20 ms, delayed ACKs);
 *    a window on bucket edges does not, and lags t_k by < one bucket.
 *    Th_k of (3) is the same sum over the ABSE_NBUCKETS - 1 complete
 *    buckets (7/8 of an RTT).
 *  - T_min (§2.1.1 names it without a value) = tmin_gaps (tunable,
 *    ABSE_TMIN_GAPS_DEFAULT; 0 = always one bucket) mean
 *    inter-ACK gaps, rounded up to whole buckets, at least one bucket
 *    (RTT/8), at most the ring: §2.1.2 says ACK gaps range from the
 *    bottleneck's spacing to one RTT, so a window shorter than a few gaps
 *    holds 0, 1 or 2 ACKs and its sample is noise.  The gap is an EWMA
 *    (7/8) of t_k - t_{k-1}, each capped at one RTT (idle time).  When
 *    ACKs are further apart than the ring, s_k = d_k / (t_k - t_{k-1}).
 *  - T_k of (4) is rounded to whole buckets and never below T_min.
 *  - U_max is the largest U_k seen, decayed by 1/8 per RTT so that an old
 *    burst does not mute the filter forever.
 *  - N = ABSE_N_DEFAULT (tunable); the paper cites [6] without a value.
 *  - RTT in (4) and (6) is the smoothed RTT the stack provides.
 *
 * Units: rates in bytes/s, times in microseconds.  Gains are Q10
 * (ABSE_UNIT = 1.0): eps = beta = ABSE_UNIT * 3 / 5.
 */
#ifndef CC_TCPW_ABSE_H
#define CC_TCPW_ABSE_H

#include "cc_common.h"
#include "ackcount.h"

#define ABSE_SCALE	10
#define ABSE_UNIT	(1U << ABSE_SCALE)
#define ABSE_EPS	(ABSE_UNIT * 3 / 5)	/* eq. (3): 0.6 */
#define ABSE_BETA	(ABSE_UNIT * 3 / 5)	/* eq. (5): 0.6 */
#define ABSE_N_DEFAULT	4U			/* eq. (6) */
#define ABSE_N_MAX	64U
#define ABSE_NBUCKETS	8U			/* power of two */
#define ABSE_BUCKET_MIN_US	100U
#define ABSE_TMIN_GAPS_DEFAULT	8U	/* T_min >= this many ACK gaps */
#define ABSE_TMIN_GAPS_MAX	64U
/* tau_k cap: 2 * 2^24 us times a rate < 2^35 B/s stays below 2^61 in (1) */
#define ABSE_TAU_MAX_US	(1U << 24)

struct tcpw_abse {
	u64 bw;			/* s^_k, bytes/s */
	u64 th;			/* Th^_k, bytes/s */
	u64 s_prev;		/* s_{k-1}, bytes/s */
	u64 u;			/* U_k, bytes/s */
	u64 umax;		/* U_max, bytes/s */
	u32 bucket[ABSE_NBUCKETS];	/* bytes per bucket, ring */
	u32 bucket_start;	/* start of the newest bucket, us */
	u32 bucket_us;		/* bucket width, us */
	u32 t_last;		/* t_{k-1}, us */
	u32 rtt_min_us;		/* ~0U = none */
	u32 ack_gap_us;		/* mean inter-ACK gap (EWMA 7/8), us; 0 = none */
	u8 head;		/* index of the newest bucket */
	u8 tmin_gaps;		/* T_min in mean ACK gaps (at least 1 bucket) */
	u8 n;			/* N of eq. (6) */
	u8 tk_div;		/* last T_k in buckets, for export */
	struct cc_ackcnt ac;
};

static CC_INLINE void abse_init(struct tcpw_abse *a, u32 now_us, u32 snd_una,
				u32 n, u32 tmin_gaps)
{
	u32 i;

	a->bw = a->th = a->s_prev = a->u = a->umax = 0;
	for (i = 0; i < ABSE_NBUCKETS; i++)
		a->bucket[i] = 0;
	a->head = 0;
	a->bucket_start = now_us;
	a->bucket_us = 1000;
	a->t_last = now_us;
	a->rtt_min_us = ~0U;
	a->ack_gap_us = 0;
	a->n = (u8)CC_MIN(n, ABSE_N_MAX);
	a->tmin_gaps = (u8)CC_MIN(tmin_gaps, ABSE_TMIN_GAPS_MAX);
	a->tk_div = 1;
	cc_ackcnt_init(&a->ac, snd_una);
}

/* Advance the ring to now_us; width follows srtt (one RTT = all buckets). */
static CC_INLINE void abse_advance(struct tcpw_abse *a, u32 now_us, u32 srtt)
{
	s32 dt = cc_time_delta(now_us, a->bucket_start);
	u32 n, i;

	if (dt < (s32)a->bucket_us)
		return;
	n = (u32)dt / a->bucket_us;
	for (i = 1; i <= ABSE_NBUCKETS; i++)	/* clear n buckets, at most all */
		if (i <= n)
			a->bucket[(a->head + i) & (ABSE_NBUCKETS - 1)] = 0;
	a->head = (u8)((a->head + CC_MIN(n, ABSE_NBUCKETS)) &
		       (ABSE_NBUCKETS - 1));
	a->bucket_start = (n >= ABSE_NBUCKETS) ? now_us :
			  a->bucket_start + n * a->bucket_us;
	if (srtt)
		a->bucket_us = CC_MAX(srtt / ABSE_NBUCKETS, ABSE_BUCKET_MIN_US);
	/* U_max decays by ~1/8 per RTT (1/64 per bucket) */
	a->umax -= (a->umax >> 6) * CC_MIN(n, ABSE_NBUCKETS);
}

/* eq. (2) over half-open buckets: the bytes of the nb newest complete
 * buckets, [bucket_start - nb * width, bucket_start), over nb * width.
 * The current bucket (which holds this ACK) is left out: a window that
 * ends at an ACK counts half an ACK too many on average. */
static CC_INLINE u64 abse_window_rate(const struct tcpw_abse *a, u32 nb)
{
	u64 sum = 0;
	u32 i;

	for (i = 1; i < ABSE_NBUCKETS; i++)	/* i = 0: current bucket */
		if (i <= nb)
			sum += a->bucket[(a->head - i) & (ABSE_NBUCKETS - 1)];
	return cc_rate_Bps(sum, nb * a->bucket_us);
}

/* T_min in whole buckets: tmin_gaps mean ACK gaps rounded up, one
 * bucket at least, the whole ring at most. */
static CC_INLINE u32 abse_tmin_buckets(const struct tcpw_abse *a)
{
	u64 tb = CC_DIV64((u64)a->ack_gap_us * a->tmin_gaps +
			  a->bucket_us - 1, a->bucket_us);

	return (u32)CC_MIN(CC_MAX(tb, 1ULL), (u64)(ABSE_NBUCKETS - 1));
}

/* eq. (4): T_k in whole buckets, T_min .. ABSE_NBUCKETS - 1 (~RTT). */
static CC_INLINE u32 abse_tk_buckets(const struct tcpw_abse *a, u32 srtt,
				     u32 cwnd, u32 mss)
{
	u64 cw_bytes = (u64)cwnd * mss, pipe, tk;
	u32 tmin = abse_tmin_buckets(a);

	if (!srtt || !cwnd || a->rtt_min_us == ~0U)
		return ABSE_NBUCKETS - 1;
	if (CC_DIV64(a->th * srtt, CC_USEC_PER_SEC) > cw_bytes)
		return tmin;
	pipe = CC_DIV64(a->th * a->rtt_min_us, CC_USEC_PER_SEC);
	if (pipe >= cw_bytes)
		return tmin;
	tk = CC_DIV64((u64)srtt * (cw_bytes - pipe), cw_bytes);
	tk = CC_DIV64(tk + a->bucket_us / 2, a->bucket_us);
	return (u32)CC_MIN(CC_MAX(tk, (u64)tmin), (u64)(ABSE_NBUCKETS - 1));
}

/* eq. (6): tau_k in us. */
static CC_INLINE u32 abse_tau_us(const struct tcpw_abse *a, u32 srtt)
{
	u64 extra = 0, ratio;

	/* U_k / U_max in Q10 first: u < 2^35 keeps u << 10 below 2^45 */
	if (a->umax) {
		ratio = CC_DIV64(CC_MIN(a->u, a->umax) << ABSE_SCALE, a->umax);
		extra = ((u64)a->n * srtt * ratio) >> ABSE_SCALE;
	}
	return (u32)CC_MIN((u64)srtt + extra, (u64)ABSE_TAU_MAX_US);
}

/* A Q10 EWMA step: g * old + (1 - g) * sample. */
static CC_INLINE u64 abse_ewma(u64 old, u64 sample, u32 g_q10)
{
	return (old * g_q10 + sample * (ABSE_UNIT - g_q10)) >> ABSE_SCALE;
}

/* Every ACK.  srtt_us: the stack's smoothed RTT (0 if none yet). */
static CC_INLINE void abse_on_ack(struct tcpw_abse *a, u32 now_us, u32 snd_una,
				  u32 mss, u32 srtt_us, u32 cwnd)
{
	u32 d = cc_acked_count(&a->ac, snd_una, mss), nb, dt, gap, tau;
	u64 s, diff, two_tau;

	abse_advance(a, now_us, srtt_us);
	a->bucket[a->head & (ABSE_NBUCKETS - 1)] += d;
	if (!srtt_us)
		return;
	/* T_min's ACK spacing: gaps longer than an RTT are idle time */
	dt = (u32)CC_MAX(cc_time_delta(now_us, a->t_last), 0);
	gap = CC_MIN(dt, srtt_us);
	a->ack_gap_us = a->ack_gap_us ? (7 * a->ack_gap_us + gap) / 8 : gap;
	/* (3): throughput over the last RTT = the complete buckets */
	a->th = abse_ewma(a->th, abse_window_rate(a, ABSE_NBUCKETS - 1),
			  ABSE_EPS);
	/* (4), (2) */
	nb = abse_tk_buckets(a, srtt_us, cwnd, mss);
	a->tk_div = (u8)nb;
	s = abse_window_rate(a, nb);
	if (!s && dt)	/* ACKs further apart than the ring: (t_{k-1}, t_k] */
		s = cc_rate_Bps(d, dt);
	/* (5) */
	diff = s > a->s_prev ? s - a->s_prev : a->s_prev - s;
	a->u = abse_ewma(a->u, diff, ABSE_BETA);
	a->umax = CC_MAX(a->umax, a->u);
	/* (6), (1) */
	tau = abse_tau_us(a, srtt_us);
	two_tau = 2ULL * tau;
	dt = (u32)CC_MIN((u64)dt, two_tau);
	if (!a->bw)
		a->bw = s;
	else
		a->bw = CC_DIV64((two_tau - dt) * a->bw + 2ULL * dt * s,
				 two_tau + dt);
	a->s_prev = s;
	a->t_last = now_us;
}

static CC_INLINE void abse_rtt(struct tcpw_abse *a, u32 rtt_us)
{
	if (rtt_us && rtt_us < a->rtt_min_us)
		a->rtt_min_us = rtt_us;
}

/* §2: ssthresh = ABSE * RTTmin / seg_size, at least 2 */
static CC_INLINE u32 abse_ssthresh(const struct tcpw_abse *a, u32 mss)
{
	return cc_bdp_pkts(a->bw, a->rtt_min_us, mss);
}

/* T_k and tau_k for export, in us. */
static CC_INLINE u32 abse_tk_us(const struct tcpw_abse *a)
{
	return a->tk_div * a->bucket_us;
}

#endif /* CC_TCPW_ABSE_H */
