/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cc_bpf.h - what the struct_ops shells of the Westwood family share:
 * vmlinux.h (generated into build/ by the Makefile), the core's type and
 * division glue, the kernel's TCP helpers as kfuncs, and the st_<algo>
 * state export of core/cc_export.h.
 */
#ifndef CC_BPF_H
#define CC_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#define CC_HAVE_KTYPES
#define CC_INLINE	__always_inline
#define CC_DIV64(a, b)	((u64)(a) / (u64)(b))	/* BPF_DIV is 64-bit */

#include "cc_export.h"

char _license[] SEC("license") = "GPL";

/* the kernel's own Reno pieces (kfuncs of bpf_tcp_ca) */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

#define CC_AF_INET	2
#define CC_TCP_INFINITE_SSTHRESH	0x7fffffff

static __always_inline struct tcp_sock *cc_tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline void *cc_priv(const struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* The stack's clock for this ACK, us (wraps every 71 min; the cores only
 * take differences). */
static __always_inline u32 cc_now_us(const struct sock *sk)
{
	return (u32)cc_tcp_sk(sk)->tcp_mstamp;
}

static __always_inline u32 cc_srtt_us(const struct sock *sk)
{
	return cc_tcp_sk(sk)->srtt_us >> 3;
}

static __always_inline bool cc_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/*
 * tcp_is_cwnd_limited() of include/net/tcp.h as kernels have had it since
 * 2022 (6.1's is this): is_cwnd_limited, which tcp_cwnd_validate() keeps
 * over a whole window, counts in slow start too, where the window may also
 * grow to twice what was in flight.  The older copy looked only at
 * max_packets_out in slow start and ignored the flag there.
 */
static __always_inline bool cc_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = cc_tcp_sk(sk);

	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	if (cc_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

/*
 * The start of cong_avoid that btbe, logwestwood and mptcpw share: nothing
 * when the window is not the limit, Reno slow start below ssthresh.  False
 * when nothing is left to do; else *acked is what the algorithm's own
 * increase gets.
 */
static __always_inline bool cc_slow_start(struct sock *sk, u32 *acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (!cc_cwnd_limited(sk))
		return false;
	if (cc_in_slow_start(tp)) {
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
static __always_inline bool cc_slow_start_whole(struct sock *sk, u32 acked)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (!cc_cwnd_limited(sk))
		return false;
	if (cc_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
		return false;
	}
	return true;
}

/* One export map per shell, named st_<algo> (contract: cc_export.h). */
#define CC_EXPORT_MAP(algo)						\
	struct {							\
		__uint(type, BPF_MAP_TYPE_HASH);			\
		__uint(max_entries, CC_EXPORT_MAX_ENTRIES);		\
		__type(key, struct cc_flow_key);			\
		__type(value, struct cc_export);			\
	} st_##algo SEC(".maps")

static __always_inline void cc_flow_key(const struct sock *sk,
					struct cc_flow_key *k)
{
	k->saddr = 0;
	k->daddr = 0;
	if (sk->__sk_common.skc_family == CC_AF_INET) {
		k->saddr = sk->__sk_common.skc_rcv_saddr;
		k->daddr = sk->__sk_common.skc_daddr;
	}
	k->sport = sk->__sk_common.skc_num;
	k->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	k->netns = sk->__sk_common.skc_net.net->ns.inum;
}

/*
 * The entry to fill for this flow, or NULL when it was refreshed less than
 * one smoothed RTT ago and the caller does not force an update (a new
 * estimate, a loss).  Fills the fields every algorithm has.
 */
static __always_inline struct cc_export *
cc_export_begin(void *map, struct sock *sk, bool force, u64 bw_Bps,
		u32 rtt_min_us)
{
	const struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cc_flow_key k = {};
	struct cc_export *v, zero = {};
	u64 now = bpf_ktime_get_ns();

	cc_flow_key(sk, &k);
	v = bpf_map_lookup_elem(map, &k);
	if (!v) {
		bpf_map_update_elem(map, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(map, &k);
		if (!v)		/* map full: export is best effort */
			return NULL;
		force = true;
	}
	if (!force && now - v->ts_ns < (u64)cc_srtt_us(sk) * 1000)
		return NULL;
	v->ts_ns = now;
	v->bwe_bps = bw_Bps * 8;
	v->rtt_min_us = rtt_min_us == ~0U ? 0 : rtt_min_us;
	v->cwnd = tp->snd_cwnd;
	v->ssthresh = tp->snd_ssthresh;
	return v;
}

static __always_inline void cc_export_delete(void *map, struct sock *sk)
{
	struct cc_flow_key k = {};

	cc_flow_key(sk, &k);
	bpf_map_delete_elem(map, &k);
}

#endif /* CC_BPF_H */
