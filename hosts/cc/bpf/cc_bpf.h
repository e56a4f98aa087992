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

#include "cc_common.h"
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

/* The window the guard falls back to with neither a window before the
 * reduction nor a finite ssthresh to go by: the stack's initial one. */
#define CC_GUARD_INIT_CWND	10U

/*
 * The window guard.  On some hosts the stack now and then takes a value from
 * a struct_ops callback that the program never returned: measured on an
 * x86-64 6.18 kernel with the SRSO "Safe RET" mitigation, ssthresh() (and
 * undo_cwnd()) of every shell here came back, a few times an hour, as the
 * low half of a kernel text address (2183597541 = srso_return_thunk + 5),
 * which PRR then turned into a window of millions of packets: a burst, a
 * queue's worth of drops, a stalled subflow.  The kernel's own Reno never
 * showed it.  No window a core sets exceeds CC_MAX_CWND, so the guard puts
 * back any that does: ssthresh to what this shell's ssthresh() last
 * returned, cwnd to the window before the reduction (or ssthresh, or the
 * initial window while ssthresh is still unset).  It runs
 * where every reduction and undo is next seen: set_state (right after
 * ssthresh() on entering CWR, Recovery or Loss) and in_ack_event (first on
 * every ACK).  Each repair is counted per socket and exported (repairs).
 */
struct cc_guard {
	__u32 ss;		/* what ssthresh() last returned, packets */
	__u32 repairs;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cc_guard);
} cc_guards SEC(".maps");

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

static __always_inline bool cc_window_wild(u32 w)
{
	return w > CC_MAX_CWND && w != CC_TCP_INFINITE_SSTHRESH;
}

/* ssthresh()'s tail: remember what it returns. */
static __always_inline u32 cc_guard_ssthresh(struct sock *sk, u32 ss)
{
	struct cc_guard *g;

	g = bpf_sk_storage_get(&cc_guards, sk, NULL,
			       BPF_SK_STORAGE_GET_F_CREATE);
	if (g)
		g->ss = ss;
	return ss;
}

/* Put back a wild window; the flow's entry in export_map (st_<algo>) shows
 * how many times. */
static __always_inline void cc_guard(struct sock *sk, void *export_map)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cc_flow_key k = {};
	struct cc_export *v;
	struct cc_guard *g;
	u32 ss = tp->snd_ssthresh, cwnd = tp->snd_cwnd;

	if (!cc_window_wild(ss) && !cc_window_wild(cwnd))
		return;
	g = bpf_sk_storage_get(&cc_guards, sk, NULL,
			       BPF_SK_STORAGE_GET_F_CREATE);
	if (cc_window_wild(ss)) {
		ss = g && g->ss && !cc_window_wild(g->ss) ?
		     g->ss : CC_MAX(CC_MIN(cwnd, CC_MAX_CWND) >> 1,
				    CC_MIN_SSTHRESH);
		tp->snd_ssthresh = ss;
	}
	if (cc_window_wild(cwnd)) {
		cwnd = tp->prior_cwnd;
		if (!cwnd || cc_window_wild(cwnd))
			cwnd = ss != CC_TCP_INFINITE_SSTHRESH ? ss :
			       CC_GUARD_INIT_CWND;
		tp->snd_cwnd = cwnd;
	}
	if (!g)
		return;
	g->repairs++;
	cc_flow_key(sk, &k);
	v = bpf_map_lookup_elem(export_map, &k);
	if (v)
		v->repairs = g->repairs;
}

#endif /* CC_BPF_H */
