// SPDX-License-Identifier: GPL-2.0
/*
 * cc_lia.bpf.c - LIA (RFC 6356), the coupled MPTCP increase, as a
 * struct_ops congestion control.  The algorithm is core/lia.h.
 *
 * Coupling as mptcpw's (cc_mptcp.h): each subflow of one MPTCP connection
 * claims a slot of a struct mptcpw_conn in lia_conns keyed by the
 * connection's token and refreshes its (cwnd, srtt) on every ACK; a plain
 * TCP flow has no peers and runs Reno (alpha = 1).
 *
 *   in_ack_event: slot refresh
 *   cong_avoid:   slow start, then min(alpha / W_total, 1 / w_i) per packet
 *   ssthresh:     w_i / 2
 *   release:      free the slot; the last subflow deletes the entry
 *
 * No module form: a module cannot reach the MPTCP token (kmod/tcp_mptcpw.c
 * says why), and LIA uncoupled is Reno.
 */
#include "cc_mptcp.h"
#include "cc_lia.h"

CC_EXPORT_MAP(cc_lia);
CC_MPTCP_CONN_MAP(lia_conns);

struct cc_lia_sk {
	struct lia l;
	u32 token;		/* 0 = not (yet) coupled */
	u32 alpha;		/* last alpha, Q16, for the export */
};

static __always_inline struct mptcpw_conn *cc_lia_conn(struct sock *sk,
						       struct cc_lia_sk *p,
						       bool attach)
{
	return cc_mptcp_conn(&lia_conns, sk, &p->token, &p->l.slot, attach);
}

static __always_inline void cc_lia_export(struct sock *sk, struct cc_lia_sk *p,
					  struct mptcpw_conn *c, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_cc_lia, sk, force, 0, ~0U);
	if (!v)
		return;
	v->x[0] = p->alpha;
	v->x[1] = p->l.delta;
	v->x[2] = p->token;
	v->x[3] = p->l.slot;
	v->x[4] = c ? cc_mptcp_nsub(c) : 1;
}

SEC("struct_ops")
void BPF_PROG(cc_lia_init, struct sock *sk)
{
	struct cc_lia_sk *p = cc_priv(sk);

	lia_init(&p->l);
	p->token = 0;
	p->alpha = LIA_UNIT;
}

SEC("struct_ops")
void BPF_PROG(cc_lia_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cc_lia_sk *p = cc_priv(sk);

	cc_guard(sk, &st_cc_lia);
	lia_on_ack(&p->l, cc_lia_conn(sk, p, false), tp->snd_cwnd,
		   cc_srtt_us(sk));
}

SEC("struct_ops")
void BPF_PROG(cc_lia_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cc_lia_sk *p = cc_priv(sk);
	struct mptcpw_conn *c = cc_lia_conn(sk, p, true);
	u32 cwnd;

	p->alpha = c ? lia_alpha_q16(c) : LIA_UNIT;
	cc_lia_export(sk, p, c, false);
	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tp->snd_cwnd;
	lia_increase(&p->l, c, &cwnd, acked);
	tp->snd_cwnd = CC_MIN(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
u32 BPF_PROG(cc_lia_ssthresh, struct sock *sk)
{
	struct cc_lia_sk *p = cc_priv(sk);
	u32 ss = lia_ssthresh(&p->l, cc_tcp_sk(sk)->snd_cwnd);

	cc_lia_export(sk, p, NULL, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(cc_lia_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_cc_lia);
}

SEC("struct_ops")
u32 BPF_PROG(cc_lia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(cc_lia_release, struct sock *sk)
{
	struct cc_lia_sk *p = cc_priv(sk);

	cc_export_delete(&st_cc_lia, sk);
	cc_mptcp_release(&lia_conns, p->token, p->l.slot);
}

SEC(".struct_ops")
struct tcp_congestion_ops cc_lia = {
	.init		= (void *)cc_lia_init,
	.release	= (void *)cc_lia_release,
	.ssthresh	= (void *)cc_lia_ssthresh,
	.cong_avoid	= (void *)cc_lia_cong_avoid,
	.in_ack_event	= (void *)cc_lia_in_ack_event,
	.set_state	= (void *)cc_lia_set_state,
	.undo_cwnd	= (void *)cc_lia_undo_cwnd,
	.name		= "cc_lia",
};
