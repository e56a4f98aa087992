// SPDX-License-Identifier: GPL-2.0
/*
 * tcpw.bpf.c - TCP Westwood with faster recovery as a struct_ops
 * congestion control.  The algorithm is core/tcpw.h (paper references
 * there); this file only translates struct sock in and out.
 *
 *   in_ack_event: AckedCount + Tustin-filtered BWE   (every ACK)
 *   pkts_acked:   RTTmin
 *   cong_avoid:   Reno (slow start, +1/cwnd)
 *   ssthresh:     BWE * RTTmin / MSS                 (3 DUPACKs and RTO)
 *   COMPLETE_CWR: cwnd = min(cwnd at loss, ssthresh)
 */
#include "cc_bpf.h"
#include "tcpw.h"

CC_EXPORT_MAP(tcpw);

/* Filter time constant tau, us; the loader may set it before load. */
const volatile u32 tau_us = TCPW_TAU_US_DEFAULT;

static __always_inline void tcpw_export(struct sock *sk, struct tcpw *w,
					bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_tcpw, sk, force, w->e.bw, w->e.rtt_min_us);
	if (!v)
		return;
	v->x[0] = w->e.tau_us;
	v->x[1] = (u32)(w->e.b_prev / 1000);
}

SEC("struct_ops")
void BPF_PROG(tcpw_init, struct sock *sk)
{
	struct tcpw *w = cc_priv(sk);

	tcpw_state_init(w, cc_now_us(sk), cc_tcp_sk(sk)->snd_una, tau_us);
}

SEC("struct_ops")
void BPF_PROG(tcpw_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct tcpw *w = cc_priv(sk);

	cc_guard(sk, &st_tcpw);
	tcpw_on_ack(w, cc_now_us(sk), tp->snd_una, tp->mss_cache);
	tcpw_export(sk, w, false);
}

SEC("struct_ops")
void BPF_PROG(tcpw_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcpw *w = cc_priv(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&w->e, (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(tcpw_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
u32 BPF_PROG(tcpw_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct tcpw *w = cc_priv(sk);
	u32 ss = tcpw_loss_ssthresh(w, tp->snd_cwnd, tp->mss_cache);

	tcpw_export(sk, w, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(tcpw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct tcpw *w = cc_priv(sk);

	if (ev == CA_EVENT_COMPLETE_CWR && w->prior_cwnd)
		tp->snd_cwnd = tcpw_recovery_cwnd(w->prior_cwnd,
						  tp->snd_ssthresh);
}

SEC("struct_ops")
void BPF_PROG(tcpw_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_tcpw);
}

SEC("struct_ops")
u32 BPF_PROG(tcpw_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(tcpw_release, struct sock *sk)
{
	cc_export_delete(&st_tcpw, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops tcpw = {
	.init		= (void *)tcpw_init,
	.release	= (void *)tcpw_release,
	.ssthresh	= (void *)tcpw_ssthresh,
	.cong_avoid	= (void *)tcpw_cong_avoid,
	.cwnd_event	= (void *)tcpw_cwnd_event,
	.in_ack_event	= (void *)tcpw_in_ack_event,
	.pkts_acked	= (void *)tcpw_pkts_acked,
	.set_state	= (void *)tcpw_set_state,
	.undo_cwnd	= (void *)tcpw_undo_cwnd,
	.name		= "tcpw",
};
