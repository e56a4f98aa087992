/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Map layouts of the kernel bottleneck (bottleneck.bpf.c), shared with the
 * controller (controller/dataplane/kernel.py decodes the same layouts with
 * the struct module; keep the two in step).  Fixed-width fields only, no
 * implicit padding.
 */
#ifndef CCLAB_BOTTLENECK_H
#define CCLAB_BOTTLENECK_H

/* Per-flow key: the IPv4 5-tuple.  Addresses in network byte order as on
 * the wire, ports in host byte order.  Traffic that is not IPv4 TCP/UDP is
 * counted under the all-zero key.
 */
struct bn_flow_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8  proto;
	__u8  pad[3];
};

/* Per-flow counters.  "Forwarded" is what left the bottleneck link towards
 * the receiver (wire bytes, Ethernet header included); random drops happen
 * on the link after the queue, queue drops in the drop-tail queue.
 */
struct bn_flow_ctr {
	__u64 fwd_bytes;
	__u64 fwd_pkts;
	__u64 rnd_drop_bytes;
	__u64 rnd_drop_pkts;
	__u64 q_drop_bytes;
	__u64 q_drop_pkts;
	__u64 enq_bytes;	/* offered to the queue */
	__u64 enq_pkts;
};

/* The link-wide counters (index 0 of an array) use the same layout; the
 * backlog in the queue and on the link is enq - fwd - rnd_drop - q_drop.
 */

/* Loss probabilities are thresholds on a 32-bit uniform draw: a packet is
 * lost when draw < thr, so thr = p * 2^32 and thr = 2^32 loses everything.
 */
#define BN_PROB_ONE	(1ULL << 32)

/* RED on the queue (Floyd & Jacobson 1993), on when on != 0.  The queue
 * and its thresholds are in packets, or in wire bytes when bytes != 0.  The
 * average is kept as avg << wlog (w_q = 2^-wlog); min and max come shifted
 * by wlog too, and both sides of the drop-probability division are shifted
 * right by norm so that they fit 31 bits (the controller computes norm from
 * (max - min) << wlog): max_p_thr (<= 2^32) times 2^31 fits 64 bits.
 */
struct bn_red_config {
	__u32 on;
	__u32 bytes;
	__u32 wlog;
	__u32 norm;
	__u64 min_s;		/* min << wlog */
	__u64 max_s;		/* max << wlog */
	__u64 max_p_thr;	/* max_p * 2^32 */
	__u64 half_ns;		/* idle time that halves the average, ns */
};

/* Run-time configuration, index 0 of an array the controller rewrites while
 * traffic flows (schedules).  Gilbert-Elliott is on when ge_on != 0; then
 * per-packet loss is ge_loss_good / ge_loss_bad in the good / bad state and
 * the state flips with ge_p_gb (good->bad) / ge_p_bg (bad->good).
 */
struct bn_config {
	__u64 loss_thr;		/* i.i.d. loss, p * 2^32 */
	__u64 ge_p_gb;
	__u64 ge_p_bg;
	__u64 ge_loss_good;
	__u64 ge_loss_bad;
	__u32 ge_on;
	__u32 qdrop_ifindex;	/* the rate limiter's device (queue drops) */
	__u64 qdrop_netns;	/* its network namespace inode */
	struct bn_red_config red;
};

/* RED's state, index 0 of an array.  avg_s is the average queue << wlog;
 * last_fwd_ns the time the link last delivered a packet (the end of the
 * queue's busy time when it is empty now: the idle time's start).
 */
struct bn_red_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 avg_s;
	__u64 last_fwd_ns;
};

/* Per-CPU random state (splitmix64), seeded by the controller from the
 * spec's seed and the CPU number; ge_bad is the Gilbert-Elliott state.
 */
struct bn_rng {
	__u64 state;
	__u64 ge_bad;
};

#endif /* CCLAB_BOTTLENECK_H */
