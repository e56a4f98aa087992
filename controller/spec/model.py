"""Experiment specs as typed settings: the frozen dataclasses a validated spec is, and the vocabularies
(data planes, topologies, flow kinds, algorithms) each field takes its values from.

`controller.spec.parse` builds them from TOML; nothing else does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.network import DATAPLANES as DATAPLANES  # the targets cclab has (dataplane/targets.py)
from controller.network import Graph, LinkSpec
from controller.spec import algos

TOPOLOGIES = ("dumbbell", "parking_lot", "multipath", "graph")
SHAPERS = ("htb", "tbf")
DELAY_FALLBACKS = ("refuse", "skip")
#: what the switches that do not emulate a link are: Linux bridges, or OVS bridges under an os-ken app
SWITCHES = ("linux", "ovs")

FLOW_KINDS = ("tcp", "udp_onoff", "mptcp")
ON_OFF_DISTRIBUTIONS = ("fixed", "exponential")

#: Our algorithms (hosts/cc/, registered in hosts/cc/algos.toml); names never collide with in-tree ones.
CCLAB_ALGOS = algos.names()
#: Algorithms the Linux kernel ships (built in or as modules).
KERNEL_ALGOS = (
    "reno",
    "cubic",
    "bbr",
    "westwood",
    "illinois",
    "highspeed",
    "scalable",
    "vegas",
    "veno",
    "htcp",
    "hybla",
    "bic",
    "yeah",
    "lp",
    "nv",
    "cdg",
    "dctcp",
)

#: link ids: its delay and BMv2 nodes are d<id> and p<id>, and their ports fit 15-character device names
LINK_ID = re.compile(r"l[a-z0-9_]{0,7}")
MAX_PAIRS = 64
#: flows of one spec, counted after `count` expands them (their ports: controller/experiment/build.py)
MAX_FLOWS = 2000
MAX_HOPS = 16
MAX_NODES = 256
MAX_RATE_MBPS = 100_000.0
MAX_DELAY_MS = 10_000.0
#: a flow's mss_bytes: Linux's smallest TCP_MAXSEG, and the largest segment the links' 1500-byte MTU carries
MIN_MSS, MAX_MSS = 88, 1460
#: keys of a link's emulation (the data-plane contract's knobs)
LINK_KEYS = (
    "rate_mbps",
    "queue_pkts",
    "queue_bytes",
    "delay_ms",
    "jitter_ms",
    "per",
    "gilbert_elliott",
    "red",
    "shaper",
    "schedule",
)


class SpecError(ValueError):
    """A spec that cannot run; the message is one line naming field and value."""


def fail(field_name: str, value: object, allowed: str) -> SpecError:
    """The one-line refusal of a field: its name, the value given and what is allowed."""
    return SpecError(f"spec error: {field_name} = {value!r}: {allowed}")


@dataclass(frozen=True)
class Topology:
    """Which network to build: a preset's parameters, and the graph it expands into."""

    kind: str
    """Topology name; one of TOPOLOGIES."""
    graph: Graph
    """Nodes and links (presets expand into one)."""
    pairs: int = 0
    """Sender/receiver pairs (dumbbell): h1..hN send to r1..rN."""
    hops: int = 0
    """Bottlenecks in a row (parking_lot)."""
    cross: int = 0
    """Cross-traffic pairs per bottleneck (parking_lot)."""
    background: tuple[int, ...] = ()
    """Background pairs on each of the two paths (multipath)."""

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.graph.hosts

    def describe(self) -> str:
        """One line for titles: the preset and its size, or the graph's."""
        if self.kind == "dumbbell":
            return f"dumbbell x{self.pairs}"
        if self.kind == "parking_lot":
            return f"parking lot of {self.hops}"
        if self.kind == "multipath":
            return "multipath of 2"
        g = self.graph
        return f"graph of {len(g.hosts) + len(g.switches)} nodes, {len(g.emulated())} emulated links"


@dataclass(frozen=True)
class Flow:
    """One traffic flow; ``count`` > 1 expands to that many parallel flows."""

    id: str
    """Flow identifier used in every results file (f1, f2, ...)."""
    algo: str
    """Congestion-control algorithm of the sender ("-" for UDP): a name, or a spec's "<name>.bpf.c" (then <name>)."""
    src: str
    """Sending host."""
    dst: str
    """Receiving host."""
    start_s: float = 0.0
    """Start, seconds after traffic begins."""
    duration_s: float = 0.0
    """How long it sends at most, seconds."""
    kind: str = "tcp"
    """Traffic kind; one of FLOW_KINDS."""
    bytes: int | None = None
    """tcp: a finite transfer of this many bytes (its completion time is recorded); None: send for duration_s."""
    mss_bytes: int | None = None
    """tcp, mptcp: the sender's largest segment, bytes (TCP_MAXSEG, before TCP options: with timestamps a segment
    carries 12 bytes less payload); None: the path's, 1448 bytes of payload at the links' 1500-byte MTU."""
    rate_mbps: float = 0.0
    """udp_onoff: sending rate while on, Mbit/s of UDP payload + headers on the wire."""
    on_s: float = 0.0
    """udp_onoff: mean length of an on period, seconds."""
    off_s: float = 0.0
    """udp_onoff: mean length of an off period, seconds (0: always on)."""
    on_off: str = "fixed"
    """udp_onoff: period lengths fixed or exponentially distributed (seeded)."""
    segment: int = 0
    """The L2 segment (subnet) the flow uses between its hosts (mptcp: its first subflow's)."""
    subflow_segments: tuple[int, ...] = ()
    """mptcp: the segment of each subflow, the first subflow's first: one per path, or twice the one path."""

    @property
    def is_tcp(self) -> bool:
        """Whether the flow is TCP on the wire (its subflows are, for mptcp)."""
        return self.kind in ("tcp", "mptcp")

    @property
    def is_mptcp(self) -> bool:
        return self.kind == "mptcp"


@dataclass(frozen=True)
class Spec:
    """A validated experiment."""

    name: str
    """Experiment name; part of the run directory's name."""
    path: Path | None
    """File the spec came from, if any."""
    duration_s: float
    """Length of the traffic phase, seconds."""
    dataplane: str
    """Data-plane target of the emulated links: kernel, bmv2 or tofino."""
    seed: int
    """Seed of every random draw (loss, on/off periods)."""
    interval_s: float
    """Counter polling interval, seconds."""
    topology: Topology
    """The network."""
    bottleneck: LinkSpec
    """The first emulated link's settings (a preset's default for all of its bottlenecks)."""
    flows: tuple[Flow, ...] = field(default_factory=tuple)
    """The flows, expanded (one entry per flow)."""
    delay_fallback: str = "refuse"
    """Where no delay element can run: refuse to run, or skip the delay (recorded)."""
    delay_element: str = "auto"
    """What delays packets: auto (netem where the kernel has it, else cclab-delay), netem or cclab-delay."""
    switches: str = "linux"
    """The graph's switches: Linux bridges, or Open vSwitch bridges programmed by cclab's os-ken app."""
    controller_app: Path | None = None
    """A user's os-ken app run beside cclab's (switches = "ovs" only)."""
    p4_program: Path | None = None
    """A v1model program of one's own for every BMv2 switch (dataplane = "bmv2" only): a .p4 source, relative to the
    spec's folder, compiled for the run with p4/common/ on the include path; default p4/v1model/bottleneck.p4 as
    `make build` compiled it."""
    sack: bool = True
    """TCP selective acknowledgements on every host (net.ipv4.tcp_sack in its namespace); the TCPW-ABSE paper's
    testbed ran with SACK off on both ends."""
    algo_params: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tunables of cclab's algorithms, [algorithms.<algo>] (hosts/cc/algos.toml); unset ones keep their defaults."""
    cc_sources: dict[str, Path] = field(default_factory=dict)
    """Algorithms of one's own, by the name flows run them under: a flow's algo = "<name>.bpf.c" (a struct_ops
    source, relative to the spec's folder) is built and registered for the run (controller.cc)."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as parsed, for the manifest."""

    @property
    def algos(self) -> tuple[str, ...]:
        return tuple(sorted({f.algo for f in self.flows if f.is_tcp}))

    @property
    def graph(self) -> Graph:
        return self.topology.graph

    @property
    def wants_delay(self) -> bool:
        return any(lk.spec.has_delay for lk in self.graph.links)
