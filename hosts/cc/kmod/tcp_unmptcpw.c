// SPDX-License-Identifier: GPL-2.0
/*
 * unMPTCPW: uncoordinated multipath TCP Westwood, tcp_congestion_ops module.
 *
 * T. A. Le, C. S. Hong, E.-N. Huh, "Coordinated TCP Westwood Congestion
 * Control for Multiple Paths over Wireless Networks", §V: each subflow runs
 * TCPW alone with its increase scaled by (1/2)^2.  The algorithm is
 * ../core/unmptcpw.h over ../core/mptcpw.h; being uncoupled, the module
 * and the BPF shell behave alike.
 *
 *   slow start ---> CA: w += split / w per packet ---> loss: w = B RTTmin
 */
#include "cc_kmod.h"
#include "unmptcpw.h"

static int tau_ms __read_mostly = TCPW_TAU_US_DEFAULT / 1000;
module_param(tau_ms, int, 0644);
MODULE_PARM_DESC(tau_ms, "Tustin filter time constant tau in ms (1..4194, default 500)");
static int split_x1024 __read_mostly = UNMPTCPW_SPLIT_X1024;
module_param(split_x1024, int, 0644);
MODULE_PARM_DESC(split_x1024, "increase scale x1024 (1..1024, default 256: the paper's (1/2)^2)");

static void unmptcpw_init(struct sock *sk)
{
	mptcpw_state_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una,
			  (u32)tau_ms * 1000);
}

static void unmptcpw_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	mptcpw_on_ack(inet_csk_ca(sk), NULL, cc_now_us(sk), tp->snd_una,
		      tp->mss_cache, tcp_snd_cwnd(tp), tp->srtt_us >> 3);
}

static void unmptcpw_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct mptcpw *m = inet_csk_ca(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&m->w.e, sample->rtt_us);
}

static void unmptcpw_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	mptcpw_increase(inet_csk_ca(sk), &cwnd, acked,
			unmptcpw_delta_q16(split_x1024));
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

static u32 unmptcpw_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return mptcpw_loss_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tp),
				    tp->mss_cache);
}

static void unmptcpw_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR)	/* w_s = B_s * RTTmin_s */
		tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
}

static size_t unmptcpw_get_info(struct sock *sk, u32 ext, int *attr,
				union tcp_cc_info *info)
{
	const struct mptcpw *m = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, m->w.e.bw, m->w.e.rtt_min_us);
}

static struct tcp_congestion_ops unmptcpw __read_mostly = {
	.init		= unmptcpw_init,
	.ssthresh	= unmptcpw_ssthresh,
	.cong_avoid	= unmptcpw_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= unmptcpw_cwnd_event,
	.in_ack_event	= unmptcpw_in_ack_event,
	.pkts_acked	= unmptcpw_pkts_acked,
	.get_info	= unmptcpw_get_info,
	.owner		= THIS_MODULE,
	.name		= "unmptcpw",
};

static int __init unmptcpw_register(void)
{
	BUILD_BUG_ON(sizeof(struct mptcpw) > ICSK_CA_PRIV_SIZE);
	if (tau_ms < 1 || tau_ms > TCPW_TAU_US_MAX / 1000 ||
	    split_x1024 < 1 || split_x1024 > UNMPTCPW_SPLIT_MAX) {
		pr_err("unmptcpw: tau_ms=%d (1..%u) or split_x1024=%d (1..%u) out of range\n",
		       tau_ms, TCPW_TAU_US_MAX / 1000, split_x1024,
		       UNMPTCPW_SPLIT_MAX);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&unmptcpw);
}

static void __exit unmptcpw_unregister(void)
{
	tcp_unregister_congestion_control(&unmptcpw);
}

module_init(unmptcpw_register);
module_exit(unmptcpw_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("unMPTCPW: uncoordinated multipath TCP Westwood, (1/2)^2 split");
