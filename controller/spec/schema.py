"""The JSON Schema of an experiment spec, for editors (`cclab schema`).

TOML language servers (taplo, Even Better TOML) complete and check a spec's
fields from it.  It is generated, not written: each field's type, range,
choices, default and rules (a link's queue needs its rate, a flow's keys per
kind) come from the table the parser checks against (controller.spec.fields),
its description from the typed settings a spec becomes (the field docstrings
of controller.spec.model and controller.network), the keys of links, flows,
schedule steps and Gilbert-Elliott tables from the same key lists parse.py
uses.  parse.py stays what validates a spec and writes the one-line refusals.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import re
import types
import typing
from typing import Any

from controller.network import GilbertElliott, Graph, Link, LinkSpec, Red, ScheduleStep
from controller.spec import algos, model
from controller.spec.fields import FIELDS, PRESET_KEYS, Field
from controller.spec.parse import FLOW_KEYS, NAMED_FILES, RED_KEYS, TOP_KEYS

DRAFT = "http://json-schema.org/draft-07/schema#"
#: a link's id: l + up to 7 letters, digits or _ (model.LINK_ID)
LINK_ID_PATTERN = "^" + model.LINK_ID.pattern + "$"
NODE_PATTERN = "^[A-Za-z][A-Za-z0-9_]{0,7}$"
NAME_PATTERN = "^[A-Za-z0-9_-]+$"
#: algo = "<name>.bpf.c", in any folder: <name> as algos.OWN_NAME
OWN_SOURCE_PATTERN = "^(.*/)?" + algos.OWN_NAME.pattern.strip("^$") + algos.OWN_SUFFIX.replace(".", "\\.") + "$"
#: the JSON type of each kind of fields.Field
JSON_TYPES = {"number": "number", "integer": "integer", "choice": "string", "boolean": "boolean", "string": "string"}


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


def _from_field(cls: type, name: str, key: str | None = None, **extra: Any) -> dict[str, Any]:
    """A scalar field's schema: its description from the dataclass that holds it, its type (else the
    annotation's), range, choices and default from fields.FIELDS[key]."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    jtype = _json_type(hints[name]) if name in hints else None
    if jtype is not None:
        out["type"] = jtype
    table = _field(FIELDS[key]) if key is not None else {}
    if "type" in table:
        out["type"] = table.pop("type")
    help_ = table.pop("description", None)
    doc = _field_docs(cls).get(name) or help_
    if doc:
        out["description"] = doc
    out.update(table)
    out.update(extra)
    return out


def _field(fld: Field) -> dict[str, Any]:
    """What one entry of fields.FIELDS says: type, bounds, choices, default (and help where it has one)."""
    out: dict[str, Any] = {}
    jtype = JSON_TYPES.get(fld.kind)
    if jtype is not None:
        out["type"] = jtype
    if fld.help:
        out["description"] = fld.help
    if fld.lo > -math.inf:
        out["exclusiveMinimum" if fld.lo_open else "minimum"] = fld.lo
    if fld.hi < math.inf:
        out["maximum"] = fld.hi
    if fld.choices:
        out["enum"] = list(fld.choices)
    if fld.default is not None:
        out["default"] = fld.default
    return out


def _key(key: str, **extra: Any) -> dict[str, Any]:
    """The schema of a key no dataclass field carries, from fields.FIELDS alone."""
    return {**_field(FIELDS[key]), **extra}


def _closed(props: dict[str, Any], keys: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    """A table with exactly these keys allowed (parse.py refuses any other)."""
    missing = [k for k in keys if k not in props]
    assert not missing, f"no schema for {missing}"
    return {"type": "object", "properties": {k: props[k] for k in keys}, "additionalProperties": False, **extra}


def _link_props() -> dict[str, Any]:
    """The keys of every link table (model.LINK_KEYS), from LinkSpec."""
    props = {
        k: _from_field(LinkSpec, k, f"link.{k}")
        for k in model.LINK_KEYS
        if k not in ("gilbert_elliott", "red", "schedule")
    }
    ge = {
        k.name: _from_field(GilbertElliott, k.name, f"gilbert_elliott.{k.name}")
        for k in dataclasses.fields(GilbertElliott)
    }
    props["gilbert_elliott"] = _closed(ge, tuple(ge), description=_field_docs(LinkSpec)["gilbert_elliott"])
    red = {k: _from_field(Red, k, f"red.{k}") for k in RED_KEYS}
    pairs = [{"required": [f"min_{u}", f"max_{u}"]} for u in ("pkts", "bytes")]
    props["red"] = _closed(red, RED_KEYS, description=_field_docs(LinkSpec)["red"], oneOf=pairs)
    steps = {k.name: _from_field(ScheduleStep, k.name, f"schedule.{k.name}") for k in dataclasses.fields(ScheduleStep)}
    step = _closed(steps, tuple(steps), required=["at_s"], minProperties=2)
    props["schedule"] = {"type": "array", "items": step, "description": _field_docs(LinkSpec)["schedule"]}
    return props


def _topology() -> dict[str, Any]:
    topo = model.Topology
    props: dict[str, Any] = {
        "kind": _from_field(topo, "kind", "topology.kind"),
        "access_delay_ms": {
            "type": "object",
            "description": FIELDS["topology.access_delay_ms"].help,
            "additionalProperties": _key("topology.access_delay_ms", description="ms, one way"),
        },
        "pairs": _from_field(topo, "pairs", "topology.pairs"),
        "hops": _from_field(topo, "hops", "topology.hops"),
        "cross": _from_field(topo, "cross", "topology.cross"),
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
        "both": _from_field(Link, "both", "link.both"),
    }
    link_keys = ("id", "a", "b", "both", *model.LINK_KEYS)
    needs = {k: [FIELDS[f"link.{k}"].needs] for k in model.LINK_KEYS if FIELDS[f"link.{k}"].needs}
    props["links"] = {
        "type": "array",
        "minItems": 1,
        "items": _closed(link, link_keys, required=["a", "b"], dependencies=needs),
        "description": FIELDS["topology.links"].help,
    }
    rules = []
    for kind in model.TOPOLOGIES:
        allowed = ["kind", "access_delay_ms", *PRESET_KEYS[kind]]
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


def _algo() -> dict[str, Any]:
    """A flow's algorithm: one cclab or the kernel has, or the source of one's own (controller.spec.algos)."""
    out = _from_field(model.Flow, "algo", "flows.algo")
    own = {"pattern": OWN_SOURCE_PATTERN, "description": "the struct_ops source of an algorithm of one's own"}
    out["anyOf"] = [{"enum": out.pop("enum")}, own]
    return out


def _flows() -> dict[str, Any]:
    fl = model.Flow
    props: dict[str, Any] = {
        "algo": _algo(),
        "src": _from_field(fl, "src"),
        "dst": _from_field(fl, "dst"),
        "start_s": _from_field(fl, "start_s", "flows.start_s"),
        "duration_s": _from_field(fl, "duration_s", "flows.duration_s"),
        "count": _key("flows.count"),
        "kind": _from_field(fl, "kind", "flows.kind"),
        "bytes": _from_field(fl, "bytes", "flows.bytes"),
        "mss_bytes": _from_field(fl, "mss_bytes", "flows.mss_bytes"),
        "rate_mbps": _from_field(fl, "rate_mbps", "flows.rate_mbps"),
        "on_s": _from_field(fl, "on_s", "flows.on_s"),
        "off_s": _from_field(fl, "off_s", "flows.off_s"),
        "on_off": _from_field(fl, "on_off", "flows.on_off"),
        "access_delay_ms": _key("flows.access_delay_ms"),
        "via": _key("flows.via", pattern=LINK_ID_PATTERN),
    }
    kinds = {k: FIELDS[f"flows.{k}"].kinds for k in FLOW_KEYS}
    udp_only = [k for k, ks in kinds.items() if ks and "tcp" not in ks]
    tcp_only = [k for k, ks in kinds.items() if ks and "udp_onoff" not in ks]
    is_tcp = {"anyOf": [{"not": {"required": ["kind"]}}, {"properties": {"kind": {"const": "tcp"}}}]}
    is_udp = {"properties": {"kind": {"const": "udp_onoff"}}, "required": ["kind"]}
    is_mptcp = {"properties": {"kind": {"const": "mptcp"}}, "required": ["kind"]}
    tcp = {"if": is_tcp, "then": {"required": ["algo"], "not": {"anyOf": [{"required": [k]} for k in udp_only]}}}
    udp = {"if": is_udp, "then": {"required": ["rate_mbps"], "not": {"anyOf": [{"required": [k]} for k in tcp_only]}}}
    # an mptcp flow: an algorithm, every path its hosts share (no via), sent for its duration (no bytes), one per sender
    mp_never = [k for k, ks in kinds.items() if ks and "mptcp" not in ks]
    mptcp = {"if": is_mptcp, "then": {"required": ["algo"], "not": {"anyOf": [{"required": [k]} for k in mp_never]}}}
    item = _closed(props, FLOW_KEYS, required=["src", "dst"], allOf=[tcp, udp, mptcp])
    return {"type": "array", "minItems": 1, "items": item, "description": FIELDS["flows"].help}


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
    both = _from_field(Link, "both", "link.both")
    props: dict[str, Any] = {
        "name": _from_field(sp, "name", pattern=NAME_PATTERN),
        "duration_s": _from_field(sp, "duration_s", "duration_s"),
        "dataplane": _from_field(sp, "dataplane", "dataplane"),
        "seed": _from_field(sp, "seed", "seed"),
        "interval_s": _from_field(sp, "interval_s", "interval_s"),
        "delay_element": _from_field(sp, "delay_element", "delay_element"),
        "sack": _from_field(sp, "sack", "sack"),
        "switches": _from_field(sp, "switches", "switches"),
        **{
            key: {"type": "string", "pattern": re.escape(suffix) + "$", "description": _field_docs(sp)[key]}
            for key, (suffix, _) in NAMED_FILES.items()
        },
        "topology": {**_topology(), "description": _field_docs(sp)["topology"]},
        "bottleneck": _closed(
            {**link, "delay_fallback": _from_field(sp, "delay_fallback", "bottleneck.delay_fallback")},
            (*model.LINK_KEYS, "delay_fallback"),
            required=["rate_mbps"],
            description=FIELDS["bottleneck"].help,
        ),
        "links": {
            "type": "object",
            "description": FIELDS["links"].help,
            "propertyNames": {"pattern": LINK_ID_PATTERN},
            "additionalProperties": _closed({**link, "both": both}, (*model.LINK_KEYS, "both")),
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
        "description": FIELDS["sweep"].help,
        "properties": {"repetitions": _key("sweep.repetitions")},
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
