// SPDX-License-Identifier: GPL-2.0
/*
 * tcpw_abse.bpf.c - TCP Westwood ABSE as a struct_ops congestion control.
 * The algorithm is core/tcpw_abse.h (paper references there).
 *
 * WARNING: differs because of the verifier: the core's state holds a ring
 * of byte buckets indexed by a run-time value, and the verifier refuses a
 * variable offset into struct sock (icsk_ca_priv).  This shell therefore
 * keeps the core state in a BPF_MAP_TYPE_SK_STORAGE entry (map values
 * may be indexed) instead of icsk_ca_priv; the arithmetic is the core's.
 *
 *   in_ack_event: AckedCount, T_k, s_k, U_k, tau_k, ABSE filter (every ACK)
 *   pkts_acked:   RTTmin
 *   cong_avoid:   Reno
 *   ssthresh:     ABSE * RTTmin / seg_size, at least 2   (3 DUPACKs, RTO)
 *   COMPLETE_CWR: cwnd = min(cwnd at loss, ssthresh)
 */
#include "cc_bpf.h"
#include "tcpw_abse.h"

CC_EXPORT_MAP(tcpw_abse);

struct abse_sk {
	struct tcpw_abse a;
	u32 prior_cwnd;		/* cwnd when ssthresh was computed */
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct abse_sk);
} abse_state SEC(".maps");

/* N of eq. (6) and T_min in mean ACK gaps; settable before load. */
const volatile u32 abse_n = ABSE_N_DEFAULT;
const volatile u32 abse_tmin_gaps = ABSE_TMIN_GAPS_DEFAULT;

static __always_inline struct abse_sk *abse_get(struct sock *sk, bool create)
{
	return bpf_sk_storage_get(&abse_state, sk, NULL,
				  create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void abse_export(struct sock *sk, struct tcpw_abse *a,
					bool force)
{
	struct cc_export *v;

	v = cc_export_begin(&st_tcpw_abse, sk, force, a->bw, a->rtt_min_us);
	if (!v)
		return;
	v->x[0] = abse_tk_us(a);
	v->x[1] = abse_tau_us(a, cc_srtt_us(sk));
	v->x[2] = (u32)(a->u / 1000);
	v->x[3] = (u32)(a->th / 1000);
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_init, struct sock *sk)
{
	struct abse_sk *s = abse_get(sk, true);

	if (!s)		/* out of memory: the flow runs as plain Reno */
		return;
	abse_init(&s->a, cc_now_us(sk), cc_tcp_sk(sk)->snd_una, abse_n,
		  abse_tmin_gaps);
	s->prior_cwnd = 0;
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct abse_sk *s = abse_get(sk, false);

	cc_guard(sk, &st_tcpw_abse);
	if (!s)
		return;
	abse_on_ack(&s->a, cc_now_us(sk), tp->snd_una, tp->mss_cache,
		    cc_srtt_us(sk), tp->snd_cwnd);
	abse_export(sk, &s->a, false);
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_pkts_acked, struct sock *sk,
	      const struct ack_sample *sample)
{
	struct abse_sk *s = abse_get(sk, false);

	if (s && sample->rtt_us > 0)
		abse_rtt(&s->a, (u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
u32 BPF_PROG(tcpw_abse_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct abse_sk *s = abse_get(sk, false);

	if (!s)
		return cc_guard_ssthresh(sk, CC_MAX(tp->snd_cwnd >> 1,
						    CC_MIN_SSTHRESH));
	s->prior_cwnd = tp->snd_cwnd;
	abse_export(sk, &s->a, true);
	return cc_guard_ssthresh(sk, abse_ssthresh(&s->a, tp->mss_cache));
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct abse_sk *s;

	if (ev != CA_EVENT_COMPLETE_CWR)
		return;
	s = abse_get(sk, false);
	if (s && s->prior_cwnd)
		tp->snd_cwnd = CC_MIN(s->prior_cwnd, tp->snd_ssthresh);
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_set_state, struct sock *sk, u8 new_state)
{
	cc_guard(sk, &st_tcpw_abse);
}

SEC("struct_ops")
u32 BPF_PROG(tcpw_abse_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(tcpw_abse_release, struct sock *sk)
{
	cc_export_delete(&st_tcpw_abse, sk);
	bpf_sk_storage_delete(&abse_state, sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops tcpw_abse = {
	.init		= (void *)tcpw_abse_init,
	.release	= (void *)tcpw_abse_release,
	.ssthresh	= (void *)tcpw_abse_ssthresh,
	.cong_avoid	= (void *)tcpw_abse_cong_avoid,
	.cwnd_event	= (void *)tcpw_abse_cwnd_event,
	.in_ack_event	= (void *)tcpw_abse_in_ack_event,
	.pkts_acked	= (void *)tcpw_abse_pkts_acked,
	.set_state	= (void *)tcpw_abse_set_state,
	.undo_cwnd	= (void *)tcpw_abse_undo_cwnd,
	.name		= "tcpw_abse",
};
