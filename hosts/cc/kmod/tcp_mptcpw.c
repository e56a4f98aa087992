// SPDX-License-Identifier: GPL-2.0
/*
 * MPTCPW: coupled multipath TCP Westwood, tcp_congestion_ops module.
 *
 * T. A. Le, C. S. Hong, E.-N. Huh, "Coordinated TCP Westwood Congestion
 * Control for Multiple Paths over Wireless Networks"
 * (MPTCPW paper §IV).  The algorithm, eq. (8) with
 * gamma = 1, lives in ../core/mptcpw.h.
 *
 * WARNING: differs from the BPF shell: UNCOUPLED.  The MPTCP token of a
 * subflow is reachable only through struct mptcp_subflow_context, which
 * is private to net/mptcp/ and absent from the installed kernel headers;
 * a module cannot find its sibling subflows without it.  Every subflow
 * therefore runs with delta_s = 1 (single-path TCPW, eq. (8) for one
 * path).  The BPF shell (bpf/mptcpw.bpf.c) does couple them.
 */
#include "cc_kmod.h"
#include "mptcpw.h"

static int tau_ms __read_mostly = TCPW_TAU_US_DEFAULT / 1000;
module_param(tau_ms, int, 0644);
MODULE_PARM_DESC(tau_ms, "Tustin filter time constant tau in ms (1..4000, default 500)");

static void mptcpw_init(struct sock *sk)
{
	mptcpw_state_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una,
			  (u32)tau_ms * 1000);
}

static void mptcpw_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mptcpw *m = inet_csk_ca(sk);

	mptcpw_on_ack(m, NULL, cc_now_us(sk), tp->snd_una, tp->mss_cache,
		      tcp_snd_cwnd(tp), tp->srtt_us >> 3);
}

static void mptcpw_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct mptcpw *m = inet_csk_ca(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&m->w.e, sample->rtt_us);
}

static void mptcpw_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	mptcpw_increase(inet_csk_ca(sk), &cwnd, acked, MPTCPW_UNIT);
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

static u32 mptcpw_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return mptcpw_loss_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tp),
				    tp->mss_cache);
}

static void mptcpw_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)	/* w_s = B_s * RTTmin_s */
		tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
}

static size_t mptcpw_get_info(struct sock *sk, u32 ext, int *attr,
			      union tcp_cc_info *info)
{
	const struct mptcpw *m = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, m->w.e.bw, m->w.e.rtt_min_us);
}

static struct tcp_congestion_ops mptcpw __read_mostly = {
	.init		= mptcpw_init,
	.ssthresh	= mptcpw_ssthresh,
	.cong_avoid	= mptcpw_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= mptcpw_cwnd_event,
	.in_ack_event	= mptcpw_in_ack_event,
	.pkts_acked	= mptcpw_pkts_acked,
	.get_info	= mptcpw_get_info,
	.owner		= THIS_MODULE,
	.name		= "mptcpw",
};

static int __init mptcpw_register(void)
{
	BUILD_BUG_ON(sizeof(struct mptcpw) > ICSK_CA_PRIV_SIZE);
	if (tau_ms < 1 || tau_ms > TCPW_TAU_US_MAX / 1000) {
		pr_err("mptcpw: tau_ms=%d outside 1..%u\n", tau_ms,
		       TCPW_TAU_US_MAX / 1000);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&mptcpw);
}

static void __exit mptcpw_unregister(void)
{
	tcp_unregister_congestion_control(&mptcpw);
}

module_init(mptcpw_register);
module_exit(mptcpw_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCPW: multipath TCP Westwood (uncoupled in this module)");
