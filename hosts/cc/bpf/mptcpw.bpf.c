// SPDX-License-Identifier: GPL-2.0
/*
 * mptcpw.bpf.c - coupled multipath TCP Westwood as a struct_ops congestion
 * control.  The algorithm is core/mptcpw.h (paper references there).
 *
 * Coupling: every MPTCP subflow finds its connection's token through
 * icsk_ulp_data -> struct mptcp_subflow_context.conn -> struct mptcp_sock
 * .token (read-only casts, bpf_rdonly_cast) and claims one slot of a
 * shared struct mptcpw_conn in the mptcpw_conns hash map keyed by that
 * token.  Every ACK refreshes the slot's (cwnd, srtt), in fast recovery
 * too; cong_avoid computes delta_s of eq. (8) over all live slots.  A plain
 * TCP flow (or a subflow that found no free slot) has no peers: delta = 1,
 * i.e. TCPW.
 *
 *   in_ack_event: TCPW estimator B_s (AckedCount + Tustin), slot refresh
 *   pkts_acked:   RTTmin_s
 *   cong_avoid:   delta_s; slow start, then min(delta_s, 1) / w_s per packet
 *   ssthresh:     B_s * RTTmin_s / MSS; COMPLETE_CWR: w_s = that
 *   release:      free the slot; the last subflow deletes the entry
 */
#include "cc_bpf.h"
#include "mptcpw.h"

CC_EXPORT_MAP(mptcpw);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);			/* MPTCP connection token */
	__type(value, struct mptcpw_conn);
} mptcpw_conns SEC(".maps");

extern void *bpf_rdonly_cast(const void *obj__ign, u32 btf_id__k) __ksym;

const volatile u32 tau_us = TCPW_TAU_US_DEFAULT;

struct mptcpw_sk {
	struct mptcpw m;
	u32 token;		/* 0 = not (yet) coupled */
};

/* The MPTCP token of this subflow, 0 for plain TCP. */
static __always_inline u32 mptcpw_token(struct sock *sk)
{
	struct inet_connection_sock *icsk = (void *)sk;
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;

	if (!bpf_core_field_exists(cc_tcp_sk(sk)->is_mptcp) ||
	    !cc_tcp_sk(sk)->is_mptcp)
		return 0;
	sf = bpf_rdonly_cast(icsk->icsk_ulp_data,
			     bpf_core_type_id_kernel(struct mptcp_subflow_context));
	if (!sf)
		return 0;
	msk = bpf_rdonly_cast(sf->conn,
			      bpf_core_type_id_kernel(struct mptcp_sock));
	if (!msk)
		return 0;
	return msk->token;
}

/* Claim a free slot; returns it or MPTCPW_MAX_PATHS when all are taken. */
static __always_inline u32 mptcpw_claim(struct mptcpw_conn *c)
{
	u32 i, bit, old;

	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		bit = 1U << i;
		if (c->used & bit)
			continue;
		old = __sync_fetch_and_or(&c->used, bit);
		if (!(old & bit))
			return i;
	}
	return MPTCPW_MAX_PATHS;
}

/*
 * This subflow's connection table; attach selects attaching to it on first
 * use.  Only cong_avoid attaches: in_ack_event also runs while the
 * handshake completes, before the stack calls init once more
 * (tcp_init_transfer), which would leak the slot claimed then.
 */
static __always_inline struct mptcpw_conn *mptcpw_conn(struct sock *sk,
						       struct mptcpw_sk *p,
						       bool attach)
{
	struct mptcpw_conn *c, zero = {};
	u32 tok, slot;

	if (p->token) {
		tok = p->token;		/* map keys must live on the stack */
		return p->m.slot < MPTCPW_MAX_PATHS ?
		       bpf_map_lookup_elem(&mptcpw_conns, &tok) : NULL;
	}
	if (!attach)
		return NULL;
	tok = mptcpw_token(sk);
	if (!tok)
		return NULL;
	c = bpf_map_lookup_elem(&mptcpw_conns, &tok);
	if (!c) {
		bpf_map_update_elem(&mptcpw_conns, &tok, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&mptcpw_conns, &tok);
		if (!c)
			return NULL;
	}
	p->token = tok;
	slot = mptcpw_claim(c);
	p->m.slot = slot;
	return slot < MPTCPW_MAX_PATHS ? c : NULL;
}

static __always_inline u32 mptcpw_nsub(const struct mptcpw_conn *c)
{
	u32 i, n = 0;

	for (i = 0; i < MPTCPW_MAX_PATHS; i++)
		n += (c->used >> i) & 1;
	return n;
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
	v->x[3] = c ? mptcpw_nsub(c) : 1;
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
	return ss;
}

SEC("struct_ops")
void BPF_PROG(mptcpw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)	/* decrease: w_s = B_s RTTmin_s */
		tp->snd_cwnd = tp->snd_ssthresh;
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
	struct mptcpw_conn *c;
	u32 bit, old, tok = p->token;

	cc_export_delete(&st_mptcpw, sk);
	if (!tok || p->m.slot >= MPTCPW_MAX_PATHS)
		return;
	c = bpf_map_lookup_elem(&mptcpw_conns, &tok);
	if (!c)
		return;
	bit = 1U << (p->m.slot & (MPTCPW_MAX_PATHS - 1));
	c->path[p->m.slot & (MPTCPW_MAX_PATHS - 1)].cwnd = 0;
	old = __sync_fetch_and_and(&c->used, ~bit);
	if (!(old & ~bit))		/* last subflow of the connection */
		bpf_map_delete_elem(&mptcpw_conns, &tok);
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
	.undo_cwnd	= (void *)mptcpw_undo_cwnd,
	.name		= "mptcpw",
};
