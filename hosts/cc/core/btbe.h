/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * btbe.h - congestion avoidance from bottleneck and target bandwidth
 * estimates (BTBE), portable core.
 *
 * Spec: BTBE paper §III.
 *
 * Estimator (§III-A): W_Bottleneck, eQ and W_Target once per RTT (round):
 *   W_Bottleneck = eBW * baseRTT / Seg_size
 *       eBW: forward-path rate, bytes acknowledged over the receiver's
 *       TCP timestamp (TSval) clock, so ACK compression cannot inflate it.
 *       The paper takes it from [12], [13] without its sampling; here a
 *       sample closes once BTBE_TS_MIN_TICKS (8) TSval ticks have passed
 *       (8 ms at 1 kHz; without timestamps, BTBE_SAMPLE_MIN_US of the
 *       local clock) and eBW is its EWMA with gain 1/8, i.e. several
 *       samples per RTT on paths longer than 8 ms, not one per RTT.
 *   eQ           = W / avgRTT * (RTT_max - baseRTT)
 *       RTT_max: the largest per-round average RTT, reset to 0 on RTO
 *   W_Target     = W_Bottleneck + eQ
 *
 * Controller (§III-B), eq. (1), per ACK:  cwnd += alpha(cwnd) / cwnd
 *   alpha(w) = a_min + (a_max - a_min) * exp(-lambda (w - W_S))
 *                                         if W_S <= w <= W_Target
 *            = a_max                      otherwise
 *   W_S = W_B + 0.2 (W_T - W_B),  lambda = LAMBDA / (W_T - W_B),
 *   a_min = 1, a_max = 16, LAMBDA = 7.25 (paper).
 * Decrease, eq. (2): ssthresh = max(W_B, 2), cwnd = ssthresh on 3 DUPACKs;
 * cwnd = 1 and RTT_max = 0 on RTO.
 *
 * NOTE on LAMBDA.  The paper says LAMBDA = 7.25 makes alpha equal
 * a_min + 0.2 (a_max - a_min) at 2/3 of the way from W_B to W_T.  With the
 * formula above that is not so: there lambda (w - W_S) = 7.25 * (2/3 - 0.2)
 * = 3.383 and alpha = 1 + 15 e^-3.383 = 1.51, not 4.0.  The value that does
 * satisfy the stated calibration is ln 5 / (2/3 - 0.2) = 3.449.  LAMBDA is
 * therefore a tunable in thousandths (lambda_x1000): default 7250, the
 * paper's number; BTBE_LAMBDA_CALIBRATED_X1000 is the calibration's value.
 *
 * Fixed point: windows in packets, alpha Q10 (BTBE_UNIT = 1.0), exp() Q24
 * from two tables (e^-i for integer i, e^-j/32 with linear interpolation,
 * relative error < 1.3e-4); exponent x in Q10, x >= 17 treated as 0
 * (e^-17 is below one Q24 unit).
 * Overflow: lambda_x1000 < 2^17 times (w << 10) < 2^30 is below 2^47.
 */
#ifndef CC_BTBE_H
#define CC_BTBE_H

#include "cc_common.h"
#include "ackcount.h"

#define BTBE_SCALE		10
#define BTBE_UNIT		(1U << BTBE_SCALE)
#define BTBE_ALPHA_MIN		(1 * BTBE_UNIT)		/* §III-B */
#define BTBE_ALPHA_MAX		(16 * BTBE_UNIT)	/* §III-B */
#define BTBE_LAMBDA_X1000	7250U			/* §III-B */
#define BTBE_LAMBDA_CALIBRATED_X1000	3449U	/* ln5/(2/3-0.2), see NOTE */
#define BTBE_LAMBDA_MAX_X1000	100000U
#define BTBE_WS_NUM		1			/* W_S at 0.2 = 1/5 */
#define BTBE_WS_DEN		5
#define BTBE_EXP_SCALE		24
#define BTBE_TS_HZ_DEFAULT	1000U	/* Linux and BSD TSval clock: 1 ms */
#define BTBE_TS_MIN_TICKS	8U	/* eBW sample spans >= 8 TSval ticks */
#define BTBE_SAMPLE_MIN_US	8000U	/* the same without timestamps */
#define BTBE_EWMA_SHIFT		3	/* eBW += (sample - eBW) / 8 */

/* e^-i, i = 0..16, Q24; zero-padded to 32 entries so that a 5-bit mask
 * alone bounds the index (the verifier then needs no range tracking) */
static const u32 btbe_exp_int[32] = {
	16777216, 6171993, 2270549, 835288, 307285, 113044, 41587, 15299,
	5628, 2070, 762, 280, 103, 38, 14, 5, 2,
};

/* e^-(j/32), j = 0..32, Q24 */
static const u32 btbe_exp_frac[33] = {
	16777216, 16261035, 15760736, 15275829, 14805841, 14350313, 13908801,
	13480872, 13066109, 12664107, 12274473, 11896828, 11530801, 11176035,
	10832185, 10498913, 10175896, 9862816, 9559370, 9265259, 8980197,
	8703905, 8436114, 8176562, 7924996, 7681169, 7444844, 7215791, 6993784,
	6778608, 6570052, 6367913, 6171993,
};

/* e^-x in Q24 for x >= 0 given in Q10.  Bounded table look-ups only. */
static CC_INLINE u32 btbe_exp_neg_q24(u64 x_q10)
{
	u32 i, j, r, lo, hi;
	u64 v;

	if (x_q10 >= (17ULL << BTBE_SCALE))
		return 0;
	/* masks are the bounds guards: i < 32 entries, j + 1 < 33 entries */
	i = (u32)(x_q10 >> BTBE_SCALE) & 31;		/* 0..16 here */
	j = (u32)(x_q10 >> (BTBE_SCALE - 5)) & 31;	/* 1/32 steps */
	r = (u32)x_q10 & 31;			/* remainder, /32 of a step */
	lo = btbe_exp_frac[j];
	hi = btbe_exp_frac[j + 1];
	v = lo - (((u64)(lo - hi) * r) >> 5);
	return (u32)(((u64)btbe_exp_int[i] * v) >> BTBE_EXP_SCALE);
}

/* alpha(w) of §III-B in Q10. */
static CC_INLINE u32 btbe_alpha_q10(u32 w, u32 wb, u32 wt, u32 lambda_x1000)
{
	u64 d, ws_q, w_q, x_q;
	u32 e;

	if (wt <= wb)
		return BTBE_ALPHA_MAX;		/* no queue seen yet: probe */
	d = wt - wb;
	ws_q = ((u64)wb << BTBE_SCALE) +
	       CC_DIV64((d << BTBE_SCALE) * BTBE_WS_NUM, BTBE_WS_DEN);
	w_q = (u64)w << BTBE_SCALE;
	if (w_q < ws_q || w > wt)
		return BTBE_ALPHA_MAX;
	x_q = CC_DIV64((u64)lambda_x1000 * (w_q - ws_q), 1000 * d);
	e = btbe_exp_neg_q24(x_q);
	return BTBE_ALPHA_MIN + (u32)(((u64)(BTBE_ALPHA_MAX - BTBE_ALPHA_MIN) *
				       e) >> BTBE_EXP_SCALE);
}

struct btbe {
	u64 ebw;		/* forward-path estimate eBW, bytes/s */
	u64 acc;		/* increase accumulator, Q10 packets x W */
	u64 rtt_sum_us;		/* RTT samples of the current round */
	u32 rtt_cnt;
	u32 round_start;	/* us */
	u32 base_rtt_us;	/* baseRTT, ~0U = none */
	u32 rtt_max_us;		/* largest per-round average RTT */
	u32 rtt_avg_us;		/* last round's average RTT */
	u32 wb;			/* W_Bottleneck, packets */
	u32 wt;			/* W_Target, packets */
	u32 ts_start;		/* TSval at the start of the eBW sample */
	u32 t_start;		/* local clock at the same point, us */
	u32 ts_bytes;		/* bytes acknowledged since then */
	u32 lambda_x1000;	/* LAMBDA * 1000 */
	u32 ts_hz;		/* receiver TSval clock rate */
	struct cc_ackcnt ac;
};

static CC_INLINE void btbe_state_init(struct btbe *b, u32 now_us, u32 snd_una,
				u32 lambda_x1000, u32 ts_hz)
{
	b->ebw = 0;
	b->acc = 0;
	b->rtt_sum_us = 0;
	b->rtt_cnt = 0;
	b->round_start = now_us;
	b->base_rtt_us = ~0U;
	b->rtt_max_us = 0;
	b->rtt_avg_us = 0;
	b->wb = 0;
	b->wt = 0;
	b->ts_start = 0;
	b->t_start = now_us;
	b->ts_bytes = 0;
	b->lambda_x1000 = CC_MIN(CC_MAX(lambda_x1000, 1U),
				 BTBE_LAMBDA_MAX_X1000);
	b->ts_hz = ts_hz ? ts_hz : BTBE_TS_HZ_DEFAULT;
	cc_ackcnt_init(&b->ac, snd_una);
}

static CC_INLINE void btbe_ebw_sample(struct btbe *b, u64 s)
{
	if (!b->ebw)
		b->ebw = s;
	else
		b->ebw = b->ebw - (b->ebw >> BTBE_EWMA_SHIFT) +
			 (s >> BTBE_EWMA_SHIFT);
}

/* Forward-path rate: bytes over the receiver's TSval clock (§III-A).
 * tsval = 0 means the ACK carried no timestamp: fall back to the local
 * ACK-arrival clock.  Returns 1 when eBW was updated. */
static CC_INLINE int btbe_ebw_ack(struct btbe *b, u32 now_us, u32 tsval,
				  u32 bytes)
{
	u32 ticks = tsval - b->ts_start;
	s32 dt = cc_time_delta(now_us, b->t_start);
	u64 s;

	b->ts_bytes += bytes;
	if (tsval && b->ts_start && ticks < (1U << 31)) {
		if (ticks < BTBE_TS_MIN_TICKS)
			return 0;
		s = CC_DIV64((u64)b->ts_bytes * b->ts_hz, ticks);
	} else {
		if (dt < (s32)BTBE_SAMPLE_MIN_US) {
			if (tsval && !b->ts_start) {
				b->ts_start = tsval;	/* first timestamp */
				b->t_start = now_us;
				b->ts_bytes = 0;
			}
			return 0;
		}
		s = cc_rate_Bps(b->ts_bytes, (u32)dt);
	}
	btbe_ebw_sample(b, CC_MIN(s, CC_MAX_BW_BPS));
	b->ts_start = tsval;
	b->t_start = now_us;
	b->ts_bytes = 0;
	return 1;
}

/* End of a round: average RTT, RTT_max, W_B, eQ, W_T (§III-A). */
static CC_INLINE void btbe_round(struct btbe *b, u32 now_us, u32 cwnd,
				 u32 mss)
{
	u64 eq = 0;

	if (b->rtt_cnt) {
		b->rtt_avg_us = (u32)CC_DIV64(b->rtt_sum_us, b->rtt_cnt);
		b->rtt_max_us = CC_MAX(b->rtt_max_us, b->rtt_avg_us);
	}
	b->rtt_sum_us = 0;
	b->rtt_cnt = 0;
	b->round_start = now_us;
	if (b->base_rtt_us == ~0U || !mss)
		return;
	b->wb = (u32)CC_MIN(CC_DIV64(b->ebw * b->base_rtt_us,
				     CC_USEC_PER_SEC * mss), CC_MAX_CWND);
	if (b->rtt_avg_us && b->rtt_max_us > b->base_rtt_us)
		eq = CC_DIV64((u64)cwnd * (b->rtt_max_us - b->base_rtt_us),
			      b->rtt_avg_us);
	b->wt = (u32)CC_MIN(b->wb + eq, (u64)CC_MAX_CWND);
}

/* Every RTT sample (us). */
static CC_INLINE void btbe_rtt(struct btbe *b, u32 rtt_us)
{
	if (!rtt_us)
		return;
	b->base_rtt_us = CC_MIN(b->base_rtt_us, rtt_us);
	b->rtt_sum_us += rtt_us;
	b->rtt_cnt++;
}

/* Every ACK, DUPACKs included; tsval = 0 when it carried no timestamp. */
static CC_INLINE void btbe_on_ack(struct btbe *b, u32 now_us, u32 snd_una,
				  u32 mss, u32 tsval, u32 cwnd)
{
	u32 bytes = cc_acked_count(&b->ac, snd_una, mss);
	u32 round = b->rtt_avg_us;

	btbe_ebw_ack(b, now_us, tsval, bytes);
	if (!round && b->base_rtt_us != ~0U)
		round = b->base_rtt_us;
	if (round && cc_time_delta(now_us, b->round_start) >= (s32)round)
		btbe_round(b, now_us, cwnd, mss);
}

/* eq. (1): congestion avoidance, one ACK covering acked packets. */
static CC_INLINE void btbe_increase(struct btbe *b, u32 *cwnd, u32 acked)
{
	u32 a = btbe_alpha_q10(*cwnd, b->wb, b->wt, b->lambda_x1000);

	cc_frac_increase(cwnd, &b->acc, a, acked, BTBE_SCALE);
}

/* eq. (2): ssthresh on 3 DUPACKs and on RTO. */
static CC_INLINE u32 btbe_loss_ssthresh(const struct btbe *b)
{
	return CC_MAX(b->wb, CC_MIN_SSTHRESH);
}

static CC_INLINE void btbe_on_rto(struct btbe *b)
{
	b->rtt_max_us = 0;
	b->acc = 0;
}

#endif /* CC_BTBE_H */
