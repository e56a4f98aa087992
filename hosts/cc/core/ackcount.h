/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ackcount.h - the AckedCount procedure of TCP Westwood: how much data an
 * ACK reports delivered, with duplicate, delayed and cumulative ACKs.
 *
 * Spec: TCPW-ABSE paper §2.2 (procedure AckedCount).
 * A DUPACK counts as one segment and is remembered in accounted_for; a later
 * cumulative ACK covering more than one segment only counts what the DUPACKs
 * did not already report.  A delayed ACK (two segments, nothing accounted
 * for) counts in full.
 *
 * The paper counts segments; here the unit is bytes and "one segment" is the
 * mss argument, so with mss = 1 and sequence numbers in segments this is the
 * paper's procedure line for line.  "cumul_ack > 1" becomes "> mss".
 *
 * The paper does not say what an ACK below last_ack_seqno (reordered on the
 * way back) counts for; here it counts as a DUPACK: one segment, remembered
 * in accounted_for, and last_ack stays where it was.
 */
#ifndef CC_ACKCOUNT_H
#define CC_ACKCOUNT_H

#include "cc_common.h"

struct cc_ackcnt {
	u32 last_ack;		/* last cumulative ACK seen (snd_una), bytes */
	u32 accounted;		/* bytes credited by DUPACKs, not yet ACKed */
};

static CC_INLINE void cc_ackcnt_init(struct cc_ackcnt *a, u32 snd_una)
{
	a->last_ack = snd_una;
	a->accounted = 0;
}

/* Returns the bytes this ACK should count for in the bandwidth estimate. */
static CC_INLINE u32 cc_acked_count(struct cc_ackcnt *a, u32 ack_seq, u32 mss)
{
	u32 cumul = ack_seq - a->last_ack;

	if (cumul > (1U << 31))		/* old ACK below snd_una: a DUPACK */
		cumul = 0;
	if (cumul == 0) {		/* DUPACK: one segment arrived */
		a->accounted += mss;
		cumul = mss;
	}
	if (cumul > mss) {		/* delayed or cumulative ACK */
		if (a->accounted >= cumul) {
			a->accounted -= cumul;
			cumul = mss;
		} else {
			cumul -= a->accounted;
			a->accounted = 0;
		}
	}
	if (ack_seq - a->last_ack < (1U << 31))
		a->last_ack = ack_seq;
	return cumul;
}

#endif /* CC_ACKCOUNT_H */
