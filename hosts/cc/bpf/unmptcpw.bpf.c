// SPDX-License-Identifier: GPL-2.0
/*
 * unmptcpw.bpf.c - uncoordinated multipath TCP Westwood as a struct_ops
 * congestion control: each subflow TCPW with its increase scaled by the
 * split (1/2)^2.  The algorithm is core/unmptcpw.h over core/mptcpw.h.
 *
 *   in_ack_event: TCPW estimator B_s
 *   pkts_acked:   RTTmin_s
 *   cong_avoid:   slow start, then split / w_s per packet
 *   ssthresh:     B_s * RTTmin_s / MSS; COMPLETE_CWR: w_s = that
 */
#include "cc_bpf.h"
#include "unmptcpw.h"

CC_EXPORT_MAP(unmptcpw);

const volatile u32 tau_us = TCPW_TAU_US_DEFAULT;
/* the increase's scale, x1024 (the paper's two-path (1/2)^2 = 256) */
const volatile u32 split_x1024 = UNMPTCPW_SPLIT_X1024;

static __always_inline void unmptcpw_export(struct sock *sk, struct mptcpw *m,
					    bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_unmptcpw, sk, force, m->w.e.bw,
			    m->w.e.rtt_min_us);
	if (v)
		v->x[0] = m->delta;
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_init, struct sock *sk)
{
	mptcpw_state_init(cc_priv(sk), cc_now_us(sk), cc_tcp_sk(sk)->snd_una,
			  tau_us);
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct mptcpw *m = cc_priv(sk);
	int upd;

	cc_guard(sk, &st_unmptcpw);
	upd = mptcpw_on_ack(m, NULL, cc_now_us(sk), tp->snd_una, tp->mss_cache,
			    tp->snd_cwnd, cc_srtt_us(sk));
	unmptcpw_export(sk, m, upd);
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	struct mptcpw *m = cc_priv(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&m->w.e, (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tp->snd_cwnd;
	mptcpw_increase(cc_priv(sk), &cwnd, acked,
			unmptcpw_delta_q16(split_x1024));
	tp->snd_cwnd = CC_MIN(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
u32 BPF_PROG(unmptcpw_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct mptcpw *m = cc_priv(sk);
	u32 ss = mptcpw_loss_ssthresh(m, tp->snd_cwnd, tp->mss_cache);

	unmptcpw_export(sk, m, true);
	return cc_guard_ssthresh(sk, ss);
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)	/* w_s = B_s RTTmin_s */
		tp->snd_cwnd = tp->snd_ssthresh;
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_unmptcpw);
}

SEC("struct_ops")
u32 BPF_PROG(unmptcpw_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(unmptcpw_release, struct sock *sk)
{
	cc_export_delete(&st_unmptcpw, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops unmptcpw = {
	.init		= (void *)unmptcpw_init,
	.release	= (void *)unmptcpw_release,
	.ssthresh	= (void *)unmptcpw_ssthresh,
	.cong_avoid	= (void *)unmptcpw_cong_avoid,
	.cwnd_event	= (void *)unmptcpw_cwnd_event,
	.in_ack_event	= (void *)unmptcpw_in_ack_event,
	.pkts_acked	= (void *)unmptcpw_pkts_acked,
	.set_state	= (void *)unmptcpw_set_state,
	.undo_cwnd	= (void *)unmptcpw_undo_cwnd,
	.name		= "unmptcpw",
};
