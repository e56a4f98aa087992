// SPDX-License-Identifier: GPL-2.0
/*
 * cc_highspeed.bpf.c - HighSpeed TCP (RFC 3649) as a struct_ops congestion
 * control, under a name that cannot collide with the kernel's own
 * `highspeed`.  The algorithm is core/highspeed.h (references there).
 *
 *   cong_avoid:  slow start, or the row for W and a(w) / W per ACK
 *   ssthresh:    W - b(w) W with the row of the last increase
 *
 * WARNING: differs because struct_ops cannot write snd_cwnd_clamp: Linux's
 * highspeed lowers it to 2^32 / 128 at init so that W * md fits 32 bits;
 * the core bounds W by CC_MAX_CWND instead.  The increase counter is the
 * core's, not the socket's snd_cwnd_cnt (the stack zeroes that one on a
 * few events of its own).
 */
#include "cc_bpf.h"
#include "cc_highspeed.h"

CC_EXPORT_MAP(cc_highspeed);

static __always_inline void cc_highspeed_export(struct sock *sk,
						struct highspeed *h, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_cc_highspeed, sk, force, 0, ~0U);
	if (!v)
		return;
	v->x[0] = h->ai;
	v->x[1] = hs_md(h->ai);
}

SEC("struct_ops")
void BPF_PROG(cc_highspeed_init, struct sock *sk)
{
	hs_init(cc_priv(sk));
}

SEC("struct_ops")
void BPF_PROG(cc_highspeed_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct highspeed *h = cc_priv(sk);
	u32 cwnd;

	cc_highspeed_export(sk, h, false);
	if (!cc_slow_start_whole(sk, acked))
		return;
	cwnd = tp->snd_cwnd;
	hs_cong_avoid(h, &cwnd, tp->snd_cwnd_clamp);
	tp->snd_cwnd = cwnd;
}

SEC("struct_ops")
u32 BPF_PROG(cc_highspeed_ssthresh, struct sock *sk)
{
	struct highspeed *h = cc_priv(sk);
	u32 ss = hs_ssthresh(h, cc_tcp_sk(sk)->snd_cwnd);

	cc_highspeed_export(sk, h, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(cc_highspeed_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_cc_highspeed);
}

SEC("struct_ops")
void BPF_PROG(cc_highspeed_in_ack_event, struct sock *sk, u32 flags)
{
	cc_guard(sk, &st_cc_highspeed);
}

SEC("struct_ops")
u32 BPF_PROG(cc_highspeed_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(cc_highspeed_release, struct sock *sk)
{
	cc_export_delete(&st_cc_highspeed, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cc_highspeed = {
	.init		= (void *)cc_highspeed_init,
	.release	= (void *)cc_highspeed_release,
	.ssthresh	= (void *)cc_highspeed_ssthresh,
	.cong_avoid	= (void *)cc_highspeed_cong_avoid,
	.set_state	= (void *)cc_highspeed_set_state,
	.in_ack_event	= (void *)cc_highspeed_in_ack_event,
	.undo_cwnd	= (void *)cc_highspeed_undo_cwnd,
	.name		= "cc_highspeed",
};
