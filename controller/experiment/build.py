"""One experiment's network, data planes, delay elements and traffic, built from its spec and torn down
in reverse order of set-up.

The graph says everything: which links are emulated (one data-plane object per emulated direction,
named <run>-<link>), which carry a delay (one delay element each, on the link's delay node), and each
flow's path, addresses and counter key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controller import system
from controller.dataplane import Bottleneck, DataPlaneError, FlowKey, LinkParams, delay, sysctls
from controller.dataplane.bmv2 import Program
from controller.dataplane.p4common import Route
from controller.dataplane.targets import Placement, make_bottleneck
from controller.experiment.preflight import P4_INFO, P4_JSON, RunError, delay_element_links
from controller.fabric.fabric import CountedFlow, OvsFabric, mininet_ports
from controller.measure.monitor import Monitor, MonitoredFlow
from controller.network import EmulatedLink, Graph, Link, LinkSpec, subnet
from controller.network.mininet import gone_shells, load_p4switch_module, load_topology_module
from controller.spec import Flow, Spec
from hosts import stack
from hosts.tcpinfo import TcpInfoSampler
from hosts.traffic import CLIENT_PORT_BASE, SERVER_PORT_BASE, IperfFlow, MptcpFlow, TransferFlow, UdpOnOffFlow

log = logging.getLogger(__name__)

#: seconds a flow may run past its schedule before it is stopped, at least (grace_s)
GRACE_S = 10.0
#: how many times iperf3's closing exchange crosses a path (the client's end of test and its results, the
#: server's replies): each crossing may wait behind a full queue
ENDING_TRIPS = 4
MTU = 1500


def grace_s(graph: Graph) -> float:
    """How long flows may run past their schedule before they are stopped: GRACE_S, or ENDING_TRIPS times the
    longest round trip the network can give a packet, every link's full queue at its lowest rate and its largest
    delay both ways, where that is longer (a 5 MB queue at 10 Mbit/s holds 4 s, behind which a client's end of
    test waits)."""
    worst = 0.0
    for link in graph.links:
        ls = link.spec
        worst += 2 * max([ls.delay_ms, *(st.delay_ms or 0.0 for st in ls.schedule)]) / 1e3
        rates = [r for r in (ls.rate_mbps, *(st.rate_mbps for st in ls.schedule)) if r]
        if rates:
            worst += _queue_bytes(ls) * 8 / (min(rates) * 1e6)
    return max(GRACE_S, ENDING_TRIPS * worst)


def link_params(
    ls: LinkSpec, rate_bps: int | None = None, per: float | None = None, delay_ms: float | None = None
) -> LinkParams:
    """An emulated link's settings at one moment: the spec's, with any schedule changes so far."""
    ge = ls.gilbert_elliott
    return LinkParams(
        rate_bps=rate_bps if rate_bps is not None else ls.rate_bps,
        queue_pkts=ls.queue_pkts,
        queue_bytes=ls.queue_bytes,
        delay_ms=delay_ms if delay_ms is not None else ls.delay_ms,
        jitter_ms=ls.jitter_ms,
        per=per if per is not None else ls.per,
        ge=(ge.p_gb, ge.p_bg, ge.loss_good, ge.loss_bad) if ge else None,
        red=ls.red,
        shaper=ls.shaper,
        mtu=MTU,
    )


def socket_buffer_bytes(spec: Spec) -> int:
    """Socket buffer limit from the spec's BDP: 4x (rate x (base RTT + full queues)) of the worst flow (an mptcp
    flow's subflows added up: one connection's buffer serves them all), >= 4 MiB."""
    need: dict[str, float] = {}
    for c in counted(spec.graph, spec.flows):
        em = c.path.links
        rate = min((e.spec.rate_bps for e in em), default=0)
        if not rate:
            continue
        queues_s = sum(_queue_bytes(e.spec) * 8 / e.spec.rate_bps for e in em)
        need[c.flow.id] = need.get(c.flow.id, 0.0) + rate / 8 * (c.path.base_rtt_ms / 1000 + queues_s)
    return max(4 << 20, int(4 * max(need.values(), default=0.0)))


def _queue_bytes(ls: LinkSpec) -> int:
    return ls.queue_bytes or (ls.queue_pkts or 100) * (MTU + 14)


def _intf_towards(net: Any, node: str, peer: str) -> Any:
    """node's Mininet interface on its link to peer."""
    a, b = net.get(node), net.get(peer)
    link = net.linksBetween(a, b)[0]
    return link.intf1 if link.intf1.node is a else link.intf2


def p4_routes(graph: Graph, link: Link, to_b_port: int, to_a_port: int) -> tuple[Route, ...]:
    """ipv4_forward entries of a link's two-port BMv2 switch: every address behind b over the bottleneck
    port, every other address of the link's segment back towards a, and the rest of the segment's subnet
    over the bottleneck (an address no host has goes on, as a bridge would flood it)."""
    behind_b = graph.side(link, link.b)
    seg = graph.link_segment(link)
    routes = [Route(subnet(seg), to_b_port, bottleneck=True)]
    for (host, s), ip in sorted(graph.addresses.items()):
        if s != seg:
            continue
        if host in behind_b:
            routes.append(Route(f"{ip}/32", to_b_port, bottleneck=True))
        else:
            routes.append(Route(f"{ip}/32", to_a_port))
    return tuple(routes)


@dataclass
class FlowPath:
    """A flow's way through the graph: addresses, the emulated links it crosses, its base RTT."""

    src_ip: str
    dst_ip: str
    links: tuple[EmulatedLink, ...]
    base_rtt_ms: float


def flow_path(graph: Graph, f: Flow, segment: int | None = None) -> FlowPath:
    """The flow's path in its segment (or in `segment`: an mptcp subflow's)."""
    seg = f.segment if segment is None else segment
    hops = graph.path(f.src, f.dst, seg)
    return FlowPath(
        graph.addresses[(f.src, seg)],
        graph.addresses[(f.dst, seg)],
        tuple(graph.emulated_on(hops)),
        graph.base_rtt_ms(hops),
    )


#: the hosts' ephemeral ports: above every flow's client port (CLIENT_PORT_BASE + flow number) and every mptcp
#: sender's own port (MPTCP_SUBFLOW_PORT_BASE + flow number), which a spec's at most 2000 flows keep below
EPHEMERAL_PORTS = (52001, 60999)
#: an mptcp flow numbered i: its sender's one ephemeral port, so its second subflow's source port (and with
#: it the subflow's 5-tuple, counted at the links it crosses) is known before the kernel opens it
MPTCP_SUBFLOW_PORT_BASE = 50000
#: an mptcp flow numbered i over one path: the port its receiver announces beside the connection's own (ADD_ADDR
#: with a port), which the second subflow joins on the same addresses; between the servers' ports
#: (SERVER_PORT_BASE + flow number) and the clients'
MPTCP_JOIN_PORT_BASE = 30000


@dataclass(frozen=True)
class Counted:
    """What the data plane counts under one 5-tuple: a flow, or one subflow (f1.1, f1.2) of an mptcp flow."""

    id: str
    flow: Flow
    index: int
    """The flow's number, 1-based: it fixes the ports."""
    path: FlowPath
    key: FlowKey
    segment: int
    """The switch group (subnet) it crosses."""


def counted(graph: Graph, flows: tuple[Flow, ...]) -> list[Counted]:
    """Every counted 5-tuple of the spec's flows, in flow order."""
    out = []
    for i, f in enumerate(flows, 1):
        proto = 6 if f.is_tcp else 17
        # (id, segment, source port, destination port): the flow, or each subflow of an mptcp flow
        parts = [(f.id, f.segment, CLIENT_PORT_BASE + i, SERVER_PORT_BASE + i)]
        if f.is_mptcp:
            parts = [(f"{f.id}.{k}", *sub) for k, sub in enumerate(subflows(f, i), 1)]
        for cid, seg, sport, dport in parts:
            p = flow_path(graph, f, seg)
            out.append(Counted(cid, f, i, p, FlowKey(p.src_ip, p.dst_ip, sport, dport, proto), seg))
    return out


def subflows(f: Flow, i: int) -> list[tuple[int, int, int]]:
    """An mptcp flow numbered i: each subflow's (segment, source port, destination port). The first is the
    connection's own; a later one to another segment goes to the receiver's address there, on the same port;
    a later one on the first's segment (one path, two subflows) joins the port its receiver announces."""
    out = [(f.subflow_segments[0], CLIENT_PORT_BASE + i, SERVER_PORT_BASE + i)]
    for seg in f.subflow_segments[1:]:
        dport = MPTCP_JOIN_PORT_BASE + i if seg == f.subflow_segments[0] else SERVER_PORT_BASE + i
        out.append((seg, MPTCP_SUBFLOW_PORT_BASE + i, dport))
    return out


Traffic = IperfFlow | UdpOnOffFlow | MptcpFlow | TransferFlow


@dataclass
class Experiment:
    spec: Spec
    delay_element: str | None
    """netem or cclab-delay for the links with a delay; None: no delay applied"""
    notes: list[str]
    run_dir: Path
    teardowns: list[Callable[[], None]] = field(default_factory=list)
    flows: list[Traffic] = field(default_factory=list)
    monitored: list[MonitoredFlow] = field(default_factory=list)
    counted: list[Counted] = field(default_factory=list)
    """every counted 5-tuple: the flows, an mptcp flow's subflows"""
    dps: dict[str, Bottleneck] = field(default_factory=dict)
    """emulated link id -> its data plane"""
    delays: dict[str, delay.LinkDelay] = field(default_factory=dict)
    """link id -> its delay element"""
    rate_now: dict[str, float] = field(default_factory=dict)
    monitor: Monitor | None = None
    ccstate_columns: list[str] = field(default_factory=list)
    notes_host: dict[str, Any] = field(default_factory=dict)
    fabric: OvsFabric | None = None
    """switches = "ovs": the OVS bridges' daemons and os-ken app"""
    mptcp_senders: dict[str, int] = field(default_factory=dict)
    """mptcp flow id -> the pid of its sender's host, alone in its network namespace with that connection"""
    tune_host: bool = True
    """Set the host sysctls of dataplane/sysctls.py while the network exists (put back on teardown)."""
    host_sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    """Host sysctls changed for the run: name -> {"was", "set"} (dataplane/sysctls.py)"""
    program: Program | None = None
    """bmv2: the spec's own program (p4_program), compiled; None: build/p4/'s"""

    @property
    def ovs(self) -> bool:
        return self.spec.switches == "ovs"

    def __post_init__(self) -> None:
        self.counted = counted(self.spec.graph, self.spec.flows)

    @property
    def paths(self) -> dict[str, FlowPath]:
        """counted id -> its path"""
        return {c.id: c.path for c in self.counted}

    def build_network(self) -> Any:
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("error")
        mod = load_topology_module()
        bmv2 = self.spec.dataplane == "bmv2"
        p4_params: dict[str, Any] = {}
        if bmv2:
            node = load_p4switch_module()
            prog = self.program or Program(P4_JSON, P4_INFO)
            p4_params = dict(cls=node.Bmv2Switch, json_path=prog.json, p4info_path=prog.p4info, log_dir=self.run_dir)
        ovs_params = None
        if self.ovs:
            self.fabric = OvsFabric(self.run_dir, self.spec.interval_s, self.spec.controller_app)
            self.teardowns.append(self.fabric.stop_ovs)
            ovs_params = self.fabric.start_ovs()
        topo = mod.GraphTopo(graph=self.spec.graph, bmv2=bmv2, p4_params=p4_params, ovs_params=ovs_params)
        htb = self.spec.dataplane == "kernel" and any(e.spec.shaper == "htb" for e in self.spec.graph.emulated())
        tuned = sysctls.NetworkSysctls(self.tune_host, htb_links=htb)
        self.teardowns.append(tuned.restore)
        self.host_sysctls = tuned.changed
        net = tuned.build(
            lambda: Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None, autoSetMacs=True)
        )
        self.teardowns.append(net.stop)
        if self.fabric is not None:
            self.teardowns.append(self.fabric.stop_app)
            counted = [  # an mptcp flow's subflows each their own entry (and cookie)
                CountedFlow(j, c.id, c.key, c.flow.src, c.flow.dst, c.segment) for j, c in enumerate(self.counted, 1)
            ]
            self.fabric.start_app(self.spec.graph, mininet_ports(net, self.spec.graph.switches), counted)
        net.start()
        if self.fabric is not None:
            self.fabric.wait_ready()
        # ARP is static: the P4 program forwards IPv4 only, and on every target an ARP request dropped by a
        # full emulated queue would hold a flow's first packets back for a second (the ARP retry time)
        net.staticArp()
        if bmv2 or self.ovs or self.spec.dataplane == "fpga-sim":
            # all three re-send raw frames: checksums must be complete (mininet/p4switch.py)
            load_p4switch_module().checksum_offload_off(net.hosts)
        bufs = socket_buffer_bytes(self.spec)
        settings = stack.sysctls(bufs, self.spec.sack, EPHEMERAL_PORTS)
        for h in net.hosts:
            for name, value in settings:
                mod._run(h, ["sysctl", "-q", "-w", f"{name}={value}"])
        self.notes_host = {
            "tcp_rmem_wmem_max_bytes": bufs,
            "tcp_no_metrics_save": 1,
            "mtu": MTU,
            "ip_local_port_range": list(EPHEMERAL_PORTS),
            "tcp_sack": int(self.spec.sack),
            "tcp_congestion_control": stack.DEFAULT_ALGO,
        }
        return net

    def setup_dataplane(self, net: Any) -> None:
        """Program every emulated direction (rate, queue, loss, counters) and every link's delay."""
        mod = load_topology_module()
        graph = self.spec.graph
        bmv2 = self.spec.dataplane == "bmv2"
        for e in graph.emulated():
            nodes = mod.chain(graph, e.link, bmv2, self.ovs)
            if e.src != e.link.a:
                nodes = nodes[::-1]
            # kernel: the limiter on the first node's port; bmv2: the P4 node's port after it; with OVS
            # switches: the Linux bridge d<link>q's port after it (mininet/topologies.py says why)
            at = 1 if bmv2 or self.ovs else 0
            a = _intf_towards(net, nodes[at], nodes[at + 1])
            b = _intf_towards(net, nodes[at + 1], nodes[at])
            place = Placement(
                run_id=f"{self.run_dir.name}-{e.id}",
                egress_dev=str(a),
                ingress_dev=str(b),
                flows=tuple(c.key for c in self.counted if e in c.path.links),
            )
            if bmv2:
                sw = net.get(nodes[1])
                back = _intf_towards(net, nodes[1], nodes[0])
                routes = p4_routes(graph, e.link, sw.ports[a], sw.ports[back])
                place = replace(place, switch=sw, bottleneck_port=sw.ports[a], routes=routes)
            dp = make_bottleneck(self.spec.dataplane, place)
            self.teardowns.append(dp.teardown)
            params = link_params(e.spec)
            dp.setup(params, seed=self.spec.seed + len(self.dps))
            self.rate_now[e.id] = params.rate_bps
            self.dps[e.id] = dp
        if self.delay_element is None:
            return
        for link in delay_element_links(graph, self.spec.dataplane):
            d = mod.delay_node(link)
            nodes = mod.chain(graph, link, bmv2, self.ovs)
            i = nodes.index(d)
            devs = (str(_intf_towards(net, d, nodes[i + 1])), str(_intf_towards(net, d, nodes[i - 1])))
            pin = system.PIN_ROOT / f"{self.run_dir.name}-d{link.id}"
            seed = self.spec.seed * 1_000_003 + 7919 * (len(self.delays) + 1)
            line = delay.LinkDelay(devs, pin, self.delay_element, seed)
            self.teardowns.append(line.teardown)
            try:
                line.setup(link.spec.delay_ms, link.spec.jitter_ms)
            except system.SystemError_ as exc:
                raise DataPlaneError(f"delay of link {link.id}: {exc}") from None
            self.delays[link.id] = line

    def start_servers(self, net: Any) -> None:
        flows_dir = self.run_dir / "iperf"
        flows_dir.mkdir()
        first = {c.flow.id: c for c in reversed(self.counted)}
        for i, f in enumerate(self.spec.flows, 1):
            p = first[f.id].path
            fl: Traffic
            if f.is_mptcp:
                self._mptcp_hosts(net, i, f)
                fl = MptcpFlow(f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir, algo=f.algo, mss=f.mss_bytes)
            elif f.is_tcp and f.bytes:
                fl = TransferFlow(
                    f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir, algo=f.algo, mss=f.mss_bytes,
                    bytes_total=f.bytes,
                )  # fmt: skip
            elif f.is_tcp:
                fl = IperfFlow(f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir, algo=f.algo, mss=f.mss_bytes)
            else:
                fl = UdpOnOffFlow(
                    f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir,
                    rate_bps=int(f.rate_mbps * 1e6), on_s=f.on_s, off_s=f.off_s, on_off=f.on_off,
                    seed=self.spec.seed * 1_000_003 + i,
                )  # fmt: skip
            self.flows.append(fl)
            self.teardowns.append(fl.stop)
            fl.start_server(net.get(f.dst))
        for c in self.counted:
            links = tuple(e.id for e in c.path.links)
            end_s = c.flow.start_s + c.flow.duration_s
            self.monitored.append(MonitoredFlow(c.id, c.flow.algo, c.key, c.flow.src, links, end_s, flow=c.flow.id))
        for fl in self.flows:
            fl.wait_server()

    def _mptcp_hosts(self, net: Any, i: int, f: Flow) -> None:
        """An mptcp flow's two ends: the receiver announces its address on every other path, or on a one-path
        flow a second port of its one address (the sender then opens one subflow to each), and the sender's
        one ephemeral port is the second subflow's source port."""
        mod = load_topology_module()
        src, dst = net.get(f.src), net.get(f.dst)
        self.mptcp_senders[f.id] = src.pid
        extra = len(f.subflow_segments) - 1
        for host in (src, dst):
            mod._run(host, ["sysctl", "-q", "-w", "net.mptcp.enabled=1"])
            mod._run(host, ["ip", "mptcp", "limits", "set", "subflows", str(extra), "add_addr_accepted", str(extra)])
        port = MPTCP_SUBFLOW_PORT_BASE + i
        mod._run(src, ["sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={port} {port}"])
        by_ip = {intf.IP(): intf.name for intf in dst.intfList() if intf.IP()}
        for seg, _sport, dport in subflows(f, i)[1:]:
            ip = self.spec.graph.addresses[(f.dst, seg)]
            on_port = [] if dport == SERVER_PORT_BASE + i else ["port", str(dport)]
            mod._run(dst, ["ip", "mptcp", "endpoint", "add", ip, "dev", by_ip[ip], *on_port, "signal"])

    def samplers(self, net: Any) -> dict[str, TcpInfoSampler]:
        out = {}
        for name in sorted({f.src for f in self.spec.flows if f.is_tcp}):
            s = TcpInfoSampler(net.get(name).pid)
            self.teardowns.append(s.close)
            out[name] = s
        return out

    def _steps(self) -> list[tuple[float, Link, Any]]:
        steps = [(st.at_s, lk, st) for lk in self.spec.graph.links for st in lk.spec.schedule]
        return sorted(steps, key=lambda x: x[0])

    def traffic(self, net: Any) -> None:
        """Start flows and schedule steps on time; return when all flows ended."""
        assert self.monitor is not None
        t0 = time.monotonic()
        self.monitor.start(t0)
        pending = sorted(zip(self.spec.flows, self.flows), key=lambda p: p[0].start_s)
        steps = self._steps()
        state: dict[str, dict[str, Any]] = {lk.id: {} for lk in self.spec.graph.links}
        grace = grace_s(self.spec.graph)
        end = t0 + self.spec.duration_s + grace
        while True:
            now = time.monotonic() - t0
            while pending and pending[0][0].start_s <= now:
                sf, fl = pending.pop(0)
                fl.start_client(net.get(sf.src))
            while steps and steps[0][0] <= now:
                _at, link, st = steps.pop(0)
                self._apply_step(link, st, state[link.id])
                log.info("t=%.2f s: link %s now %s", now, link.id, st)
            if self.monitor.error is not None:
                raise RunError(f"counter polling failed: {self.monitor.error}")
            gone = gone_shells([*net.hosts, *net.switches])
            if gone:  # its commands (and teardown's) cannot run there any more: the run stops, incomplete
                raise RunError(f"{gone[0]} during the run: the network is no longer whole")
            if not pending and all(fl.done() for fl in self.flows):
                return
            if time.monotonic() > end:
                late = [fl.flow_id for fl in self.flows if not fl.done()]
                self.notes.append(f"flows {', '.join(late)} overran their schedule by {grace:.3g} s and were stopped")
                return
            time.sleep(0.02)

    def _apply_step(self, link: Link, st: Any, now: dict[str, Any]) -> None:
        if st.rate_mbps is not None:
            now["rate_bps"] = int(round(st.rate_mbps * 1e6))
        for key in ("per", "delay_ms"):
            if getattr(st, key) is not None:
                now[key] = getattr(st, key)
        for e_id in (link.id, link.id + "r"):
            dp = self.dps.get(e_id)
            if dp is not None and e_id in {e.id for e in self.spec.graph.emulated() if e.link is link}:
                params = link_params(link.spec, now.get("rate_bps"), now.get("per"), now.get("delay_ms"))
                dp.apply(params)
                self.rate_now[e_id] = params.rate_bps
        delay = self.delays.get(link.id)
        if delay is not None and st.delay_ms is not None:
            delay.apply(st.delay_ms, link.spec.jitter_ms)

    def edge_counts(self) -> dict[str, dict[str, int]]:
        """switches = "ovs": each flow's counters at its sender's switch, read after now; else nothing."""
        if self.fabric is None or self.fabric.proc is None:
            return {}
        try:
            return self.fabric.edge_counts(time.time())
        except (OSError, ValueError, KeyError) as exc:  # the check is then missing; teardown must go on
            self.notes.append(f"edge counters unreadable: {exc}")
            return {}

    def mptcp_counters(self) -> dict[str, dict[str, int]]:
        """Each mptcp flow's sender namespace's MPTCP counters that are not zero (MPTcpExt in /proc/net/netstat:
        joins, fallbacks to TCP, MPTCPRetrans: data sent again on a subflow after another's loss, which no
        subflow's TCP count holds), read before teardown ends the namespace. One unreadable is noted, left out."""
        out = {}
        for fid, pid in self.mptcp_senders.items():
            try:
                out[fid] = {k: v for k, v in system.netstat(pid)["MPTcpExt"].items() if v}
            except (OSError, KeyError, ValueError) as exc:
                self.notes.append(f"{fid}: the sender's MPTCP counters unreadable: {exc!r}")
        return out

    def teardown(self) -> list[str]:
        errors = []
        while self.teardowns:
            step = self.teardowns.pop()
            try:
                step()
            except Exception as exc:  # keep tearing down; report at the end
                errors.append(f"{getattr(step, '__qualname__', step)}: {exc}")
        return errors

    def describe_links(self) -> list[dict[str, Any]]:
        """What the manifest records of each emulated direction and delay element."""
        out = []
        for e in self.spec.graph.emulated():
            dp = self.dps.get(e.id)
            entry: dict[str, Any] = {"id": e.id, "from": e.src, "to": e.dst}
            if dp is not None:
                entry["devices"] = [dp.egress_dev, dp.ingress_dev]
                entry[self.spec.dataplane] = dp.describe()
            out.append(entry)
        for lid, d in self.delays.items():
            out.append({"id": lid, "delay_element": d.element, "devices": list(d.devs), "delay_ms": d.delay_ms})
        return out
