/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * cc_export.h - the state-export contract between the BPF shells and the
 * cclab runner (controller/), which dumps the st_<algo> maps into
 * ccstate.csv.  Usable from BPF (after vmlinux.h) and from userspace.
 *
 * Key: one TCP flow as the sender sees it.  Addresses are IPv4 in network
 * byte order exactly as in the IP header (skc_rcv_saddr / skc_daddr); ports
 * are in HOST byte order (sport = skc_num, dport = ntohs(skc_dport)); netns
 * is the inode number of the sender's network namespace (/proc/PID/ns/net),
 * since runs side by side use the same addresses and ports, each in
 * namespaces of its own.  IPv6 flows are exported with both addresses 0.
 *
 * Value: ts_ns is bpf_ktime_get_ns() at the update; bwe_bps the algorithm's
 * bandwidth estimate in bits per second (0 if it has none); cwnd and
 * ssthresh in packets; x[] algorithm-specific extras whose names and units
 * are listed, in order, in hosts/cc/algos.toml; repairs the wild windows the
 * BPF shells' guard put back on this flow (bpf/cc_bpf.h).
 */
#ifndef CC_EXPORT_H
#define CC_EXPORT_H

#ifndef CC_HAVE_KTYPES
#include <stdint.h>
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
#endif

#define CC_EXPORT_MAX_ENTRIES	4096
#define CC_EXPORT_NX		5

struct cc_flow_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u32 netns;
};

struct cc_export {
	__u64 ts_ns;
	__u64 bwe_bps;
	__u32 rtt_min_us;
	__u32 cwnd;
	__u32 ssthresh;
	__u32 x[CC_EXPORT_NX];
	__u32 repairs;		/* windows the guard put back (cc_bpf.h) */
};

#endif /* CC_EXPORT_H */
