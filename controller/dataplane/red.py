"""RED's settings as the targets' programs take them: integers only (no floats in eBPF or P4), shared by the
kernel target and the BMv2 one so that both run the same arithmetic.  No target imports another; both import
this."""

from __future__ import annotations

import math
from typing import NamedTuple

from controller.network import Red


class RedConfig(NamedTuple):
    """A link's RED as integers (struct bn_red_config in p4/ebpf/bottleneck.h; set_red's parameters in
    p4/v1model/bottleneck.p4)."""

    on: int
    bytes: int
    """1: the queue and the thresholds are wire bytes; 0: packets."""
    wlog: int
    """w_q = 2^-wlog; the average is kept << wlog."""
    norm: int
    """Shifts (max - min) << wlog below 2^31, so that its product with max_p_thr (<= 2^32) fits 64 bits."""
    min_s: int
    """min << wlog."""
    max_s: int
    """max << wlog."""
    max_p_thr: int
    """max_p * 2^32."""
    half_ns: int
    """The idle time that halves the average, ns (>= 1)."""


RED_OFF = RedConfig(0, 0, 0, 0, 0, 0, 0, 0)


def red_config(red: Red | None, rate_bps: int, frame_bytes: int) -> RedConfig:
    """`red` on a link of rate_bps whose full-size frames are frame_bytes on the wire; RED_OFF for None.

    An idle time of m full-size frame times s leaves (1 - 2^-wlog)^m of the average (Floyd & Jacobson's idle
    rule), so it halves every s / -log2(1 - 2^-wlog); wlog = 0 (w_q = 1): any idle time empties it.
    """
    if red is None:
        return RED_OFF
    lo, hi = red.thresholds
    k = red.wlog
    norm = max(0, ((hi - lo) << k).bit_length() - 31)
    frame_ns = frame_bytes * 8 * 1e9 / rate_bps
    half_ns = 1 if k == 0 else max(1, round(frame_ns / -math.log2(1 - 2.0**-k)))
    return RedConfig(1, int(red.in_bytes), k, norm, lo << k, hi << k, round(red.max_p * (1 << 32)), half_ns)
