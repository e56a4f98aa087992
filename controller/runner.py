"""One experiment, start to end: check, build, measure, write, tear down.

Everything that can be checked is checked before anything is created.  Every
set-up step registers its teardown first; teardown runs on success, error,
Ctrl-C and SIGTERM, with further signals ignored until it is done.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from controller import cc, results, summary, system
from controller.ccstate import CcStateReader
from controller.dataplane import DataPlaneError, FlowKey, delay, sysctls
from controller.dataplane.bmv2 import Bmv2Bottleneck, Route
from controller.dataplane.kernel import KernelBottleneck, LinkParams
from controller.monitor import FLOW_COLUMNS, LINK_FLOW_COLUMNS, LiveState, Monitor, MonitoredFlow, MonitoredLink
from controller.network import EmulatedLink, Graph, Link, LinkSpec, subnet
from controller.spec import Flow, Spec
from hosts.tcpinfo import TcpInfoSampler
from hosts.traffic import CLIENT_PORT_BASE, SERVER_PORT_BASE, IperfFlow, TrafficError, UdpOnOffFlow

log = logging.getLogger(__name__)

TOPOLOGY_FILE = system.REPO / "mininet" / "topologies.py"
P4SWITCH_FILE = system.REPO / "mininet" / "p4switch.py"
P4_BUILD = system.BUILD / "p4"
P4_JSON = P4_BUILD / "bottleneck.json"
P4_INFO = P4_BUILD / "bottleneck.p4info.txtpb"
#: what the bmv2 target needs on PATH
BMV2_TOOLS = ("simple_switch_grpc", "simple_switch_CLI")
LOCK = system.RUN_STATE / "lock"
#: seconds a flow may run past its schedule before it is stopped
GRACE_S = 10.0
MTU = 1500


class RunError(RuntimeError):
    """The experiment could not run; the message is one line with the fix."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the experiment ran."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


@dataclass
class RunOptions:
    allow_no_delay: bool = False
    """Run a spec with delay on a kernel without netem, recording that delay was skipped."""
    results_root: Path = results.RESULTS
    on_update: Callable[[LiveState], None] | None = None
    """Called from the monitor thread after every interval."""
    plots: bool = True
    host_sysctls: bool = True
    """Set the host sysctls of dataplane/sysctls.py for the run (put back on teardown); False keeps the host's."""


@dataclass
class Outcome:
    run_dir: Path
    summary: dict[str, Any]


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_topology_module() -> ModuleType:
    """mininet/topologies.py (nodes, GraphTopo and the presets), loaded by path."""
    return _load_by_path("cclab_topologies", TOPOLOGY_FILE)


def load_p4switch_module() -> ModuleType:
    """mininet/p4switch.py (the BMv2 node), loaded by path like the topology."""
    return _load_by_path("cclab_node_p4switch", P4SWITCH_FILE)


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


# --- checks before anything is built -------------------------------------------


def preflight(spec: Spec, opts: RunOptions) -> tuple[str | None, list[str]]:
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
            if spec.delay_fallback == "skip" or opts.allow_no_delay:
                notes.append(f"delay_ms = {shown} not applied: {exc}")
            else:
                raise RunError(
                    f"delay_ms = {shown} cannot be applied: {exc}; run it in the lab VM, or pass --allow-no-delay "
                    '(or set bottleneck.delay_fallback = "skip") to run without delay'
                ) from None
    return element, notes


@contextlib.contextmanager
def run_lock() -> Iterator[None]:
    system.RUN_STATE.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode().strip() or "?"
            raise RunError(f"another cclab run is active (pid {holder}); wait for it or run `cclab clean`") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Teardown must finish: a second Ctrl-C is ignored until it has."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --- the experiment ----------------------------------------------------------------


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
        shaper=ls.shaper,
        mtu=MTU,
    )


def socket_buffer_bytes(spec: Spec) -> int:
    """Socket buffer limit from the spec's BDP: 4x (rate x (base RTT + full queues)) of the worst flow, >= 4 MiB."""
    g = spec.graph
    worst = 0.0
    for f in spec.flows:
        hops = g.path(f.src, f.dst, f.segment)
        em = g.emulated_on(hops)
        rate = min((e.spec.rate_bps for e in em), default=0)
        if not rate:
            continue
        queues_s = sum(_queue_bytes(e.spec) * 8 / e.spec.rate_bps for e in em)
        worst = max(worst, rate / 8 * (g.base_rtt_ms(hops) / 1000 + queues_s))
    return max(4 << 20, int(4 * worst))


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
class _Path:
    """A flow's way through the graph: addresses, the emulated links it crosses, its base RTT."""

    src_ip: str
    dst_ip: str
    links: tuple[EmulatedLink, ...]
    base_rtt_ms: float


def flow_path(graph: Graph, f: Flow) -> _Path:
    hops = graph.path(f.src, f.dst, f.segment)
    return _Path(
        graph.addresses[(f.src, f.segment)],
        graph.addresses[(f.dst, f.segment)],
        tuple(graph.emulated_on(hops)),
        graph.base_rtt_ms(hops),
    )


Dataplane = KernelBottleneck | Bmv2Bottleneck
Traffic = IperfFlow | UdpOnOffFlow


@dataclass
class _Experiment:
    spec: Spec
    opts: RunOptions
    delay_element: str | None
    """netem or cclab-delay for the links with a delay; None: no delay applied"""
    notes: list[str]
    run_dir: Path
    teardowns: list[Callable[[], None]] = field(default_factory=list)
    flows: list[Traffic] = field(default_factory=list)
    monitored: list[MonitoredFlow] = field(default_factory=list)
    paths: dict[str, _Path] = field(default_factory=dict)
    dps: dict[str, Dataplane] = field(default_factory=dict)
    """emulated link id -> its data plane"""
    delays: dict[str, delay.LinkDelay] = field(default_factory=dict)
    """link id -> its delay element"""
    rate_now: dict[str, float] = field(default_factory=dict)
    monitor: Monitor | None = None
    ccstate_columns: list[str] = field(default_factory=list)
    notes_host: dict[str, Any] = field(default_factory=dict)
    host_sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    """Host sysctls changed for the run: name -> {"was", "set"}, put back on teardown (dataplane/sysctls.py)"""

    def __post_init__(self) -> None:
        self.paths = {f.id: flow_path(self.spec.graph, f) for f in self.spec.flows}

    def flow_key(self, i: int, f: Flow) -> FlowKey:
        p = self.paths[f.id]
        return FlowKey(p.src_ip, p.dst_ip, CLIENT_PORT_BASE + i, SERVER_PORT_BASE + i, 6 if f.is_tcp else 17)

    def build_network(self) -> Any:
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("error")
        mod = load_topology_module()
        bmv2 = self.spec.dataplane == "bmv2"
        p4_params: dict[str, Any] = {}
        if bmv2:
            node = load_p4switch_module()
            p4_params = dict(cls=node.Bmv2Switch, json_path=P4_JSON, p4info_path=P4_INFO, log_dir=self.run_dir)
        topo = mod.GraphTopo(graph=self.spec.graph, bmv2=bmv2, p4_params=p4_params)
        tuned = sysctls.NetworkSysctls(self.opts.host_sysctls)
        self.teardowns.append(tuned.restore)
        self.host_sysctls = tuned.changed
        net = tuned.build(
            lambda: Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None, autoSetMacs=True)
        )
        self.teardowns.append(net.stop)
        net.start()
        # ARP is static: the P4 program forwards IPv4 only, and on every target an ARP request dropped by a
        # full emulated queue would hold a flow's first packets back for a second (the ARP retry time)
        net.staticArp()
        if bmv2:
            node.checksum_offload_off(net.hosts)
        bufs = socket_buffer_bytes(self.spec)
        for h in net.hosts:
            for name, value in (
                ("net.ipv4.tcp_rmem", f"4096 131072 {bufs}"),
                ("net.ipv4.tcp_wmem", f"4096 16384 {bufs}"),
                ("net.ipv4.tcp_no_metrics_save", "1"),
            ):
                mod._run(h, ["sysctl", "-q", "-w", f"{name}={value}"])
        self.notes_host = {"tcp_rmem_wmem_max_bytes": bufs, "tcp_no_metrics_save": 1, "mtu": MTU}
        return net

    def setup_dataplane(self, net: Any) -> None:
        """Program every emulated direction (rate, queue, loss, counters) and every link's delay."""
        mod = load_topology_module()
        graph = self.spec.graph
        bmv2 = self.spec.dataplane == "bmv2"
        for e in graph.emulated():
            nodes = mod.chain(graph, e.link, bmv2)
            if e.src != e.link.a:
                nodes = nodes[::-1]
            # kernel: the limiter on the first node's port; bmv2: the P4 node's port after it
            at = 1 if bmv2 else 0
            a = _intf_towards(net, nodes[at], nodes[at + 1])
            b = _intf_towards(net, nodes[at + 1], nodes[at])
            keys = tuple(self.flow_key(i, f) for i, f in enumerate(self.spec.flows, 1) if e in self.paths[f.id].links)
            dp: Dataplane
            if bmv2:
                sw = net.get(nodes[1])
                back = _intf_towards(net, nodes[1], nodes[0])
                dp = Bmv2Bottleneck(
                    run_id=f"{self.run_dir.name}-{e.id}",
                    switch=sw,
                    bottleneck_port=sw.ports[a],
                    egress_dev=str(a),
                    ingress_dev=str(b),
                    routes=p4_routes(graph, e.link, sw.ports[a], sw.ports[back]),
                    flows=keys,
                )
            else:
                dp = KernelBottleneck(run_id=f"{self.run_dir.name}-{e.id}", egress_dev=str(a), ingress_dev=str(b))
            self.teardowns.append(dp.teardown)
            params = link_params(e.spec)
            dp.setup(params, seed=self.spec.seed + len(self.dps), use_delay=False)
            self.rate_now[e.id] = params.rate_bps
            self.dps[e.id] = dp
        if self.delay_element is None:
            return
        for link in graph.links:
            if not link.spec.has_delay:
                continue
            d = mod.delay_node(link)
            nodes = mod.chain(graph, link, bmv2)
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
        for i, f in enumerate(self.spec.flows, 1):
            p = self.paths[f.id]
            fl: Traffic
            if f.is_tcp:
                fl = IperfFlow(f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir, algo=f.algo, bytes_total=f.bytes)
            else:
                fl = UdpOnOffFlow(
                    f.id, i, p.src_ip, p.dst_ip, f.duration_s, flows_dir,
                    rate_bps=int(f.rate_mbps * 1e6), on_s=f.on_s, off_s=f.off_s, on_off=f.on_off,
                    seed=self.spec.seed * 1_000_003 + i,
                )  # fmt: skip
            self.flows.append(fl)
            self.teardowns.append(fl.stop)
            fl.start_server(net.get(f.dst))
            key = self.flow_key(i, f)
            self.monitored.append(MonitoredFlow(f.id, f.algo, key, f.src, tuple(e.id for e in p.links)))
        for fl in self.flows:
            fl.wait_server()

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
        end = t0 + self.spec.duration_s + GRACE_S
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
            if not pending and all(fl.done() for fl in self.flows):
                return
            if time.monotonic() > end:
                late = [fl.flow_id for fl in self.flows if not fl.done()]
                self.notes.append(f"flows {', '.join(late)} overran their schedule by {GRACE_S:g} s and were stopped")
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
                if isinstance(dp, Bmv2Bottleneck):
                    entry["bmv2"] = dp.describe()
            out.append(entry)
        for lid, d in self.delays.items():
            out.append({"id": lid, "delay_element": d.element, "devices": list(d.devs), "delay_ms": d.delay_ms})
        return out


def run(spec: Spec, opts: RunOptions | None = None) -> Outcome:
    """Run an experiment; raise RunError/SpecError before creating anything if it cannot run."""
    opts = opts or RunOptions()
    element, notes = preflight(spec, opts)
    with run_lock():
        loaded = cc.load(spec.algos)
        run_dir = results.new_run_dir(spec, opts.results_root)
        ex = _Experiment(spec, opts, element, notes, run_dir)
        ex.teardowns.append(lambda: cc.unload(loaded))
        complete, reason = False, None
        goodputs: dict[str, float | None] = {}
        extra: dict[str, Any] = {"delay_applied": False}
        try:
            with signals_raise():
                net = ex.build_network()
                ex.setup_dataplane(net)
                extra = {
                    "delay_applied": bool(ex.delays),
                    "delay_element": element if ex.delays else None,
                    "hosts": ex.notes_host,
                    "host_sysctls_changed": ex.host_sysctls,
                    "links": ex.describe_links(),
                }
                first = next(iter(ex.dps.values()))
                extra["bottleneck_devices"] = [first.egress_dev, first.ingress_dev]
                if isinstance(first, Bmv2Bottleneck):  # the first link's, for readers of one-bottleneck runs
                    extra["bmv2"] = first.describe()
                results.write_json(run_dir / "manifest.json", results.manifest(spec, extra))
                ex.start_servers(net)
                reader = CcStateReader(spec.algos)
                ex.teardowns.append(reader.close)
                ex.ccstate_columns = reader.columns
                links = [
                    MonitoredLink(lid, dp, (lambda lid=lid: ex.rate_now[lid]))  # type: ignore[misc]
                    for lid, dp in ex.dps.items()
                ]
                ex.monitor = Monitor(
                    links,
                    ex.monitored,
                    spec.interval_s,
                    ex.samplers(net),
                    opts.on_update,
                    spec.duration_s,
                    reader if reader.maps else None,
                )
                ex.traffic(net)
                for lid, dp in ex.dps.items():
                    if isinstance(dp, Bmv2Bottleneck) and not dp.wait_drained():
                        notes.append(
                            f"bmv2 {lid}: the queue did not drain after the flows ended; queue drops may be short"
                        )
                complete = True
        except Interrupted as exc:
            reason = f"interrupted ({exc})"
        except (RunError, DataPlaneError, TrafficError, system.SystemError_, cc.CcError) as exc:
            reason = str(exc)
        except BaseException as exc:  # recorded, torn down, then re-raised as it is
            reason = f"internal error: {exc!r}"
            raise
        finally:
            with signals_ignored():
                series = ex.monitor.stop() if ex.monitor is not None and ex.monitor.series.first else None
                for fl in ex.flows:
                    fl.stop()
                    goodputs[fl.flow_id] = fl.goodput_bps()
                    err = fl.error()
                    if err and complete:
                        complete, reason = False, f"{fl.flow_id}: {err}"
                errors = ex.teardown()
                if errors:
                    notes.append("teardown: " + "; ".join(errors))
                if not (run_dir / "manifest.json").exists():
                    results.write_json(run_dir / "manifest.json", results.manifest(spec, extra))
                out = _write(ex, series, goodputs, complete, reason, extra)
        if reason is not None and not reason.startswith("interrupted"):
            raise RunError(f"{reason} (partial results in {run_dir})")
        return Outcome(run_dir, out)


def _write(
    ex: _Experiment,
    series: Any,
    goodputs: dict[str, float | None],
    complete: bool,
    reason: str | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    from controller.monitor import Series

    series = series or Series()
    run_dir = ex.run_dir
    results.write_rows(run_dir / "timeseries.csv", FLOW_COLUMNS, series.timeseries)
    results.write_csv(
        run_dir / "link.csv",
        series.link,
        [
            "t_s",
            "link",
            "link_bps",
            "capacity_bps",
            "backlog_pkts",
            "jain",
            "active_flows",
            "random_drops",
            "queue_drops",
        ],
    )
    results.write_rows(run_dir / "links.csv", LINK_FLOW_COLUMNS, series.links)
    results.write_csv(
        run_dir / "cwnd.csv",
        series.tcpinfo,
        [
            "t_s",
            "flow",
            "algo",
            "cwnd_pkts",
            "ssthresh_pkts",
            "srtt_us",
            "rttvar_us",
            "min_rtt_us",
            "mss",
            "total_retrans",
            "bytes_acked",
            "delivery_rate_bps",
            "ca_state",
        ],
    )
    if series.ccstate:
        results.write_csv(run_dir / "ccstate.csv", series.ccstate, ex.ccstate_columns)
    summ = summary.build(
        ex.spec,
        ex.monitored,
        series,
        goodputs,
        paths={fid: ([e.id for e in p.links], p.base_rtt_ms) for fid, p in ex.paths.items()},
        traffic={fl.flow_id: fl.report() for fl in ex.flows},
        complete=complete,
        reason=reason,
        delay_applied=bool(extra.get("delay_applied")),
        cpu_busy=ex.monitor.cpu_busy_fraction if ex.monitor else None,
        extra_notes=ex.notes,
    )
    results.write_csv(
        run_dir / "flows.csv",
        [{**f, "path": " ".join(f["path"])} for f in summ["flows"]],
        [
            "id",
            "kind",
            "algo",
            "src",
            "dst",
            "start_s",
            "duration_s",
            "active_s",
            "path",
            "base_rtt_ms",
            "min_rtt_ms",
            "throughput_bps",
            "bytes",
            "packets",
            "random_drops",
            "queue_drops",
            "iperf_goodput_bps",
            "completion_s",
            "offered_bytes",
        ],
    )
    summ["delay_element"] = extra.get("delay_element")
    summ["bottleneck"]["delay_element"] = extra.get("delay_element")
    stats = {lid: d.stats for lid, d in ex.delays.items() if d.stats}
    if stats:  # cclab-delay's own account: packets, drops, how late releases were
        summ["delay_stats"] = stats
    if ex.opts.plots and series.link:
        from controller import plots

        results.write_json(run_dir / "summary.json", summ)
        try:
            plots.plot_run(run_dir)
        except Exception as exc:  # plots are derived; their failure must not lose data
            summ["fidelity"]["notes"].append(f"plotting failed: {exc}")
    results.finish(run_dir, summ)
    return summ
