// SPDX-License-Identifier: GPL-2.0
/*
 * mptcpw.bpf.c - coupled multipath TCP Westwood as a struct_ops congestion
 * control.  The algorithm is core/mptcpw.h (paper references there).
 *
 * Coupling (cc_mptcp.h): every MPTCP subflow finds its connection's token
 * and claims one slot of a shared struct mptcpw_conn in the mptcpw_conns
 * hash map keyed by that token.  Every ACK refreshes the slot's (cwnd,
 * srtt), in fast recovery too; cong_avoid computes delta_s of eq. (8) over
 * all live slots.  A plain
 * TCP flow (or a subflow that found no free slot) has no peers: delta = 1,
 * i.e. TCPW.
 *
 *   in_ack_event: TCPW estimator B_s (AckedCount + Tustin), slot refresh
 *   pkts_acked:   RTTmin_s
 *   cong_avoid:   delta_s; slow start, then min(delta_s, 1) / w_s per packet
 *   ssthresh:     B_s * RTTmin_s / MSS; COMPLETE_CWR: w_s = that
 *   release:      free the slot; the last subflow deletes the entry
 */
#include "cc_mptcp.h"

CC_EXPORT_MAP(mptcpw);
CC_MPTCP_CONN_MAP(mptcpw_conns);

const volatile u32 tau_us = TCPW_TAU_US_DEFAULT;

struct mptcpw_sk {
	struct mptcpw m;
	u32 token;		/* 0 = not (yet) coupled */
};

static __always_inline struct mptcpw_conn *mptcpw_conn(struct sock *sk,
						       struct mptcpw_sk *p,
						       bool attach)
{
	return cc_mptcp_conn(&mptcpw_conns, sk, &p->token, &p->m.slot, attach);
}

static __always_inline void mptcpw_export(struct sock *sk, struct mptcpw_sk *p,
					  struct mptcpw_conn *c, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_mptcpw, sk, force, p->m.w.e.bw,
			    p->m.w.e.rtt_min_us);
	if (!v)
		return;
	v->x[0] = p->m.delta;
	v->x[1] = p->token;
	v->x[2] = p->m.slot;
	v->x[3] = c ? cc_mptcp_nsub(c) : 1;
}

SEC("struct_ops")
void BPF_PROG(mptcpw_init, struct sock *sk)
{
	struct mptcpw_sk *p = cc_priv(sk);

	mptcpw_state_init(&p->m, cc_now_us(sk), cc_tcp_sk(sk)->snd_una, tau_us);
	p->token = 0;
}

SEC("struct_ops")
void BPF_PROG(mptcpw_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct mptcpw_sk *p = cc_priv(sk);

	cc_guard(sk, &st_mptcpw);
	mptcpw_on_ack(&p->m, mptcpw_conn(sk, p, false), cc_now_us(sk),
		      tp->snd_una, tp->mss_cache, tp->snd_cwnd, cc_srtt_us(sk));
}

SEC("struct_ops")
void BPF_PROG(mptcpw_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	struct mptcpw_sk *p = cc_priv(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&p->m.w.e, (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(mptcpw_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct mptcpw_sk *p = cc_priv(sk);
	struct mptcpw_conn *c = mptcpw_conn(sk, p, true);
	u32 delta = mptcpw_delta(&p->m, c), cwnd;

	mptcpw_export(sk, p, c, false);
	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tp->snd_cwnd;
	mptcpw_increase(&p->m, &cwnd, acked, delta);
	tp->snd_cwnd = CC_MIN(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
u32 BPF_PROG(mptcpw_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct mptcpw_sk *p = cc_priv(sk);
	u32 ss = mptcpw_loss_ssthresh(&p->m, tp->snd_cwnd, tp->mss_cache);

	mptcpw_export(sk, p, NULL, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(mptcpw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)	/* decrease: w_s = B_s RTTmin_s */
		tp->snd_cwnd = tp->snd_ssthresh;
}

SEC("struct_ops")
void BPF_PROG(mptcpw_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_mptcpw);
}

SEC("struct_ops")
u32 BPF_PROG(mptcpw_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(mptcpw_release, struct sock *sk)
{
	struct mptcpw_sk *p = cc_priv(sk);

	cc_export_delete(&st_mptcpw, sk);
	cc_mptcp_release(&mptcpw_conns, p->token, p->m.slot);
}

SEC(".struct_ops")
struct tcp_congestion_ops mptcpw = {
	.init		= (void *)mptcpw_init,
	.release	= (void *)mptcpw_release,
	.ssthresh	= (void *)mptcpw_ssthresh,
	.cong_avoid	= (void *)mptcpw_cong_avoid,
	.cwnd_event	= (void *)mptcpw_cwnd_event,
	.in_ack_event	= (void *)mptcpw_in_ack_event,
	.pkts_acked	= (void *)mptcpw_pkts_acked,
	.set_state	= (void *)mptcpw_set_state,
	.undo_cwnd	= (void *)mptcpw_undo_cwnd,
	.name		= "mptcpw",
};
