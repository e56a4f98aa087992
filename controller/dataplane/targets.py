"""The registry of data-plane targets: name -> how to make one, for the runner, the conformance suite and
the benchmarks alike.

A target is made from a `Placement` (where its link sits); the typed factories
and the `type[Bottleneck]` entries make mypy check every target against the
contract (controller/dataplane/__init__.py), so one that drifts fails `make lint`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.dataplane import Bottleneck, DataPlaneError, FlowKey
from controller.dataplane.bmv2 import Bmv2Bottleneck
from controller.dataplane.fpgasim import FpgaSimBottleneck
from controller.dataplane.kernel import KernelBottleneck
from controller.dataplane.p4common import Route
from controller.dataplane.tofino import TofinoBottleneck
from controller.network import DATAPLANES


@dataclass(frozen=True)
class Placement:
    """Where one emulated direction sits: what any target needs to be made."""

    run_id: str
    """Names what the target leaves on the host (pins) while it runs: unique per link direction and run."""
    egress_dev: str
    """A: the device (or switch port's interface) where the link's queue is."""
    ingress_dev: str
    """B: A's peer, where the link ends."""
    flows: tuple[FlowKey, ...] = ()
    """Declared flows (targets with fixed counter slots count these per flow, the rest together)."""
    switch: Any = None
    """The P4 switch node (bmv2: its P4Runtime client and Thrift CLI)."""
    bottleneck_port: int = 0
    """The switch port of A (P4 targets)."""
    routes: tuple[Route, ...] = ()
    """The switch's forwarding entries (P4 targets)."""


@dataclass(frozen=True)
class Target:
    """One registered target."""

    name: str
    cls: type[Bottleneck]
    make: Callable[[Placement], Bottleneck]
    in_mininet: bool
    """Whether cclab builds it inside a Mininet network here (the tofino target needs a Tofino switch)."""
    sources: tuple[str, ...]
    """The tracked files and folders (repository paths) only this target runs on: a run's source hash covers
    its own target's and the shared sources, never another target's (results/rundir.py)."""


def _kernel(at: Placement) -> KernelBottleneck:
    return KernelBottleneck(at.run_id, at.egress_dev, at.ingress_dev)


def _bmv2(at: Placement) -> Bmv2Bottleneck:
    return Bmv2Bottleneck(
        at.run_id, at.switch, at.bottleneck_port, at.egress_dev, at.ingress_dev, routes=at.routes, flows=at.flows
    )


def _tofino(at: Placement) -> TofinoBottleneck:
    return TofinoBottleneck(
        at.run_id, at.bottleneck_port, at.routes, at.flows, egress_dev=at.egress_dev, ingress_dev=at.ingress_dev
    )


def _fpgasim(at: Placement) -> FpgaSimBottleneck:
    return FpgaSimBottleneck(at.run_id, at.egress_dev, at.ingress_dev, flows=at.flows)


_HERE = "controller/dataplane"
_P4_SHARED = ("p4/common", f"{_HERE}/p4common.py", f"{_HERE}/p4runtime.py")
_FPGA_FILES = (f"{_HERE}/fpgasim.py", f"{_HERE}/fpgaregs.py")

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("kernel", KernelBottleneck, _kernel, True, ("p4/ebpf", f"{_HERE}/kernel.py")),
        Target("bmv2", Bmv2Bottleneck, _bmv2, True, ("p4/v1model", *_P4_SHARED, f"{_HERE}/bmv2.py")),
        Target("tofino", TofinoBottleneck, _tofino, False, ("p4/tna", *_P4_SHARED, f"{_HERE}/tofino.py")),
        Target("fpga-sim", FpgaSimBottleneck, _fpgasim, True, ("fpga/rtl", "fpga/sim", *_FPGA_FILES)),
    )
}
assert tuple(TARGETS) == DATAPLANES, f"targets {tuple(TARGETS)} against the spec's dataplane names {DATAPLANES}"


def target(name: str) -> Target:
    """The registered target `name`; DataPlaneError names the ones there are."""
    try:
        return TARGETS[name]
    except KeyError:
        raise DataPlaneError(f"dataplane {name!r} is not one of {', '.join(TARGETS)}") from None


def make_bottleneck(name: str, at: Placement) -> Bottleneck:
    """A new, not yet set-up target `name` at `at`."""
    return target(name).make(at)


def in_mininet() -> tuple[str, ...]:
    """The targets cclab builds in a Mininet network here, in registry order."""
    return tuple(n for n, t in TARGETS.items() if t.in_mininet)
