// SPDX-License-Identifier: GPL-2.0
/*
 * TCP Westwood ABSE (adaptive bandwidth share estimation),
 * tcp_congestion_ops module.
 *
 * Paper: TCPW-ABSE paper §2 (eqs. (1)-(6), AckedCount).
 * The algorithm lives in ../core/tcpw_abse.h; its state fills
 * ICSK_CA_PRIV_SIZE exactly, so the cwnd at the loss is taken from
 * tp->prior_cwnd, which the stack records when recovery starts.
 *
 *   every ACK    -> AckedCount, Th^_k, T_k, s_k, U_k, tau_k, ABSE filter
 *   3 DUPACKs    -> ssthresh = ABSE * RTTmin / MSS, cwnd = min(cwnd, ssthresh)
 *   RTO          -> the same ssthresh (at least 2), cwnd = 1
 *   otherwise    -> Reno
 */
#include "cc_kmod.h"
#include "tcpw_abse.h"

static int n_gain __read_mostly = ABSE_N_DEFAULT;
module_param(n_gain, int, 0644);
MODULE_PARM_DESC(n_gain, "N of eq. (6): tau_k = RTT (1 + N U_k/U_max) (0..64, default 4)");
static int tmin_gaps __read_mostly = ABSE_TMIN_GAPS_DEFAULT;
module_param(tmin_gaps, int, 0644);
MODULE_PARM_DESC(tmin_gaps, "T_min of eq. (4) in mean inter-ACK gaps, at least RTT/8 (0..64, default 8)");

static void tcpw_abse_init(struct sock *sk)
{
	abse_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una, n_gain,
		  tmin_gaps);
}

static void tcpw_abse_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	abse_on_ack(inet_csk_ca(sk), cc_now_us(sk), tp->snd_una, tp->mss_cache,
		    tp->srtt_us >> 3, tcp_snd_cwnd(tp));
}

static void tcpw_abse_pkts_acked(struct sock *sk,
				 const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		abse_rtt(inet_csk_ca(sk), sample->rtt_us);
}

static u32 tcpw_abse_ssthresh(struct sock *sk)
{
	return abse_ssthresh(inet_csk_ca(sk), tcp_sk(sk)->mss_cache);
}

static void tcpw_abse_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR && tp->prior_cwnd)
		tcp_snd_cwnd_set(tp, min(tp->prior_cwnd, tp->snd_ssthresh));
}

static size_t tcpw_abse_get_info(struct sock *sk, u32 ext, int *attr,
				 union tcp_cc_info *info)
{
	const struct tcpw_abse *a = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, a->bw, a->rtt_min_us);
}

static struct tcp_congestion_ops tcpw_abse __read_mostly = {
	.init		= tcpw_abse_init,
	.ssthresh	= tcpw_abse_ssthresh,
	.cong_avoid	= tcp_reno_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= tcpw_abse_cwnd_event,
	.in_ack_event	= tcpw_abse_in_ack_event,
	.pkts_acked	= tcpw_abse_pkts_acked,
	.get_info	= tcpw_abse_get_info,
	.owner		= THIS_MODULE,
	.name		= "tcpw_abse",
};

static int __init tcpw_abse_register(void)
{
	BUILD_BUG_ON(sizeof(struct tcpw_abse) > ICSK_CA_PRIV_SIZE);
	if (n_gain < 0 || n_gain > ABSE_N_MAX) {
		pr_err("tcpw_abse: n_gain=%d outside 0..%u\n", n_gain,
		       ABSE_N_MAX);
		return -EINVAL;
	}
	if (tmin_gaps < 0 || tmin_gaps > ABSE_TMIN_GAPS_MAX) {
		pr_err("tcpw_abse: tmin_gaps=%d outside 0..%u\n", tmin_gaps,
		       ABSE_TMIN_GAPS_MAX);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&tcpw_abse);
}

static void __exit tcpw_abse_unregister(void)
{
	tcp_unregister_congestion_control(&tcpw_abse);
}

module_init(tcpw_abse_register);
module_exit(tcpw_abse_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP Westwood ABSE (adaptive bandwidth share estimation)");
