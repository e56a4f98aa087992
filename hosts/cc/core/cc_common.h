/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * cc_common.h - what every portable congestion-control core needs.
 *
 * The cores under hosts/cc/core/ are compiled three times: into the
 * tcp_congestion_ops modules (kmod/), into the eBPF struct_ops programs
 * (bpf/) and into the userspace harness (test/).  The shell that includes a
 * core may define, *before* the include:
 *
 *   CC_HAVE_KTYPES      u8/u16/u32/u64/s32/s64 already exist (kernel, vmlinux.h)
 *   CC_DIV64(a, b)      u64 / u64 division; the kmod maps it to div64_u64()
 *                       because 32-bit kernels have no native 64-bit divide
 *   CC_INLINE           the inline keyword to use (BPF: __always_inline)
 *
 * Rules for the cores (see STYLE.md): C99, no floating point, no globals,
 * no data-dependent loops (the BPF verifier must accept every path), every
 * fixed-point scale named, every overflow limit written down.
 */
#ifndef CC_COMMON_H
#define CC_COMMON_H

#ifndef CC_HAVE_KTYPES
#include <stdint.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
#endif

#ifndef CC_DIV64
#define CC_DIV64(a, b)	((u64)(a) / (u64)(b))
#endif

#ifndef CC_INLINE
#define CC_INLINE	inline
#endif

#define CC_MIN(a, b)	((a) < (b) ? (a) : (b))
#define CC_MAX(a, b)	((a) > (b) ? (a) : (b))

#define CC_USEC_PER_SEC	1000000ULL

/* Smallest window any member of the family falls to on loss (packets). */
#define CC_MIN_SSTHRESH	2U

/*
 * Windows are bounded so that every product in the cores fits 64 bits.
 * 2^20 packets of 64 KB is 64 GB in flight: far beyond any path we emulate.
 */
#define CC_MAX_CWND	(1U << 20)

/* Bandwidth estimates are bytes per second, bounded by 2^35 B/s (275 Gbit/s). */
#define CC_MAX_BW_BPS	(1ULL << 35)

/* Signed difference of two wrapping u32 microsecond clocks. */
static CC_INLINE s32 cc_time_delta(u32 later, u32 earlier)
{
	return (s32)(later - earlier);
}

/*
 * BWE * RTTmin / MSS in packets, at least CC_MIN_SSTHRESH.
 * bw_Bps < 2^35 and rtt_us < 2^28 (268 s) keep the product below 2^63.
 */
static CC_INLINE u32 cc_bdp_pkts(u64 bw_Bps, u32 rtt_us, u32 mss)
{
	u64 w;

	if (!mss || !rtt_us || rtt_us == ~0U)
		return CC_MIN_SSTHRESH;
	if (bw_Bps > CC_MAX_BW_BPS)
		bw_Bps = CC_MAX_BW_BPS;
	w = CC_DIV64(bw_Bps * rtt_us, CC_USEC_PER_SEC * mss);
	if (w > CC_MAX_CWND)
		w = CC_MAX_CWND;
	return CC_MAX((u32)w, CC_MIN_SSTHRESH);
}

/* A bandwidth sample in bytes per second: bytes over dt_us, clamped. */
static CC_INLINE u64 cc_rate_Bps(u64 bytes, u32 dt_us)
{
	u64 r;

	if (!dt_us)
		dt_us = 1;
	r = CC_DIV64(bytes * CC_USEC_PER_SEC, dt_us);
	return CC_MIN(r, CC_MAX_BW_BPS);
}

/*
 * Additive increase with a fractional numerator: add inc/2^scale packets per
 * acked packet, i.e. W += inc * acked / (W << scale) over a Reno-style
 * accumulator.  One division instead of a loop, so the verifier sees no
 * data-dependent iteration.  inc <= 2^20 << scale, acked <= 2^16 => the
 * accumulator stays below 2^62.
 */
static CC_INLINE void cc_frac_increase(u32 *cwnd, u64 *acc, u64 inc,
				       u32 acked, u32 scale)
{
	u64 per_pkt, add;
	u32 w = *cwnd ? *cwnd : 1;

	*acc += inc * acked;
	per_pkt = (u64)w << scale;
	if (*acc < per_pkt)
		return;
	add = CC_DIV64(*acc, per_pkt);
	*acc -= add * per_pkt;
	add = CC_MIN(add, (u64)(CC_MAX_CWND - CC_MIN(*cwnd, CC_MAX_CWND)));
	*cwnd += (u32)add;
}

#endif /* CC_COMMON_H */
