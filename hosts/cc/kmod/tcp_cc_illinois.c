// SPDX-License-Identifier: GPL-2.0
/*
 * TCP-Illinois under cclab's name cc_illinois, tcp_congestion_ops module.
 *
 * S. Liu, T. Basar, R. Srikant, "TCP-Illinois: A Loss- and Delay-Based
 * Congestion Control Algorithm for High-Speed Networks", Performance
 * Evaluation 65(6-7), 2008, as Linux's tcp_illinois.c does it; the
 * algorithm lives in ../core/illinois.h.
 *
 *   round end: alpha in [0.3, 10], beta in [1/8, 1/2] from the queueing delay
 *   slow start ---> CA: W += alpha / W ---> loss: ssthresh = W - beta W
 *                                      \--> RTO: alpha = 1, beta = 1/2
 */
#include "cc_kmod.h"
#include "cc_illinois.h"

static int win_thresh __read_mostly = ILL_WIN_THRESH;
module_param(win_thresh, int, 0644);
MODULE_PARM_DESC(win_thresh, "window (packets) below which alpha = 1, beta = 1/2 (default 15)");
static int theta __read_mostly = ILL_THETA;
module_param(theta, int, 0644);
MODULE_PARM_DESC(theta, "rounds of low delay before alpha returns to its maximum (default 5)");

static void cc_illinois_init(struct sock *sk)
{
	ill_init(inet_csk_ca(sk), tcp_sk(sk)->snd_nxt, win_thresh, theta);
}

static void cc_illinois_pkts_acked(struct sock *sk,
				   const struct ack_sample *sample)
{
	ill_sample(inet_csk_ca(sk), sample->pkts_acked, sample->rtt_us);
}

static void cc_illinois_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct illinois *c = inet_csk_ca(sk);
	u32 cwnd;

	ill_on_ack(c, ack, tp->snd_nxt, tcp_snd_cwnd(tp));
	if (!cc_slow_start_whole(sk, acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	ill_increase(c, &cwnd, tp->snd_cwnd_clamp);
	tcp_snd_cwnd_set(tp, cwnd);
}

static u32 cc_illinois_ssthresh(struct sock *sk)
{
	return ill_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tcp_sk(sk)));
}

static void cc_illinois_set_state(struct sock *sk, u8 new_state)
{
	if (new_state == TCP_CA_Loss)
		ill_on_rto(inet_csk_ca(sk), tcp_sk(sk)->snd_nxt);
}

static size_t cc_illinois_get_info(struct sock *sk, u32 ext, int *attr,
				   union tcp_cc_info *info)
{
	const struct illinois *c = inet_csk_ca(sk);

	return cc_vegas_info(sk, ext, attr, info, 0,
			     c->base_rtt_us == 0x7fffffff ? ~0U : c->base_rtt_us);
}

static struct tcp_congestion_ops cc_illinois __read_mostly = {
	.init		= cc_illinois_init,
	.ssthresh	= cc_illinois_ssthresh,
	.cong_avoid	= cc_illinois_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.set_state	= cc_illinois_set_state,
	.pkts_acked	= cc_illinois_pkts_acked,
	.get_info	= cc_illinois_get_info,
	.owner		= THIS_MODULE,
	.name		= "cc_illinois",
};

static int __init cc_illinois_register(void)
{
	BUILD_BUG_ON(sizeof(struct illinois) > ICSK_CA_PRIV_SIZE);
	if (win_thresh < 1 || win_thresh > 65536 || theta < 1 || theta > 255) {
		pr_err("cc_illinois: win_thresh=%d (1..65536) or theta=%d (1..255) out of range\n",
		       win_thresh, theta);
		return -EINVAL;
	}
	return tcp_register_congestion_control(&cc_illinois);
}

static void __exit cc_illinois_unregister(void)
{
	tcp_unregister_congestion_control(&cc_illinois);
}

module_init(cc_illinois_register);
module_exit(cc_illinois_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP-Illinois (cclab's core, Linux illinois's behaviour)");
