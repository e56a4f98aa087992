"""LogWestwood+'s climb back to the window at the loss (LogWestwood+ paper eq. (7)) beside Reno's: the RTTs each
needs over a gap, and where a measured climb sits between the two.

Reno's +1 packet per RTT closes a gap of G packets in G RTTs; eq. (7) closes 1/alpha of what is left per RTT,
down to its 1/W floor: 12 RTTs against Reno's 22 over 21 packets, 9 against 11 over 10.  A fixed share of Reno's
time would judge the size of the gap, not the algorithm, so a climb is placed between the two counts instead.
The lab VM's guest suite judges its climbs so (vm/guest_tests/test_guest.py); tests/test_cc_core.py checks the
count against the C core's own climb.
"""

from __future__ import annotations

#: the paper's simulations (§III) fix alpha = 4
ALPHA = 4
#: a median place below this is nearer eq. (7)'s count than Reno's
MAX_PLACE = 0.5
#: the smallest gap a climb is placed over: below 8 packets eq. (7)'s count meets Reno's (its recovery RTT and
#: 1/W floor outweigh the gap), and below 5 it passes it, so a place there says nothing of the algorithm
MIN_GAP = 10


def eq7_rtts(ssthresh: int, wmax: int, alpha: int = ALPHA) -> int:
    """RTTs from a loss at `wmax` back to it: one RTT of recovery at `ssthresh`, then eq. (7) per acknowledged
    packet, W packets acknowledged per RTT."""
    w, rtts = float(ssthresh), 1
    while w < wmax:
        for _ in range(max(int(w), 1)):
            w = min(w + max((wmax - w) / (alpha * w), 1 / w), wmax)
        rtts += 1
    return rtts


def reno_rtts(ssthresh: int, wmax: int) -> int:
    """The same with Reno's +1 packet per RTT."""
    return 1 + wmax - ssthresh


def place(rtts: float, ssthresh: int, wmax: int) -> float:
    """Where a climb of `rtts` RTTs from `ssthresh` back to `wmax` sits: 0 at eq7_rtts, 1 at reno_rtts."""
    if wmax - ssthresh < MIN_GAP:
        raise ValueError(f"gap {wmax - ssthresh} packets ({ssthresh} -> {wmax}): a climb is placed over {MIN_GAP}+")
    eq7, reno = eq7_rtts(ssthresh, wmax), reno_rtts(ssthresh, wmax)
    return round((rtts - eq7) / (reno - eq7), 2)
