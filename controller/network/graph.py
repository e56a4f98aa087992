"""The network as a graph: hosts, switches and links; any link may be emulated.

A spec names a preset (`controller.network.presets`) or lists nodes and links
itself; presets expand into the same `Graph`, so one code path builds, addresses,
routes, programs and measures every network.

- An *emulated* link has a rate (and queue, loss, schedule): the data-plane
  contract applies to it in its direction a -> b, or in both directions, and
  it is measured.  Each emulated direction is one `EmulatedLink` ("l1" for
  a -> b; "l1r" for b -> a when both are emulated).
- Any link may have a one-way delay (both directions: propagation is
  symmetric) with or without a rate; a host's access link with a delay gives
  the flows of that host their own base RTT.
- Switches are Linux bridges, so each connected piece of switches is one L2
  segment with its own subnet 10.<segment>.0.0/16; a host gets one address per
  segment it attaches to.  A loop inside a segment is refused (bridges would
  flood it).  A flow's path is the tree path between its hosts in a segment
  they share.

Pure Python: validated before anything is built; `mininet/topologies.py`
builds it and `controller.experiment` programs and measures it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.network import units

#: address group per host-name prefix: senders 10.S.1.n, receivers 10.S.2.n, others 10.S.3.n
ADDRESS_GROUPS = {"h": 1, "r": 2}
OTHER_GROUP = 3
#: each L2 segment's subnet: 10.<segment>.0.0/16
PREFIX_LEN = 16
MAX_HOSTS_PER_GROUP = 254
MAX_SEGMENTS = 255


def subnet(segment: int) -> str:
    return f"10.{segment}.0.0/{PREFIX_LEN}"


class GraphError(ValueError):
    """The network cannot be built: the message is one line naming the field and value."""


@dataclass(frozen=True)
class GilbertElliott:
    """Two-state bursty loss: per-packet transition and loss probabilities."""

    p_gb: float
    """Probability of moving from the good to the bad state, per packet."""
    p_bg: float
    """Probability of moving from the bad to the good state, per packet."""
    loss_good: float
    """Loss probability per packet in the good state."""
    loss_bad: float
    """Loss probability per packet in the bad state."""


@dataclass(frozen=True)
class Red:
    """Random Early Detection (Floyd & Jacobson, IEEE/ACM ToN 1993) on a link's queue: an arrival is dropped with
    probability max_p * (avg - min) / (max - min) while the average queue avg is between min and max, always from
    max on; thresholds in the unit of the link's queue limit (packets or bytes)."""

    min_pkts: int | None = None
    """Lower threshold of the average queue, packets (with queue_pkts): below it nothing is dropped early."""
    max_pkts: int | None = None
    """Upper threshold of the average queue, packets: from it every arrival is dropped; > min_pkts, <= queue_pkts."""
    min_bytes: int | None = None
    """Lower threshold, wire bytes (with queue_bytes)."""
    max_bytes: int | None = None
    """Upper threshold, wire bytes; > min_bytes, <= queue_bytes."""
    max_p: float = 0.1
    """Drop probability as the average reaches max, in (0, 1]."""
    wlog: int = 9
    """The average's weight is w_q = 2^-wlog (Linux's Wlog): per arrival avg += w_q * (queue - avg); 9 gives
    0.00195, near the 0.002 of Floyd & Jacobson's simulations."""

    @property
    def in_bytes(self) -> bool:
        return self.min_bytes is not None

    @property
    def thresholds(self) -> tuple[int, int]:
        """(min, max) in the queue's unit."""
        lo, hi = (self.min_bytes, self.max_bytes) if self.in_bytes else (self.min_pkts, self.max_pkts)
        assert lo is not None and hi is not None
        return lo, hi


#: the average's weight the Tofino program is built with (RED_WLOG in p4/tna/bottleneck.p4): Tofino's stateful ALUs
#: shift by no run-time amount, so a RED queue on the tofino target has red.wlog = this
TNA_RED_WLOG = 9


@dataclass(frozen=True)
class ScheduleStep:
    """At ``at_s`` seconds into the run, change the named link parameters."""

    at_s: float
    """Seconds from the start of traffic."""
    rate_mbps: float | None = None
    """New link rate, Mbit/s."""
    per: float | None = None
    """New i.i.d. random loss probability per wire packet."""
    delay_ms: float | None = None
    """New one-way delay, ms."""


@dataclass(frozen=True)
class LinkSpec:
    """What a link emulates: the data-plane contract's knobs (rate None: a plain or delay-only link)."""

    rate_mbps: float | None = None
    """Link rate, Mbit/s (10^6 bit/s); None: not rate-limited, not measured."""
    queue_pkts: int | None = None
    """Drop-tail queue limit in packets (exclusive with queue_bytes)."""
    queue_bytes: int | None = None
    """Drop-tail queue limit in bytes (exclusive with queue_pkts)."""
    delay_ms: float = 0.0
    """One-way delay, ms, in both directions."""
    jitter_ms: float = 0.0
    """Delay jitter, ms."""
    per: float = 0.0
    """i.i.d. random loss probability per wire packet, in [0, 1]."""
    gilbert_elliott: GilbertElliott | None = None
    """Bursty loss instead of i.i.d. loss, when given."""
    red: Red | None = None
    """A RED queue instead of plain drop-tail, when given; its drops are queue drops (congestion), and the
    queue limit still holds."""
    shaper: str = "htb"
    """Rate limiter qdisc of the kernel target: htb or tbf."""
    schedule: tuple[ScheduleStep, ...] = ()
    """Parameter changes while running, in time order."""

    @property
    def rate_bps(self) -> int:
        return units.bps(self.rate_mbps or 0.0)

    @property
    def emulated(self) -> bool:
        return self.rate_mbps is not None

    @property
    def has_delay(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or any(s.delay_ms for s in self.schedule)


@dataclass(frozen=True)
class Link:
    """A link of the graph between nodes a and b."""

    id: str
    """l1, l2, ... (in spec order), or the spec's own name."""
    a: str
    b: str
    spec: LinkSpec = field(default_factory=LinkSpec)
    both: bool = False
    """Emulate rate, queue and loss in both directions (b -> a as link id + "r")."""


@dataclass(frozen=True)
class EmulatedLink:
    """One emulated direction of a link: src -> dst, measured under its own id."""

    id: str
    link: Link
    src: str
    dst: str

    @property
    def spec(self) -> LinkSpec:
        return self.link.spec


@dataclass
class Graph:
    """Nodes and links; derived: segments, addresses, paths."""

    hosts: tuple[str, ...]
    switches: tuple[str, ...]
    links: tuple[Link, ...]
    kind: str = "graph"
    """The preset it came from (dumbbell, parking_lot) or "graph"."""
    segment_of: dict[str, int] = field(default_factory=dict, init=False)
    """switch -> its L2 segment number."""
    addresses: dict[tuple[str, int], str] = field(default_factory=dict, init=False)
    """(host, segment) -> IPv4 address."""
    _adj: dict[str, list[tuple[str, Link]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._check_nodes()
        for n in (*self.hosts, *self.switches):
            self._adj[n] = []
        for link in self.links:
            self._adj[link.a].append((link.b, link))
            self._adj[link.b].append((link.a, link))
        self._segments()
        self._address()

    # --- validation --------------------------------------------------------

    def _check_nodes(self) -> None:
        seen: set[str] = set()
        for n in (*self.hosts, *self.switches):
            if n in seen:
                raise GraphError(f"spec error: topology node {n!r} is named twice")
            seen.add(n)
        pairs: dict[frozenset[str], str] = {}
        ids: set[str] = set()
        for i, link in enumerate(self.links):
            where = f"topology.links[{i}]"
            for end in ("a", "b"):
                name = getattr(link, end)
                if name not in seen:
                    raise GraphError(
                        f"spec error: {where}.{end} = {name!r}: no such node; nodes: {', '.join(sorted(seen))}"
                    )
            if link.a == link.b:
                raise GraphError(f"spec error: {where}.b = {link.b!r}: a link joins two different nodes")
            pair = frozenset((link.a, link.b))
            if pair in pairs:
                raise GraphError(
                    f"spec error: {where} = {link.a}-{link.b}: duplicate link (already {pairs[pair]}); "
                    "one link per pair of nodes"
                )
            pairs[pair] = link.id
            if link.id in ids or link.id + "r" in ids:
                raise GraphError(f"spec error: {where}.id = {link.id!r}: link ids must be unique")
            ids.add(link.id)
            if link.both:
                ids.add(link.id + "r")
            if link.a in self.hosts and link.b in self.hosts:
                raise GraphError(f"spec error: {where} = {link.a}-{link.b}: hosts connect through a switch")
        for h in self.hosts:
            if not any(h in (link.a, link.b) for link in self.links):
                raise GraphError(f"spec error: topology host {h!r} has no link")

    def _segments(self) -> None:
        """Number the L2 segments (connected switches) and refuse loops inside one."""
        seg = 0
        for start in self.switches:
            if start in self.segment_of:
                continue
            if seg >= MAX_SEGMENTS:
                raise GraphError(f"spec error: topology has more than {MAX_SEGMENTS} separate switch groups")
            self.segment_of[start] = seg
            queue: deque[tuple[str, Link | None]] = deque([(start, None)])
            while queue:
                node, via = queue.popleft()
                for peer, link in self._adj[node]:
                    if peer not in self.switches or link is via:
                        continue
                    if peer in self.segment_of:
                        # breadth-first: a second way into a numbered switch closes a cycle
                        raise GraphError(
                            f"spec error: topology link {link.id} = {link.a}-{link.b} closes a loop of "
                            "switches; Linux bridges would flood it (use hosts with one interface per path)"
                        )
                    self.segment_of[peer] = seg
                    queue.append((peer, link))
            seg += 1

    def _address(self) -> None:
        counters: dict[tuple[int, int], int] = {}
        for h in self.hosts:
            group = ADDRESS_GROUPS.get(h[:1], OTHER_GROUP)
            for peer, _link in self._adj[h]:
                if peer not in self.switches:
                    continue
                seg = self.segment_of[peer]
                if (h, seg) in self.addresses:
                    raise GraphError(f"spec error: host {h!r} has two links into one switch group (segment {seg})")
                n = counters.get((seg, group), 0) + 1
                if n > MAX_HOSTS_PER_GROUP:
                    raise GraphError(f"spec error: more than {MAX_HOSTS_PER_GROUP} hosts named {h[:1]}* in a segment")
                counters[(seg, group)] = n
                self.addresses[(h, seg)] = f"10.{seg}.{group}.{n}"

    # --- derived -----------------------------------------------------------

    def host_segments(self, host: str) -> list[int]:
        return sorted(seg for (h, seg) in self.addresses if h == host)

    def shared_segments(self, a: str, b: str) -> list[int]:
        return sorted(set(self.host_segments(a)) & set(self.host_segments(b)))

    def path(self, src: str, dst: str, segment: int) -> list[tuple[Link, str, str]]:
        """The links from src to dst inside one segment, each as (link, from_node, to_node)."""
        prev: dict[str, tuple[str, Link] | None] = {src: None}
        queue = deque([src])
        while queue:
            node = queue.popleft()
            if node == dst:
                break
            for peer, link in self._adj[node]:
                if peer in prev:
                    continue
                if peer != dst and (peer not in self.switches or self.segment_of[peer] != segment):
                    continue
                prev[peer] = (node, link)
                queue.append(peer)
        if dst not in prev:
            raise GraphError(f"spec error: no path from {src} to {dst} in segment {segment}")
        hops: list[tuple[Link, str, str]] = []
        node = dst
        while (step := prev[node]) is not None:
            before, link = step
            hops.append((link, before, node))
            node = before
        return hops[::-1]

    def link_segment(self, link: Link) -> int:
        """The segment a link belongs to (every link has a switch at one end at least)."""
        return self.segment_of[link.a if link.a in self.segment_of else link.b]

    def side(self, link: Link, node: str) -> set[str]:
        """The hosts reachable from `node` without crossing `link` (in its segment)."""
        seg = self.link_segment(link)
        seen, queue = {node}, deque([node])
        while queue:
            n = queue.popleft()
            for peer, lk in self._adj[n]:
                if lk is link or peer in seen:
                    continue
                if peer in self.switches and self.segment_of[peer] != seg:
                    continue
                seen.add(peer)
                if peer in self.switches:
                    queue.append(peer)
        return {n for n in seen if n in self.hosts}

    def emulated(self) -> list[EmulatedLink]:
        """Every emulated direction, in link order (a -> b first)."""
        out = []
        for link in self.links:
            if link.spec.emulated:
                out.append(EmulatedLink(link.id, link, link.a, link.b))
                if link.both:
                    out.append(EmulatedLink(link.id + "r", link, link.b, link.a))
        return out

    def emulated_on(self, hops: Iterable[tuple[Link, str, str]]) -> list[EmulatedLink]:
        """The emulated directions a path crosses, in order."""
        by_dir = {(e.link.id, e.src): e for e in self.emulated()}
        return [e for link, a, _b in hops if (e := by_dir.get((link.id, a))) is not None]

    def base_rtt_ms(self, hops: Iterable[tuple[Link, str, str]]) -> float:
        """Twice the one-way delays along a path (the spec's RTT before any queueing)."""
        return 2 * sum(link.spec.delay_ms for link, _a, _b in hops)
