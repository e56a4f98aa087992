// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * harness.c - drive the portable cores (hosts/cc/core/) in userspace with
 * synthetic ACK/loss traces.  tests/test_cc_core.py runs each sub-command
 * and checks the printed "key=value" lines against values worked by hand
 * from the papers' equations.  Integer arithmetic only, like the cores.
 *
 *   harness tustin | ackcount | ssthresh | logww | btbe | mptcpw |
 *           mptcpw_recovery | abse | illinois | highspeed | lia | unmptcpw
 *   harness abse_trace <rate_Bps> <mss> <pkts_per_ack> <rtt_us> <seconds>
 *   harness climb <reno|tcpwplus|logwestwood|logwestwood_adapt> <pkts_per_ack>
 *                 <ack|packet>
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tcpw.h"
#include "../core/tcpwplus.h"
#include "../core/tcpw_abse.h"
#include "../core/logwestwood.h"
#include "../core/btbe.h"
#include "../core/mptcpw.h"
#include "../core/cc_illinois.h"
#include "../core/cc_highspeed.h"
#include "../core/cc_lia.h"
#include "../core/unmptcpw.h"

#define P64(k, v)	printf("%s=%" PRIu64 "\n", (k), (u64)(v))

/* Step response of the Tustin filter (mptcpw §III): a constant rate of
 * 10 000 bytes every 10 ms (1e6 B/s) into an estimator starting at 0. */
static int cmd_tustin(void)
{
	struct tcpw w;
	u32 t = 0, una = 0, k;

	tcpw_state_init(&w, t, una, TCPW_TAU_US_DEFAULT);
	printf("tau_us=%u\ndt_us=10000\nrate_Bps=1000000\n", TCPW_TAU_US_DEFAULT);
	for (k = 1; k <= 300; k++) {
		t += 10000;
		una += 10000;
		tcpw_on_ack(&w, t, una, 1000);
		printf("step_%u=%" PRIu64 "\n", k, w.e.bw);
	}
	return 0;
}

/* AckedCount (abse §2.2) in segments: mss = 1, sequence numbers count
 * segments. */
static void ack_step(struct cc_ackcnt *a, const char *tag, u32 seq)
{
	u32 acked = cc_acked_count(a, seq, 1);

	printf("%s_acked=%u\n%s_accounted=%u\n", tag, acked, tag, a->accounted);
}

static int cmd_ackcount(void)
{
	struct cc_ackcnt a;

	/* A: three DUPACKs, then a cumulative ACK for 4 segments */
	cc_ackcnt_init(&a, 10);
	ack_step(&a, "a_dup1", 10);
	ack_step(&a, "a_dup2", 10);
	ack_step(&a, "a_dup3", 10);
	ack_step(&a, "a_cum", 14);
	/* B: three DUPACKs, then a cumulative ACK for 2 segments */
	cc_ackcnt_init(&a, 10);
	ack_step(&a, "b_dup1", 10);
	ack_step(&a, "b_dup2", 10);
	ack_step(&a, "b_dup3", 10);
	ack_step(&a, "b_cum", 12);
	ack_step(&a, "b_next", 14);
	/* C: a delayed ACK (2 segments), nothing accounted for */
	cc_ackcnt_init(&a, 10);
	ack_step(&a, "c_delayed", 12);
	/* D: one in-order segment */
	ack_step(&a, "d_single", 13);
	/* E: an ACK below the last one (reordered): a DUPACK */
	ack_step(&a, "e_old", 11);
	ack_step(&a, "e_next", 15);
	return 0;
}

/*
 * Loss response of every estimator-based member: a path of 1e6 B/s
 * (1000-byte segments, 1000 per second) with RTT 100 ms, driven for 20 s
 * with one ACK per ms, then a loss at cwnd 150.  Expected ssthresh:
 * BWE * RTTmin / MSS with the printed BWE (the BDP is 100 packets).
 */
#define SS_MSS		1000U
#define SS_RTT		100000U
#define SS_CWND		150U

static int cmd_ssthresh(void)
{
	struct tcpw w;
	struct tcpwplus wp;
	struct tcpw_abse a;
	struct logwestwood l;
	struct btbe b;
	struct mptcpw m;
	u32 t = 0, una = 0, i, ts = 1;

	tcpw_state_init(&w, t, una, TCPW_TAU_US_DEFAULT);
	tcpwplus_state_init(&wp, t, una, TCPWP_WIN_MIN_US);
	abse_init(&a, t, una, ABSE_N_DEFAULT, ABSE_TMIN_GAPS_DEFAULT);
	logww_init(&l, t, una, LOGWW_ALPHA_DEFAULT, 1, 0);
	btbe_state_init(&b, t, una, BTBE_LAMBDA_X1000, BTBE_TS_HZ_DEFAULT);
	mptcpw_state_init(&m, t, una, TCPW_TAU_US_DEFAULT);
	for (i = 0; i < 20000; i++) {
		t += 1000;
		ts += 1;
		una += SS_MSS;
		tcpw_bwe_rtt(&w.e, SS_RTT);
		tcpw_on_ack(&w, t, una, SS_MSS);
		tcpwplus_rtt(&wp, SS_RTT);
		tcpwplus_on_ack(&wp, t, una, SS_MSS);
		abse_rtt(&a, SS_RTT);
		abse_on_ack(&a, t, una, SS_MSS, SS_RTT, SS_CWND);
		tcpwplus_rtt(&l.wp, SS_RTT);
		tcpwplus_on_ack(&l.wp, t, una, SS_MSS);
		btbe_rtt(&b, SS_RTT);
		btbe_on_ack(&b, t, una, SS_MSS, ts, SS_CWND);
		tcpw_bwe_rtt(&m.w.e, SS_RTT);
		tcpw_on_ack(&m.w, t, una, SS_MSS);
	}
	printf("mss=%u\nrtt_us=%u\ncwnd=%u\n", SS_MSS, SS_RTT, SS_CWND);
	P64("tcpw_bwe", w.e.bw);
	P64("tcpw_rttmin", w.e.rtt_min_us);
	P64("tcpw_ssthresh", tcpw_loss_ssthresh(&w, SS_CWND, SS_MSS));
	P64("tcpw_cwnd_after", tcpw_recovery_cwnd(SS_CWND, tcpw_loss_ssthresh(&w, SS_CWND, SS_MSS)));
	P64("tcpw_cwnd_after_small", tcpw_recovery_cwnd(60, tcpw_loss_ssthresh(&w, 60, SS_MSS)));
	P64("tcpwplus_bwe", wp.bw);
	P64("tcpwplus_rttmin", wp.rtt_min_us);
	P64("tcpwplus_ssthresh", tcpwplus_loss_ssthresh(&wp, SS_MSS));
	P64("tcpw_abse_bwe", a.bw);
	P64("tcpw_abse_rttmin", a.rtt_min_us);
	P64("tcpw_abse_ssthresh", abse_ssthresh(&a, SS_MSS));
	P64("logwestwood_bwe", l.wp.bw);
	P64("logwestwood_rttmin", l.wp.rtt_min_us);
	P64("logwestwood_ssthresh", logww_ssthresh(&l, SS_CWND, SS_MSS));
	P64("logwestwood_wmax", l.wmax);
	P64("mptcpw_bwe", m.w.e.bw);
	P64("mptcpw_rttmin", m.w.e.rtt_min_us);
	P64("mptcpw_ssthresh", mptcpw_loss_ssthresh(&m, SS_CWND, SS_MSS));
	P64("btbe_bwe", b.ebw);
	P64("btbe_rttmin", b.base_rtt_us);
	P64("btbe_wb", b.wb);
	P64("btbe_ssthresh", btbe_loss_ssthresh(&b));
	return 0;
}

/* eq. (7) steps and the alpha adaptation of the LogWestwood+ paper §II. */
static int cmd_logww(void)
{
	static const u32 cases[][3] = {	/* W, Wmax, alpha (integer) */
		{ 100, 200, 4 }, { 10, 100, 2 }, { 199, 200, 4 },
		{ 683, 733, 4 }, { 300, 200, 4 }, { 50, 0, 4 },
	};
	struct logwestwood l;
	u32 i, w;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		printf("step_%u_%u_%u=%" PRIu64 "\n", cases[i][0], cases[i][1],
		       cases[i][2], logww_step_q20(cases[i][0], cases[i][1],
						   cases[i][2] * LOGWW_UNIT));
	/* per-ACK trace from W = 10 towards Wmax = 100 with alpha = 2 */
	logww_init(&l, 0, 0, 2 * LOGWW_UNIT, 0, 0);
	l.wmax = 100;
	w = 10;
	for (i = 1; i <= 5; i++) {
		logww_cong_avoid(&l, &w, 1);
		printf("trace_%u=%u\n", i, w);
	}
	/* the same from delayed ACKs (acked = 2), per packet and per ACK */
	for (i = 0; i < 2; i++) {
		u32 k;

		logww_init(&l, 0, 0, 2 * LOGWW_UNIT, 0, i);
		l.wmax = 100;
		w = 10;
		for (k = 1; k <= 3; k++) {
			logww_cong_avoid(&l, &w, 2);
			printf("%s_%u=%u\n", i ? "delack_per_ack" : "delack_per_pkt",
			       k, w);
		}
	}
	/* alpha: x2 on a loss before Wmax, /2 per errorless climb, floor 2 */
	logww_init(&l, 0, 0, 4 * LOGWW_UNIT, 1, 0);
	l.wp.rtt_min_us = 100000;
	l.wp.bw = 500000;
	printf("alpha_0=%u\n", l.alpha);
	logww_ssthresh(&l, 100, 1000);		/* first loss: no Wmax yet */
	printf("alpha_1_first_loss=%u\nwmax_1=%u\n", l.alpha, l.wmax);
	logww_ssthresh(&l, 80, 1000);		/* W never reached 100 */
	printf("alpha_2_loss_below=%u\nwmax_2=%u\n", l.alpha, l.wmax);
	w = 79;
	for (i = 0; i < 2000 && w < 80; i++)
		logww_cong_avoid(&l, &w, 1);
	printf("alpha_3_reached=%u\n", l.alpha);
	logww_ssthresh(&l, 90, 1000);		/* loss after reaching */
	printf("alpha_4_loss_after=%u\n", l.alpha);
	w = 60;
	for (i = 0; i < 100000 && w < 90; i++)
		logww_cong_avoid(&l, &w, 1);
	printf("alpha_5_reached=%u\n", l.alpha);
	logww_ssthresh(&l, 95, 1000);
	w = 60;
	for (i = 0; i < 100000 && w < 95; i++)
		logww_cong_avoid(&l, &w, 1);
	printf("alpha_6_floor=%u\n", l.alpha);
	return 0;
}

/* btbe §III: alpha(w), the estimator and the decrease. */
static int cmd_btbe(void)
{
	static const u32 ws[] = { 300, 350, 360, 400, 500, 600, 601 };
	struct btbe b;
	u32 i, t = 0, una = 0, ts = 1000, rtt;

	for (i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
		printf("alpha_paper_%u=%u\n", ws[i],
		       btbe_alpha_q10(ws[i], 300, 600, BTBE_LAMBDA_X1000));
		printf("alpha_calib_%u=%u\n", ws[i],
		       btbe_alpha_q10(ws[i], 300, 600,
				      BTBE_LAMBDA_CALIBRATED_X1000));
	}
	for (i = 0; i <= 160; i += 8)
		printf("exp_%u=%u\n", i * 64, btbe_exp_neg_q24(i * 64));
	/* estimator: 1250 bytes per receiver tick (1.25e6 B/s), 1000-byte
	 * segments, baseRTT 100 ms, later rounds at 150 ms, cwnd 200 */
	btbe_state_init(&b, t, una, BTBE_LAMBDA_X1000, 1000);
	for (i = 0; i < 4000; i++) {
		t += 1000;
		ts += 1;
		una += 1250;
		rtt = i < 1000 ? 100000 : 150000;
		btbe_rtt(&b, rtt);
		btbe_on_ack(&b, t, una, 1000, ts, 200);
	}
	P64("est_ebw", b.ebw);
	P64("est_base_rtt", b.base_rtt_us);
	P64("est_rtt_avg", b.rtt_avg_us);
	P64("est_rtt_max", b.rtt_max_us);
	P64("est_wb", b.wb);
	P64("est_wt", b.wt);
	P64("est_ssthresh", btbe_loss_ssthresh(&b));
	btbe_on_rto(&b);
	P64("rto_rtt_max", b.rtt_max_us);
	/* increase: at w < W_S alpha = 16, so one window of ACKs adds 16 */
	b.wb = 300;
	b.wt = 600;
	b.acc = 0;
	rtt = 320;
	for (i = 0; i < 320; i++)
		btbe_increase(&b, &rtt, 1);
	P64("inc_from_320", rtt);
	return 0;
}

/* A connection of n subflows with these windows (packets) and RTTs (us). */
static void conn_fill(struct mptcpw_conn *c, u32 n, const u32 *w, const u32 *rtt)
{
	u32 i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < n; i++) {
		c->path[i].cwnd = w[i];
		c->path[i].rtt_us = rtt[i];
		c->used |= 1U << i;
	}
}

/* eq. (8) with gamma = 1. */
static void delta_case(const char *tag, u32 n, const u32 *w, const u32 *rtt)
{
	struct mptcpw_conn c;
	u32 i;

	conn_fill(&c, n, w, rtt);
	for (i = 0; i < n; i++)
		printf("%s_%u=%u\n", tag, i, mptcpw_delta_q16(&c, i));
}

static int cmd_mptcpw(void)
{
	static const u32 w1[] = { 10, 20 }, r1[] = { 100000, 200000 };
	static const u32 w2[] = { 30, 10 }, r2[] = { 50000, 100000 };
	static const u32 w3[] = { 40 }, r3[] = { 80000 };
	static const u32 w4[] = { 25, 25, 25 }, r4[] = { 60000, 60000, 60000 };
	struct mptcpw m;
	u32 cw = 100, i;

	delta_case("d_eqrate", 2, w1, r1);
	delta_case("d_uneven", 2, w2, r2);
	delta_case("d_single", 1, w3, r3);
	delta_case("d_three", 3, w4, r4);
	/* increase: delta = 0.25 -> a window of ACKs adds 0.25 packets */
	mptcpw_state_init(&m, 0, 0, TCPW_TAU_US_DEFAULT);
	for (i = 0; i < 400; i++)
		mptcpw_increase(&m, &cw, 1, MPTCPW_UNIT / 4);
	printf("inc_quarter_400acks=%u\n", cw);
	return 0;
}

/*
 * Two coupled subflows as the eBPF shell drives them: every ACK calls
 * mptcpw_on_ack (in_ack_event), cong_avoid (mptcpw_delta + increase) runs
 * only outside recovery.  Subflow A (slot 0, RTT 50 ms) falls from 100 to
 * 50 packets at a loss and stays in recovery; subflow B (slot 1, RTT
 * 100 ms, 60 packets) keeps increasing.  B's delta must see A's 50.
 */
static int cmd_mptcpw_recovery(void)
{
	struct mptcpw_conn c;
	struct mptcpw a, b;
	u32 t = 0, una_a = 0, una_b = 0, wa = 100, wb = 60, i, d;

	memset(&c, 0, sizeof(c));
	mptcpw_state_init(&a, t, una_a, TCPW_TAU_US_DEFAULT);
	mptcpw_state_init(&b, t, una_b, TCPW_TAU_US_DEFAULT);
	a.slot = 0;
	b.slot = 1;
	c.used = 3;
	for (i = 1; i <= 40; i++) {
		t += 1000;
		una_a += 1000;
		una_b += 1000;
		if (i == 20) {
			printf("wa_before=%u\nwb_before=%u\ndelta_b_before=%u\n",
			       wa, wb, mptcpw_delta(&b, &c));
			wa = 50;		/* A's loss: recovery from here on */
		}
		mptcpw_on_ack(&a, &c, t, una_a, 1000, wa, 50000);
		if (i < 20)
			mptcpw_increase(&a, &wa, 1, mptcpw_delta(&a, &c));
		mptcpw_on_ack(&b, &c, t, una_b, 1000, wb, 100000);
		d = mptcpw_delta(&b, &c);
		mptcpw_increase(&b, &wb, 1, d);
		if (i == 21)
			printf("wa_recovery=%u\nwb_recovery=%u\n"
			       "delta_b_recovery=%u\n", wa, wb, d);
	}
	printf("slot_a_cwnd=%u\nslot_a_rtt_us=%u\n", c.path[0].cwnd,
	       c.path[0].rtt_us);
	return 0;
}

/* ABSE: T_k and tau_k on an uncongested and a congested path. */
static int cmd_abse(void)
{
	struct tcpw_abse a;
	u32 t = 0, una = 0, i;

	abse_init(&a, t, una, ABSE_N_DEFAULT, ABSE_TMIN_GAPS_DEFAULT);
	for (i = 0; i < 5000; i++) {		/* 1e6 B/s, RTT 100 ms */
		t += 1000;
		una += 1000;
		abse_rtt(&a, 100000);
		abse_on_ack(&a, t, una, 1000, 100000, 100);
	}
	P64("uncong_bw", a.bw);
	P64("uncong_th", a.th);
	P64("uncong_tk_us", abse_tk_us(&a));
	P64("uncong_tau_us", abse_tau_us(&a, 100000));
	/* same rate, cwnd 400: Th*RTTmin = 100 pkts, T_k = RTT * 300/400 */
	for (i = 0; i < 2000; i++) {
		t += 1000;
		una += 1000;
		abse_on_ack(&a, t, una, 1000, 100000, 400);
	}
	P64("cong_bw", a.bw);
	P64("cong_tk_us", abse_tk_us(&a));
	P64("cong_tk_expect_us", 75000);
	P64("cong_ssthresh", abse_ssthresh(&a, 1000));
	return 0;
}

/* TCP-Illinois: alpha(d_a, d_m), beta(d_a, d_m), a round, the increase,
 * ssthresh and the RTO reset. */
static int cmd_illinois(void)
{
	static const u32 das[] = { 0, 100, 101, 1000, 1001, 4500, 7999, 8000,
				   10000 };
	struct illinois c;
	u32 i, w, acks, ack = 0;

	for (i = 0; i < sizeof(das) / sizeof(das[0]); i++) {
		ill_init(&c, 0, ILL_WIN_THRESH, ILL_THETA);
		c.rtt_above = 1;	/* past the first low-delay rounds */
		printf("alpha_%u=%u\n", das[i], ill_alpha(&c, das[i], 10000));
		printf("beta_%u=%u\n", das[i], ill_beta(das[i], 10000));
	}
	/* never above d_1: alpha_max at once */
	ill_init(&c, 0, ILL_WIN_THRESH, ILL_THETA);
	printf("alpha_fresh_low=%u\n", ill_alpha(&c, 50, 10000));
	/* after a high-delay round, alpha_max again only on the theta-th low one */
	c.alpha = ill_alpha(&c, 8000, 10000);
	for (i = 1; i <= ILL_THETA; i++) {
		c.alpha = ill_alpha(&c, 50, 10000);
		printf("alpha_low_round_%u=%u\n", i, c.alpha);
	}
	/* one round at W = 100: samples 100 ms, then 100 at 110 ms, one at
	 * 150 ms; base 100 ms, max 150 ms, average (100 * 110 + 150) / 101 */
	ill_init(&c, 1000, ILL_WIN_THRESH, ILL_THETA);
	ill_sample(&c, 1, 100000);
	ill_on_ack(&c, 1001, 2000, 100);	/* round 1 ends: base only */
	for (i = 0; i < 100; i++)
		ill_sample(&c, 1, 110000);
	ill_sample(&c, 1, 150000);
	ill_on_ack(&c, 1500, 3000, 100);	/* not past end_seq 2000 */
	printf("round_mid_cnt=%u\n", c.cnt_rtt);
	ill_on_ack(&c, 2001, 3000, 100);
	P64("round_base_us", c.base_rtt_us);
	P64("round_max_us", c.max_rtt_us);
	P64("round_alpha", c.alpha);
	P64("round_beta", c.beta);
	P64("round_ssthresh_100", ill_ssthresh(&c, 100));
	/* below win_thresh: Reno's alpha and beta */
	ill_on_ack(&c, 3001, 4000, 10);
	P64("small_alpha", c.alpha);
	P64("small_beta", c.beta);
	P64("small_ssthresh_10", ill_ssthresh(&c, 10));
	/* increase at alpha = 10, W = 100, one packet per ACK: 100 ACKs */
	c.alpha = ILL_ALPHA_MAX;
	c.cnt = 0;
	w = 100;
	for (acks = 0; acks < 100; acks++)
		ill_increase(&c, &w, 0xffffffffU);
	printf("inc_alpha10_w100_100acks=%u\n", w);
	/* alpha = 1, W = 100: one window of ACKs adds one */
	c.alpha = ILL_ALPHA_UNIT;
	c.cnt = 0;
	w = 100;
	for (acks = 0; acks < 100; acks++)
		ill_increase(&c, &w, 0xffffffffU);
	printf("inc_alpha1_w100_100acks=%u\n", w);
	/* a delayed ACK's sample (2 packets) counts 2 once */
	c.cnt = 0;
	ill_sample(&c, 2, 100000);
	ill_increase(&c, &w, 0xffffffffU);
	ill_increase(&c, &w, 0xffffffffU);
	printf("cnt_after_delack_and_one=%u\n", c.cnt);
	/* RTO: alpha 1, beta 1/2 */
	c.alpha = 300;
	c.beta = ILL_BETA_MIN;
	ill_on_rto(&c, 5000);
	printf("rto_alpha=%u\nrto_beta=%u\nrto_end_seq=%u\n", c.alpha, c.beta,
	       c.end_seq);
	(void)ack;
	return 0;
}

/* HighSpeed TCP: rows, decreases, the increase and the first-loss case. */
static int cmd_highspeed(void)
{
	static const u32 ws[] = { 1, 38, 39, 118, 119, 1000, 1058, 1059,
				  84035, 89053, 89054, 1000000 };
	struct highspeed h;
	u32 i, w, acks;

	for (i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
		h.ai = hs_row(ws[i]);
		printf("row_%u=%u\nmd_%u=%u\nssthresh_%u=%u\n", ws[i], h.ai,
		       ws[i], hs_md(h.ai), ws[i], hs_ssthresh(&h, ws[i]));
	}
	/* slow start never sets the row: a first loss at 1000 halves */
	hs_init(&h);
	printf("first_loss_ssthresh_1000=%u\n", hs_ssthresh(&h, 1000));
	/* CA at 1000 (row 7, a = 8): +1 every 125 ACKs, 1000 ACKs add 8 */
	hs_init(&h);
	w = 1000;
	for (acks = 1; acks <= 1000; acks++) {
		hs_cong_avoid(&h, &w, 0xffffffffU);
		if (acks == 124 || acks == 125)
			printf("w_after_%u_acks=%u\n", acks, w);
	}
	printf("w_after_1000_acks=%u\nrow_after=%u\n", w, h.ai);
	/* at 38 (row 0, a = 1): Reno, 38 ACKs add one */
	hs_init(&h);
	w = 38;
	for (acks = 0; acks < 38; acks++)
		hs_cong_avoid(&h, &w, 0xffffffffU);
	printf("reno_w_after_38_acks=%u\n", w);
	/* the clamp stops it */
	w = 50;
	for (acks = 0; acks < 500; acks++)
		hs_cong_avoid(&h, &w, 50);
	printf("clamped_w=%u\n", w);
	return 0;
}

/* LIA (RFC 6356 §3): alpha and delta_i on a table of paths. */
static void lia_case(const char *tag, u32 n, const u32 *w, const u32 *rtt)
{
	struct mptcpw_conn c;
	u32 i;

	conn_fill(&c, n, w, rtt);
	printf("%s_alpha=%u\n", tag, lia_alpha_q16(&c));
	for (i = 0; i < n; i++)
		printf("%s_delta_%u=%u\n", tag, i, lia_delta_q16(&c, i));
}

static int cmd_lia(void)
{
	static const u32 w1[] = { 10, 10 }, r1[] = { 100000, 100000 };
	static const u32 w2[] = { 10, 20 }, r2[] = { 100000, 200000 };
	static const u32 w3[] = { 30, 10 }, r3[] = { 50000, 100000 };
	static const u32 w4[] = { 40 }, r4[] = { 80000 };
	static const u32 w5[] = { 20, 5, 5 }, r5[] = { 10000, 10000, 10000 };
	static const u32 w6[] = { 100, 2 }, r6[] = { 10000, 400000 };
	struct mptcpw_conn c;
	struct lia a, b;
	u32 wa = 100, wb = 100, i;

	lia_case("equal", 2, w1, r1);
	lia_case("eqrate", 2, w2, r2);
	lia_case("uneven", 2, w3, r3);
	lia_case("single", 1, w4, r4);
	lia_case("three", 3, w5, r5);
	lia_case("farpath", 2, w6, r6);
	/* two equal subflows of 100 at 100 ms: alpha = 1/2, each adds
	 * alpha / W_total = 1/400 per packet; 400 packets add one */
	memset(&c, 0, sizeof(c));
	lia_init(&a);
	lia_init(&b);
	a.slot = 0;
	b.slot = 1;
	c.used = 3;
	for (i = 0; i < 400; i++) {
		lia_on_ack(&a, &c, wa, 100000);
		lia_on_ack(&b, &c, wb, 100000);
		lia_increase(&a, &c, &wa, 1);
		if (i == 198)
			printf("coupled_w_after_199=%u\n", wa);
	}
	printf("coupled_w_after_400=%u\n", wa);
	/* uncoupled (no table): Reno, 100 packets add one */
	lia_init(&a);
	wa = 100;
	for (i = 0; i < 100; i++)
		lia_increase(&a, NULL, &wa, 1);
	printf("alone_w_after_100=%u\n", wa);
	printf("ssthresh_100=%u\nssthresh_3=%u\n", lia_ssthresh(&a, 100),
	       lia_ssthresh(&a, 3));
	return 0;
}

/* unMPTCPW: the split as delta, and its increase. */
static int cmd_unmptcpw(void)
{
	struct mptcpw m;
	u32 w = 100, i;

	printf("delta_default=%u\ndelta_one=%u\ndelta_over=%u\n",
	       unmptcpw_delta_q16(UNMPTCPW_SPLIT_X1024),
	       unmptcpw_delta_q16(1024), unmptcpw_delta_q16(5000));
	mptcpw_state_init(&m, 0, 0, TCPW_TAU_US_DEFAULT);
	for (i = 0; i < 399; i++)
		mptcpw_increase(&m, &w, 1, unmptcpw_delta_q16(UNMPTCPW_SPLIT_X1024));
	printf("w_after_399=%u\n", w);
	mptcpw_increase(&m, &w, 1, unmptcpw_delta_q16(UNMPTCPW_SPLIT_X1024));
	printf("w_after_400=%u\n", w);
	return 0;
}

/*
 * ABSE on a slow path (abse §2.1): rate_Bps, mss-byte segments, one ACK per
 * per_ack segments at even spacing, RTT = RTTmin = rtt_us, cwnd = the BDP
 * (no queue), for seconds.  Prints the estimate at the end and its lowest
 * and highest value over the second half, and ssthresh at the end.
 */
static int cmd_abse_trace(u32 rate_Bps, u32 mss, u32 per_ack, u32 rtt_us,
			  u32 seconds)
{
	struct tcpw_abse a;
	u64 t_ns = 0, gap_ns, end_ns, lo = ~0ULL, hi = 0;
	u32 una = 0, cwnd;

	if (!rate_Bps || !mss || !per_ack || !rtt_us || !seconds)
		return 2;
	gap_ns = (u64)per_ack * mss * 1000000000ULL / rate_Bps;
	end_ns = (u64)seconds * 1000000000ULL;
	cwnd = (u32)CC_MAX((u64)rate_Bps * rtt_us / 1000000 / mss, 1ULL);
	abse_init(&a, 0, 0, ABSE_N_DEFAULT, ABSE_TMIN_GAPS_DEFAULT);
	while ((t_ns += gap_ns) <= end_ns) {
		una += per_ack * mss;
		abse_rtt(&a, rtt_us);
		abse_on_ack(&a, (u32)(t_ns / 1000), una, mss, rtt_us, cwnd);
		if (t_ns >= end_ns / 2) {
			lo = CC_MIN(lo, a.bw);
			hi = CC_MAX(hi, a.bw);
		}
	}
	printf("rate_Bps=%u\nmss=%u\nrtt_us=%u\ncwnd=%u\n", rate_Bps, mss,
	       rtt_us, cwnd);
	P64("ack_gap_us", gap_ns / 1000);
	P64("bw", a.bw);
	P64("bw_lo", lo);
	P64("bw_hi", hi);
	P64("tk_us", abse_tk_us(&a));
	P64("ssthresh", abse_ssthresh(&a, mss));
	return 0;
}

/*
 * The LogWestwood+ scenario (LogWestwood+ paper §III): 100 Mbit/s bottleneck,
 * 1500-byte packets, base RTT 82 ms -> a 683-packet pipe, 50-packet
 * drop-tail queue, capacity 733.  Round-based packet model: a round sends W
 * packets and lasts max(RTTmin, W/C); its ACKs (one per b packets, as a
 * delayed-ACK receiver sends) arrive spaced b/C; a round starting with
 * W > 733 loses a packet and the loss response runs at the round's end.
 * The climb time is measured after the second loss, from the decrease back
 * to W >= 733.
 *
 * Two ways to count an ACK (the last argument):
 *   ack     ns-2, as the paper simulated: every ACK is one increase step
 *           (Reno W += 1/W, eq. (7) once), whatever it covers;
 *   packet  the kernel: cong_avoid(acked = b) per ACK, Reno through
 *           tcp_cong_avoid_ai (1/W per packet), logww_cong_avoid with
 *           acked = b and the shells' default per_ack = 0.
 */
#define CL_MSS		1500U
#define CL_RTT_US	82000U
#define CL_C_PPS_X1000	8333333ULL	/* 100e6 / 8 / 1500 * 1000 */
#define CL_CAP		733U

enum cl_algo { CL_RENO, CL_WP, CL_LOGWW, CL_LOGWW_ADAPT };

struct cl_sim {
	enum cl_algo algo;
	struct tcpwplus wp;
	struct logwestwood l;
	u64 t_ns;
	u32 w, cnt, una, b, per_packet;
};

static void cl_ack(struct cl_sim *s, u64 t_ns, u32 rtt_us)
{
	u32 now = (u32)(t_ns / 1000);
	struct tcpwplus *wp = s->algo >= CL_LOGWW ? &s->l.wp : &s->wp;

	s->una += s->b * CL_MSS;
	tcpwplus_rtt(wp, rtt_us);
	tcpwplus_on_ack(wp, now, s->una, CL_MSS);
	if (s->algo >= CL_LOGWW) {
		logww_cong_avoid(&s->l, &s->w, s->b);	/* as the shells call it */
		return;
	}
	s->cnt += s->per_packet ? s->b : 1;	/* W += 1/W per packet or ACK */
	if (s->cnt >= s->w) {
		u32 add = s->cnt / s->w;

		s->cnt -= add * s->w;
		s->w += add;
	}
}

/* One round; returns 1 if it ended in a loss. */
static int cl_round(struct cl_sim *s)
{
	u32 w = s->w, nacks = (w + s->b - 1) / s->b, i;
	u64 dur = (u64)w * 1000000000ULL * 1000 / CL_C_PPS_X1000;
	u64 gap = (u64)s->b * 1000000000ULL * 1000 / CL_C_PPS_X1000;
	u64 t0 = s->t_ns;

	if (dur < CL_RTT_US * 1000ULL)
		dur = CL_RTT_US * 1000ULL;
	for (i = 1; i <= nacks; i++)
		cl_ack(s, t0 + i * gap, (u32)(dur / 1000));
	s->t_ns = t0 + dur;
	if (w <= CL_CAP)
		return 0;
	if (s->algo == CL_RENO)
		s->w = CC_MAX(w / 2, 2U);
	else if (s->algo == CL_WP)
		s->w = tcpwplus_loss_ssthresh(&s->wp, CL_MSS);
	else
		s->w = logww_ssthresh(&s->l, w, CL_MSS);
	s->cnt = 0;
	return 1;
}

static int cmd_climb(const char *name, u32 b, const char *count)
{
	struct cl_sim s;
	u32 losses = 0, rounds = 0, start_w = 0;
	u64 t_loss = 0;

	memset(&s, 0, sizeof(s));
	if (!strcmp(name, "reno"))
		s.algo = CL_RENO;
	else if (!strcmp(name, "tcpwplus"))
		s.algo = CL_WP;
	else if (!strcmp(name, "logwestwood"))
		s.algo = CL_LOGWW;
	else if (!strcmp(name, "logwestwood_adapt"))
		s.algo = CL_LOGWW_ADAPT;
	else
		return 2;
	if (!strcmp(count, "packet"))
		s.per_packet = 1;
	else if (strcmp(count, "ack"))
		return 2;
	s.b = b ? b : 1;
	s.w = 600;
	tcpwplus_state_init(&s.wp, 0, 0, TCPWP_WIN_MIN_US);
	logww_init(&s.l, 0, 0, LOGWW_ALPHA_DEFAULT, s.algo == CL_LOGWW_ADAPT,
		   !s.per_packet);
	while (rounds++ < 100000) {
		if (losses == 2 && s.w >= CL_CAP) {
			printf("algo=%s\nacks_per_ack=%u\nper_packet=%u\n",
			       name, s.b, s.per_packet);
			printf("bdp_pkts=683\ncap_pkts=%u\nrtt_us=%u\n", CL_CAP,
			       CL_RTT_US);
			printf("start_w=%u\nclimb_us=%" PRIu64 "\n", start_w,
			       (s.t_ns - t_loss) / 1000);
			P64("alpha_q10", s.l.alpha);
			return 0;
		}
		if (cl_round(&s)) {
			losses++;
			t_loss = s.t_ns;
			start_w = s.w;
		}
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		goto usage;
	if (!strcmp(argv[1], "tustin"))
		return cmd_tustin();
	if (!strcmp(argv[1], "ackcount"))
		return cmd_ackcount();
	if (!strcmp(argv[1], "ssthresh"))
		return cmd_ssthresh();
	if (!strcmp(argv[1], "logww"))
		return cmd_logww();
	if (!strcmp(argv[1], "btbe"))
		return cmd_btbe();
	if (!strcmp(argv[1], "mptcpw"))
		return cmd_mptcpw();
	if (!strcmp(argv[1], "mptcpw_recovery"))
		return cmd_mptcpw_recovery();
	if (!strcmp(argv[1], "abse"))
		return cmd_abse();
	if (!strcmp(argv[1], "illinois"))
		return cmd_illinois();
	if (!strcmp(argv[1], "highspeed"))
		return cmd_highspeed();
	if (!strcmp(argv[1], "lia"))
		return cmd_lia();
	if (!strcmp(argv[1], "unmptcpw"))
		return cmd_unmptcpw();
	if (!strcmp(argv[1], "abse_trace") && argc == 7)
		return cmd_abse_trace((u32)strtoul(argv[2], NULL, 10),
				      (u32)strtoul(argv[3], NULL, 10),
				      (u32)strtoul(argv[4], NULL, 10),
				      (u32)strtoul(argv[5], NULL, 10),
				      (u32)strtoul(argv[6], NULL, 10));
	if (!strcmp(argv[1], "climb") && argc == 5)
		return cmd_climb(argv[2], (u32)strtoul(argv[3], NULL, 10),
				 argv[4]);
usage:
	fprintf(stderr, "usage: harness tustin|ackcount|ssthresh|logww|btbe|mptcpw|"
			"mptcpw_recovery|abse|\n"
			"               illinois|highspeed|lia|unmptcpw\n"
			"       harness abse_trace <rate_Bps> <mss> <pkts_per_ack> <rtt_us> <s>\n"
			"       harness climb <algo> <packets_per_ack> ack|packet\n");
	return 2;
}
