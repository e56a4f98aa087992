// SPDX-License-Identifier: GPL-2.0
/*
 * LogWestwood+, tcp_congestion_ops module.
 *
 * D. Kliazovich, F. Granelli, D. Miorandi, "TCP Westwood+ Enhancement in
 * High-Speed Long-Distance Networks" (LogWestwood+ paper §II-III).
 * The algorithm lives in ../core/logwestwood.h.
 *
 * eq. (7) runs once per acknowledged packet (cong_avoid's acked, 2 for a
 * delayed ACK), as Linux applies Reno's 1/W; the paper's ns-2 applies it
 * once per ACK, which per_ack=1 selects (core/logwestwood.h says why).
 *
 *            loss before Wmax: alpha x2          W reaches Wmax: alpha /2
 *   slow start ---> CA: W += max((Wmax-W)/(alpha W), 1/W) ---> loss:
 *                   W = ssthresh = BWE*RTTmin/MSS, Wmax = W at the loss
 */
#include "cc_kmod.h"
#include "logwestwood.h"

static int alpha __read_mostly = LOGWW_ALPHA_DEFAULT / LOGWW_UNIT;
module_param(alpha, int, 0644);
MODULE_PARM_DESC(alpha, "initial alpha of eq. (7) (2..1024, default 4 as in §III)");
static bool alpha_adapt __read_mostly = true;
module_param(alpha_adapt, bool, 0644);
MODULE_PARM_DESC(alpha_adapt, "adapt alpha x2 / /2 as in §II (default on)");
static bool per_ack __read_mostly;
module_param(per_ack, bool, 0644);
MODULE_PARM_DESC(per_ack, "eq. (7) once per ACK as the paper's ns-2, not per acknowledged packet (default off)");

static void logwestwood_init(struct sock *sk)
{
	logww_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una,
		   (u32)alpha * LOGWW_UNIT, alpha_adapt, per_ack);
}

static void logwestwood_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct logwestwood *l = inet_csk_ca(sk);

	tcpwplus_on_ack(&l->wp, cc_now_us(sk), tp->snd_una, tp->mss_cache);
}

static void logwestwood_pkts_acked(struct sock *sk,
				   const struct ack_sample *sample)
{
	struct logwestwood *l = inet_csk_ca(sk);

	if (sample->rtt_us > 0)
		tcpwplus_rtt(&l->wp, sample->rtt_us);
}

static void logwestwood_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	logww_cong_avoid(inet_csk_ca(sk), &cwnd, acked);
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

static u32 logwestwood_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return logww_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tp), tp->mss_cache);
}

static void logwestwood_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct logwestwood *l = inet_csk_ca(sk);

	if (ev == CA_EVENT_COMPLETE_CWR) {
		tp->snd_ssthresh = tcpwplus_loss_ssthresh(&l->wp, tp->mss_cache);
		tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
	} else if (ev == CA_EVENT_LOSS) {
		tcpwplus_on_rto(&l->wp);
	}
}

static size_t logwestwood_get_info(struct sock *sk, u32 ext, int *attr,
				   union tcp_cc_info *info)
{
	const struct logwestwood *l = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, l->wp.bw, l->wp.rtt_min_us);
}

static struct tcp_congestion_ops logwestwood __read_mostly = {
	.init		= logwestwood_init,
	.ssthresh	= logwestwood_ssthresh,
	.cong_avoid	= logwestwood_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= logwestwood_cwnd_event,
	.in_ack_event	= logwestwood_in_ack_event,
	.pkts_acked	= logwestwood_pkts_acked,
	.get_info	= logwestwood_get_info,
	.owner		= THIS_MODULE,
	.name		= "logwestwood",
};

static int __init logwestwood_register(void)
{
	BUILD_BUG_ON(sizeof(struct logwestwood) > ICSK_CA_PRIV_SIZE);
	if (alpha < LOGWW_ALPHA_FLOOR / LOGWW_UNIT ||
	    alpha > LOGWW_ALPHA_MAX / LOGWW_UNIT) {
		pr_err("logwestwood: alpha=%d outside %u..%u\n", alpha,
		       LOGWW_ALPHA_FLOOR / LOGWW_UNIT,
		       LOGWW_ALPHA_MAX / LOGWW_UNIT);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&logwestwood);
}

static void __exit logwestwood_unregister(void)
{
	tcp_unregister_congestion_control(&logwestwood);
}

module_init(logwestwood_register);
module_exit(logwestwood_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("LogWestwood+ (Westwood+ with logarithmic increase)");
