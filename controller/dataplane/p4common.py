"""What the P4 targets (bmv2.py, tofino.py) share: their forwarding entries, wire sizes, loss threshold and
counter slots.  No target imports another; both import this."""

from __future__ import annotations

from dataclasses import dataclass

ETH_HLEN = 14
PROB_MAX = (1 << 32) - 1
#: the counter index of every packet of no declared flow (declared flows: 1..n)
FALLBACK_INDEX = 0
#: slack on the time a full queue takes to drain, seconds (also the drain poll interval)
DRAIN_MARGIN_S = 0.05


def loss_threshold(p: float) -> int:
    """p in [0, 1] as the 32-bit threshold a uniform 32-bit draw is compared against."""
    return min(PROB_MAX, int(round(p * (1 << 32))))


def frame_bytes(mtu: int) -> int:
    """A full-size frame on the wire as the P4 targets count it (Ethernet header, no FCS)."""
    return mtu + ETH_HLEN


@dataclass(frozen=True)
class Route:
    """An ipv4_forward entry: destination prefix -> switch port."""

    prefix: str
    """e.g. 10.0.1.1/32 or 10.0.2.0/24."""
    port: int
    """Switch port number (BMv2: Mininet's port number of the switch interface; Tofino: dev_port)."""
    bottleneck: bool = False
    """Whether the port is the bottleneck port (its traffic is counted)."""
