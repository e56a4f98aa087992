"""The JSON Schema of an experiment spec, for editors (`cclab schema`).

TOML language servers (taplo, Even Better TOML) complete and check a spec's
fields from it.  It is generated, not written: each field's type and its
description come from the typed settings a spec becomes (the frozen
dataclasses of controller.spec.model and controller.network: their
annotations and field docstrings), its choices from the vocabularies parse.py
checks against (DATAPLANES, TOPOLOGIES, the algorithms, ...), the keys of
links, flows, schedule steps and Gilbert-Elliott tables from the same key
lists and dataclasses parse.py uses, and the ranges from RANGES below.
parse.py stays what validates a spec and writes the one-line refusals;
tests/test_schema.py holds the two in agreement at every range's bounds and
every table's keys.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from controller.network import GilbertElliott, Graph, Link, LinkSpec, ScheduleStep
from controller.network.elements import DELAY_ELEMENTS
from controller.spec import algos, model
from controller.spec.parse import FLOW_KEYS, TOP_KEYS
from controller.spec.sweep import MAX_REPETITIONS

DRAFT = "http://json-schema.org/draft-07/schema#"
#: a link's id: l + up to 7 letters, digits or _ (model.LINK_ID)
LINK_ID_PATTERN = "^" + model.LINK_ID.pattern + "$"
NODE_PATTERN = "^[A-Za-z][A-Za-z0-9_]{0,7}$"
NAME_PATTERN = "^[A-Za-z0-9_-]+$"


@dataclass(frozen=True)
class Range:
    """The values parse.py accepts for a number."""

    lo: float = -math.inf
    """Lowest value (inclusive unless lo_open)."""
    hi: float = math.inf
    """Highest value, inclusive."""
    lo_open: bool = False
    """lo itself is refused (a value must be above it)."""


PROB = Range(0.0, 1.0)
DELAY = Range(0.0, model.MAX_DELAY_MS)
RATE = Range(0.0, model.MAX_RATE_MBPS, lo_open=True)
#: table.key -> the range parse.py checks ("link" is every link table: bottleneck, links.<id>, topology.links[i])
RANGES: dict[str, Range] = {
    "duration_s": Range(0.0, 86_400.0, lo_open=True),
    "seed": Range(0, 2**63 - 1),
    "interval_s": Range(0.01, 10.0),
    "topology.pairs": Range(1, model.MAX_PAIRS),
    "topology.hops": Range(1, model.MAX_HOPS),
    "topology.cross": Range(1, model.MAX_PAIRS),
    "topology.access_delay_ms": DELAY,
    "link.rate_mbps": RATE,
    "link.queue_pkts": Range(1, 1_000_000),
    "link.queue_bytes": Range(1500, 1_000_000_000),
    "link.delay_ms": DELAY,
    "link.jitter_ms": DELAY,
    "link.per": PROB,
    "schedule.at_s": Range(0.0),
    "schedule.rate_mbps": RATE,
    "schedule.per": PROB,
    "schedule.delay_ms": DELAY,
    "gilbert_elliott.p_gb": PROB,
    "gilbert_elliott.p_bg": PROB,
    "gilbert_elliott.loss_good": PROB,
    "gilbert_elliott.loss_bad": PROB,
    "flows.start_s": Range(0.0),
    "flows.duration_s": Range(0.0, lo_open=True),
    "flows.count": Range(1, 64),
    "flows.bytes": Range(1, 1 << 40),
    "flows.rate_mbps": RATE,
    "flows.on_s": Range(0.0, lo_open=True),
    "flows.off_s": Range(0.0),
    "flows.access_delay_ms": DELAY,
    "sweep.repetitions": Range(1, MAX_REPETITIONS),
}
#: the keys of [topology] besides kind and access_delay_ms, per kind (parse._topology's table)
PRESET_KEYS = {
    "dumbbell": ("pairs",),
    "parking_lot": ("hops", "cross"),
    "multipath": ("background",),
    "graph": ("hosts", "switches", "links"),
}
#: a graph link's keys that need rate_mbps (only a rate-limited link has a queue and loss)
NEEDS_RATE = {k: ["rate_mbps"] for k in ("queue_pkts", "queue_bytes", "per", "gilbert_elliott", "shaper")}
#: descriptions of keys no dataclass field carries
DOCS = {
    "count": "Run this many parallel flows of this table (ids f1, f2, ... in order).",
    "access_delay_ms": "One-way delay on the sender's access link, ms (its own RTT).",
    "topology.access_delay_ms": "One-way delay on hosts' access links, ms, e.g. {h2 = 40}.",
    "topology.links": "The graph's links: [[topology.links]] with a, b and, for an emulated link, rate_mbps.",
    "bottleneck": "Every bottleneck of a preset: rate, queue, delay, loss, schedule.",
    "links": "One preset link's settings instead of [bottleneck]'s, by id: [links.l2].",
    "flows": "The flows: [[flows]] tables.",
    "sweep": "A sweep (cclab sweep): repetitions, and per dotted field path the list of values to sweep.",
    "repetitions": "Runs per grid point, each with its own seed.",
    "via": "The link a flow between two multi-homed hosts crosses: picks its path (tcp, udp_onoff).",
}


@functools.cache
def _field_docs(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string under each field)."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    out: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                out[node.target.id] = " ".join(nxt.value.value.split())
    return out


def _json_type(annotation: Any) -> str | None:
    """The JSON type of a scalar annotation (float, int | None, str, bool); None for anything else."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = args[0] if len(args) == 1 else annotation
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(annotation)


def _from_field(cls: type, name: str, rng_key: str | None = None, **extra: Any) -> dict[str, Any]:
    """A scalar field's schema from the dataclass that holds it: type, description, and its range."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    jtype = _json_type(hints[name]) if name in hints else None
    if jtype is not None:
        out["type"] = jtype
    doc = _field_docs(cls).get(name)
    if doc:
        out["description"] = doc
    rng = RANGES.get(rng_key or "")
    if rng is not None:
        out.update(_range(rng))
    fld = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if fld is not None and fld.default is not dataclasses.MISSING and fld.default is not None:
        out["default"] = fld.default
    out.update(extra)
    return out


def _range(rng: Range) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rng.lo > -math.inf:
        out["exclusiveMinimum" if rng.lo_open else "minimum"] = rng.lo
    if rng.hi < math.inf:
        out["maximum"] = rng.hi
    return out


def _number(rng_key: str, doc: str, jtype: str = "number") -> dict[str, Any]:
    return {"type": jtype, "description": doc, **_range(RANGES[rng_key])}


def _closed(props: dict[str, Any], keys: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    """A table with exactly these keys allowed (parse.py refuses any other)."""
    missing = [k for k in keys if k not in props]
    assert not missing, f"no schema for {missing}"
    return {"type": "object", "properties": {k: props[k] for k in keys}, "additionalProperties": False, **extra}


def _link_props() -> dict[str, Any]:
    """The keys of every link table (model.LINK_KEYS), from LinkSpec."""
    props = {
        k: _from_field(LinkSpec, k, f"link.{k}") for k in model.LINK_KEYS if k not in ("gilbert_elliott", "schedule")
    }
    props["shaper"]["enum"] = list(model.SHAPERS)
    ge = {
        k.name: _from_field(GilbertElliott, k.name, f"gilbert_elliott.{k.name}")
        for k in dataclasses.fields(GilbertElliott)
    }
    props["gilbert_elliott"] = _closed(ge, tuple(ge), description=_field_docs(LinkSpec)["gilbert_elliott"])
    steps = {k.name: _from_field(ScheduleStep, k.name, f"schedule.{k.name}") for k in dataclasses.fields(ScheduleStep)}
    step = _closed(steps, tuple(steps), required=["at_s"], minProperties=2)
    props["schedule"] = {"type": "array", "items": step, "description": _field_docs(LinkSpec)["schedule"]}
    return props


def _topology() -> dict[str, Any]:
    topo = model.Topology
    props: dict[str, Any] = {
        "kind": _from_field(topo, "kind", enum=list(model.TOPOLOGIES), default="dumbbell"),
        "access_delay_ms": {
            "type": "object",
            "description": DOCS["topology.access_delay_ms"],
            "additionalProperties": _number("topology.access_delay_ms", "ms, one way"),
        },
        "pairs": _from_field(topo, "pairs", "topology.pairs", default=2),
        "hops": _from_field(topo, "hops", "topology.hops", default=3),
        "cross": _from_field(topo, "cross", "topology.cross", default=1),
        "background": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": model.MAX_PAIRS},
            "minItems": 2,
            "maxItems": 2,
            "default": [0, 0],
            "description": _field_docs(topo).get("background", ""),
        },
    }
    for key in ("hosts", "switches"):
        names = {"type": "string", "pattern": NODE_PATTERN}
        props[key] = {"type": "array", "items": names, "minItems": 1, "description": _field_docs(Graph).get(key, "")}
    link = {
        **_link_props(),
        "id": _from_field(Link, "id", pattern=LINK_ID_PATTERN),
        "a": {"type": "string", "description": "One end: a host or switch (emulation runs a -> b)."},
        "b": {"type": "string", "description": "The other end."},
        "both": _from_field(Link, "both"),
    }
    link_keys = ("id", "a", "b", "both", *model.LINK_KEYS)
    props["links"] = {
        "type": "array",
        "minItems": 1,
        "items": _closed(link, link_keys, required=["a", "b"], dependencies=NEEDS_RATE),
        "description": DOCS["topology.links"],
    }
    rules = []
    for kind in model.TOPOLOGIES:
        allowed = ["kind", "access_delay_ms", *PRESET_KEYS.get(kind, ())]
        if kind == "graph":
            allowed.remove("access_delay_ms")
        then: dict[str, Any] = {"propertyNames": {"enum": allowed}}
        if kind == "graph":
            then["required"] = list(PRESET_KEYS["graph"])
        cond: dict[str, Any] = {"properties": {"kind": {"const": kind}}}
        if kind == "dumbbell":  # the default kind
            cond = {"anyOf": [{"not": {"required": ["kind"]}}, cond]}
        else:
            cond["required"] = ["kind"]
        rules.append({"if": cond, "then": then})
    return {"type": "object", "properties": props, "allOf": rules}


def _flows() -> dict[str, Any]:
    fl = model.Flow
    props: dict[str, Any] = {
        "algo": _from_field(fl, "algo", enum=list(model.CCLAB_ALGOS + model.KERNEL_ALGOS)),
        "src": _from_field(fl, "src"),
        "dst": _from_field(fl, "dst"),
        "start_s": _from_field(fl, "start_s", "flows.start_s"),
        "duration_s": _from_field(fl, "duration_s", "flows.duration_s"),
        "count": _number("flows.count", DOCS["count"], "integer"),
        "kind": _from_field(fl, "kind", enum=list(model.FLOW_KINDS)),
        "bytes": _from_field(fl, "bytes", "flows.bytes"),
        "rate_mbps": _from_field(fl, "rate_mbps", "flows.rate_mbps"),
        "on_s": _from_field(fl, "on_s", "flows.on_s"),
        "off_s": _from_field(fl, "off_s", "flows.off_s"),
        "on_off": _from_field(fl, "on_off", enum=list(model.ON_OFF_DISTRIBUTIONS)),
        "access_delay_ms": _number("flows.access_delay_ms", DOCS["access_delay_ms"]),
        "via": {"type": "string", "pattern": LINK_ID_PATTERN, "description": DOCS["via"]},
    }
    for key in ("start_s", "duration_s", "rate_mbps", "on_s", "off_s"):
        props[key].pop("default", None)  # parse.py's defaults depend on the run (duration_s - start_s, ...)
    udp_only = ["rate_mbps", "on_s", "off_s", "on_off"]
    tcp_only = ["algo", "bytes"]
    is_tcp = {"anyOf": [{"not": {"required": ["kind"]}}, {"properties": {"kind": {"const": "tcp"}}}]}
    is_udp = {"properties": {"kind": {"const": "udp_onoff"}}, "required": ["kind"]}
    is_mptcp = {"properties": {"kind": {"const": "mptcp"}}, "required": ["kind"]}
    tcp = {"if": is_tcp, "then": {"required": ["algo"], "not": {"anyOf": [{"required": [k]} for k in udp_only]}}}
    udp = {"if": is_udp, "then": {"required": ["rate_mbps"], "not": {"anyOf": [{"required": [k]} for k in tcp_only]}}}
    # an mptcp flow: an algorithm, every path its hosts share (no via), sent for its duration (no bytes), one per sender
    mp_never = [*udp_only, "bytes", "via"]
    mptcp = {"if": is_mptcp, "then": {"required": ["algo"], "not": {"anyOf": [{"required": [k]} for k in mp_never]}}}
    item = _closed(props, FLOW_KEYS, required=["src", "dst"], allOf=[tcp, udp, mptcp])
    return {"type": "array", "minItems": 1, "items": item, "description": DOCS["flows"]}


def _algorithms() -> dict[str, Any]:
    """[algorithms.<algo>]: each of cclab's algorithms' tunables, from hosts/cc/algos.toml."""
    props = {}
    for algo in model.CCLAB_ALGOS:
        params = algos.params(algo)
        tunables = {
            k: {"type": "integer", "minimum": p.lo, "maximum": p.hi, "default": p.default, "description": p.help}
            for k, p in params.items()
        }
        props[algo] = _closed(
            tunables, tuple(params), description=f"tunables of {algo}; unset ones keep their defaults"
        )
    return _closed(props, model.CCLAB_ALGOS, description=_field_docs(model.Spec)["algo_params"])


def spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of an experiment spec, including a [sweep] table."""
    sp = model.Spec
    link = _link_props()
    props: dict[str, Any] = {
        "name": _from_field(sp, "name", pattern=NAME_PATTERN),
        "duration_s": _from_field(sp, "duration_s", "duration_s"),
        "dataplane": _from_field(sp, "dataplane", enum=list(model.DATAPLANES), default="kernel"),
        "seed": _from_field(sp, "seed", "seed", default=1),
        "interval_s": _from_field(sp, "interval_s", "interval_s", default=0.1),
        "delay_element": _from_field(sp, "delay_element", enum=list(DELAY_ELEMENTS)),
        "switches": _from_field(sp, "switches", enum=list(model.SWITCHES), default="linux"),
        "controller_app": {"type": "string", "description": _field_docs(sp)["controller_app"]},
        "topology": {**_topology(), "description": _field_docs(sp)["topology"]},
        "bottleneck": _closed(
            {**link, "delay_fallback": _from_field(sp, "delay_fallback", enum=list(model.DELAY_FALLBACKS))},
            (*model.LINK_KEYS, "delay_fallback"),
            required=["rate_mbps"],
            description=DOCS["bottleneck"],
        ),
        "links": {
            "type": "object",
            "description": DOCS["links"],
            "propertyNames": {"pattern": LINK_ID_PATTERN},
            "additionalProperties": _closed({**link, "both": _from_field(Link, "both")}, (*model.LINK_KEYS, "both")),
        },
        "flows": _flows(),
        "algorithms": _algorithms(),
    }
    out = _closed(props, TOP_KEYS, required=["duration_s", "flows"])
    graph = {
        "properties": {"topology": {"properties": {"kind": {"const": "graph"}}, "required": ["kind"]}},
        "required": ["topology"],
    }
    # a preset needs [bottleneck]; a graph gives each link its own settings instead
    out["allOf"] = [{"if": graph, "then": {"not": {"required": ["bottleneck"]}}, "else": {"required": ["bottleneck"]}}]
    # bmv2 emulates one direction per link (parse._check_emulation)
    one_way = {"properties": {"links": {"items": {"properties": {"both": {"const": False}}}}}}
    bmv2 = {"properties": {"dataplane": {"const": "bmv2"}}, "required": ["dataplane"]}
    out["allOf"].append({"if": bmv2, "then": {"properties": {"topology": one_way}}})
    out["properties"]["sweep"] = {
        "type": "object",
        "description": DOCS["sweep"],
        "properties": {"repetitions": _number("sweep.repetitions", DOCS["repetitions"], "integer")},
        "additionalProperties": {
            "description": 'A dotted path into this spec (e.g. "bottleneck.per", "flows[0].algo"): the values '
            "to sweep; or a sub-table of such paths ([sweep.bottleneck] per = [...])",
            "type": ["array", "object"],
        },
    }
    return {
        "$schema": DRAFT,
        "title": "cclab experiment spec",
        "description": "An experiment for `cclab run` (or, with [sweep], `cclab sweep`); README: Experiments.",
        **out,
    }
