// SPDX-License-Identifier: GPL-2.0
/*
 * tcpwplus.bpf.c - TCP Westwood+ as a struct_ops congestion control,
 * under its own name so it can run beside the in-tree "westwood".
 * The algorithm is core/tcpwplus.h (paper references there, and the two
 * differences from westwood: eq. (5) at loss detection, RTT in us).
 *
 *   in_ack_event: AckedCount, one BWE sample per RTT (EWMA)
 *   pkts_acked:   RTT, RTTmin
 *   cong_avoid:   Reno
 *   ssthresh:     max(2, BWE * RTTmin / MSS)           (eq. (5))
 *   COMPLETE_CWR: cwnd = ssthresh;  LOSS (RTO): re-learn RTTmin
 */
#include "cc_bpf.h"
#include "tcpwplus.h"

CC_EXPORT_MAP(tcpwplus);

/* Lower bound of the sampling window, us; settable before load. */
const volatile u32 win_min_us = TCPWP_WIN_MIN_US;

static __always_inline void tcpwplus_export(struct sock *sk,
					    struct tcpwplus *w, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_tcpwplus, sk, force, w->bw, w->rtt_min_us);
	if (!v)
		return;
	v->x[0] = (u32)(w->bw_ns / 1000);
	v->x[1] = w->rtt_us;
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_init, struct sock *sk)
{
	tcpwplus_state_init(cc_priv(sk), cc_now_us(sk),
			    cc_tcp_sk(sk)->snd_una, win_min_us);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct tcpwplus *w = cc_priv(sk);
	int upd = tcpwplus_on_ack(w, cc_now_us(sk), tp->snd_una, tp->mss_cache);

	cc_guard(sk, &st_tcpwplus);
	tcpwplus_export(sk, w, upd);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		tcpwplus_rtt(cc_priv(sk), (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
u32 BPF_PROG(tcpwplus_ssthresh, struct sock *sk)
{
	struct tcpwplus *w = cc_priv(sk);
	u32 ss = tcpwplus_loss_ssthresh(w, cc_tcp_sk(sk)->mss_cache);

	tcpwplus_export(sk, w, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct tcpwplus *w = cc_priv(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)
		tp->snd_cwnd = tp->snd_ssthresh =
			tcpwplus_loss_ssthresh(w, tp->mss_cache);
	else if (ev == CA_EVENT_LOSS)
		tcpwplus_on_rto(w);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_tcpwplus);
}

SEC("struct_ops")
u32 BPF_PROG(tcpwplus_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(tcpwplus_release, struct sock *sk)
{
	cc_export_delete(&st_tcpwplus, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops tcpwplus = {
	.init		= (void *)tcpwplus_init,
	.release	= (void *)tcpwplus_release,
	.ssthresh	= (void *)tcpwplus_ssthresh,
	.cong_avoid	= (void *)tcpwplus_cong_avoid,
	.cwnd_event	= (void *)tcpwplus_cwnd_event,
	.in_ack_event	= (void *)tcpwplus_in_ack_event,
	.pkts_acked	= (void *)tcpwplus_pkts_acked,
	.set_state	= (void *)tcpwplus_set_state,
	.undo_cwnd	= (void *)tcpwplus_undo_cwnd,
	.name		= "tcpwplus",
};
