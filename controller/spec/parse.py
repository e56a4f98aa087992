"""Experiment specs: TOML in, frozen typed settings out, or one clear error.

Every field is typed and ranged here, before anything is built.  An unknown
key is an error (a typo must not silently fall back to a default), and each
error names the field, the value given and what is allowed, in one line.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib

from controller.network import (
    TNA_RED_WLOG,
    GilbertElliott,
    Graph,
    GraphError,
    Link,
    LinkSpec,
    Red,
    ScheduleStep,
    fpga,
    presets,
)
from controller.spec import algos
from controller.spec.fields import FIELDS as F
from controller.spec.fields import PRESET_KEYS, Field, allowed
from controller.spec.model import (
    CCLAB_ALGOS,
    LINK_ID,
    LINK_KEYS,
    MAX_FLOWS,
    MAX_NODES,
    MAX_PAIRS,
    Flow,
    Spec,
    SpecError,
    Topology,
)
from controller.spec.model import fail as _fail

# --- validation helpers -----------------------------------------------------


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


#: the table's default (a caller passes its own where the default depends on the run)
_TABLE_DEFAULT: Any = object()


def _num(
    table: dict[str, Any], key: str, where: str, fld: Field, *, default: Any = _TABLE_DEFAULT, hi: float | None = None
) -> float | None:
    """A number within the field's range (its hi, or `hi` where the run bounds it), or the default."""
    name = f"{where}.{key}" if where else key
    if key not in table:
        return fld.default if default is _TABLE_DEFAULT else default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise _fail(name, value, f"must be a number{fld.suffix}")
    top = fld.hi if hi is None else hi
    low_ok = value > fld.lo if fld.lo_open else value >= fld.lo
    if not low_ok or value > top:
        raise _fail(name, value, allowed(fld, top))
    return float(value)


def _req_num(table: dict[str, Any], key: str, where: str, fld: Field, hi: float | None = None) -> float:
    value = _num(table, key, where, fld, default=None, hi=hi)
    if value is None:
        name = f"{where}.{key}" if where else key
        raise SpecError(f"spec error: {name} is missing: it is required{fld.suffix}")
    return value


def whole(table: dict[str, Any], key: str, where: str, fld: Field, *, default: Any = _TABLE_DEFAULT) -> int | None:
    """A whole number within the field's range, or the default."""
    name = f"{where}.{key}" if where else key
    if key not in table:
        return fld.default if default is _TABLE_DEFAULT else default  # type: ignore[no-any-return]
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or not fld.lo <= value <= fld.hi:
        raise _fail(name, value, allowed(fld))
    return value


def _choice(table: dict[str, Any], key: str, where: str, fld: Field) -> str:
    name = f"{where}.{key}" if where else key
    value = table.get(key, fld.default)
    if value not in fld.choices:
        raise _fail(name, value, f"must be one of: {', '.join(fld.choices)}")
    return str(value)


def _bool(table: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise _fail(f"{where}.{key}" if where else key, value, "must be true or false")
    return value


# --- sections ---------------------------------------------------------------


def _schedule(b: dict[str, Any], where: str, duration_s: float) -> tuple[ScheduleStep, ...]:
    steps = b.get("schedule", [])
    if not isinstance(steps, list):
        raise _fail(f"{where}.schedule", steps, "must be an array of tables")
    out = []
    for i, step in enumerate(steps):
        w = f"{where}.schedule[{i}]"
        if not isinstance(step, dict):
            raise _fail(w, step, "must be a table like {at_s = 5, per = 0.01}")
        _check_keys(step, w, ("at_s", "rate_mbps", "per", "delay_ms"))
        at_s = _req_num(step, "at_s", w, F["schedule.at_s"], hi=duration_s)
        rate = _num(step, "rate_mbps", w, F["schedule.rate_mbps"])
        per = _num(step, "per", w, F["schedule.per"])
        delay = _num(step, "delay_ms", w, F["schedule.delay_ms"])
        if rate is None and per is None and delay is None:
            raise _fail(w, step, "changes nothing; give rate_mbps, per or delay_ms")
        out.append(ScheduleStep(at_s=at_s, rate_mbps=rate, per=per, delay_ms=delay))
    if [s.at_s for s in out] != sorted(s.at_s for s in out):
        raise _fail(f"{where}.schedule", [s.at_s for s in out], "at_s must be in increasing order")
    return tuple(out)


RED_KEYS = ("min_pkts", "max_pkts", "min_bytes", "max_bytes", "max_p", "wlog")


def _red(b: dict[str, Any], where: str, queue_pkts: int | None, queue_bytes: int | None) -> Red | None:
    """A link's red table: thresholds in the unit of its queue limit, min < max <= the limit."""
    if "red" not in b:
        return None
    r = _table(b, "red", f"{where}.")
    w = f"{where}.red"
    _check_keys(r, w, RED_KEYS)
    unit, other, limit = ("bytes", "pkts", queue_bytes) if queue_bytes is not None else ("pkts", "bytes", queue_pkts)
    for key in (f"min_{other}", f"max_{other}"):
        if key in r:
            raise _fail(f"{w}.{key}", r[key], f"give min_{unit} and max_{unit}: the link's queue limit is queue_{unit}")
    lo = whole(r, f"min_{unit}", w, F[f"red.min_{unit}"])
    hi = whole(r, f"max_{unit}", w, F[f"red.max_{unit}"])
    if lo is None or hi is None:
        missing = f"min_{unit}" if lo is None else f"max_{unit}"
        raise SpecError(f"spec error: {w}.{missing} is missing: a RED queue needs min_{unit} and max_{unit}")
    if lo >= hi:
        raise _fail(f"{w}.min_{unit}", lo, f"must be < max_{unit} ({hi})")
    if limit is not None and hi > limit:
        raise _fail(f"{w}.max_{unit}", hi, f"must be <= the queue limit, queue_{unit} ({limit})")
    max_p = _num(r, "max_p", w, F["red.max_p"])
    wlog = whole(r, "wlog", w, F["red.wlog"])
    assert max_p is not None and wlog is not None
    if unit == "bytes":
        return Red(min_bytes=lo, max_bytes=hi, max_p=max_p, wlog=wlog)
    return Red(min_pkts=lo, max_pkts=hi, max_p=max_p, wlog=wlog)


def _link_spec(b: dict[str, Any], where: str, duration_s: float, *, rate_required: bool) -> LinkSpec:
    """A link's emulation settings (LINK_KEYS of table `b`, already key-checked)."""
    if rate_required:
        rate: float | None = _req_num(b, "rate_mbps", where, F["link.rate_mbps"])
    else:
        rate = _num(b, "rate_mbps", where, F["link.rate_mbps"])
    qp = whole(b, "queue_pkts", where, F["link.queue_pkts"], default=None)
    qb = whole(b, "queue_bytes", where, F["link.queue_bytes"])
    if qp is not None and qb is not None:
        raise _fail(f"{where}.queue_bytes", qb, "give queue_pkts or queue_bytes, not both")
    if qp is None and qb is None and rate is not None:
        qp = F["link.queue_pkts"].default
    ge = None
    if "gilbert_elliott" in b:
        g = _table(b, "gilbert_elliott", f"{where}.")
        w = f"{where}.gilbert_elliott"
        _check_keys(g, w, ("p_gb", "p_bg", "loss_good", "loss_bad"))
        ge = GilbertElliott(
            p_gb=_num(g, "p_gb", w, F["gilbert_elliott.p_gb"]) or 0.0,
            p_bg=_num(g, "p_bg", w, F["gilbert_elliott.p_bg"]) or 0.0,
            loss_good=_num(g, "loss_good", w, F["gilbert_elliott.loss_good"]) or 0.0,
            loss_bad=_num(g, "loss_bad", w, F["gilbert_elliott.loss_bad"]) or 0.0,
        )
    ls = LinkSpec(
        rate_mbps=rate,
        queue_pkts=qp,
        queue_bytes=qb,
        delay_ms=_num(b, "delay_ms", where, F["link.delay_ms"]) or 0.0,
        jitter_ms=_num(b, "jitter_ms", where, F["link.jitter_ms"]) or 0.0,
        per=_num(b, "per", where, F["link.per"]) or 0.0,
        gilbert_elliott=ge,
        red=_red(b, where, qp, qb),
        shaper=_choice(b, "shaper", where, F["link.shaper"]),
        schedule=_schedule(b, where, duration_s),
    )
    if rate is None:
        for key in LINK_KEYS:
            if key in b and F[f"link.{key}"].needs == "rate_mbps":
                raise _fail(f"{where}.{key}", b[key], "needs rate_mbps: only a rate-limited link has a queue and loss")
        if any(st.rate_mbps is not None or st.per is not None for st in ls.schedule):
            raise _fail(f"{where}.schedule", b["schedule"], "changes rate or per on a link without rate_mbps")
    return ls


def _bottleneck(raw: dict[str, Any], duration_s: float, required: bool) -> tuple[LinkSpec | None, str]:
    """The [bottleneck] table: a preset's settings for its bottleneck links; and the delay fallback."""
    if "bottleneck" not in raw:
        if required:
            raise SpecError("spec error: bottleneck is missing: a preset topology needs a [bottleneck] table")
        return None, "refuse"
    b = _table(raw, "bottleneck", "")
    _check_keys(b, "bottleneck", (*LINK_KEYS, "delay_fallback"))
    fallback = _choice(b, "delay_fallback", "bottleneck", F["bottleneck.delay_fallback"])
    return _link_spec(b, "bottleneck", duration_s, rate_required=True), fallback


def _access_delays(t: dict[str, Any], hosts: tuple[str, ...]) -> dict[str, float]:
    """topology.access_delay_ms = {h2 = 40}: one-way delay on a host's access link."""
    table = _table(t, "access_delay_ms", "topology.")
    out = {}
    for host, value in table.items():
        if host not in hosts:
            raise _fail(f"topology.access_delay_ms.{host}", value, f"no such host; hosts: {', '.join(hosts)}")
        out[host] = _req_num(table, host, "topology.access_delay_ms", F["topology.access_delay_ms"])
    return out


def _graph_links(t: dict[str, Any], duration_s: float) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Link, ...]]:
    """kind = "graph": topology.hosts, topology.switches and [[topology.links]]."""
    names: dict[str, tuple[str, ...]] = {}
    for key in ("hosts", "switches"):
        value = t.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
            raise _fail(f"topology.{key}", value, "must be a non-empty array of node names")
        for x in value:
            if not x or not all(c.isalnum() or c == "_" for c in x) or len(x) > 8 or not x[0].isalpha():
                raise _fail(f"topology.{key}", x, "node names are 1-8 letters, digits or _, starting with a letter")
        names[key] = tuple(value)
    if len(names["hosts"]) + len(names["switches"]) > MAX_NODES:
        raise _fail("topology", len(names["hosts"]) + len(names["switches"]), f"at most {MAX_NODES} nodes")
    entries = t.get("links")
    if not isinstance(entries, list) or not entries:
        raise _fail("topology.links", entries, "needs at least one [[topology.links]] table")
    links = []
    for i, e in enumerate(entries):
        where = f"topology.links[{i}]"
        if not isinstance(e, dict):
            raise _fail(where, e, 'must be a table like {a = "h1", b = "s1"}')
        _check_keys(e, where, ("id", "a", "b", "both", *LINK_KEYS))
        for end in ("a", "b"):
            if not isinstance(e.get(end), str):
                raise _fail(f"{where}.{end}", e.get(end), "must name a node")
        lid = e.get("id", "")
        if not isinstance(lid, str) or (lid and not (LINK_ID.fullmatch(lid))):
            raise _fail(f"{where}.id", lid, "must be l followed by up to 7 letters, digits or _ (e.g. l1, lcore)")
        both = _bool(e, "both", where, F["link.both"].default)
        spec = _link_spec(e, where, duration_s, rate_required=False)
        if both and not spec.emulated:
            raise _fail(f"{where}.both", both, "needs rate_mbps (both directions of an emulated link)")
        links.append(Link(lid, e["a"], e["b"], spec, both))
    return names["hosts"], names["switches"], tuple(links)


def _topology(raw: dict[str, Any], duration_s: float) -> tuple[Topology, LinkSpec, str]:
    t = _table(raw, "topology", "")
    kind = _choice(t, "kind", "topology", F["topology.kind"])
    _check_keys(t, "topology", ("kind", "access_delay_ms", *PRESET_KEYS[kind]))
    bottleneck, fallback = _bottleneck(raw, duration_s, required=kind != "graph")
    try:
        if kind == "graph":
            if "access_delay_ms" in t:
                raise _fail("topology.access_delay_ms", t["access_delay_ms"], "give delay_ms on the host's link")
            if "links" in raw:
                raise _fail("links", raw["links"], "[links.<id>] overrides a preset's links; give graph links here")
            hosts, switches, links = _graph_links(t, duration_s)
            graph = Graph(hosts, switches, tuple(presets.renumber(list(links))))
            emulated = graph.emulated()
            if not emulated:
                raise _fail("topology.links", "no rate_mbps", "at least one link must be emulated (rate_mbps)")
            if bottleneck is not None:
                raise _fail("bottleneck", raw["bottleneck"], "a graph gives each link its own settings")
            return Topology(kind, graph), emulated[0].spec, fallback
        assert bottleneck is not None
        if kind == "dumbbell":
            pairs = whole(t, "pairs", "topology", F["topology.pairs"])
            assert pairs is not None
            probe = presets.dumbbell(pairs, bottleneck)
            graph = presets.dumbbell(pairs, bottleneck, _access_delays(t, probe.hosts))
            topo = Topology(kind, _override(raw, graph, duration_s), pairs=pairs)
        elif kind == "multipath":
            background = _background(t)
            probe = presets.multipath(background, bottleneck)
            graph = presets.multipath(background, bottleneck, _access_delays(t, probe.hosts))
            topo = Topology(kind, _override(raw, graph, duration_s), background=background)
        else:
            hops = whole(t, "hops", "topology", F["topology.hops"])
            cross = whole(t, "cross", "topology", F["topology.cross"])
            assert hops is not None and cross is not None
            probe = presets.parking_lot(hops, bottleneck, cross=cross)
            graph = presets.parking_lot(hops, bottleneck, _access_delays(t, probe.hosts), cross=cross)
            topo = Topology(kind, _override(raw, graph, duration_s), hops=hops, cross=cross)
    except GraphError as exc:
        raise SpecError(str(exc)) from None
    return topo, topo.graph.emulated()[0].spec, fallback


def _background(t: dict[str, Any]) -> tuple[int, int]:
    """topology.background: background pairs on path 1 and path 2 of a multipath topology."""
    value = t.get("background", [0, 0])
    ok = isinstance(value, list) and len(value) == 2
    if not ok or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_PAIRS for n in value):
        raise _fail("topology.background", value, f"must be two whole numbers from 0 to {MAX_PAIRS} (pairs per path)")
    return (value[0], value[1])


def _override(raw: dict[str, Any], graph: Graph, duration_s: float) -> Graph:
    """[links.<id>]: one preset link's settings instead of [bottleneck]'s."""
    table = _table(raw, "links", "")
    if not table:
        return graph
    by_id = {lk.id: lk for lk in graph.links}
    links = list(graph.links)
    for lid, value in table.items():
        where = f"links.{lid}"
        if lid not in by_id:
            raise _fail(where, value, f"no such link in this topology; links: {', '.join(by_id)}")
        if not isinstance(value, dict):
            raise _fail(where, value, "must be a table of link settings")
        _check_keys(value, where, (*LINK_KEYS, "both"))
        old = by_id[lid]
        both = _bool(value, "both", where, old.both)
        merged = {**_link_table(old.spec), **value}
        merged.pop("both", None)
        spec = _link_spec(merged, where, duration_s, rate_required=False)
        links[links.index(old)] = Link(lid, old.a, old.b, spec, both)
    return Graph(graph.hosts, graph.switches, tuple(links), kind=graph.kind)


def _link_table(ls: LinkSpec) -> dict[str, Any]:
    """A LinkSpec back as the TOML keys that would give it (to merge an override into)."""
    out: dict[str, Any] = {}
    if ls.rate_mbps is not None:
        out["rate_mbps"] = ls.rate_mbps
        out["shaper"] = ls.shaper
        out["per"] = ls.per
        if ls.queue_bytes is not None:
            out["queue_bytes"] = ls.queue_bytes
        else:
            out["queue_pkts"] = ls.queue_pkts
    out["delay_ms"], out["jitter_ms"] = ls.delay_ms, ls.jitter_ms
    if ls.gilbert_elliott is not None:
        out["gilbert_elliott"] = dict(vars(ls.gilbert_elliott))
    if ls.red is not None:
        out["red"] = {k: v for k, v in vars(ls.red).items() if v is not None}
    if ls.schedule:
        out["schedule"] = [{k: v for k, v in vars(st).items() if v is not None} for st in ls.schedule]
    return out


FLOW_KEYS = (
    "algo",
    "src",
    "dst",
    "start_s",
    "duration_s",
    "count",
    "kind",
    "bytes",
    "mss_bytes",
    "rate_mbps",
    "on_s",
    "off_s",
    "on_off",
    "access_delay_ms",
    "via",
)


def _flows(
    raw: dict[str, Any], topo: Topology, duration_s: float, path: Path | None, sources: dict[str, Path]
) -> tuple[Flow, ...]:
    """The [[flows]]; an algorithm of one's own (algo = "<name>.bpf.c") goes into `sources` by its name."""
    entries = raw.get("flows", [])
    if not isinstance(entries, list) or not entries:
        raise _fail("flows", entries, "needs at least one [[flows]] table")
    known = F["flows.algo"].choices
    hosts = topo.graph.hosts
    out: list[Flow] = []
    mptcp_senders: set[str] = set()
    mptcp_receivers: set[str] = set()
    tcp_senders: set[str] = set()
    for i, f in enumerate(entries):
        where = f"flows[{i}]"
        if not isinstance(f, dict):
            raise _fail(where, f, "must be a table")
        _check_keys(f, where, FLOW_KEYS)
        kind = _choice(f, "kind", where, F["flows.kind"])
        src, dst = f.get("src"), f.get("dst")
        for end, name in (("src", src), ("dst", dst)):
            if name not in hosts:
                raise _fail(f"{where}.{end}", name, f"no such host in this topology; hosts: {', '.join(hosts)}")
        if src == dst:
            raise _fail(f"{where}.dst", dst, "must differ from src")
        shared = topo.graph.shared_segments(str(src), str(dst))
        if not shared:
            raise _fail(f"{where}.dst", dst, f"no route from {src}: the two hosts share no switch group")
        if kind == "mptcp":
            if len(shared) > 2:
                raise _fail(
                    f"{where}.kind", kind, f"takes one path or two between {src} and {dst}, found {len(shared)} "
                    "(hosts sharing one switch group: two subflows over it; two: one subflow on each)"
                )  # fmt: skip
            if "via" in f:
                raise _fail(f"{where}.via", f["via"], "an mptcp flow takes every path its hosts share (no via)")
            if src in mptcp_senders or src in tcp_senders:
                raise _fail(f"{where}.src", src, "already sends a tcp or mptcp flow; an mptcp sender sends only that")
            mptcp_senders.add(str(src))
            if src in mptcp_receivers or dst in mptcp_senders:
                # a host announces its endpoints on the connections it opens too: its peer would add subflows
                end, host = ("src", src) if src in mptcp_receivers else ("dst", dst)
                raise _fail(f"{where}.{end}", host, "an mptcp host sends or receives one mptcp flow, not both")
            if dst in mptcp_receivers:
                # its announced addresses (or port) go to every mptcp connection it accepts
                raise _fail(f"{where}.dst", dst, "already receives an mptcp flow; an mptcp receiver receives one")
            mptcp_receivers.add(str(dst))
            if f.get("count", 1) != 1:
                raise _fail(f"{where}.count", f["count"], "must be 1 for an mptcp flow (one per sending host)")
        elif kind == "tcp" and src in mptcp_senders:
            # the mptcp flow's second subflow owns the host's one ephemeral port (build.py); iperf3 needs another
            raise _fail(f"{where}.src", src, "sends an mptcp flow; give this tcp flow another sending host")
        if kind == "tcp":
            tcp_senders.add(str(src))
        if kind != "mptcp" and "via" in f:
            shared = _via(topo.graph, f["via"], shared, f"{where}.via")
        start = _num(f, "start_s", where, F["flows.start_s"], hi=duration_s) or 0.0
        if start >= duration_s:
            raise _fail(f"{where}.start_s", start, f"must be < duration_s ({duration_s:g})")
        dur = _num(f, "duration_s", where, F["flows.duration_s"], default=duration_s - start)
        assert dur is not None
        if start + dur > duration_s + 1e-9:
            raise _fail(f"{where}.duration_s", dur, f"start_s + duration_s must be <= duration_s ({duration_s:g})")
        count = whole(f, "count", where, F["flows.count"])
        assert count is not None
        extra: dict[str, Any] = {}
        if kind in ("tcp", "mptcp"):
            if kind == "mptcp" and "bytes" in f:
                raise _fail(f"{where}.bytes", f["bytes"], 'is for kind = "tcp" flows (mptcp sends for its duration)')
            algo = f.get("algo")
            if isinstance(algo, str) and algo.endswith(algos.OWN_SUFFIX):
                algo = _own_algo(algo, f"{where}.algo", path, sources)
            elif algo not in known:
                raise _fail(
                    f"{where}.algo", algo, f"unknown algorithm; known: {', '.join(known)}, or a source <name>.bpf.c"
                )
            _check_kind(f, kind, where)
            extra["mss_bytes"] = whole(f, "mss_bytes", where, F["flows.mss_bytes"])
            if kind == "tcp":
                extra["bytes"] = whole(f, "bytes", where, F["flows.bytes"])
            else:
                # one path: two subflows over it, the paper's two-path flow at a shared bottleneck
                extra["subflow_segments"] = tuple(shared) if len(shared) == 2 else (shared[0], shared[0])
        else:
            _check_kind(f, kind, where)
            algo = "-"
            extra["rate_mbps"] = _req_num(f, "rate_mbps", where, F["flows.rate_mbps"])
            extra["on_s"] = _num(f, "on_s", where, F["flows.on_s"], default=dur)
            extra["off_s"] = _num(f, "off_s", where, F["flows.off_s"])
            extra["on_off"] = _choice(f, "on_off", where, F["flows.on_off"])
        for _ in range(count):
            out.append(
                Flow(f"f{len(out) + 1}", str(algo), str(src), str(dst), start, dur, kind, segment=shared[0], **extra)
            )
    if len(out) > MAX_FLOWS:
        raise _fail("flows", f"{len(out)} flows", f"at most {MAX_FLOWS} flows in one spec (count included)")
    return tuple(out)


def _own_algo(value: str, where: str, path: Path | None, sources: dict[str, Path]) -> str:
    """An algorithm of one's own: its struct_ops source (relative to the spec's folder) and the name it runs as."""
    source = _beside_spec(value, path)
    name = algos.own_name(source)
    if name is None:
        raise _fail(where, value, "a source's name before .bpf.c is the algorithm's: a-z, 0-9 and _, at most 15")
    if name in F["flows.algo"].choices:
        raise _fail(where, value, f"{name} is an algorithm cclab or the kernel has: give your own another name")
    source = _existing(where, value, source)
    if sources.setdefault(name, source) != source:
        raise _fail(where, value, f"another file of the spec is named {name} already ({sources[name]})")
    return name


def _check_kind(f: dict[str, Any], kind: str, where: str) -> None:
    """A flow's keys that are for other kinds of flow (rate_mbps is for udp_onoff, bytes for tcp)."""
    for key in FLOW_KEYS:
        kinds = F[f"flows.{key}"].kinds
        if key in f and kinds and kind not in kinds:
            raise _fail(f"{where}.{key}", f[key], f'is for kind = "{kinds[0]}" flows')


def _via(graph: Graph, via: object, shared: list[int], where: str) -> list[int]:
    """flows[i].via: the link a flow between two multi-homed hosts must cross; picks its switch group."""
    link = next((lk for lk in graph.links if lk.id == via), None)
    if link is None:
        raise _fail(where, via, f"no such link; links: {', '.join(lk.id for lk in graph.links)}")
    seg = graph.link_segment(link)
    if seg not in shared:
        raise _fail(where, via, "is not on a path between the flow's hosts")
    return [seg]


def _flow_access_delays(raw: dict[str, Any], topo: Topology) -> dict[str, float]:
    """flows[i].access_delay_ms: the delay of that flow's sender's access link (one value per host)."""
    out: dict[str, float] = {}
    for i, f in enumerate(raw.get("flows", [])):
        if not isinstance(f, dict) or "access_delay_ms" not in f:
            continue
        where = f"flows[{i}]"
        if topo.kind == "graph":
            raise _fail(f"{where}.access_delay_ms", f["access_delay_ms"], "give delay_ms on the host's link")
        value = _req_num(f, "access_delay_ms", where, F["flows.access_delay_ms"])
        src = str(f.get("src"))
        if out.get(src, value) != value:
            raise _fail(f"{where}.access_delay_ms", value, f"another flow from {src} gives {out[src]:g}; one per host")
        out[src] = value
    return out


#: the keys of a spec's top level ([sweep] is controller.spec.sweep's)
TOP_KEYS = (
    "name",
    "duration_s",
    "dataplane",
    "seed",
    "interval_s",
    "delay_element",
    "sack",
    "switches",
    "controller_app",
    "p4_program",
    "topology",
    "bottleneck",
    "links",
    "flows",
    "algorithms",
)


def _algorithms(raw: dict[str, Any]) -> dict[str, dict[str, int]]:
    """[algorithms.<algo>]: tunables of cclab's algorithms (hosts/cc/algos.toml), whole numbers in range."""
    out: dict[str, dict[str, int]] = {}
    table = _table(raw, "algorithms", "")
    _check_keys(table, "algorithms", CCLAB_ALGOS)  # the kernel's own algorithms take no tunables here
    for algo, given in table.items():
        where = f"algorithms.{algo}"
        if not isinstance(given, dict):
            raise _fail(where, given, "must be a table of <tunable> = whole number")
        declared = algos.params(algo)
        _check_keys(given, where, tuple(declared))
        values = {}
        for k, p in declared.items():
            value = whole(given, k, where, Field("integer", p.lo, p.hi))
            if value is not None:
                values[k] = value
        out[algo] = values
    return out


def parse(raw: dict[str, Any], path: Path | None = None) -> Spec:
    """Validate a parsed TOML document into a Spec, or raise SpecError."""
    if "sweep" in raw:  # controller.spec.sweep strips the table before it parses each point
        raise _fail("sweep", "[sweep]", "this spec is a sweep: run it with `cclab sweep`, or run one of its points")
    _check_keys(raw, "", TOP_KEYS)
    name = raw.get("name", path.stem if path else "run")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise _fail("name", name, "must be a non-empty string of letters, digits, - and _")
    duration = _req_num(raw, "duration_s", "", F["duration_s"])
    dataplane = _choice(raw, "dataplane", "", F["dataplane"])
    seed = whole(raw, "seed", "", F["seed"])
    interval = _num(raw, "interval_s", "", F["interval_s"])
    assert seed is not None and interval is not None
    delay_element = _choice(raw, "delay_element", "", F["delay_element"])
    sack = _bool(raw, "sack", "", F["sack"].default)
    switches = _choice(raw, "switches", "", F["switches"])
    app = _named_file(
        raw,
        "controller_app",
        path,
        None if switches == "ovs" else 'needs switches = "ovs" (an os-ken app programs OVS bridges)',
    )
    program = _named_file(
        raw,
        "p4_program",
        path,
        None if dataplane == "bmv2" else f'needs dataplane = "bmv2" (not {dataplane!r}): it runs on the BMv2 switches',
    )
    topo, first, fallback = _topology(raw, duration)
    _check_emulation(topo.graph, dataplane)
    _check_switches(topo.graph, dataplane, switches)
    cc_sources: dict[str, Path] = {}
    flows = _flows(raw, topo, duration, path, cc_sources)
    algo_params = _algorithms(raw)
    delays = _flow_access_delays(raw, topo)
    if delays:
        topo = _with_access_delays(topo, delays)
    return Spec(
        name=name,
        path=path,
        duration_s=duration,
        dataplane=dataplane,
        seed=seed,
        interval_s=interval,
        topology=topo,
        bottleneck=first,
        flows=flows,
        delay_fallback=fallback,
        delay_element=delay_element,
        sack=sack,
        switches=switches,
        controller_app=app,
        p4_program=program,
        algo_params=algo_params,
        cc_sources=cc_sources,
        raw=raw,
    )


#: the spec's fields that name a file beside it: field -> (its suffix, what the file must be)
NAMED_FILES = {
    "controller_app": (".py", "an os-ken app's .py file"),
    "p4_program": (".p4", "a v1model program's .p4 source"),
}


def _named_file(raw: dict[str, Any], key: str, path: Path | None, unusable: str | None) -> Path | None:
    """A NAMED_FILES field: the file, relative to the spec's directory; `unusable` says why this network cannot
    use it (None: it can)."""
    if key not in raw:
        return None
    value = raw[key]
    if unusable:
        raise _fail(key, value, unusable)
    suffix, what = NAMED_FILES[key]
    if not isinstance(value, str) or not value.endswith(suffix):
        raise _fail(key, value, f"must be the path of {what}")
    return _existing(key, value, _beside_spec(value, path))


def _beside_spec(value: str, path: Path | None) -> Path:
    """A file a spec names: as given if absolute (or the spec has no file), else relative to the spec's folder."""
    return Path(value) if Path(value).is_absolute() or path is None else path.parent / value


def anchored(raw: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """`raw` with the files it names (own algorithms, NAMED_FILES) made absolute from the spec's
    folder: for a copy of the spec written elsewhere (a sweep's points/*.toml) that must name the same files."""
    if path is None:
        return raw

    def fix(value: Any, suffix: str) -> Any:
        ok = isinstance(value, str) and value.endswith(suffix) and not Path(value).is_absolute()
        return str(_beside_spec(value, path).resolve()) if ok else value

    for key, (suffix, _) in NAMED_FILES.items():
        if key in raw:
            raw[key] = fix(raw[key], suffix)
    for f in raw.get("flows", []) if isinstance(raw.get("flows"), list) else []:
        if isinstance(f, dict) and "algo" in f:
            f["algo"] = fix(f["algo"], algos.OWN_SUFFIX)
    return raw


def _existing(field: str, value: str, file: Path) -> Path:
    """`file`, resolved; SpecError naming `field` if there is no such file."""
    if not file.is_file():
        raise _fail(field, value, f"no such file ({file})")
    return file.resolve()


def _check_emulation(graph: Graph, dataplane: str) -> None:
    """What the targets can emulate: links between switches; on bmv2 one direction per link."""
    for lk in graph.links:
        if not lk.spec.emulated:
            continue
        where = f"link {lk.id} ({lk.a}-{lk.b})"
        if lk.a in graph.hosts or lk.b in graph.hosts:
            raise _fail(f"{where}.rate_mbps", lk.spec.rate_mbps, "emulate links between switches (put one in front)")
        if lk.both and dataplane == "bmv2":
            raise _fail(f"{where}.both", True, "bmv2 emulates one direction per link; give the other its own link")
        if lk.spec.gilbert_elliott is not None and dataplane == "bmv2":
            raise _fail(f"{where}.gilbert_elliott", "{...}", "not in the BMv2 program yet; use i.i.d. per on bmv2")
        if lk.spec.red is not None and dataplane == "tofino" and lk.spec.red.wlog != TNA_RED_WLOG:
            raise _fail(
                f"{where}.red.wlog", lk.spec.red.wlog,
                f"the Tofino program's RED average has the weight 2^-{TNA_RED_WLOG} built in: use {TNA_RED_WLOG} "
                "(or rebuild p4/tna with -DRED_WLOG and change TNA_RED_WLOG)",
            )  # fmt: skip
        if dataplane == "fpga-sim":
            _check_fpga_link(lk, where)


def _check_fpga_link(lk: Link, where: str) -> None:
    """The FPGA element delays the direction it emulates, by a fixed number of cycles, with i.i.d. loss; its
    line rate, queue and delay line are those of the harness build."""
    if lk.spec.has_delay and not lk.both:
        raise _fail(
            f"{where}.both", False,
            "fpga-sim delays inside the element of each emulated direction: set both = true so that the reverse "
            "direction (the ACKs) is delayed too",
        )  # fmt: skip
    if lk.spec.jitter_ms:
        raise _fail(f"{where}.jitter_ms", lk.spec.jitter_ms, "the FPGA element's delay line has no jitter; use 0")
    if lk.spec.gilbert_elliott is not None:
        raise _fail(f"{where}.gilbert_elliott", "{...}", "not in the FPGA element; use i.i.d. per on fpga-sim")
    if lk.spec.red is not None:
        raise _fail(f"{where}.red", "{...}", "not in the FPGA element yet; RED runs on the kernel and bmv2 targets")
    why = fpga.link_refusal(lk.spec)  # the element's line rate and memories, as the harness is built
    if why is not None:
        raise _fail(f"{where}.{why[0]}", why[1], why[2])


def _check_switches(graph: Graph, dataplane: str, switches: str) -> None:
    """What OVS switches run with: the kernel target, and a link emulated both ways without a delay (the
    reverse direction's limiter would sit on the port that delays it)."""
    if switches != "ovs":
        return
    if dataplane != "kernel":
        raise _fail("switches", switches, f'runs with dataplane = "kernel" only (not {dataplane!r}) for now')
    for lk in graph.links:
        if lk.spec.emulated and lk.both and lk.spec.has_delay:
            raise _fail(
                f"link {lk.id} ({lk.a}-{lk.b}).both", True,
                'with switches = "ovs" a link emulated both ways has no delay_ms yet; give each direction a link',
            )  # fmt: skip


def _with_access_delays(topo: Topology, delays: dict[str, float]) -> Topology:
    g = topo.graph
    links = []
    for lk in g.links:
        host = lk.a if lk.a in delays else lk.b if lk.b in delays else None
        if host is not None and not lk.spec.emulated and (lk.a in g.switches or lk.b in g.switches):
            old = lk.spec.delay_ms
            if old and old != delays[host]:
                raise _fail(f"topology.access_delay_ms.{host}", old, f"and a flow's access_delay_ms {delays[host]:g}")
            lk = Link(lk.id, lk.a, lk.b, LinkSpec(delay_ms=delays[host]), lk.both)
        links.append(lk)
    graph = Graph(g.hosts, g.switches, tuple(links), kind=g.kind)
    return Topology(topo.kind, graph, topo.pairs, topo.hops, topo.cross)


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
