"""The OVS fabric of a run (`switches = "ovs"`): OVS bridges, the os-ken process, its statistics.

Set-up, each step with its teardown registered by the caller (controller/experiment/build.py):

1. `start_ovs`: cclab's own ovsdb-server and ovs-vswitchd, or the user's OVS (controller/fabric/ovs.py);
2. the Mininet network is built with the graph's switches as OVS bridges (mininet/topologies.py);
3. `start_app`: the routes and the counted flows are planned from the graph and the Mininet ports
   (`plan`), written to <run>/fabric.json, and os-ken starts with cclab's app (controller/fabric/app.py)
   and the user's, listening on 127.0.0.1 only;
4. `wait_ready` after the bridges connected: every switch has its entries before any traffic.

While the run goes on, the app appends every flow- and port-statistics reply to <run>/openflow.jsonl;
`edge_counts` reads each flow's counters at its sender's switch from it (the offered bytes, seen at
the edge of the network).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import system
from controller.dataplane import FlowKey
from controller.fabric import ovs as ovs_mod
from controller.network import Graph, units
from controller.network.mininet import load_topology_module

log = logging.getLogger(__name__)

APP = Path(__file__).with_name("app.py")
READY_TIMEOUT_S = 30.0
#: the OVS userspace datapath's ceiling here, Mbit/s of TCP summed over every emulated direction
#: (measured: docs/benchmarks.md, bench ovs); a spec asking for more is refused before anything is built
NETDEV_MAX_MBPS = 400.0
#: seconds the edge counters must stay unchanged to be final, and how long to wait for that at most
EDGE_SETTLE_S = 1.2
EDGE_TIMEOUT_S = 6.0


@dataclass(frozen=True)
class CountedFlow:
    """A spec flow as the fabric counts it."""

    cookie: int
    """The flow's number (1, 2, ...): the cookie of its OpenFlow entries."""
    id: str
    """The spec's flow id."""
    key: FlowKey
    """Its 5-tuple."""
    src: str
    """Sending host."""
    dst: str
    """Receiving host."""
    segment: int
    """The L2 segment it uses."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def osken_version() -> str | None:
    """The os-ken release this Python imports; None where it has none."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("os-ken")
        except PackageNotFoundError:
            return version("os_ken")
    except Exception:
        return None


def missing() -> str | None:
    """What `switches = "ovs"` lacks here, one line with the fix; None when nothing is."""
    gone = ovs_mod.missing()
    if gone:
        return gone
    import importlib.util

    if importlib.util.find_spec("os_ken") is None:
        return "os-ken is not importable from this Python; install Debian's python3-os-ken (`make deps`)"
    return None


def too_fast(graph: Graph) -> str | None:
    """Refusal of a spec whose emulated links ask more of the userspace datapath than it carries here."""
    total_mbps = units.mbps(sum(e.spec.rate_bps for e in graph.emulated()))
    if total_mbps <= NETDEV_MAX_MBPS or ovs_mod.kernel_datapath():
        return None
    return (
        f"the emulated links' rate_mbps add up to {total_mbps:g}, and OVS's userspace datapath (this kernel has "
        f"no openvswitch module) carries at most {NETDEV_MAX_MBPS:g} Mbit/s here; lower rate_mbps, or use "
        'switches = "linux"'
    )


def plan(graph: Graph, ports: dict[tuple[str, str], int], flows: list[CountedFlow]) -> dict[str, Any]:
    """Each switch's routes and counted flows: the unique path inside a segment gives every out port.

    ``ports``: (switch, the Mininet node next to it on a link) -> OpenFlow port number."""
    dpids = {s: i for i, s in enumerate(graph.switches, 1)}
    out: dict[str, Any] = {}
    for s in graph.switches:
        seg = graph.segment_of[s]
        routes = []
        for (host, hseg), ip in sorted(graph.addresses.items()):
            if hseg != seg:
                continue
            link, _frm, _to = graph.path(s, host, seg)[0]
            routes.append({"dst": ip, "port": ports[(s, _next_node(graph, link, s))]})
        out[str(dpids[s])] = {"name": s, "routes": routes, "flows": []}
    for fl in flows:
        for link, frm, _to in graph.path(fl.src, fl.dst, fl.segment):
            if frm not in dpids:
                continue
            k = fl.key
            out[str(dpids[frm])]["flows"].append({
                "cookie": fl.cookie, "id": fl.id, "src": k.src, "dst": k.dst, "sport": k.sport, "dport": k.dport,
                "proto": k.proto, "port": ports[(frm, _next_node(graph, link, frm))],
            })  # fmt: skip
    return out


def _next_node(graph: Graph, link: Any, frm: str) -> str:
    """The Mininet node after `frm` on a graph link: its delay node, or the node at its other end."""
    nodes = load_topology_module().chain(graph, link, False, True)
    return str(nodes[1] if frm == link.a else nodes[-2])


def mininet_ports(net: Any, switches: tuple[str, ...]) -> dict[tuple[str, str], int]:
    """(switch, the node at the other end of one of its links) -> the OpenFlow port number of that link."""
    out = {}
    for name in switches:
        sw = net.get(name)
        for intf in sw.intfList():
            link = getattr(intf, "link", None)
            if link is None:
                continue
            other = link.intf2 if link.intf1 is intf else link.intf1
            out[(name, other.node.name)] = sw.ports[intf]
    return out


def edge_switch(graph: Graph, fl: CountedFlow) -> str:
    """The switch a flow enters the network at (its sender's)."""
    return graph.path(fl.src, fl.dst, fl.segment)[0][2]


@dataclass
class OvsFabric:
    run_dir: Path
    interval_s: float
    user_app: Path | None = None
    ovs: ovs_mod.Ovs | None = None
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    flows: list[CountedFlow] = field(default_factory=list)
    edge: dict[str, int] = field(default_factory=dict)
    """flow id -> datapath id of its sender's switch"""

    @property
    def stats_path(self) -> Path:
        return self.run_dir / "openflow.jsonl"

    @property
    def ready_path(self) -> Path:
        return self.run_dir / "fabric.ready"

    def start_ovs(self) -> dict[str, Any]:
        """Start (or join) OVS and pick the controller port; return the bridges' Mininet parameters."""
        self.ovs = ovs_mod.start()
        self.port = free_port()
        return {
            "db": str(self.ovs.db),
            "datapath_type": self.ovs.datapath_type,
            "of_port": self.port,
            "mark": self.run_dir.name,
        }

    def stop_ovs(self) -> None:
        if self.ovs is not None:
            self.ovs.stop()

    def start_app(self, graph: Graph, ports: dict[tuple[str, str], int], flows: list[CountedFlow]) -> None:
        """Write the plan and start os-ken with cclab's app (and the user's); return once it listens."""
        self.flows = flows
        dpids = {s: i for i, s in enumerate(graph.switches, 1)}
        self.edge = {fl.id: dpids[edge_switch(graph, fl)] for fl in flows}
        self.config = {
            "interval_s": self.interval_s,
            "stats_path": str(self.stats_path),
            "ready_path": str(self.ready_path),
            "switches": plan(graph, ports, flows),
            "flows": {fl.id: {"cookie": fl.cookie, "edge_dpid": self.edge[fl.id]} for fl in flows},
        }
        cfg = self.run_dir / "fabric.json"
        cfg.write_text(json.dumps(self.config, indent=1))
        apps = [str(APP)] + ([str(self.user_app)] if self.user_app else [])
        env = {**os.environ, "CCLAB_FABRIC": str(cfg), "CCLAB_RUN_DIR": str(self.run_dir)}
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
        logf = open(self.run_dir / "osken.log", "ab")  # noqa: SIM115 (the child keeps it)
        try:
            # a session of its own: Ctrl-C reaches cclab, which stops the app in its teardown, in order
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller.fabric.launch", str(self.port), *apps],
                env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        finally:
            logf.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise system.SystemError_(f"os-ken exited ({self.proc.returncode}): {self._log_tail()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise system.SystemError_(f"os-ken did not listen on 127.0.0.1:{self.port} within {READY_TIMEOUT_S:g} s")

    def _log_tail(self) -> str:
        try:
            lines = (self.run_dir / "osken.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def wait_ready(self) -> None:
        """Block until the app programmed every switch."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready_path.exists():
            if self.proc is not None and self.proc.poll() is not None:
                raise system.SystemError_(f"os-ken exited ({self.proc.returncode}): {self._log_tail()}")
            if time.monotonic() > deadline:
                raise system.SystemError_(
                    f"the OVS bridges were not all programmed within {READY_TIMEOUT_S:g} s (see osken.log)"
                )
            time.sleep(0.05)

    def stop_app(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)

    def edge_counts(self, after: float, timeout_s: float = EDGE_TIMEOUT_S) -> dict[str, dict[str, int]]:
        """Each flow's packets and bytes at its sender's switch once they stopped changing after the
        wall-clock time `after`: OVS moves its datapath's counts into the OpenFlow entries' statistics
        in batches (every 500 ms by default), so a read is final only when a poll EDGE_SETTLE_S later
        still shows the same counts.  After `timeout_s`, the latest poll."""
        deadline = time.monotonic() + timeout_s
        while True:
            polls = self._edge_polls(after)
            last = polls[-1][1] if polls else None
            if last is not None and any(c == last and t <= polls[-1][0] - EDGE_SETTLE_S for t, c in polls):
                return last
            if time.monotonic() > deadline:
                return last or {}
            time.sleep(self.interval_s / 2)

    def _edge_polls(self, after: float) -> list[tuple[float, dict[str, dict[str, int]]]]:
        """(time, each flow's edge counts) of every poll since `after` that all edge switches answered."""
        want = set(self.edge.values())
        by_poll: dict[int, tuple[float, dict[int, dict[int, dict[str, int]]]]] = {}
        try:
            lines = self.stats_path.read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:  # a line being written
                continue
            if rec["kind"] != "flow" or rec["t"] < after or rec["dpid"] not in want:
                continue
            t, seen = by_poll.setdefault(rec["n"], (rec["t"], {}))
            by_cookie = seen.setdefault(rec["dpid"], {})
            for r in rec["rows"]:
                by_cookie[r["cookie"]] = {"packets": r["packets"], "bytes": r["bytes"]}
            by_poll[rec["n"]] = (max(t, rec["t"]), seen)
        zero = {"packets": 0, "bytes": 0}
        return [
            (t, {fl.id: seen[self.edge[fl.id]].get(fl.cookie, zero) for fl in self.flows})
            for _n, (t, seen) in sorted(by_poll.items())
            if not want - set(seen)
        ]

    def describe(self) -> dict[str, Any]:
        """What the manifest records of the fabric."""
        out: dict[str, Any] = {"switches": "ovs", "os_ken": osken_version(), "controller": f"tcp:127.0.0.1:{self.port}"}
        if self.ovs is not None:
            out.update(self.ovs.describe())
        if self.user_app is not None:
            out["controller_app"] = str(self.user_app)
        return out
