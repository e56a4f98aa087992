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
from controller.dataplane import DataPlaneError, FlowKey
from controller.dataplane.bmv2 import Bmv2Bottleneck, Route
from controller.dataplane.kernel import KernelBottleneck, LinkParams
from controller.monitor import LiveState, Monitor, MonitoredFlow
from controller.spec import Spec
from hosts.tcpinfo import TcpInfoSampler
from hosts.traffic import CLIENT_PORT_BASE, SERVER_PORT_BASE, IperfFlow, TrafficError

log = logging.getLogger(__name__)

TOPOLOGY_FILE = system.REPO / "mininet" / "dumbbell.py"
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
    return _load_by_path("cclab_topo_dumbbell", TOPOLOGY_FILE)


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


def sender_ip(name: str) -> str:
    return f"10.0.1.{int(name[1:])}"


def receiver_ip(name: str) -> str:
    return f"10.0.2.{int(name[1:])}"


#: every receiver is behind the bottleneck
RECEIVER_PREFIX = "10.0.2.0/24"


# --- checks before anything is built -------------------------------------------


def preflight(spec: Spec, opts: RunOptions) -> tuple[bool, list[str]]:
    """Raise RunError for what cannot run; return (use_delay, notes)."""
    notes: list[str] = []
    missing = dataplane_missing(spec.dataplane)
    if missing:
        raise RunError(f"dataplane = {spec.dataplane!r} cannot run here: {missing}")
    system.require_root()
    if spec.dataplane == "kernel":
        system.require_tools("tc", "bpftool", "iperf3", "ethtool", "brctl", "unshare")
    else:
        system.require_tools("tc", "iperf3", "ethtool", "brctl", "unshare", "ss")
    if spec.dataplane == "bmv2":
        if spec.bottleneck.gilbert_elliott is not None:
            raise RunError("bottleneck.gilbert_elliott is not in the BMv2 program yet; use i.i.d. `per` on bmv2")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise RunError("Mininet is not importable from this Python; run `make deps` and use .venv/bin/cclab") from None
    cc.check_available(spec.algos)
    b = spec.bottleneck
    wants_delay = b.delay_ms > 0 or b.jitter_ms > 0 or any(s.delay_ms for s in b.schedule)
    use_delay = False
    if wants_delay:
        # netem where the kernel has it; else, on the kernel target, cclab-delay (delay/)
        from controller.dataplane import delayline

        no_line = delayline.missing() if spec.dataplane == "kernel" else "cclab-delay serves the kernel target only"
        if system.has_netem() or no_line is None:
            use_delay = True
        elif b.delay_fallback == "skip" or opts.allow_no_delay:
            notes.append(f"delay_ms = {b.delay_ms:g} not applied: this kernel has no netem, and {no_line}")
        else:
            raise RunError(
                f"bottleneck.delay_ms = {b.delay_ms:g} needs netem, which this kernel lacks, or cclab-delay: "
                f'{no_line}; or pass --allow-no-delay (or set bottleneck.delay_fallback = "skip")'
            )
    return use_delay, notes


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
    spec: Spec, rate_bps: int | None = None, per: float | None = None, delay_ms: float | None = None
) -> LinkParams:
    b = spec.bottleneck
    ge = b.gilbert_elliott
    return LinkParams(
        rate_bps=rate_bps if rate_bps is not None else b.rate_bps,
        queue_pkts=b.queue_pkts,
        queue_bytes=b.queue_bytes,
        delay_ms=delay_ms if delay_ms is not None else b.delay_ms,
        jitter_ms=b.jitter_ms,
        per=per if per is not None else b.per,
        ge=(ge.p_gb, ge.p_bg, ge.loss_good, ge.loss_bad) if ge else None,
        shaper=b.shaper,
        mtu=MTU,
    )


def socket_buffer_bytes(spec: Spec) -> int:
    """Socket buffer limit from the spec's BDP: 4x (rate x (2 delay + full queue)), >= 4 MiB."""
    b = spec.bottleneck
    queue_bytes = b.queue_bytes or (b.queue_pkts or 100) * (MTU + 14)
    rtt_s = 2 * b.delay_ms / 1000 + queue_bytes * 8 / b.rate_bps
    bdp = b.rate_bps / 8 * rtt_s
    return max(4 << 20, int(4 * bdp))


def bmv2_routes(net: Any, switch: Any, bottleneck_intf: Any, pairs: int) -> tuple[Route, ...]:
    """ipv4_forward entries of the dumbbell's BMv2 switch: each sender on its port, receivers over the bottleneck."""
    routes = []
    for i in range(1, pairs + 1):
        host = net.get(f"h{i}")
        link = net.linksBetween(switch, host)[0]
        intf = link.intf1 if link.intf1.node is switch else link.intf2
        routes.append(Route(f"{sender_ip(host.name)}/32", switch.ports[intf]))
    routes.append(Route(RECEIVER_PREFIX, switch.ports[bottleneck_intf], bottleneck=True))
    return tuple(routes)


@dataclass
class _Experiment:
    spec: Spec
    opts: RunOptions
    use_delay: bool
    notes: list[str]
    run_dir: Path
    teardowns: list[Callable[[], None]] = field(default_factory=list)
    flows: list[IperfFlow] = field(default_factory=list)
    monitored: list[MonitoredFlow] = field(default_factory=list)
    dp: KernelBottleneck | Bmv2Bottleneck | None = None
    monitor: Monitor | None = None
    rate_now: float = 0.0
    ccstate_columns: list[str] = field(default_factory=list)

    def build_network(self) -> Any:
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("error")
        mod = load_topology_module()
        topo = mod.Dumbbell(pairs=self.spec.topology.pairs)
        node = load_p4switch_module() if self.spec.dataplane == "bmv2" else None
        if node is not None:
            # s1 (the rate limiter's side) is the BMv2 switch; s2 stays a Linux bridge.
            info = dict(topo.nodeInfo("s1"))
            info.update(cls=node.Bmv2Switch, json_path=P4_JSON, p4info_path=P4_INFO, log_dir=self.run_dir)
            topo.setNodeInfo("s1", info)
        net = Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None, autoSetMacs=True)
        self.teardowns.append(net.stop)
        net.start()
        if node is not None:
            net.staticArp()  # the P4 program forwards IPv4 only
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
        a_sw, b_sw = (net.get(n) for n in ("s1", "s2"))
        link = net.linksBetween(a_sw, b_sw)[0]
        a, b = (link.intf1, link.intf2) if link.intf1.node is a_sw else (link.intf2, link.intf1)
        fwd = tuple(str(i) for i in b_sw.intfList() if str(i) not in (str(b), "lo"))
        dp: KernelBottleneck | Bmv2Bottleneck
        if self.spec.dataplane == "bmv2":
            dp = Bmv2Bottleneck(
                run_id=self.run_dir.name,
                switch=a_sw,
                bottleneck_port=a_sw.ports[a],
                egress_dev=str(a),
                ingress_dev=str(b),
                routes=bmv2_routes(net, a_sw, a, self.spec.topology.pairs),
                flows=tuple(
                    FlowKey(sender_ip(f.src), receiver_ip(f.dst), CLIENT_PORT_BASE + i, SERVER_PORT_BASE + i, 6)
                    for i, f in enumerate(self.spec.flows, 1)
                ),
                fwd_delay_devs=fwd,
                rev_delay_devs=(str(b),),
            )
        else:
            dp = KernelBottleneck(
                run_id=self.run_dir.name,
                egress_dev=str(a),
                ingress_dev=str(b),
                fwd_delay_devs=fwd,
                rev_delay_devs=(str(b),),
            )
        self.teardowns.append(dp.teardown)
        params = link_params(self.spec)
        dp.setup(params, seed=self.spec.seed, use_delay=self.use_delay)
        self.rate_now = params.rate_bps
        self.dp = dp

    def start_servers(self, net: Any) -> None:
        flows_dir = self.run_dir / "iperf"
        flows_dir.mkdir()
        for i, f in enumerate(self.spec.flows, 1):
            fl = IperfFlow(f.id, i, f.algo, sender_ip(f.src), receiver_ip(f.dst), f.duration_s, flows_dir)
            self.flows.append(fl)
            self.teardowns.append(fl.stop)
            fl.start_server(net.get(f.dst))
            key = FlowKey(fl.src_ip, fl.dst_ip, fl.client_port, fl.server_port, 6)
            self.monitored.append(MonitoredFlow(f.id, f.algo, key, f.src))
        for fl in self.flows:
            fl.wait_server()

    def samplers(self, net: Any) -> dict[str, TcpInfoSampler]:
        out = {}
        for name in sorted({f.src for f in self.spec.flows}):
            s = TcpInfoSampler(net.get(name).pid)
            self.teardowns.append(s.close)
            out[name] = s
        return out

    def traffic(self, net: Any) -> None:
        """Start flows and schedule steps on time; return when all flows ended."""
        assert self.dp is not None and self.monitor is not None
        t0 = time.monotonic()
        self.monitor.start(t0)
        pending = sorted(zip(self.spec.flows, self.flows), key=lambda p: p[0].start_s)
        steps = list(self.spec.bottleneck.schedule)
        rate, per, delay = None, None, None
        end = t0 + self.spec.duration_s + GRACE_S
        while True:
            now = time.monotonic() - t0
            while pending and pending[0][0].start_s <= now:
                sf, fl = pending.pop(0)
                fl.start_client(net.get(sf.src))
            while steps and steps[0].at_s <= now:
                st = steps.pop(0)
                rate = int(round(st.rate_mbps * 1e6)) if st.rate_mbps is not None else rate
                per = st.per if st.per is not None else per
                delay = st.delay_ms if st.delay_ms is not None else delay
                params = link_params(self.spec, rate, per, delay)
                self.dp.apply(params)
                self.rate_now = params.rate_bps
                log.info("t=%.2f s: bottleneck now %s", now, st)
            if self.monitor.error is not None:
                raise RunError(f"counter polling failed: {self.monitor.error}")
            if not pending and all(fl.done() for fl in self.flows):
                return
            if time.monotonic() > end:
                late = [fl.flow_id for fl in self.flows if not fl.done()]
                self.notes.append(f"flows {', '.join(late)} overran their schedule by {GRACE_S:g} s and were stopped")
                return
            time.sleep(0.02)

    def teardown(self) -> list[str]:
        errors = []
        while self.teardowns:
            step = self.teardowns.pop()
            try:
                step()
            except Exception as exc:  # keep tearing down; report at the end
                errors.append(f"{getattr(step, '__qualname__', step)}: {exc}")
        return errors


def run(spec: Spec, opts: RunOptions | None = None) -> Outcome:
    """Run an experiment; raise RunError/SpecError before creating anything if it cannot run."""
    opts = opts or RunOptions()
    use_delay, notes = preflight(spec, opts)
    with run_lock():
        loaded = cc.load(spec.algos)
        run_dir = results.new_run_dir(spec, opts.results_root)
        ex = _Experiment(spec, opts, use_delay, notes, run_dir)
        ex.teardowns.append(lambda: cc.unload(loaded))
        complete, reason = False, None
        goodputs: dict[str, float | None] = {}
        extra: dict[str, Any] = {"delay_applied": False}
        try:
            with signals_raise():
                net = ex.build_network()
                ex.setup_dataplane(net)
                assert ex.dp is not None
                extra = {
                    "delay_applied": ex.dp.delay_applied,
                    "hosts": ex.notes_host,
                    "bottleneck_devices": [ex.dp.egress_dev, ex.dp.ingress_dev],
                    "netem": use_delay,
                }
                if isinstance(ex.dp, Bmv2Bottleneck):
                    extra["bmv2"] = ex.dp.describe()
                results.write_json(run_dir / "manifest.json", results.manifest(spec, extra))
                ex.start_servers(net)
                reader = CcStateReader(spec.algos)
                ex.teardowns.append(reader.close)
                ex.ccstate_columns = reader.columns
                ex.monitor = Monitor(
                    ex.dp,
                    ex.monitored,
                    spec.interval_s,
                    lambda: ex.rate_now,
                    ex.samplers(net),
                    opts.on_update,
                    spec.duration_s,
                    reader if reader.maps else None,
                )
                ex.traffic(net)
                if isinstance(ex.dp, Bmv2Bottleneck) and not ex.dp.wait_drained():
                    notes.append("bmv2: the queue did not drain after the flows ended; queue drops may be short")
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
                        complete, reason = False, f"{fl.flow_id}: iperf3: {err}"
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
    results.write_csv(
        run_dir / "timeseries.csv",
        series.timeseries,
        ["t_s", "flow", "algo", "bytes", "pkts", "rate_bps", "random_drops", "queue_drops", "cum_bytes"],
    )
    results.write_csv(
        run_dir / "link.csv",
        series.link,
        ["t_s", "link_bps", "capacity_bps", "backlog_pkts", "jain", "active_flows", "random_drops", "queue_drops"],
    )
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
        complete=complete,
        reason=reason,
        delay_applied=bool(extra.get("delay_applied")),
        cpu_busy=ex.monitor.cpu_busy_fraction if ex.monitor else None,
        extra_notes=ex.notes,
    )
    results.write_csv(
        run_dir / "flows.csv",
        summ["flows"],
        [
            "id",
            "algo",
            "src",
            "dst",
            "start_s",
            "duration_s",
            "throughput_bps",
            "bytes",
            "packets",
            "random_drops",
            "queue_drops",
            "iperf_goodput_bps",
        ],
    )
    if ex.opts.plots and series.link:
        from controller import plots

        results.write_json(run_dir / "summary.json", summ)
        try:
            plots.plot_run(run_dir)
        except Exception as exc:  # plots are derived; their failure must not lose data
            summ["fidelity"]["notes"].append(f"plotting failed: {exc}")
    results.finish(run_dir, summ)
    return summ
