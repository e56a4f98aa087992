/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * cc_highspeed.h - HighSpeed TCP (S. Floyd, RFC 3649), portable core, with the
 * behaviour of Linux's tcp_highspeed.c.
 *
 * Above 38 packets the window grows by a(w) packets per window of ACKs and
 * falls by b(w) * w on loss, a(w) and b(w) from RFC 3649 Appendix B's table.
 * As Linux does it:
 *
 *   - the table index ai is kept in the state and moves only in congestion
 *     avoidance: ai is the first row with w <= hs_row_cwnd[ai] (the last
 *     row, a = 72, above 89053 packets); slow start leaves it where it was, so a loss in
 *     the first slow start halves the window (ai = 0, b = 0.5);
 *   - the increase counts ACKs, not acknowledged packets: every ACK adds
 *     ai + 1 to a counter and W grows by one when the counter reaches W
 *     (a(w) = ai + 1 per window of ACKs);
 *   - ssthresh = max(W - W * b / 256, 2), b in 1/256 as Linux rounds it.
 *
 *   slow start (Reno) --> CA: cnt += ai + 1 per ACK, W++ at cnt >= W
 *                  \-----> loss: ssthresh = W - W * md[ai] / 256
 *
 * The index is found by a binary search of HS_ROWS rows in HS_SEARCH_STEPS
 * fixed steps (the BPF verifier sees no data-dependent loop); Linux walks
 * from the previous index, which ends at the same row.
 *
 * Overflow: W <= CC_MAX_CWND (2^20) and md <= 128 keep W * md below 2^27.
 */
#ifndef CC_HIGHSPEED_H
#define CC_HIGHSPEED_H

#include "cc_common.h"

#define HS_ROWS			72U
#define HS_SEARCH_STEPS		7U	/* 2^7 = 128 >= HS_ROWS + 1 candidates */
#define HS_MD_SHIFT		8	/* b(w) in 1/256 */

/* RFC 3649 Appendix B: the window where each row ends (packets) ... */
static const u32 hs_row_cwnd[HS_ROWS] = {
	38, 118, 221, 347, 495, 663, 851, 1058, 1284, 1529,
	1793, 2076, 2378, 2699, 3039, 3399, 3778, 4177, 4596, 5036,
	5497, 5979, 6483, 7009, 7558, 8130, 8726, 9346, 9991, 10661,
	11358, 12082, 12834, 13614, 14424, 15265, 16137, 17042, 17981, 18955,
	19965, 21013, 22101, 23230, 24402, 25618, 26881, 28193, 29557, 30975,
	32450, 33986, 35586, 37253, 38992, 40808, 42707, 44694, 46776, 48961,
	51258, 53677, 56230, 58932, 61799, 64851, 68113, 71617, 75401, 79517,
	84035, 89053,
};

/* ... and its decrease b(w) x 256 (row i: a(w) = i + 1 packets per RTT). */
static const u8 hs_row_md[HS_ROWS] = {
	128, 112, 104, 98, 93, 89, 86, 83, 81, 78,
	76, 74, 72, 71, 69, 68, 66, 65, 64, 62,
	61, 60, 59, 58, 57, 56, 55, 54, 53, 52,
	52, 51, 50, 49, 48, 48, 47, 46, 45, 45,
	44, 43, 43, 42, 41, 41, 40, 39, 39, 38,
	38, 37, 36, 36, 35, 35, 34, 33, 33, 32,
	32, 31, 30, 30, 29, 28, 28, 27, 26, 26,
	25, 24,
};

struct highspeed {
	u32 ai;		/* row of hs_row_*: a(w) = ai + 1 */
	u32 cnt;	/* ACK credit towards the next +1, in (ai + 1)s */
};

static CC_INLINE void hs_init(struct highspeed *h)
{
	h->ai = 0;
	h->cnt = 0;
}

/* Row i's window, ~0 past the table (the guard bounds the index for the
 * verifier). */
static CC_INLINE u32 hs_cwnd_at(u32 i)
{
	if (i >= HS_ROWS)
		return 0xffffffffU;
	return hs_row_cwnd[i];
}

/* The row for window w: the first with w <= its cwnd, the last one past
 * the table's end (searched over HS_ROWS + 1 candidates, the last a
 * virtual row at ~0). */
static CC_INLINE u32 hs_row(u32 w)
{
	u32 lo = 0, n = HS_ROWS + 1, i, half;

	/* invariant: the row is in [lo, lo + n) */
	for (i = 0; i < HS_SEARCH_STEPS; i++) {
		if (n <= 1)
			break;
		half = n / 2;
		if (w > hs_cwnd_at(lo + half - 1)) {
			lo += half;	/* past row lo + half - 1 */
			n -= half;
		} else {
			n = half;
		}
	}
	return CC_MIN(lo, HS_ROWS - 1);
}

/* b(w) x 256 of row ai. */
static CC_INLINE u32 hs_md(u32 ai)
{
	if (ai >= HS_ROWS)	/* bound for the verifier */
		ai = HS_ROWS - 1;
	return hs_row_md[ai];
}

/* Congestion avoidance, one ACK (whatever it covers): the row for the
 * current W, then a(w) / W.  clamp: the socket's snd_cwnd_clamp. */
static CC_INLINE void hs_cong_avoid(struct highspeed *h, u32 *cwnd, u32 clamp)
{
	u32 w = *cwnd ? *cwnd : 1;

	h->ai = hs_row(w);
	if (w >= CC_MIN(clamp, CC_MAX_CWND))
		return;
	h->cnt += h->ai + 1;
	if (h->cnt >= w) {
		h->cnt -= w;
		*cwnd = w + 1;
	}
}

/* Loss: W - W * b(w), at least 2, with the row of the last increase. */
static CC_INLINE u32 hs_ssthresh(const struct highspeed *h, u32 cwnd)
{
	u32 w = CC_MIN(cwnd, CC_MAX_CWND);

	return CC_MAX(w - ((w * hs_md(h->ai)) >> HS_MD_SHIFT), CC_MIN_SSTHRESH);
}

#endif /* CC_HIGHSPEED_H */
