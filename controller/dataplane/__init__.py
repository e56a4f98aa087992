"""Data-plane drivers: one per target, one contract (docs/conformance.md).

A driver programs the bottleneck (rate, drop-tail queue, delay, random loss),
changes those while running, and reads per-flow counters keyed by 5-tuple.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import NamedTuple


class DataPlaneError(RuntimeError):
    """The data plane could not be set up or read; the message says why and what to do."""


class FlowKey(NamedTuple):
    """An IPv4 5-tuple as the data plane keys its counters (a tuple: cheap to hash)."""

    src: str
    dst: str
    sport: int
    dport: int
    proto: int


@dataclass(slots=True)
class FlowCounters:
    """Cumulative counters of one flow at the bottleneck (wire bytes); slotted: thousands are made per poll."""

    fwd_bytes: int = 0
    fwd_pkts: int = 0
    rnd_drop_bytes: int = 0
    rnd_drop_pkts: int = 0
    q_drop_bytes: int = 0
    q_drop_pkts: int = 0
    enq_bytes: int = 0
    enq_pkts: int = 0


#: the counters' names, in order (the instances are slotted: no vars())
COUNTER_FIELDS = tuple(f.name for f in fields(FlowCounters))


@dataclass
class Snapshot:
    """One read of the data plane: per-flow and link-wide counters at time t."""

    t: float
    """time.monotonic() of the read."""
    flows: dict[FlowKey, FlowCounters] = field(default_factory=dict)
    link: FlowCounters = field(default_factory=FlowCounters)

    @property
    def backlog_pkts(self) -> int:
        """Packets in the queue (and on the link): offered minus left minus dropped."""
        k = self.link
        return max(0, k.enq_pkts - k.fwd_pkts - k.rnd_drop_pkts - k.q_drop_pkts)
