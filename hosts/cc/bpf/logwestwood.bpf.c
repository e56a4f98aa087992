// SPDX-License-Identifier: GPL-2.0
/*
 * logwestwood.bpf.c - LogWestwood+ as a struct_ops congestion control.
 * The algorithm is core/logwestwood.h (paper references there).
 *
 *   in_ack_event: Westwood+ BWE (one sample per RTT)
 *   cong_avoid:   slow start, then eq. (7) per ACKed packet
 *   ssthresh:     eq. (5); Wmax <- cwnd; alpha x2 if Wmax was not reached
 *
 * eq. (7) runs once per acknowledged packet (acked, 2 for a delayed ACK),
 * as Linux applies Reno's 1/W, where the paper's ns-2 counts ACKs: with
 * delayed ACKs this shell grows twice as fast per RTT as the paper's
 * simulation.  per_ack = 1 (rodata) applies it once per ACK, as ns-2.
 */
#include "cc_bpf.h"
#include "logwestwood.h"

CC_EXPORT_MAP(logwestwood);

/* Initial alpha in Q10 (paper §III: 4) and whether it adapts (§II). */
const volatile u32 alpha_q10 = LOGWW_ALPHA_DEFAULT;
const volatile u32 alpha_adapt = 1;
/* eq. (7) once per ACK (the paper's ns-2) instead of per ACKed packet. */
const volatile u32 per_ack = 0;

static __always_inline void logww_export(struct sock *sk,
					 struct logwestwood *l, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_logwestwood, sk, force, l->wp.bw,
			    l->wp.rtt_min_us);
	if (!v)
		return;
	v->x[0] = l->wmax;
	v->x[1] = l->alpha;
	v->x[2] = l->reached;
}

SEC("struct_ops")
void BPF_PROG(logwestwood_init, struct sock *sk)
{
	logww_init(cc_priv(sk), cc_now_us(sk), cc_tcp_sk(sk)->snd_una,
		   alpha_q10, alpha_adapt, per_ack);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct logwestwood *l = cc_priv(sk);
	int upd = tcpwplus_on_ack(&l->wp, cc_now_us(sk), tp->snd_una,
				  tp->mss_cache);

	cc_guard(sk, &st_logwestwood);
	logww_export(sk, l, upd);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	struct logwestwood *l = cc_priv(sk);

	if (sample->rtt_us > 0)
		tcpwplus_rtt(&l->wp, (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tp->snd_cwnd;
	logww_cong_avoid(cc_priv(sk), &cwnd, acked);
	tp->snd_cwnd = CC_MIN(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
u32 BPF_PROG(logwestwood_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct logwestwood *l = cc_priv(sk);
	u32 ss = logww_ssthresh(l, tp->snd_cwnd, tp->mss_cache);

	logww_export(sk, l, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct logwestwood *l = cc_priv(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)
		tp->snd_cwnd = tp->snd_ssthresh =
			tcpwplus_loss_ssthresh(&l->wp, tp->mss_cache);
	else if (ev == CA_EVENT_LOSS)
		tcpwplus_on_rto(&l->wp);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_logwestwood);
}

SEC("struct_ops")
u32 BPF_PROG(logwestwood_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(logwestwood_release, struct sock *sk)
{
	cc_export_delete(&st_logwestwood, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops logwestwood = {
	.init		= (void *)logwestwood_init,
	.release	= (void *)logwestwood_release,
	.ssthresh	= (void *)logwestwood_ssthresh,
	.cong_avoid	= (void *)logwestwood_cong_avoid,
	.cwnd_event	= (void *)logwestwood_cwnd_event,
	.in_ack_event	= (void *)logwestwood_in_ack_event,
	.pkts_acked	= (void *)logwestwood_pkts_acked,
	.set_state	= (void *)logwestwood_set_state,
	.undo_cwnd	= (void *)logwestwood_undo_cwnd,
	.name		= "logwestwood",
};
