// SPDX-License-Identifier: GPL-2.0
/*
 * TCP Westwood with faster recovery (TCPW), tcp_congestion_ops module.
 *
 * C. Casetti, M. Gerla, S. Lee, S. Mascolo, M. Sanadidi, "TCP with Faster
 * Recovery" (TCPW faster-recovery slides) and the Tustin filter
 * of the MPTCPW paper §III.  The algorithm lives in
 * ../core/tcpw.h; this file translates struct sock in and out.
 *
 *   every ACK      -> AckedCount -> Tustin-filtered BWE
 *   3 DUPACKs      -> ssthresh = BWE * RTTmin / MSS, cwnd = min(cwnd, ssthresh)
 *   RTO            -> the same ssthresh, cwnd = 1 (done by the stack)
 *   otherwise      -> Reno
 */
#include "cc_kmod.h"
#include "tcpw.h"

static int tau_ms __read_mostly = TCPW_TAU_US_DEFAULT / 1000;
module_param(tau_ms, int, 0644);
MODULE_PARM_DESC(tau_ms, "Tustin filter time constant tau in ms (1..4000, default 500)");

static void tcpw_init(struct sock *sk)
{
	struct tcpw *w = inet_csk_ca(sk);

	tcpw_state_init(w, cc_now_us(sk), tcp_sk(sk)->snd_una,
			(u32)tau_ms * 1000);
}

static void tcpw_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	tcpw_on_ack(inet_csk_ca(sk), cc_now_us(sk), tp->snd_una, tp->mss_cache);
}

static void tcpw_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct tcpw *w = inet_csk_ca(sk);

	if (sample->rtt_us > 0)
		tcpw_bwe_rtt(&w->e, sample->rtt_us);
}

static u32 tcpw_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return tcpw_loss_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tp),
				  tp->mss_cache);
}

static void tcpw_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct tcpw *w = inet_csk_ca(sk);

	if (ev == CA_EVENT_COMPLETE_CWR && w->prior_cwnd)
		tcp_snd_cwnd_set(tp, tcpw_recovery_cwnd(w->prior_cwnd,
							tp->snd_ssthresh));
}

static size_t tcpw_get_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	const struct tcpw *w = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, w->e.bw, w->e.rtt_min_us);
}

static struct tcp_congestion_ops tcpw __read_mostly = {
	.init		= tcpw_init,
	.ssthresh	= tcpw_ssthresh,
	.cong_avoid	= tcp_reno_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= tcpw_cwnd_event,
	.in_ack_event	= tcpw_in_ack_event,
	.pkts_acked	= tcpw_pkts_acked,
	.get_info	= tcpw_get_info,
	.owner		= THIS_MODULE,
	.name		= "tcpw",
};

static int __init tcpw_register(void)
{
	BUILD_BUG_ON(sizeof(struct tcpw) > ICSK_CA_PRIV_SIZE);
	if (tau_ms < 1 || tau_ms > TCPW_TAU_US_MAX / 1000) {
		pr_err("tcpw: tau_ms=%d outside 1..%u\n", tau_ms,
		       TCPW_TAU_US_MAX / 1000);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&tcpw);
}

static void __exit tcpw_unregister(void)
{
	tcp_unregister_congestion_control(&tcpw);
}

module_init(tcpw_register);
module_exit(tcpw_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP Westwood with faster recovery (Tustin-filtered BWE)");
