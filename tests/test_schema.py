"""`cclab schema`: a standard JSON Schema validator accepts every shipped spec and rejects the spec tests'
bad specs; the schema and parse.py, both derived from controller.spec.fields, agree at every range's bounds
and on every table's keys."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from controller import spec
from controller.spec import fields, schema, tomllib
from controller.spec import sweep as sweep_spec
from tests import test_network, test_spec
from tests.conftest import CCLAB, REPO, experiment_specs

SCHEMA = schema.spec_schema()
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
#: bad specs of the spec tests that no JSON Schema can refuse, by the field their refusal names, and why
NEEDS_THE_PARSER = {
    "flows[0].src": "host names come from the topology (h1..hN of the preset)",
    "flows[0].dst": "host names come from the topology",
    "flows[1].dst": "host names and routes come from the topology",
    "bottleneck.schedule[0].at_s": "a step's time is bounded by the spec's own duration_s",
    "topology.links[3].b": "a link's ends must be nodes the spec lists",
    "topology.links[1]": "one link per pair of nodes",
    "loop": "switches of a group must form a tree",
    "link l1": "only links between switches are emulated (which nodes are hosts is data)",
    "links.l99": "the links a preset has depend on its size",
    "flows[1].access_delay_ms": "one access delay per host, across flows",
    "flows[2].dst": "an mptcp receiver receives one mptcp flow (a relation between flows)",
    "flows[2].src": "an mptcp sender sends nothing else, nor receives mptcp (a relation between flows)",
    "flows[1].via": "a path choice must name a link on the flow's paths (from the topology)",
    "link l1 (s1-s2).red.wlog": "the RED weight a data plane takes is a rule across fields (dataplane and the link)",
}


def _spec_files() -> list[Path]:
    files = experiment_specs() + sorted((REPO / "vm" / "guest_tests").glob("*.toml"))
    assert files, "no specs found"
    return files


def _errors(doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]


def _params(test: Callable[..., None]) -> list[Any]:
    marks = getattr(test, "pytestmark", [])
    return [p for m in marks if m.name == "parametrize" for p in m.args[1]]


def test_schema_is_a_valid_draft7_schema_and_the_committed_file_is_current() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    proc = subprocess.run([*CCLAB, "schema"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == SCHEMA
    committed = json.loads((REPO / "spec.schema.json").read_text())
    assert committed == SCHEMA, "spec.schema.json is stale: run `.venv/bin/cclab schema --out spec.schema.json`"


@pytest.mark.parametrize("path", _spec_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_spec_validates(path: Path) -> None:
    raw = tomllib.loads(path.read_text())
    assert not _errors(raw), _errors(raw)
    if "sweep" in raw:
        sweep_spec.load(path)  # the parser agrees: a sweep, every point valid
    else:
        spec.load(path)


def _bad_specs() -> list[tuple[str, str, str]]:
    """(id, TOML text, the field the parser's refusal names) of every bad spec the spec tests use."""
    out = []
    for old, new, field, _value in _params(test_spec.test_bad_field_is_named_with_its_value):
        out.append((f"spec:{field}", test_spec.GOOD.replace(old, new), field))
    out.append(("spec:missing-rate", test_spec.GOOD.replace("rate_mbps = 10", "queue_pkts = 10"), "rate_mbps"))
    for text, needle in _params(test_spec.test_cli_rejects_bad_spec_in_one_line_and_creates_nothing):
        out.append((f"cli:{needle}", text, needle.split(" = ")[0]))
    for text, field, _value in _params(test_network.test_bad_network_is_refused_naming_field_and_value):
        out.append((f"network:{field}", text, field))
    return out


def test_bad_specs_of_the_spec_tests_are_rejected() -> None:
    checked, left = 0, []
    for case_id, text, field in _bad_specs():
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue  # not TOML at all: no schema sees it
        with pytest.raises(spec.SpecError):
            spec.parse(raw)
        errors = _errors(raw)
        if field in NEEDS_THE_PARSER:
            left.append(case_id)
            continue
        assert errors, f"{case_id}: the schema accepts a spec the parser refuses ({field})"
        checked += 1
    assert checked >= 15, f"only {checked} bad specs checked against the schema"
    print(f"schema rejects {checked} bad specs; {len(left)} need the parser: {left}")


# --- agreement with parse.py ------------------------------------------------------------------------------------

BASE: dict[str, Any] = tomllib.loads(test_spec.GOOD)


def _place(key: str, value: Any) -> tuple[dict[str, Any], str]:
    """A good spec with `value` at the field FIELDS[key] describes; and the name parse.py gives that field."""
    raw = copy.deepcopy(BASE)
    table, _, name = key.rpartition(".")
    if not table:
        raw[name] = value
        return raw, name
    if table == "topology":
        if name in ("hops", "cross"):
            raw["topology"] = {"kind": "parking_lot"}
            raw["flows"][0].update(src="h0", dst="r0")
        if name == "access_delay_ms":
            raw["topology"][name] = {"h1": value}
            return raw, "topology.access_delay_ms.h1"
        raw["topology"][name] = value
        return raw, f"topology.{name}"
    if table == "link":
        raw["bottleneck"][name] = value
        return raw, f"bottleneck.{name}"
    if table == "schedule":
        step = {"at_s": value} if name == "at_s" else {"at_s": 1, name: value}
        raw["bottleneck"]["schedule"] = [step if name != "at_s" else {**step, "per": 0.1}]
        return raw, f"bottleneck.schedule[0].{name}"
    if table == "gilbert_elliott":
        raw["bottleneck"]["gilbert_elliott"] = {name: value}
        return raw, f"bottleneck.gilbert_elliott.{name}"
    if table == "red":
        # thresholds that leave room for any bound of the one placed: min 0, max the largest queue limit
        unit = "bytes" if name.endswith("_bytes") else "pkts"
        raw["bottleneck"].pop("queue_pkts", None)
        raw["bottleneck"][f"queue_{unit}"] = int(fields.FIELDS[f"link.queue_{unit}"].hi)
        red = {f"min_{unit}": 0, f"max_{unit}": raw["bottleneck"][f"queue_{unit}"], name: value}
        raw["bottleneck"]["red"] = red
        return raw, f"bottleneck.red.{name}"
    assert table == "flows", key
    flow = raw["flows"][0]
    if name in ("rate_mbps", "on_s", "off_s"):
        del flow["algo"]
        flow.update(kind="udp_onoff", rate_mbps=1)
    if name in ("start_s", "duration_s"):
        raw["duration_s"] = 1e6 if value > 86_400 else max(raw["duration_s"], value + 1)
    flow[name] = value
    return raw, f"flows[0].{name}"


def _beyond(bound: float, up: bool, integer: bool) -> float:
    if integer:
        return int(bound) + (1 if up else -1)
    step = max(abs(bound), 1.0) * 1e-6
    return bound + step if up else bound - step


#: every number of a spec (a sweep's repetitions are checked by tests/test_sweep.py)
NUMBERS = sorted(k for k, f in fields.FIELDS.items() if f.kind in ("number", "integer") and not k.startswith("sweep."))


@pytest.mark.parametrize("key", NUMBERS)
def test_schema_and_parser_agree_at_each_bound(key: str) -> None:
    rng = fields.FIELDS[key]
    integer = rng.kind == "integer"
    inside = [b for b in (rng.lo, rng.hi) if math.isfinite(b) and not (b == rng.lo and rng.lo_open)]
    outside = [_beyond(rng.hi, True, integer)] if math.isfinite(rng.hi) else []
    if math.isfinite(rng.lo):
        outside.append(rng.lo if rng.lo_open else _beyond(rng.lo, False, integer))
    for value in inside:
        raw, _name = _place(key, int(value) if integer else value)
        if key == "duration_s" and value > 0:
            raw["duration_s"] = value
        assert not _errors(raw), f"{key} = {value}: schema refuses {_errors(raw)}"
        spec.parse(raw)  # the parser accepts the bound too
    for value in outside:
        raw, name = _place(key, int(value) if integer else value)
        assert _errors(raw), f"{key} = {value}: the schema accepts what the parser refuses"
        with pytest.raises(spec.SpecError) as exc:
            spec.parse(raw)
        assert f"{name} = " in str(exc.value), str(exc.value)


def test_schema_and_parser_agree_on_each_algorithm_tunables_bounds() -> None:
    tunables = [
        (algo, k, p)
        for algo, t in SCHEMA["properties"]["algorithms"]["properties"].items()
        for k, p in t["properties"].items()
    ]
    assert len(tunables) >= 10, tunables
    for algo, k, p in tunables:
        for value, ok in (
            (p["minimum"], True),
            (p["maximum"], True),
            (p["minimum"] - 1, False),
            (p["maximum"] + 1, False),
        ):
            raw = copy.deepcopy(BASE)
            raw["algorithms"] = {algo: {k: value}}
            assert (not _errors(raw)) == ok, f"{algo}.{k} = {value}: {_errors(raw)}"
            if ok:
                assert spec.parse(raw).algo_params == {algo: {k: value}}
            else:
                with pytest.raises(spec.SpecError, match=rf"algorithms\.{algo}\.{k} = {value}: must be a whole number"):
                    spec.parse(raw)


def _allowed_by_parser(raw: dict[str, Any]) -> set[str]:
    with pytest.raises(spec.SpecError) as exc:
        spec.parse(raw)
    m = re.search(r"unknown key; allowed here: (.*)$", str(exc.value))
    assert m, str(exc.value)
    return set(m.group(1).split(", "))


def test_schema_and_parser_allow_the_same_keys() -> None:
    props = SCHEMA["properties"]
    raw = copy.deepcopy(BASE)
    raw["zz_typo"] = 1
    assert _allowed_by_parser(raw) == set(props) - {"sweep"}
    for kind in spec.TOPOLOGIES:
        raw = copy.deepcopy(BASE)
        raw["topology"] = {"kind": kind, "zz_typo": 1}
        rule = next(r for r in props["topology"]["allOf"] if kind in json.dumps(r["if"]))
        allowed = set(rule["then"]["propertyNames"]["enum"])
        if kind == "graph":  # the parser knows the key, to refuse it with the fix ("give delay_ms on the link")
            allowed.add("access_delay_ms")
        assert _allowed_by_parser(raw) == allowed, kind
    tables: list[tuple[Callable[[dict[str, Any]], None], dict[str, Any]]] = [
        (lambda r: r["bottleneck"].update(zz_typo=1), props["bottleneck"]),
        (lambda r: r["flows"][0].update(zz_typo=1), props["flows"]["items"]),
        (lambda r: r.update(links={"l1": {"zz_typo": 1}}), props["links"]["additionalProperties"]),
        (
            lambda r: r["bottleneck"].update(schedule=[{"at_s": 1, "zz_typo": 1}]),
            props["bottleneck"]["properties"]["schedule"]["items"],
        ),
        (
            lambda r: r["bottleneck"].update(gilbert_elliott={"zz_typo": 1}),
            props["bottleneck"]["properties"]["gilbert_elliott"],
        ),
        (
            lambda r: r["bottleneck"].update(red={"min_pkts": 1, "max_pkts": 2, "zz_typo": 1}),
            props["bottleneck"]["properties"]["red"],
        ),
        (lambda r: r.update(algorithms={"zz_typo": {}}), props["algorithms"]),
        (
            lambda r: r.update(algorithms={"logwestwood": {"zz_typo": 1}}),
            props["algorithms"]["properties"]["logwestwood"],
        ),
    ]
    for put, sub in tables:
        raw = copy.deepcopy(BASE)
        put(raw)
        assert _allowed_by_parser(raw) == set(sub["properties"]), sub["properties"].keys()
    graph = test_network.GRAPH.replace('a = "a1"\nb = "sw1"', 'a = "a1"\nb = "sw1"\nzz_typo = 1')
    link_item = props["topology"]["properties"]["links"]["items"]
    assert _allowed_by_parser(tomllib.loads(graph)) == set(link_item["properties"])


def test_choices_come_from_the_parsers_vocabularies() -> None:
    props = SCHEMA["properties"]
    assert props["dataplane"]["enum"] == list(spec.DATAPLANES)
    assert props["topology"]["properties"]["kind"]["enum"] == list(spec.TOPOLOGIES)
    assert props["flows"]["items"]["properties"]["kind"]["enum"] == list(spec.FLOW_KINDS)
    named, own = props["flows"]["items"]["properties"]["algo"]["anyOf"]
    assert set(named["enum"]) == set(spec.CCLAB_ALGOS + spec.KERNEL_ALGOS)
    assert re.match(own["pattern"], "labs/04-own-cc/mycc.bpf.c") and not re.match(own["pattern"], "My-CC.bpf.c")
    assert props["bottleneck"]["properties"]["rate_mbps"]["description"].startswith("Link rate")
