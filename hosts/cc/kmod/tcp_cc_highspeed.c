// SPDX-License-Identifier: GPL-2.0
/*
 * HighSpeed TCP under cclab's name cc_highspeed, tcp_congestion_ops module.
 *
 * S. Floyd, "HighSpeed TCP for Large Congestion Windows", RFC 3649, 2003,
 * as Linux's tcp_highspeed.c does it; the algorithm lives in
 * ../core/highspeed.h.
 *
 *   slow start ---> CA: +a(w) per window of ACKs ---> loss: W - b(w) W
 */
#include "cc_kmod.h"
#include "cc_highspeed.h"

static void cc_highspeed_init(struct sock *sk)
{
	hs_init(inet_csk_ca(sk));
}

static void cc_highspeed_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd;

	if (!cc_slow_start_whole(sk, acked))
		return;
	cwnd = tcp_snd_cwnd(tp);
	hs_cong_avoid(inet_csk_ca(sk), &cwnd, tp->snd_cwnd_clamp);
	tcp_snd_cwnd_set(tp, cwnd);
}

static u32 cc_highspeed_ssthresh(struct sock *sk)
{
	return hs_ssthresh(inet_csk_ca(sk), tcp_snd_cwnd(tcp_sk(sk)));
}

static struct tcp_congestion_ops cc_highspeed __read_mostly = {
	.init		= cc_highspeed_init,
	.ssthresh	= cc_highspeed_ssthresh,
	.cong_avoid	= cc_highspeed_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.owner		= THIS_MODULE,
	.name		= "cc_highspeed",
};

static int __init cc_highspeed_register(void)
{
	BUILD_BUG_ON(sizeof(struct highspeed) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&cc_highspeed);
}

static void __exit cc_highspeed_unregister(void)
{
	tcp_unregister_congestion_control(&cc_highspeed);
}

module_init(cc_highspeed_register);
module_exit(cc_highspeed_unregister);

MODULE_AUTHOR("cclab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("HighSpeed TCP, RFC 3649 (cclab's core, Linux highspeed's behaviour)");
