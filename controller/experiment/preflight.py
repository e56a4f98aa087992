"""What must hold before an experiment builds anything: the data plane's tools, root, Mininet, the
algorithms, and a delay element for the links with a delay.  Whatever fails is one line with the fix.
"""

from __future__ import annotations

from pathlib import Path

from controller import capabilities, cc, system
from controller.dataplane import DataPlaneError, bmv2, delay
from controller.dataplane.targets import target
from controller.network import Graph, Link
from controller.spec import Spec

#: what the bmv2 target needs on PATH (controller.capabilities decides what this machine can do)
BMV2_TOOLS = capabilities.BMV2_TOOLS
P4_JSON, P4_INFO = capabilities.P4_JSON, capabilities.P4_INFO
dataplane_missing = capabilities.dataplane_missing


class RunError(RuntimeError):
    """The experiment could not run; the message is one line with the fix."""


def delay_element_links(graph: Graph, dataplane: str) -> list[Link]:
    """The links whose delay a delay element carries: every link with a delay, but the emulated ones of a target
    that delays by itself (it then has the delay in its LinkParams, and the link gets no delay element)."""
    itself = target(dataplane).cls.delays_itself
    return [lk for lk in graph.links if lk.spec.has_delay and not (itself and lk.spec.emulated)]


def preflight(spec: Spec, allow_no_delay: bool = False) -> tuple[str | None, list[str]]:
    """Raise RunError for what cannot run; return (the delay element, None where no link needs one; notes)."""
    notes: list[str] = []
    missing = dataplane_missing(spec.dataplane, own_program=spec.p4_program is not None)
    if missing:
        raise RunError(f"dataplane = {spec.dataplane!r} cannot run here: {missing}")
    system.require_root()
    if spec.dataplane in ("kernel", "fpga-sim"):  # fpga-sim: bpftool for the steering program, ethtool
        system.require_tools(*capabilities.KERNEL_TOOLS)
    else:
        system.require_tools(*capabilities.BMV2_HOST_TOOLS)
    why = capabilities.mininet_missing()
    if why:
        raise RunError(why)
    cc.check_available([a for a in spec.algos if a not in spec.cc_sources])  # those are built at load
    if spec.switches == "ovs":
        from controller.fabric import fabric

        why = fabric.missing() or fabric.too_fast(spec.graph)
        if why:
            raise RunError(f'switches = "ovs" cannot run this spec here: {why}')
    for algo in spec.algos:
        why = capabilities.algo_missing(algo)
        if why:
            raise RunError(why)
        if algo in cc.available() and (why := cc.unsettable(algo, spec.algo_params.get(algo, {}))):
            raise RunError(f"algorithms.{algo}: {why}; unload it first: cclab cc unload {algo}")
    element = None
    delayed = delay_element_links(spec.graph, spec.dataplane)
    if delayed:
        delays = sorted({lk.spec.delay_ms for lk in delayed})
        shown = ", ".join(f"{d:g}" for d in delays)
        try:
            element = delay.pick_element(spec.delay_element)
        except DataPlaneError as exc:
            if spec.delay_fallback == "skip" or allow_no_delay:
                notes.append(f"delay_ms = {shown} not applied: {exc}")
            else:
                raise RunError(
                    f"delay_ms = {shown} cannot be applied: {exc}; run it in the lab VM, or pass --allow-no-delay "
                    '(or set bottleneck.delay_fallback = "skip") to run without delay'
                ) from None
    return element, notes


def p4_program(spec: Spec, out: Path) -> bmv2.Program | None:
    """The spec's own BMv2 program (p4_program) compiled into out/ and held to what the bmv2 driver writes and
    reads; None for cclab's own (build/p4/). A compiler error or a missing table is a RunError of one line."""
    if spec.p4_program is None:
        return None
    try:
        prog = bmv2.compile_program(spec.p4_program, out)
    except bmv2.Bmv2Error as exc:
        raise RunError(f"p4_program: {exc}") from None
    red = any(lk.spec.red is not None for lk in spec.graph.emulated())
    problems = bmv2.program_problems(prog.p4info, red=red)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RunError(
            f"p4_program: {spec.p4_program.name} is not a program cclab's bmv2 driver can drive: {problems[0]}{more}; "
            "keep the names of p4/v1model/bottleneck.p4's tables, actions and counters"
        )
    return prog
