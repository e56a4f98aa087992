"""Data-plane targets: one per kind of switch, one contract (docs/dataplane-contract.md).

A target programs the bottleneck (rate, drop-tail or RED queue, random loss; delay
only where it `delays_itself`), changes those while running, and reads
per-flow counters keyed by 5-tuple.  `Bottleneck` is what every target
implements; controller/dataplane/targets.py makes them by name.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

from controller.network import Red


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
    empties: int | None = None
    """Departures since set-up that left the queue and the link empty, where the target counts them (kernel);
    None where it cannot tell.  An interval without one had work throughout."""

    @property
    def backlog_pkts(self) -> int:
        """Packets in the queue (and on the link): offered minus left minus dropped."""
        k = self.link
        return max(0, k.enq_pkts - k.fwd_pkts - k.rnd_drop_pkts - k.q_drop_pkts)


@dataclass
class LinkParams:
    """The bottleneck's parameters at one moment (the contract's knobs)."""

    rate_bps: int
    queue_pkts: int | None = None
    queue_bytes: int | None = None
    delay_ms: float = 0.0
    """One-way delay: a target that does not delay by itself ignores it (the link's delay element has it)."""
    jitter_ms: float = 0.0
    per: float = 0.0
    ge: tuple[float, float, float, float] | None = None
    """Gilbert-Elliott (p_gb, p_bg, loss_good, loss_bad), or None for i.i.d."""
    red: Red | None = None
    """RED on the queue (thresholds in the queue limit's unit), or None for drop-tail alone."""
    shaper: str = "htb"
    mtu: int = 1500


class Bottleneck(Protocol):
    """One emulated bottleneck direction on a target: the verbs the runner, the monitor and the tests call.

    Every target implements every verb; one it has nothing to do for is a
    no-op whose docstring says why.
    """

    delays_itself: ClassVar[bool]
    """True: the target holds packets for `LinkParams.delay_ms` itself, and the runner adds no delay
    element to its links; False: it never touches delay (the link's netem or cclab-delay has it)."""

    @property
    def egress_dev(self) -> str:
        """A: the device (or switch port's interface) where the link's queue is."""
        ...

    @property
    def ingress_dev(self) -> str:
        """B: A's peer, where the link ends."""
        ...

    def setup(self, params: LinkParams, seed: int) -> None:
        """Program the link; on any failure undo what was done and raise DataPlaneError."""
        ...

    def apply(self, params: LinkParams) -> None:
        """Change rate and loss (and delay, where it delays itself) while traffic flows."""
        ...

    def read(self) -> Snapshot:
        """Every counter now: per declared (or seen) flow and for the link."""
        ...

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        """Return once a read finds the queue empty (True), or False after the timeout."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this target and its settings."""
        ...

    def teardown(self) -> None:
        """Remove what set-up made; safe to call twice and after a partial set-up."""
        ...


def remove_pins(path: Path) -> None:
    """Unlink a pinned-object directory tree (bpffs needs unlink, not rmtree of files)."""
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
