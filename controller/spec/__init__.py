"""Experiment specs: `model` is what a validated spec is, `parse` turns TOML into one or refuses it.

Callers use the names below; `cclab` reads a spec once, with `load`, before anything is built.
"""

from controller.spec.model import (
    CCLAB_ALGOS,
    DATAPLANES,
    FLOW_KINDS,
    KERNEL_ALGOS,
    SHAPERS,
    TOPOLOGIES,
    Flow,
    Spec,
    SpecError,
    Topology,
)
from controller.spec.parse import load, parse, read_raw, tomllib

__all__ = [
    "CCLAB_ALGOS",
    "DATAPLANES",
    "FLOW_KINDS",
    "KERNEL_ALGOS",
    "SHAPERS",
    "TOPOLOGIES",
    "Flow",
    "Spec",
    "SpecError",
    "Topology",
    "load",
    "parse",
    "read_raw",
    "tomllib",
]
