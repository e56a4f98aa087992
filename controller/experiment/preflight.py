"""What must hold before an experiment builds anything: the data plane's tools, root, Mininet, the
algorithms, and a delay element for the links with a delay.  Whatever fails is one line with the fix.
"""

from __future__ import annotations

from controller import cc, system
from controller.dataplane import DataPlaneError, delay
from controller.spec import Spec

P4_BUILD = system.BUILD / "p4"
P4_JSON = P4_BUILD / "bottleneck.json"
P4_INFO = P4_BUILD / "bottleneck.p4info.txtpb"
#: what the bmv2 target needs on PATH
BMV2_TOOLS = ("simple_switch_grpc", "simple_switch_CLI")


class RunError(RuntimeError):
    """The experiment could not run; the message is one line with the fix."""


def dataplane_missing(dataplane: str) -> str | None:
    """What this machine lacks to run `dataplane`, in one line with the fix; None when nothing is missing."""
    import shutil

    if dataplane == "tofino":
        return (
            "the tofino target needs Intel's P4 Studio SDE (bf_switchd, bfrt_grpc) and a Tofino switch; "
            "p4/tna/bottleneck.p4 and controller/dataplane/tofino.py are not run by `cclab run`"
        )
    if dataplane != "bmv2":
        return None
    missing = [t for t in BMV2_TOOLS if shutil.which(t) is None]
    if not (P4_JSON.exists() and P4_INFO.exists()):
        no_p4c = shutil.which("p4c-bm2-ss") is None
        missing.append(f"{P4_JSON.relative_to(system.REPO)} ({'p4c-bm2-ss not on PATH' if no_p4c else 'not built'})")
    try:
        import finsy.proto  # noqa: F401
    except ImportError:
        return "the finsy package (P4Runtime) is not installed in this Python; run `make venv`"
    if not missing:
        return None
    return (
        f"missing {', '.join(missing)}; install p4c and BMv2 with PI (the p4lang packages, README: P4 targets) "
        "so they are on PATH, then `make build`"
    )


def preflight(spec: Spec, allow_no_delay: bool = False) -> tuple[str | None, list[str]]:
    """Raise RunError for what cannot run; return (the delay element, None for no delay; notes)."""
    notes: list[str] = []
    missing = dataplane_missing(spec.dataplane)
    if missing:
        raise RunError(f"dataplane = {spec.dataplane!r} cannot run here: {missing}")
    system.require_root()
    if spec.dataplane == "kernel":
        system.require_tools("tc", "bpftool", "iperf3", "ethtool", "brctl", "unshare")
    else:
        system.require_tools("tc", "iperf3", "ethtool", "brctl", "unshare", "ss")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise RunError("Mininet is not importable from this Python; run `make deps` and use .venv/bin/cclab") from None
    cc.check_available(spec.algos)
    element = None
    if spec.wants_delay:
        delays = sorted({lk.spec.delay_ms for lk in spec.graph.links if lk.spec.has_delay})
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
