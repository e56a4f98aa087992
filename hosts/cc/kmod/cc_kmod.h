/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cc_kmod.h - glue between the portable cores (../core/) and the kernel:
 * kernel integer types, div64_u64() for 64-bit division (32-bit kernels
 * have no native one), and a vegas-style get_info so that `ss -ti` shows
 * the estimate of every module of the family.
 */
#ifndef CC_KMOD_H
#define CC_KMOD_H

#include <linux/math64.h>
#include <linux/module.h>
#include <linux/inet_diag.h>
#include <net/tcp.h>

#define CC_HAVE_KTYPES
#define CC_DIV64(a, b)	div64_u64((u64)(a), (u64)(b))
#define CC_INLINE	inline

static inline u32 cc_now_us(const struct sock *sk)
{
	return (u32)tcp_sk(sk)->tcp_mstamp;
}

/*
 * The start of cong_avoid that btbe, logwestwood and mptcpw share: nothing
 * when the window is not the limit, Reno slow start below ssthresh.  False
 * when nothing is left to do; else *acked is what the algorithm's own
 * increase gets.
 */
static inline bool cc_slow_start(struct sock *sk, u32 *acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!tcp_is_cwnd_limited(sk))
		return false;
	if (tcp_in_slow_start(tp)) {
		*acked = tcp_slow_start(tp, *acked);
		if (!*acked)
			return false;
	}
	return true;
}

/*
 * The start of cong_avoid as Linux's illinois and highspeed have it: like
 * cc_slow_start, but an ACK that slow start took is not shared with the
 * algorithm's increase (what slow start leaves of acked is dropped).  True
 * when the algorithm's increase is to run.
 */
static inline bool cc_slow_start_whole(struct sock *sk, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!tcp_is_cwnd_limited(sk))
		return false;
	if (tcp_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
		return false;
	}
	return true;
}

/*
 * INET_DIAG_VEGASINFO, as tcp_westwood.c reports it: tcpv_rtt the latest
 * RTT (us), tcpv_minrtt RTTmin (us), tcpv_rttcnt the bandwidth estimate in
 * kbit/s (saturating), the one per-algorithm number ss can show.
 */
static inline size_t cc_vegas_info(struct sock *sk, u32 ext, int *attr,
				   union tcp_cc_info *info, u64 bw_Bps,
				   u32 rtt_min_us)
{
	if (!(ext & (1 << (INET_DIAG_VEGASINFO - 1))))
		return 0;
	info->vegas.tcpv_enabled = 1;
	info->vegas.tcpv_rttcnt = (u32)min_t(u64, div64_u64(bw_Bps * 8, 1000),
					     U32_MAX);
	info->vegas.tcpv_rtt = tcp_sk(sk)->srtt_us >> 3;
	info->vegas.tcpv_minrtt = rtt_min_us == ~0U ? 0 : rtt_min_us;
	*attr = INET_DIAG_VEGASINFO;
	return sizeof(struct tcpvegas_info);
}

#endif /* CC_KMOD_H */
