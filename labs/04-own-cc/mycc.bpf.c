// SPDX-License-Identifier: GPL-2.0
/*
 * mycc.bpf.c - lab 4: a congestion control of your own, AIMD(a, b), as an
 * eBPF struct_ops program the kernel's TCP calls on every ACK and loss.
 *
 *   cong_avoid:  slow start below ssthresh (given), then a packets more
 *                per round trip                                 (increase)
 *   ssthresh:    on a loss, the window to fall to: b times cwnd,
 *                at least 2 packets                             (decrease)
 *   undo_cwnd:   Reno's: a loss found spurious gives the window back
 *
 * Reno is AIMD(1, 1/2).  This one cuts less, to b = 0.7 (CUBIC's beta), and
 * grows by the a that makes it as fast as Reno at the same loss rate
 * (README, Background): a = 3 (1 - b) / (1 + b).
 *
 * No floating point in eBPF: a fraction f is the whole number
 * f * MYCC_UNIT (MYCC_UNIT means 1.0).
 */
#include "cc_bpf.h"

/* the kernel's additive increase: one packet more per w packets acknowledged */
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, u32 w, u32 acked) __ksym;

#define MYCC_SCALE	10
#define MYCC_UNIT	(1 << MYCC_SCALE)		/* 1.0 */
/* b: the window after a loss, as a fraction of the window at the loss */
#define MYCC_BETA	(MYCC_UNIT * 7 / 10)		/* 716: 0.70 */
/* a: packets added per round trip, Reno-friendly for MYCC_BETA */
#define MYCC_ALPHA	MYCC_UNIT	/* TODO: 3 (1 - b) / (1 + b), in MYCC_UNITs, from MYCC_BETA */

SEC("struct_ops")
void BPF_PROG(mycc_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	/* nothing while the window is not the limit; Reno's slow start below
	 * ssthresh; false when slow start used up every acknowledged packet */
	if (!cc_slow_start(sk, &acked))
		return;
	/* TODO (increase): MYCC_ALPHA / MYCC_UNIT packets more per round trip.
	 * tcp_cong_avoid_ai(tp, w, acked) adds one packet per w acknowledged;
	 * one round trip acknowledges about tp->snd_cwnd of them, so this,
	 * Reno's, adds one packet per round trip. */
	tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
}

SEC("struct_ops")
u32 BPF_PROG(mycc_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = cc_tcp_sk(sk);

	/* TODO (decrease): MYCC_BETA / MYCC_UNIT of tp->snd_cwnd, at least 2
	 * (the stack brings cwnd down to what this returns through fast
	 * recovery).  As it stands it never backs off. */
	return tp->snd_cwnd;
}

SEC("struct_ops")
u32 BPF_PROG(mycc_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mycc = {
	.ssthresh	= (void *)mycc_ssthresh,
	.cong_avoid	= (void *)mycc_cong_avoid,
	.undo_cwnd	= (void *)mycc_undo_cwnd,
	.name		= "mycc",
};
