/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * logwestwood.h - LogWestwood+: Westwood+ with a logarithmic increase.
 *
 * Spec: LogWestwood+ paper §II eq. (5)-(7), §III.
 * Estimate and decrease are Westwood+ (tcpwplus.h, eq. (5)).  In congestion
 * avoidance (eq. (7)):
 *
 *   W <- W + max((Wmax - W) / (alpha * W), 1 / W)
 *
 * once per acknowledged packet, by default.  The paper (§II) applies it
 * "for each acknowledgement packet received" in ns-2, where one ACK is one
 * packet unless the receiver delays ACKs; Linux applies Reno's 1/W per
 * acknowledged packet (tcp_cong_avoid_ai), and eq. (7)'s floor is there to
 * keep LogWestwood+ at least as fast as that Reno (§II, objective 1), so
 * the shells count packets too: with delayed ACKs (acked = 2) they climb
 * twice as fast per RTT as a per-ACK reading.  per_ack = 1 (a tunable of
 * the shells) applies eq. (7) once per ACK whatever it covers, as ns-2.
 *
 * Wmax is the window at the last loss event.  alpha (§II): x2 when a loss
 * is detected before W reached Wmax, /2 for every errorless increase over
 * the same interval (W climbed to Wmax without a loss), never below 2.
 * The paper's simulations (§III) fix alpha = 4; both the initial alpha and
 * whether it adapts are tunables of the shells.
 *
 *        loss, W <  Wmax: alpha *= 2        W reaches Wmax: alpha /= 2
 *   ... --------------------------> epoch ----------------------------> ...
 *        (Wmax <- W at the loss)           (floor LOGWW_ALPHA_FLOOR)
 *
 * Fixed point: alpha is Q10 (LOGWW_UNIT = 1.0), capped at LOGWW_ALPHA_MAX;
 * the per-ACK increase is Q20 of a packet (LOGWW_INC_SCALE).  With
 * Wmax <= CC_MAX_CWND (2^20) the numerator (Wmax - W) << 30 < 2^50.
 * The logarithmic step is clamped so that one ACK never carries W past Wmax.
 */
#ifndef CC_LOGWESTWOOD_H
#define CC_LOGWESTWOOD_H

#include "tcpwplus.h"

#define LOGWW_SCALE		10
#define LOGWW_UNIT		(1U << LOGWW_SCALE)	/* alpha = 1.0 */
#define LOGWW_ALPHA_FLOOR	(2 * LOGWW_UNIT)	/* §II lower bound */
#define LOGWW_ALPHA_DEFAULT	(4 * LOGWW_UNIT)	/* §III simulations */
#define LOGWW_ALPHA_MAX		(1024 * LOGWW_UNIT)	/* overflow guard */
#define LOGWW_INC_SCALE		20

struct logwestwood {
	struct tcpwplus wp;
	u64 acc;		/* increase not yet applied, Q20 packets */
	u32 wmax;		/* window at the last loss, packets; 0 = none */
	u32 alpha;		/* Q10 */
	u32 alpha_floor;	/* Q10 */
	u8 adapt;		/* adapt alpha (§II) or keep it fixed (§III) */
	u8 reached;		/* W reached Wmax since the last loss */
	u8 per_ack;		/* eq. (7) once per ACK (ns-2), not per packet */
};

static CC_INLINE void logww_init(struct logwestwood *l, u32 now_us,
				 u32 snd_una, u32 alpha_q10, int adapt,
				 int per_ack)
{
	tcpwplus_state_init(&l->wp, now_us, snd_una, TCPWP_WIN_MIN_US);
	l->acc = 0;
	l->wmax = 0;
	l->alpha_floor = LOGWW_ALPHA_FLOOR;
	l->alpha = CC_MIN(CC_MAX(alpha_q10, l->alpha_floor), LOGWW_ALPHA_MAX);
	l->adapt = !!adapt;
	l->reached = 0;
	l->per_ack = !!per_ack;
}

/* eq. (7): per-ACK increase in Q20 packets, for the current W. */
static CC_INLINE u64 logww_step_q20(u32 w, u32 wmax, u32 alpha_q10)
{
	u64 lin, lg;

	if (!w)
		w = 1;
	lin = CC_DIV64(1ULL << LOGWW_INC_SCALE, w);	/* 1/W */
	if (wmax <= w)
		return lin;
	/* (Wmax - W) / (alpha * W), with alpha in Q10 */
	lg = CC_DIV64((u64)(wmax - w) << (LOGWW_INC_SCALE + LOGWW_SCALE),
		      (u64)alpha_q10 * w);
	return CC_MAX(lg, lin);
}

/* Congestion avoidance, one ACK covering acked packets (the kernel's
 * cong_avoid argument: 2 for a delayed ACK). */
static CC_INLINE void logww_cong_avoid(struct logwestwood *l, u32 *cwnd,
				       u32 acked)
{
	u32 w = *cwnd;
	u64 step = logww_step_q20(w, l->wmax, l->alpha);

	if (l->per_ack)
		acked = CC_MIN(acked, 1U);
	/* each of the acked packets advances W by eq. (7) at the current W */
	l->acc += step * acked;
	if (l->wmax > w) {
		u64 room = (u64)(l->wmax - w) << LOGWW_INC_SCALE;

		if (l->acc > room)
			l->acc = room;	/* never jump past Wmax in one ACK */
	}
	w += (u32)(l->acc >> LOGWW_INC_SCALE);
	l->acc &= (1ULL << LOGWW_INC_SCALE) - 1;
	w = CC_MIN(w, CC_MAX_CWND);
	if (l->wmax && w >= l->wmax && !l->reached) {
		l->reached = 1;		/* errorless increase up to Wmax */
		if (l->adapt)
			l->alpha = CC_MAX(l->alpha >> 1, l->alpha_floor);
	}
	*cwnd = w;
}

/* A loss event at window cwnd: adapt alpha, remember Wmax, eq. (5). */
static CC_INLINE u32 logww_ssthresh(struct logwestwood *l, u32 cwnd, u32 mss)
{
	if (l->adapt && l->wmax && !l->reached)
		l->alpha = CC_MIN(l->alpha << 1, LOGWW_ALPHA_MAX);
	l->wmax = cwnd;
	l->reached = 0;
	l->acc = 0;
	return tcpwplus_loss_ssthresh(&l->wp, mss);
}

#endif /* CC_LOGWESTWOOD_H */
