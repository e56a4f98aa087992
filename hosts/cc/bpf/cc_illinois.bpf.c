// SPDX-License-Identifier: GPL-2.0
/*
 * cc_illinois.bpf.c - TCP-Illinois as a struct_ops congestion control,
 * under a name that cannot collide with the kernel's own `illinois`.
 * The algorithm is core/illinois.h (references there).
 *
 *   pkts_acked:  RTT sample (base, max, this round's sum and count)
 *   cong_avoid:  at a round's end alpha, beta <- f(delay); slow start, or
 *                W += alpha / W per packet
 *   ssthresh:    W - beta W
 *   set_state:   TCP_CA_Loss (RTO): alpha = 1, beta = 1/2
 */
#include "cc_bpf.h"
#include "cc_illinois.h"

CC_EXPORT_MAP(cc_illinois);

/* Linux's win_thresh and theta (module parameters there). */
const volatile u32 win_thresh = ILL_WIN_THRESH;
const volatile u32 theta = ILL_THETA;

static __always_inline void cc_illinois_export(struct sock *sk,
					       struct illinois *c, bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_cc_illinois, sk, force, 0,
			    c->base_rtt_us == 0x7fffffff ? ~0U : c->base_rtt_us);
	if (!v)
		return;
	v->x[0] = c->alpha;
	v->x[1] = c->beta;
	v->x[2] = c->max_rtt_us;
	v->x[3] = c->rtt_above;
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_init, struct sock *sk)
{
	ill_init(cc_priv(sk), cc_tcp_sk(sk)->snd_nxt, win_thresh, theta);
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	ill_sample(cc_priv(sk), sample->pkts_acked, sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct illinois *c = cc_priv(sk);
	u32 cwnd;

	ill_on_ack(c, ack, tp->snd_nxt, tp->snd_cwnd);
	cc_illinois_export(sk, c, false);
	if (!cc_slow_start_whole(sk, acked))
		return;
	cwnd = tp->snd_cwnd;
	ill_increase(c, &cwnd, tp->snd_cwnd_clamp);
	tp->snd_cwnd = cwnd;
}

SEC("struct_ops")
u32 BPF_PROG(cc_illinois_ssthresh, struct sock *sk)
{
	struct illinois *c = cc_priv(sk);
	u32 ss = ill_ssthresh(c, cc_tcp_sk(sk)->snd_cwnd);

	cc_illinois_export(sk, c, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_cc_illinois);
	if (new_state == TCP_CA_Loss)
		ill_on_rto(cc_priv(sk), cc_tcp_sk(sk)->snd_nxt);
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_in_ack_event, struct sock *sk, u32 flags)
{
	cc_guard(sk, &st_cc_illinois);
}

SEC("struct_ops")
u32 BPF_PROG(cc_illinois_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(cc_illinois_release, struct sock *sk)
{
	cc_export_delete(&st_cc_illinois, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cc_illinois = {
	.init		= (void *)cc_illinois_init,
	.release	= (void *)cc_illinois_release,
	.ssthresh	= (void *)cc_illinois_ssthresh,
	.cong_avoid	= (void *)cc_illinois_cong_avoid,
	.set_state	= (void *)cc_illinois_set_state,
	.pkts_acked	= (void *)cc_illinois_pkts_acked,
	.in_ack_event	= (void *)cc_illinois_in_ack_event,
	.undo_cwnd	= (void *)cc_illinois_undo_cwnd,
	.name		= "cc_illinois",
};
