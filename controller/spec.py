"""Experiment specs: TOML in, frozen typed settings out, or one clear error.

Every field is typed and ranged here, before anything is built.  An unknown
key is an error (a typo must not silently fall back to a default), and each
error names the field, the value given and what is allowed, in one line.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib

DATAPLANES = ("kernel", "bmv2", "tofino")
TOPOLOGIES = ("dumbbell",)
SHAPERS = ("htb", "tbf")
DELAY_FALLBACKS = ("refuse", "skip")
FLOW_KINDS = ("tcp",)

#: Our algorithms (hosts/cc/); names never collide with in-tree ones.
CCLAB_ALGOS = ("tcpw", "tcpwplus", "tcpw_abse", "logwestwood", "btbe", "mptcpw")
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

MAX_PAIRS = 64
MAX_RATE_MBPS = 100_000.0


class SpecError(ValueError):
    """A spec that cannot run; the message is one line naming field and value."""


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
class ScheduleStep:
    """At ``at_s`` seconds into the run, change the named bottleneck parameters."""

    at_s: float
    """Seconds from the start of traffic."""
    rate_mbps: float | None = None
    """New bottleneck rate, Mbit/s."""
    per: float | None = None
    """New i.i.d. random loss probability per wire packet."""
    delay_ms: float | None = None
    """New one-way delay, ms (netem kernels only)."""


@dataclass(frozen=True)
class Bottleneck:
    """The emulated bottleneck link."""

    rate_mbps: float
    """Link rate, Mbit/s (10^6 bit/s)."""
    queue_pkts: int | None = None
    """Drop-tail queue limit in packets (exclusive with queue_bytes)."""
    queue_bytes: int | None = None
    """Drop-tail queue limit in bytes (exclusive with queue_pkts)."""
    delay_ms: float = 0.0
    """One-way delay added on the bottleneck, ms (needs netem)."""
    jitter_ms: float = 0.0
    """Delay jitter, ms (needs netem)."""
    per: float = 0.0
    """i.i.d. random loss probability per wire packet, in [0, 1]."""
    gilbert_elliott: GilbertElliott | None = None
    """Bursty loss instead of i.i.d. loss, when given."""
    shaper: str = "htb"
    """Rate limiter qdisc of the kernel target: htb or tbf."""
    delay_fallback: str = "refuse"
    """Where the kernel has no netem: refuse to run, or skip the delay (recorded)."""
    schedule: tuple[ScheduleStep, ...] = ()
    """Parameter changes while running, in time order."""

    @property
    def rate_bps(self) -> int:
        return int(round(self.rate_mbps * 1e6))


@dataclass(frozen=True)
class Topology:
    """Which network to build."""

    kind: str = "dumbbell"
    """Topology name; one of TOPOLOGIES."""
    pairs: int = 2
    """Sender/receiver pairs (dumbbell): h1..hN send to r1..rN."""

    @property
    def senders(self) -> tuple[str, ...]:
        return tuple(f"h{i}" for i in range(1, self.pairs + 1))

    @property
    def receivers(self) -> tuple[str, ...]:
        return tuple(f"r{i}" for i in range(1, self.pairs + 1))


@dataclass(frozen=True)
class Flow:
    """One traffic flow; ``count`` > 1 expands to that many parallel flows."""

    id: str
    """Flow identifier used in every results file (f1, f2, ...)."""
    algo: str
    """Congestion-control algorithm of the sender."""
    src: str
    """Sending host."""
    dst: str
    """Receiving host."""
    start_s: float = 0.0
    """Start, seconds after traffic begins."""
    duration_s: float = 0.0
    """How long it sends, seconds."""
    kind: str = "tcp"
    """Traffic kind; one of FLOW_KINDS."""


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
    """Bottleneck target: kernel, bmv2 or tofino."""
    seed: int
    """Seed of every random draw (loss)."""
    interval_s: float
    """Counter polling interval, seconds."""
    topology: Topology
    """The network."""
    bottleneck: Bottleneck
    """The emulated bottleneck."""
    flows: tuple[Flow, ...] = field(default_factory=tuple)
    """The flows, expanded (one entry per flow)."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as parsed, for the manifest."""

    @property
    def algos(self) -> tuple[str, ...]:
        return tuple(sorted({f.algo for f in self.flows}))


# --- validation helpers -----------------------------------------------------


def _fail(field_name: str, value: object, allowed: str) -> SpecError:
    return SpecError(f"spec error: {field_name} = {value!r}: {allowed}")


def _check_keys(table: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            name = f"{where}.{key}" if where else key
            raise _fail(name, table[key], f"unknown key; allowed here: {', '.join(allowed)}")


def _table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise _fail(f"{where}{key}", value, "must be a table")
    return value


def _num(
    table: dict[str, Any],
    key: str,
    where: str,
    *,
    default: float | None = None,
    lo: float = -math.inf,
    hi: float = math.inf,
    lo_open: bool = False,
    unit: str = "",
) -> float | None:
    name = f"{where}.{key}" if where else key
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise _fail(name, value, f"must be a number{unit}")
    low_ok = value > lo if lo_open else value >= lo
    if not low_ok or value > hi:
        bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
        span = bound if hi == math.inf else f"{bound} and <= {hi:g}"
        raise _fail(name, value, f"must be {span}{unit}")
    return float(value)


def _req_num(table: dict[str, Any], key: str, where: str, **kw: Any) -> float:
    value = _num(table, key, where, **kw)
    if value is None:
        name = f"{where}.{key}" if where else key
        raise SpecError(f"spec error: {name} is missing: it is required{kw.get('unit', '')}")
    return value


def _int(table: dict[str, Any], key: str, where: str, default: int | None, lo: int, hi: int) -> int | None:
    name = f"{where}.{key}" if where else key
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, value, f"must be a whole number from {lo} to {hi}")
    if not lo <= value <= hi:
        raise _fail(name, value, f"must be a whole number from {lo} to {hi}")
    return value


def _choice(table: dict[str, Any], key: str, where: str, default: str, allowed: tuple[str, ...]) -> str:
    name = f"{where}.{key}" if where else key
    value = table.get(key, default)
    if value not in allowed:
        raise _fail(name, value, f"must be one of: {', '.join(allowed)}")
    return str(value)


def _prob(table: dict[str, Any], key: str, where: str, default: float | None = 0.0) -> float | None:
    return _num(table, key, where, default=default, lo=0.0, hi=1.0, unit=" (a probability)")


# --- sections ---------------------------------------------------------------


def _topology(raw: dict[str, Any]) -> Topology:
    t = _table(raw, "topology", "")
    _check_keys(t, "topology", ("kind", "pairs"))
    kind = _choice(t, "kind", "topology", "dumbbell", TOPOLOGIES)
    pairs = _int(t, "pairs", "topology", 2, 1, MAX_PAIRS)
    assert pairs is not None
    return Topology(kind=kind, pairs=pairs)


def _schedule(b: dict[str, Any], duration_s: float) -> tuple[ScheduleStep, ...]:
    steps = b.get("schedule", [])
    if not isinstance(steps, list):
        raise _fail("bottleneck.schedule", steps, "must be an array of tables")
    out = []
    for i, step in enumerate(steps):
        where = f"bottleneck.schedule[{i}]"
        if not isinstance(step, dict):
            raise _fail(where, step, "must be a table like {at_s = 5, per = 0.01}")
        _check_keys(step, where, ("at_s", "rate_mbps", "per", "delay_ms"))
        at_s = _req_num(step, "at_s", where, lo=0.0, hi=duration_s, unit=" (s, within the run)")
        rate = _num(step, "rate_mbps", where, lo=0.0, hi=MAX_RATE_MBPS, lo_open=True, unit=" (Mbit/s)")
        per = _prob(step, "per", where, default=None)
        delay = _num(step, "delay_ms", where, lo=0.0, hi=10_000.0, unit=" (ms)")
        if rate is None and per is None and delay is None:
            raise _fail(where, step, "changes nothing; give rate_mbps, per or delay_ms")
        out.append(ScheduleStep(at_s=at_s, rate_mbps=rate, per=per, delay_ms=delay))
    if [s.at_s for s in out] != sorted(s.at_s for s in out):
        raise _fail("bottleneck.schedule", [s.at_s for s in out], "at_s must be in increasing order")
    return tuple(out)


def _bottleneck(raw: dict[str, Any], duration_s: float) -> Bottleneck:
    b = _table(raw, "bottleneck", "")
    _check_keys(
        b,
        "bottleneck",
        (
            "rate_mbps",
            "queue_pkts",
            "queue_bytes",
            "delay_ms",
            "jitter_ms",
            "per",
            "gilbert_elliott",
            "shaper",
            "delay_fallback",
            "schedule",
        ),
    )
    rate = _req_num(b, "rate_mbps", "bottleneck", lo=0.0, hi=MAX_RATE_MBPS, lo_open=True, unit=" (Mbit/s)")
    qp = _int(b, "queue_pkts", "bottleneck", None, 1, 1_000_000)
    qb = _int(b, "queue_bytes", "bottleneck", None, 1500, 1_000_000_000)
    if qp is not None and qb is not None:
        raise _fail("bottleneck.queue_bytes", qb, "give queue_pkts or queue_bytes, not both")
    if qp is None and qb is None:
        qp = 100
    ge = None
    if "gilbert_elliott" in b:
        g = _table(b, "gilbert_elliott", "bottleneck.")
        where = "bottleneck.gilbert_elliott"
        _check_keys(g, where, ("p_gb", "p_bg", "loss_good", "loss_bad"))
        ge = GilbertElliott(
            p_gb=_prob(g, "p_gb", where, 0.0) or 0.0,
            p_bg=_prob(g, "p_bg", where, 1.0) or 0.0,
            loss_good=_prob(g, "loss_good", where, 0.0) or 0.0,
            loss_bad=_prob(g, "loss_bad", where, 1.0) or 0.0,
        )
    return Bottleneck(
        rate_mbps=rate,
        queue_pkts=qp,
        queue_bytes=qb,
        delay_ms=_num(b, "delay_ms", "bottleneck", default=0.0, lo=0.0, hi=10_000.0, unit=" (ms)") or 0.0,
        jitter_ms=_num(b, "jitter_ms", "bottleneck", default=0.0, lo=0.0, hi=10_000.0, unit=" (ms)") or 0.0,
        per=_prob(b, "per", "bottleneck") or 0.0,
        gilbert_elliott=ge,
        shaper=_choice(b, "shaper", "bottleneck", "htb", SHAPERS),
        delay_fallback=_choice(b, "delay_fallback", "bottleneck", "refuse", DELAY_FALLBACKS),
        schedule=_schedule(b, duration_s),
    )


def _flows(raw: dict[str, Any], topo: Topology, duration_s: float) -> tuple[Flow, ...]:
    entries = raw.get("flows", [])
    if not isinstance(entries, list) or not entries:
        raise _fail("flows", entries, "needs at least one [[flows]] table")
    known = CCLAB_ALGOS + KERNEL_ALGOS
    out: list[Flow] = []
    for i, f in enumerate(entries):
        where = f"flows[{i}]"
        if not isinstance(f, dict):
            raise _fail(where, f, "must be a table")
        _check_keys(f, where, ("algo", "src", "dst", "start_s", "duration_s", "count", "kind"))
        algo = f.get("algo")
        if algo not in known:
            raise _fail(f"{where}.algo", algo, f"unknown algorithm; known: {', '.join(known)}")
        src, dst = f.get("src"), f.get("dst")
        if src not in topo.senders:
            raise _fail(f"{where}.src", src, f"no such sender in this topology; senders: {', '.join(topo.senders)}")
        if dst not in topo.receivers:
            raise _fail(
                f"{where}.dst", dst, f"no such receiver in this topology; receivers: {', '.join(topo.receivers)}"
            )
        start = _num(f, "start_s", where, default=0.0, lo=0.0, hi=duration_s, unit=" (s, within the run)") or 0.0
        if start >= duration_s:
            raise _fail(f"{where}.start_s", start, f"must be < duration_s ({duration_s:g})")
        dur = _num(f, "duration_s", where, default=duration_s - start, lo=0.0, lo_open=True, unit=" (s)")
        assert dur is not None
        if start + dur > duration_s + 1e-9:
            raise _fail(f"{where}.duration_s", dur, f"start_s + duration_s must be <= duration_s ({duration_s:g})")
        count = _int(f, "count", where, 1, 1, 64)
        kind = _choice(f, "kind", where, "tcp", FLOW_KINDS)
        assert count is not None
        for _ in range(count):
            out.append(Flow(f"f{len(out) + 1}", str(algo), str(src), str(dst), start, dur, kind))
    return tuple(out)


def parse(raw: dict[str, Any], path: Path | None = None) -> Spec:
    """Validate a parsed TOML document into a Spec, or raise SpecError."""
    if "sweep" in raw:  # controller.sweep strips the table before it parses each point
        raise _fail("sweep", "[sweep]", "this spec is a sweep: run it with `cclab sweep`, or run one of its points")
    _check_keys(raw, "", ("name", "duration_s", "dataplane", "seed", "interval_s", "topology", "bottleneck", "flows"))
    name = raw.get("name", path.stem if path else "run")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise _fail("name", name, "must be a non-empty string of letters, digits, - and _")
    duration = _req_num(raw, "duration_s", "", lo=0.0, hi=86_400.0, lo_open=True, unit=" (s)")
    dataplane = _choice(raw, "dataplane", "", "kernel", DATAPLANES)
    seed = _int(raw, "seed", "", 1, 0, 2**63 - 1)
    interval = _num(raw, "interval_s", "", default=0.1, lo=0.01, hi=10.0, unit=" (s)")
    assert seed is not None and interval is not None
    topo = _topology(raw)
    return Spec(
        name=name,
        path=path,
        duration_s=duration,
        dataplane=dataplane,
        seed=seed,
        interval_s=interval,
        topology=topo,
        bottleneck=_bottleneck(raw, duration),
        flows=_flows(raw, topo, duration),
        raw=raw,
    )


def load(path: Path) -> Spec:
    """Read and validate a spec file, or raise SpecError with one clear line."""
    return parse(read_raw(path), path)


def read_raw(path: Path) -> dict[str, Any]:
    """Read a spec file's TOML document, unvalidated, or raise SpecError with one clear line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"spec error: cannot read {path}: {exc.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"spec error: {path} is not valid TOML: {exc}") from None
    return raw
