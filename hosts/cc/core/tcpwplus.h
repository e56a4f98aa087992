/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcpwplus.h - TCP Westwood+, portable core.
 *
 * Spec: LogWestwood+ paper §II eq. (5):
 *   on loss  W <- max(2, BWE * RTTmin / seg_size)
 * with BWE sampled once per RTT (bytes acknowledged during the RTT divided
 * by the RTT, which ACK compression cannot inflate) and EWMA-filtered.
 * Linux's in-tree "westwood" module is this estimator, which the testbed
 * uses as the reference, so the free parameters follow it:
 *  - a sample closes when the window has lasted max(RTT, TCPWP_WIN_MIN_US);
 *  - two cascaded EWMA stages with gain 7/8 (TCPWP_GAIN_*), the first
 *    sample initialising both;
 *  - RTTmin is re-learnt after an RTO (the path may have changed).
 * Two differences from the in-tree module, both on the paper's side:
 *  - eq. (5) applies at loss detection: the ssthresh callback returns
 *    BWE * RTTmin / MSS, so fast recovery works towards it.  westwood's
 *    ssthresh is tcp_reno_ssthresh (cwnd / 2) and it sets
 *    cwnd = ssthresh = BWE * RTTmin only when recovery completes;
 *  - RTTs are the stack's microseconds; westwood keeps RTT, RTTmin and its
 *    window in jiffies (usecs_to_jiffies rounds up: at HZ = 250 a 10.1 ms
 *    RTT reads 12 ms, and its BWE * RTTmin is in that unit).
 *
 * Units: bw in bytes/s, times in microseconds.
 */
#ifndef CC_TCPWPLUS_H
#define CC_TCPWPLUS_H

#include "cc_common.h"
#include "ackcount.h"

#define TCPWP_WIN_MIN_US	50000U	/* 50 ms: Linux's TCP_WESTWOOD_RTT_MIN */
#define TCPWP_GAIN_NUM		7U	/* EWMA: new = (7 * old + sample) / 8 */
#define TCPWP_GAIN_DEN		8U

struct tcpwplus {
	u64 bw_ns;		/* first EWMA stage, bytes/s */
	u64 bw;			/* BWE: second EWMA stage, bytes/s */
	u32 bk;			/* bytes acknowledged in the current window */
	u32 win_start;		/* start of the current window, us */
	u32 rtt_us;		/* latest RTT sample, us */
	u32 rtt_min_us;		/* RTTmin, ~0U = none */
	u32 win_min_us;		/* lower bound on the sampling window, us */
	u8 first;		/* no sample taken yet */
	u8 reset_rtt_min;	/* take the next RTT sample as RTTmin */
	struct cc_ackcnt ac;
};

static CC_INLINE void tcpwplus_state_init(struct tcpwplus *w, u32 now_us,
				    u32 snd_una, u32 win_min_us)
{
	w->bw_ns = 0;
	w->bw = 0;
	w->bk = 0;
	w->win_start = now_us;
	w->rtt_us = 0;
	w->rtt_min_us = ~0U;
	w->win_min_us = win_min_us;
	w->first = 1;
	w->reset_rtt_min = 0;
	cc_ackcnt_init(&w->ac, snd_una);
}

static CC_INLINE u64 tcpwplus_ewma(u64 old, u64 sample)
{
	return CC_DIV64(TCPWP_GAIN_NUM * old + sample, TCPWP_GAIN_DEN);
}

static CC_INLINE void tcpwplus_rtt(struct tcpwplus *w, u32 rtt_us)
{
	if (!rtt_us)
		return;
	w->rtt_us = rtt_us;
	if (w->reset_rtt_min || rtt_us < w->rtt_min_us)
		w->rtt_min_us = rtt_us;
	w->reset_rtt_min = 0;
}

/* Close the window if it lasted one RTT.  Returns 1 on a new estimate. */
static CC_INLINE int tcpwplus_update(struct tcpwplus *w, u32 now_us)
{
	s32 dt = cc_time_delta(now_us, w->win_start);
	u64 b;

	if (!w->rtt_us || dt <= (s32)CC_MAX(w->rtt_us, w->win_min_us))
		return 0;
	b = cc_rate_Bps(w->bk, (u32)dt);
	if (w->first) {
		w->bw_ns = b;
		w->bw = b;
		w->first = 0;
	} else {
		w->bw_ns = tcpwplus_ewma(w->bw_ns, b);
		w->bw = tcpwplus_ewma(w->bw, w->bw_ns);
	}
	w->bk = 0;
	w->win_start = now_us;
	return 1;
}

/* Every ACK: count what it reports (AckedCount), then maybe sample. */
static CC_INLINE int tcpwplus_on_ack(struct tcpwplus *w, u32 now_us,
				     u32 snd_una, u32 mss)
{
	w->bk += cc_acked_count(&w->ac, snd_una, mss);
	return tcpwplus_update(w, now_us);
}

/* eq. (5) */
static CC_INLINE u32 tcpwplus_loss_ssthresh(const struct tcpwplus *w, u32 mss)
{
	return cc_bdp_pkts(w->bw, w->rtt_min_us, mss);
}

static CC_INLINE void tcpwplus_on_rto(struct tcpwplus *w)
{
	w->reset_rtt_min = 1;
}

#endif /* CC_TCPWPLUS_H */
