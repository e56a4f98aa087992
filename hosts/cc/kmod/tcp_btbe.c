// SPDX-License-Identifier: GPL-2.0
/*
 * BTBE: congestion avoidance from bottleneck and target bandwidth
 * estimates, tcp_congestion_ops module.
 *
 * T.-A. Le, C. S. Hong, "A Bottleneck and Target Bandwidth Estimates-Based
 * Congestion Control Algorithm for High BDP Networks"
 * (BTBE paper §III).  The algorithm and
 * the note on the paper's lambda live in ../core/btbe.h.
 *
 *   W_B ............ W_S ................. W_T
 *   | alpha = 16    | alpha = 1 + 15 e^-lambda(w - W_S) | alpha = 16
 *   loss: cwnd = ssthresh = max(W_B, 2);  RTO: cwnd = 1, RTT_max = 0
 */
#include "cc_kmod.h"
#include "btbe.h"

static int lambda_x1000 __read_mostly = BTBE_LAMBDA_X1000;
module_param(lambda_x1000, int, 0644);
MODULE_PARM_DESC(lambda_x1000, "LAMBDA * 1000, lambda = LAMBDA / (W_T - W_B) (1..100000, paper 7250)");
static int ts_hz __read_mostly = BTBE_TS_HZ_DEFAULT;
module_param(ts_hz, int, 0644);
MODULE_PARM_DESC(ts_hz, "receiver TSval clock rate in Hz (1..1000000, default 1000)");

static void btbe_init(struct sock *sk)
{
	btbe_state_init(inet_csk_ca(sk), cc_now_us(sk), tcp_sk(sk)->snd_una,
			lambda_x1000, ts_hz);
}

static void btbe_in_ack_event(struct sock *sk, u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 tsval = tp->rx_opt.saw_tstamp ? tp->rx_opt.rcv_tsval : 0;

	btbe_on_ack(inet_csk_ca(sk), cc_now_us(sk), tp->snd_una, tp->mss_cache,
		    tsval, tcp_snd_cwnd(tp));
}

static void btbe_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		btbe_rtt(inet_csk_ca(sk), sample->rtt_us);
}

static void btbe_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start(sk, &acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	btbe_increase(inet_csk_ca(sk), &cwnd, acked);
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

static u32 btbe_ssthresh(struct sock *sk)
{
	return btbe_loss_ssthresh(inet_csk_ca(sk));
}

static void btbe_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ev == CA_EVENT_COMPLETE_CWR) {
		tp->snd_ssthresh = btbe_ssthresh(sk);
		tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
	} else if (ev == CA_EVENT_LOSS) {
		btbe_on_rto(inet_csk_ca(sk));
	}
}

static size_t btbe_get_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	const struct btbe *b = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, b->ebw, b->base_rtt_us);
}

static struct tcp_congestion_ops btbe __read_mostly = {
	.init		= btbe_init,
	.ssthresh	= btbe_ssthresh,
	.cong_avoid	= btbe_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.cwnd_event	= btbe_cwnd_event,
	.in_ack_event	= btbe_in_ack_event,
	.pkts_acked	= btbe_pkts_acked,
	.get_info	= btbe_get_info,
	.owner		= THIS_MODULE,
	.name		= "btbe",
};

static int __init btbe_register(void)
{
	BUILD_BUG_ON(sizeof(struct btbe) > ICSK_CA_PRIV_SIZE);
	if (lambda_x1000 < 1 || lambda_x1000 > BTBE_LAMBDA_MAX_X1000 ||
	    ts_hz < 1 || ts_hz > 1000000) {
		pr_err("btbe: lambda_x1000=%d or ts_hz=%d out of range\n",
		       lambda_x1000, ts_hz);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&btbe);
}

static void __exit btbe_unregister(void)
{
	tcp_unregister_congestion_control(&btbe);
}

module_init(btbe_register);
module_exit(btbe_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("BTBE: bottleneck and target bandwidth estimates");
