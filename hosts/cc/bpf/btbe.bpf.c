// SPDX-License-Identifier: GPL-2.0
/*
 * btbe.bpf.c - bottleneck/target bandwidth estimate congestion avoidance
 * as a struct_ops congestion control.  The algorithm is core/btbe.h
 * (paper references and the note on LAMBDA there).
 *
 *   in_ack_event: eBW over the receiver's TSval clock; per-RTT W_B, eQ, W_T
 *   pkts_acked:   baseRTT, per-round average RTT
 *   cong_avoid:   slow start, then cwnd += alpha(cwnd) / cwnd   (eq. (1))
 *   ssthresh:     max(W_Bottleneck, 2)                         (eq. (2))
 *   COMPLETE_CWR: cwnd = ssthresh;  LOSS (RTO): RTT_max = 0
 */
#include "cc_bpf.h"
#include "btbe.h"

CC_EXPORT_MAP(btbe);

/* LAMBDA * 1000 (paper: 7250) and the receiver's TSval clock rate. */
const volatile u32 lambda_x1000 = BTBE_LAMBDA_X1000;
const volatile u32 ts_hz = BTBE_TS_HZ_DEFAULT;

static __always_inline void btbe_export(struct sock *sk, struct btbe *b,
					bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_btbe, sk, force, b->ebw, b->base_rtt_us);
	if (!v)
		return;
	v->x[0] = b->wb;
	v->x[1] = b->wt;
	v->x[2] = btbe_alpha_q10(cc_tcp_sk(sk)->snd_cwnd, b->wb, b->wt,
				 b->lambda_x1000);
	v->x[3] = b->rtt_max_us;
	v->x[4] = b->rtt_avg_us;
}

SEC("struct_ops")
void BPF_PROG(btbe_init, struct sock *sk)
{
	btbe_state_init(cc_priv(sk), cc_now_us(sk), cc_tcp_sk(sk)->snd_una,
			lambda_x1000, ts_hz);
}

SEC("struct_ops")
void BPF_PROG(btbe_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct btbe *b = cc_priv(sk);
	u32 tsval = 0;

	cc_guard(sk, &st_btbe);
	if (BPF_CORE_READ_BITFIELD(tp, rx_opt.saw_tstamp))
		tsval = tp->rx_opt.rcv_tsval;
	btbe_on_ack(b, cc_now_us(sk), tp->snd_una, tp->mss_cache, tsval,
		    tp->snd_cwnd);
	btbe_export(sk, b, false);
}

SEC("struct_ops")
void BPF_PROG(btbe_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		btbe_rtt(cc_priv(sk), (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(btbe_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tp->snd_cwnd;
	btbe_increase(cc_priv(sk), &cwnd, acked);
	tp->snd_cwnd = CC_MIN(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
u32 BPF_PROG(btbe_ssthresh, struct sock *sk)
{
	struct btbe *b = cc_priv(sk);

	btbe_export(sk, b, true);
	return cc_guard_ssthresh(sk, btbe_loss_ssthresh(b));
}

SEC("struct_ops")
void BPF_PROG(btbe_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct btbe *b = cc_priv(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)
		tp->snd_cwnd = tp->snd_ssthresh = btbe_loss_ssthresh(b);
	else if (ev == CA_EVENT_LOSS)
		btbe_on_rto(b);
}

SEC("struct_ops")
void BPF_PROG(btbe_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_btbe);
}

SEC("struct_ops")
u32 BPF_PROG(btbe_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(btbe_release, struct sock *sk)
{
	cc_export_delete(&st_btbe, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops btbe = {
	.init		= (void *)btbe_init,
	.release	= (void *)btbe_release,
	.ssthresh	= (void *)btbe_ssthresh,
	.cong_avoid	= (void *)btbe_cong_avoid,
	.cwnd_event	= (void *)btbe_cwnd_event,
	.in_ack_event	= (void *)btbe_in_ack_event,
	.pkts_acked	= (void *)btbe_pkts_acked,
	.set_state	= (void *)btbe_set_state,
	.undo_cwnd	= (void *)btbe_undo_cwnd,
	.name		= "btbe",
};
