"""A spec's fields, stated once: each one's type, range, unit, default, rule and help.

parse.py checks a spec against this table and words its one-line refusals from it ("must be > 0 and <=
100000 (Mbit/s)"); schema.py generates the JSON Schema's types, bounds, choices, defaults and rules from
the same entries.  What a field means is its dataclass field's docstring (controller.spec.model,
controller.network) where it has one; `help` is for the keys no dataclass carries.

Keys are "table.key" ("link" is every link table: [bottleneck], [links.<id>], [[topology.links]]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from controller.network.elements import DELAY_ELEMENTS
from controller.spec.model import (
    CCLAB_ALGOS,
    DATAPLANES,
    DELAY_FALLBACKS,
    FLOW_KINDS,
    KERNEL_ALGOS,
    MAX_DELAY_MS,
    MAX_HOPS,
    MAX_MSS,
    MAX_PAIRS,
    MAX_RATE_MBPS,
    MIN_MSS,
    ON_OFF_DISTRIBUTIONS,
    SHAPERS,
    SWITCHES,
    TOPOLOGIES,
)

#: runs per grid point of a sweep
MAX_REPETITIONS = 1000


@dataclass(frozen=True)
class Field:
    """One key of a spec: what the parser accepts there and the schema says."""

    kind: str
    """"number", "integer" (a whole number), "choice", "boolean", "string" or "table" (the last two checked by
    their own code)."""
    lo: float = -math.inf
    """Lowest value, inclusive unless lo_open."""
    hi: float = math.inf
    """Highest value, inclusive (a bound the run sets, such as duration_s, the parser passes itself)."""
    lo_open: bool = False
    """lo itself is refused (a value must be above it)."""
    unit: str = ""
    """What a number is in, as a refusal says it after the bounds: "ms", "Mbit/s", "a probability"."""
    choices: tuple[str, ...] = ()
    """The values a choice takes."""
    default: Any = None
    """The value when the key is not given; None when there is none or it depends on the run."""
    needs: str = ""
    """Another key of the same table this one needs (a link's queue and loss need its rate_mbps)."""
    kinds: tuple[str, ...] = ()
    """For a flow's key: the flow kinds it is for (empty: every kind)."""
    help: str = ""
    """What the key means, where no dataclass field's docstring says it."""

    @property
    def suffix(self) -> str:
        return f" ({self.unit})" if self.unit else ""


def _prob(default: float | None = 0.0, **kw: Any) -> Field:
    return Field("number", 0.0, 1.0, unit="a probability", default=default, **kw)


RATE = Field("number", 0.0, MAX_RATE_MBPS, lo_open=True, unit="Mbit/s")
DELAY = Field("number", 0.0, MAX_DELAY_MS, unit="ms", default=0.0)
UDP = ("udp_onoff",)

FIELDS: dict[str, Field] = {
    "duration_s": Field("number", 0.0, 86_400.0, lo_open=True, unit="s"),
    "dataplane": Field("choice", choices=DATAPLANES, default="kernel"),
    "seed": Field("integer", 0, 2**63 - 1, default=1),
    "interval_s": Field("number", 0.01, 10.0, unit="s", default=0.1),
    "delay_element": Field("choice", choices=DELAY_ELEMENTS, default="auto"),
    "sack": Field("boolean", default=True),
    "switches": Field("choice", choices=SWITCHES, default="linux"),
    "topology.kind": Field("choice", choices=TOPOLOGIES, default="dumbbell"),
    "topology.pairs": Field("integer", 1, MAX_PAIRS, default=2),
    "topology.hops": Field("integer", 1, MAX_HOPS, default=3),
    "topology.cross": Field("integer", 1, MAX_PAIRS, default=1),
    "topology.access_delay_ms": Field(
        "number", 0.0, MAX_DELAY_MS, unit="ms", help="One-way delay on hosts' access links, ms, e.g. {h2 = 40}."
    ),
    "topology.links": Field(
        "table", help="The graph's links: [[topology.links]] with a, b and, for an emulated link, rate_mbps."
    ),
    "bottleneck": Field("table", help="Every bottleneck of a preset: rate, queue, delay, loss, schedule."),
    "bottleneck.delay_fallback": Field("choice", choices=DELAY_FALLBACKS, default="refuse"),
    "links": Field("table", help="One preset link's settings instead of [bottleneck]'s, by id: [links.l2]."),
    "link.rate_mbps": RATE,
    # only a rate-limited link has a queue and loss
    "link.queue_pkts": Field("integer", 1, 1_000_000, default=100, needs="rate_mbps"),
    "link.queue_bytes": Field("integer", 1500, 1_000_000_000, needs="rate_mbps"),
    "link.delay_ms": DELAY,
    "link.jitter_ms": DELAY,
    "link.per": _prob(needs="rate_mbps"),
    "link.gilbert_elliott": Field("table", needs="rate_mbps"),
    "link.red": Field("table", needs="rate_mbps"),
    "link.shaper": Field("choice", choices=SHAPERS, default="htb", needs="rate_mbps"),
    "link.schedule": Field("table"),
    "link.both": Field("boolean", default=False),
    "schedule.at_s": Field("number", 0.0, unit="s, within the run"),
    "schedule.rate_mbps": RATE,
    "schedule.per": _prob(None),
    "schedule.delay_ms": Field("number", 0.0, MAX_DELAY_MS, unit="ms"),
    "gilbert_elliott.p_gb": _prob(0.0),
    "gilbert_elliott.p_bg": _prob(1.0),
    "gilbert_elliott.loss_good": _prob(0.0),
    "gilbert_elliott.loss_bad": _prob(1.0),
    # a RED queue's thresholds, in the unit of its link's queue limit (parse.py: min < max <= the limit)
    "red.min_pkts": Field("integer", 0, 999_999),
    "red.max_pkts": Field("integer", 1, 1_000_000),
    "red.min_bytes": Field("integer", 0, 999_999_999),
    "red.max_bytes": Field("integer", 1, 1_000_000_000),
    "red.max_p": Field("number", 0.0, 1.0, lo_open=True, unit="a probability", default=0.1),
    "red.wlog": Field("integer", 0, 20, default=9),
    "flows": Field("table", help="The flows: [[flows]] tables."),
    "flows.algo": Field("choice", choices=CCLAB_ALGOS + KERNEL_ALGOS, kinds=("tcp", "mptcp")),
    "flows.src": Field("string"),
    "flows.dst": Field("string"),
    "flows.start_s": Field("number", 0.0, unit="s, within the run", default=0.0),
    "flows.duration_s": Field("number", 0.0, lo_open=True, unit="s"),
    "flows.count": Field(
        "integer", 1, 64, default=1, help="Run this many parallel flows of this table (ids f1, f2, ... in order)."
    ),
    "flows.kind": Field("choice", choices=FLOW_KINDS, default="tcp"),
    "flows.bytes": Field("integer", 1, 1 << 40, kinds=("tcp",)),
    "flows.mss_bytes": Field("integer", MIN_MSS, MAX_MSS, unit="bytes", kinds=("tcp", "mptcp")),
    "flows.rate_mbps": Field("number", 0.0, MAX_RATE_MBPS, lo_open=True, unit="Mbit/s", kinds=UDP),
    "flows.on_s": Field("number", 0.0, lo_open=True, unit="s", kinds=UDP),
    "flows.off_s": Field("number", 0.0, unit="s", default=0.0, kinds=UDP),
    "flows.on_off": Field("choice", choices=ON_OFF_DISTRIBUTIONS, default="fixed", kinds=UDP),
    "flows.access_delay_ms": Field(
        "number", 0.0, MAX_DELAY_MS, unit="ms", help="One-way delay on the sender's access link, ms (its own RTT)."
    ),
    "flows.via": Field(
        "string",
        kinds=("tcp", "udp_onoff"),
        help="The link a flow between two multi-homed hosts crosses: picks its path (tcp, udp_onoff).",
    ),
    "sweep": Field(
        "table", help="A sweep (cclab sweep): repetitions, and per dotted field path the list of values to sweep."
    ),
    "sweep.repetitions": Field(
        "integer", 1, MAX_REPETITIONS, default=1, help="Runs per grid point, each with its own seed."
    ),
}

#: the keys of [topology] besides kind and access_delay_ms, per kind
PRESET_KEYS = {
    "dumbbell": ("pairs",),
    "parking_lot": ("hops", "cross"),
    "multipath": ("background",),
    "graph": ("hosts", "switches", "links"),
}


def allowed(fld: Field, hi: float | None = None) -> str:
    """What a refusal says is allowed for a number: "must be > 0 and <= 100000 (Mbit/s)"."""
    hi = fld.hi if hi is None else hi
    if fld.kind == "integer":
        return f"must be a whole number from {fld.lo} to {hi}"
    bound = f"> {fld.lo:g}" if fld.lo_open else f">= {fld.lo:g}"
    span = bound if hi == math.inf else f"{bound} and <= {hi:g}"
    return f"must be {span}{fld.suffix}"
