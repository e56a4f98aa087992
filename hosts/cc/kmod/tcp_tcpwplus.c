// SPDX-License-Identifier: GPL-2.0
/*
 * TCP Westwood+, tcp_congestion_ops module, under its own name so that it
 * can run beside the in-tree "westwood" (the same estimator, the
 * reference).  Unlike westwood it applies eq. (5) at loss detection (the
 * in-tree one halves then and sets BWE * RTTmin at recovery's end) and
 * measures RTT in microseconds, not jiffies (core/tcpwplus.h).
 *
 * Paper: LogWestwood+ paper §II eq. (5); L. A. Grieco, S. Mascolo,
 * "Performance evaluation and comparison of Westwood+, New Reno, and Vegas
 * TCP congestion control".  The algorithm lives in ../core/tcpwplus.h.
 *
 *   every ACK    -> AckedCount; once per RTT: BWE sample, two EWMA stages
 *   loss         -> ssthresh = max(2, BWE * RTTmin / MSS) at detection;
 *                   cwnd = ssthresh (re-evaluated) when recovery completes
 *   RTO          -> the same, and RTTmin is re-learnt
 *   otherwise    -> Reno
 */
#include "cc_kmod.h"
#include "tcpwplus.h"

static int win_min_ms __read_mostly = TCPWP_WIN_MIN_US / 1000;
module_param(win_min_ms, int, 0644);
MODULE_PARM_DESC(win_min_ms, "shortest BWE sampling window in ms (1..1000, default 50)");

static void tcpwplus_init(struct sock *sk)
{
	tcpwplus_state_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una,
			    (u32)win_min_ms * 1000);
}

static void tcpwplus_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	tcpwplus_on_ack(inet_csk_ca(sk), cc_now_us(sk), tp->snd_una,
			tp->mss_cache);
}

static void tcpwplus_pkts_acked(struct sock *sk,
				const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		tcpwplus_rtt(inet_csk_ca(sk), sample->rtt_us);
}

static u32 tcpwplus_ssthresh(struct sock *sk)
{
	return tcpwplus_loss_ssthresh(inet_csk_ca(sk), tcp_sk(sk)->mss_cache);
}

static void tcpwplus_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR) {
		tp->snd_ssthresh = tcpwplus_ssthresh(sk);
		tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
	} else if (ev == CA_EVENT_LOSS) {
		tcpwplus_on_rto(inet_csk_ca(sk));
	}
}

static size_t tcpwplus_get_info(struct sock *sk, u32 ext, int *attr,
				union tcp_cc_info *info)
{
	const struct tcpwplus *w = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, w->bw, w->rtt_min_us);
}

static struct tcp_congestion_ops tcpwplus __read_mostly = {
	.init		= tcpwplus_init,
	.ssthresh	= tcpwplus_ssthresh,
	.cong_avoid	= tcp_reno_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= tcpwplus_cwnd_event,
	.in_ack_event	= tcpwplus_in_ack_event,
	.pkts_acked	= tcpwplus_pkts_acked,
	.get_info	= tcpwplus_get_info,
	.owner		= THIS_MODULE,
	.name		= "tcpwplus",
};

static int __init tcpwplus_register(void)
{
	BUILD_BUG_ON(sizeof(struct tcpwplus) > ICSK_CA_PRIV_SIZE);
	if (win_min_ms < 1 || win_min_ms > 1000) {
		pr_err("tcpwplus: win_min_ms=%d outside 1..1000\n", win_min_ms);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&tcpwplus);
}

static void __exit tcpwplus_unregister(void)
{
	tcp_unregister_congestion_control(&tcpwplus);
}

module_init(tcpwplus_register);
module_exit(tcpwplus_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP Westwood+ (per-RTT bandwidth estimate)");
