"""Rates as a spec writes them (Mbit/s) and as the data planes and results count them (bit/s): one
conversion each way, so every part rounds alike."""

#: bit/s in one Mbit/s (decimal, as tc, iperf3 and the papers count)
BPS_PER_MBPS = 1_000_000


def bps(mbps: float) -> int:
    """Mbit/s -> bit/s, rounded to the nearest bit/s (0.1 Mbit/s is 100000, not 99999)."""
    return int(round(mbps * BPS_PER_MBPS))


def mbps(bps: float) -> float:
    """bit/s -> Mbit/s, for display and tables."""
    return bps / BPS_PER_MBPS
