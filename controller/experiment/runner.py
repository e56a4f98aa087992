"""One experiment, start to end: check, build, measure, write, tear down.

Everything that can be checked is checked before anything is created.  Every
set-up step registers its teardown first; teardown runs on success, error,
Ctrl-C, SIGTERM and SIGHUP (the sweep that started the run died, or the
terminal closed).  Each of its steps is bounded in time (a Mininet node
whose shell died or does not answer is passed over: network/mininet.py's
BoundedShell); a signal while it runs is noted and teardown goes on, and a
second Ctrl-C or SIGTERM abandons it, marks the run so, writes what was
measured and leaves the rest to `cclab clean`.  A SIGHUP never abandons it:
a dying sweep's kernel sends it several times (isolated.PARENT_GONE).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from controller import cc, system
from controller.dataplane import Bottleneck, DataPlaneError
from controller.dataplane.bmv2 import Program
from controller.experiment.build import Experiment
from controller.experiment.isolated import PARENT_GONE
from controller.experiment.preflight import RunError, delay_element_links, p4_program, preflight
from controller.measure.ccstate import CcStateReader
from controller.measure.monitor import FLOW_COLUMNS, LINK_FLOW_COLUMNS, LiveState, Monitor, MonitoredLink
from controller.results import rundir, summary
from controller.results.edge import add_edge
from controller.spec import Spec
from hosts.traffic import TrafficError

log = logging.getLogger(__name__)

LOCK = system.RUN_STATE / "lock"


#: the signals that stop a run
STOP = (signal.SIGINT, signal.SIGTERM, PARENT_GONE)


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived while the experiment ran."""


class Abandoned(KeyboardInterrupt):
    """A second SIGINT or SIGTERM arrived while the run was torn down: the rest of teardown is `cclab clean`'s."""


@dataclass
class RunOptions:
    allow_no_delay: bool = False
    """Run a spec with delay on a kernel without netem, recording that delay was skipped."""
    results_root: Path = rundir.RESULTS
    on_update: Callable[[LiveState], None] | None = None
    """Called from the monitor thread after every interval."""
    on_running: Callable[[], None] | None = None
    """Called once the network is built and programmed, just before traffic starts: a live view starts here,
    so it only ever shows a running experiment (every refusal comes before)."""
    plots: bool = True
    host_sysctls: bool = True
    """Set the host sysctls of dataplane/sysctls.py for the run (put back on teardown); False keeps the host's."""


@dataclass
class Outcome:
    run_dir: Path
    summary: dict[str, Any]
    interrupted: bool = False
    """SIGINT or SIGTERM ended the run (torn down, marked incomplete): a caller running several stops too."""


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


class StopSignals:
    """The handler of STOP for a run's whole life, so that no instant is left in which a signal's default action
    ends the run with its network up.  While the experiment runs the first signal raises Interrupted.  After it,
    and once teardown starts, each is noted in ``seen`` and teardown goes on, so an impatient second Ctrl-C after
    the one that stopped the run does not leave half a network; a second Ctrl-C or SIGTERM noted raises
    Abandoned, so that a teardown that hangs can always be stopped.  A SIGHUP is never one of the two: the
    kernel repeats it as the run's dying sweep goes (isolated.PARENT_GONE)."""

    def __init__(self, stopping: bool) -> None:
        self.stopping = stopping
        self.seen: list[str] = []

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self.stopping:
            self.stopping = True
            raise Interrupted(name)
        self.seen.append(name)
        asked = [n for n in self.seen if n != PARENT_GONE.name]
        if len(asked) > 1:
            raise Abandoned(asked[-1])
        if self.seen.count(name) == 1:
            log.warning("%s: tearing down the run first; a second Ctrl-C abandons teardown (then `cclab clean`)", name)


@contextlib.contextmanager
def stop_signals(stopping: bool = False) -> Iterator[StopSignals]:
    """StopSignals handles STOP inside the block (``stopping``: teardown's rules from the start)."""
    handler = StopSignals(stopping)
    old = {s: signal.signal(s, handler) for s in STOP}
    try:
        yield handler
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(spec: Spec, opts: RunOptions | None = None) -> Outcome:
    """Run an experiment; raise RunError/SpecError before creating anything if it cannot run."""
    opts = opts or RunOptions()
    element, notes = preflight(spec, opts.allow_no_delay)
    with run_lock(), tempfile.TemporaryDirectory(prefix="cclab-p4-") as staging:
        program = p4_program(spec, Path(staging))  # compiled before anything is registered or created
        loaded = cc.load(spec.algos, spec.algo_params, spec.cc_sources)
        run_dir = rundir.new_run_dir(spec, opts.results_root)
        if program is not None:  # the program that ran, beside its results (a grader reads it there)
            program = _keep_program(program, run_dir / "p4")
        ex = Experiment(spec, element, notes, run_dir, tune_host=opts.host_sysctls, program=program)
        ex.teardowns.append(lambda: cc.unload(loaded))
        complete, reason, interrupted = False, None, False
        goodputs: dict[str, float | None] = {}
        extra: dict[str, Any] = {"delay_applied": False}
        with stop_signals() as stop:
            try:
                if spec.cc_sources:  # the sources that ran, beside their results (a grader reads them there)
                    (run_dir / "cc").mkdir()
                    for source in spec.cc_sources.values():
                        shutil.copyfile(source, run_dir / "cc" / source.name)
                net = ex.build_network()
                ex.setup_dataplane(net)
                # a target that delays by itself has its links' delay (and no delay element on them)
                self_delayed = spec.wants_delay and not delay_element_links(spec.graph, spec.dataplane)
                extra = {
                    "delay_applied": bool(ex.delays) or self_delayed,
                    "delay_element": element if ex.delays else None,
                    "hosts": ex.notes_host,
                    "host_sysctls_changed": ex.host_sysctls,
                    "links": ex.describe_links(),
                    "algorithms": cc.describe(spec.algos, spec.algo_params, loaded, spec.cc_sources),
                }
                if ex.fabric is not None:
                    extra["switches"] = ex.fabric.describe()
                first = next(iter(ex.dps.values()))
                extra["bottleneck_devices"] = [first.egress_dev, first.ingress_dev]
                extra[spec.dataplane] = first.describe()  # the first link's, for readers of one-bottleneck runs
                rundir.write_json(run_dir / "manifest.json", rundir.manifest(spec, extra))
                ex.start_servers(net)
                # the senders' namespaces: runs side by side write the same addresses and ports into the maps
                reader = CcStateReader(spec.algos, frozenset(system.netns_inode(h.pid) for h in net.hosts))
                ex.teardowns.append(reader.close)
                ex.ccstate_columns = reader.columns
                links = [
                    MonitoredLink(lid, dp, (lambda lid=lid: ex.rate_now[lid]))  # type: ignore[misc]
                    for lid, dp in ex.dps.items()
                ]
                held = settle_links(ex.dps, notes)
                if held:
                    extra["backlog_before_flows_pkts"] = held
                ex.monitor = Monitor(
                    links,
                    ex.monitored,
                    spec.interval_s,
                    ex.samplers(net),
                    opts.on_update,
                    spec.duration_s,
                    reader if reader.maps else None,
                )
                if opts.on_running is not None:
                    opts.on_running()
                ex.traffic(net)
                for lid, dp in ex.dps.items():
                    if not dp.wait_drained():
                        notes.append(
                            f"{spec.dataplane} {lid}: the queue did not drain after the flows ended; "
                            "queue drops may be short"
                        )
                complete = True
            except Interrupted as exc:
                reason, interrupted = f"interrupted ({exc})", True
            except (RunError, DataPlaneError, TrafficError, system.SystemError_, cc.CcError) as exc:
                reason = str(exc)
            except BaseException as exc:  # recorded, torn down, then re-raised as it is
                reason = f"internal error: {exc!r}"
                raise
            finally:
                stop.stopping = True  # from here every signal is noted (StopSignals)
                edge: dict[str, dict[str, int]] = {}
                mptcp_counters: dict[str, dict[str, int]] = {}
                series = None
                try:
                    started = ex.monitor is not None and bool(ex.monitor.series.first)
                    # the edge first: it waits until the senders' switches count no more packets (a closed
                    # socket still sends what it buffered), so the links' final read below sees the same packets
                    edge = ex.edge_counts() if started else {}
                    series = ex.monitor.stop() if ex.monitor is not None and started else None
                    for fl in ex.flows:
                        fl.stop()
                        goodputs[fl.flow_id] = fl.goodput_bps()
                        err = fl.error()
                        if err and complete:
                            complete, reason = False, f"{fl.flow_id}: {err}"
                    # the senders' namespaces hold the connections' counters until teardown ends them
                    mptcp_counters = ex.mptcp_counters() if started else {}
                    errors = ex.teardown()
                    if errors:
                        notes.append("teardown: " + "; ".join(errors))
                except Abandoned as exc:
                    left = f"teardown abandoned ({exc}): run `cclab clean` to remove what is left"
                    complete, interrupted = False, True
                    reason = f"{reason}; {left}" if reason else left
                    log.warning("%s", left)
                if not (run_dir / "manifest.json").exists():
                    rundir.write_json(run_dir / "manifest.json", rundir.manifest(spec, extra))
                out = _write(ex, opts, series, goodputs, complete, reason, extra, edge, mptcp_counters)
        if reason is not None and not interrupted:
            raise RunError(f"{reason} (partial results in {run_dir})")
        return Outcome(run_dir, out, interrupted)


def settle_links(dps: Mapping[str, Bottleneck], notes: list[str]) -> dict[str, int]:
    """Before the flows start: each link's queue empty by its counters.  Returns the packets each link's count
    held that was not (none, as a rule).

    A packet a kernel link counts into its queue in the instant between attaching its two programs (offered at
    the egress hook before the ingress one is there to count it out) never leaves it counted: left there, the
    queue reads one packet long all run and the target never sees it run empty, so the fidelity check's
    standing backlog is one packet short of what it says.  wait_drained() gives it back as a drop its program
    missed, before the monitor's first snapshot: none of the run's counts has it, and it is not one of the drops
    the summary reports given back at the end."""
    held: dict[str, int] = {}
    for lid, dp in dps.items():
        n = dp.read().backlog_pkts
        if n <= 0:
            continue
        held[lid] = n
        missed = getattr(dp, "missed_qdrops", None)
        if not dp.wait_drained():
            notes.append(f"{lid}: its queue held {n} packet(s) by its counters before the flows started, and still did")
        if hasattr(dp, "missed_qdrops"):
            dp.missed_qdrops = missed
    return held


def _keep_program(prog: Program, folder: Path) -> Program:
    """A compiled program copied into the run's folder beside its source: the files the switches load."""
    folder.mkdir()
    assert prog.source is not None
    shutil.copyfile(prog.source, folder / prog.source.name)
    json_path, p4info = folder / prog.json.name, folder / prog.p4info.name
    shutil.copyfile(prog.json, json_path)
    shutil.copyfile(prog.p4info, p4info)
    return Program(json_path, p4info, folder / prog.source.name, prog.output)


def _write(
    ex: Experiment,
    opts: RunOptions,
    series: Any,
    goodputs: dict[str, float | None],
    complete: bool,
    reason: str | None,
    extra: dict[str, Any],
    edge: dict[str, dict[str, int]] | None = None,
    mptcp_counters: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    """The run's files and summary.json; ``mptcp_counters``: each mptcp flow's sender's MPTCP counters
    (Experiment.mptcp_counters())."""
    from controller.measure.monitor import Series

    series = series or Series()
    run_dir = ex.run_dir
    rundir.write_rows(run_dir / "timeseries.csv", FLOW_COLUMNS, series.timeseries)
    rundir.write_csv(
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
            "queue_empties",
        ],
    )
    rundir.write_rows(run_dir / "links.csv", LINK_FLOW_COLUMNS, series.links)
    rundir.write_csv(
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
            "sack",
            "total_retrans",
            "bytes_acked",
            "delivery_rate_bps",
            "ca_state",
        ],
    )
    if series.ccstate:
        rundir.write_csv(run_dir / "ccstate.csv", series.ccstate, ex.ccstate_columns)
    traffic = {fl.flow_id: fl.report() for fl in ex.flows}
    for fid, counters in (mptcp_counters or {}).items():
        traffic[fid]["mptcp_counters"] = counters
    summ = summary.build(
        ex.spec,
        ex.monitored,
        series,
        goodputs,
        paths={fid: ([e.id for e in p.links], p.base_rtt_ms) for fid, p in ex.paths.items()},
        traffic=traffic,
        complete=complete,
        reason=reason,
        delay_applied=bool(extra.get("delay_applied")),
        cpu_busy=ex.monitor.cpu_busy_fraction if ex.monitor else None,
        extra_notes=ex.notes,
        # as the manifest recorded them: the data plane is torn down by now and describes no shaper any more
        link_buckets=summary.buckets(extra.get("links") or ex.describe_links()),
    )
    if ex.monitor is not None:
        summ["monitor"] = ex.monitor.timing()
    if edge:  # switches = "ovs": the flows' counters at their senders' switches against the links'
        add_edge(summ, edge)
    if ex.fabric is not None:
        summ["switches"] = ex.fabric.describe()
    rundir.write_csv(
        run_dir / "flows.csv",
        [{**f, "path": " ".join(f["path"])} for f in summ["flows"]],
        [
            "id",
            "flow",
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
    element = {lid: a for lid, dp in ex.dps.items() if (a := getattr(dp, "final_stats", None)) is not None}
    if element:  # fpga-sim: each harness's counters as it stopped, the RTL's own, the controller's last read
        summ["element_stats"] = element
    owned = {lid: n for lid, dp in ex.dps.items() if (n := getattr(dp, "owned_pkts", None)) is not None}
    if owned:  # packets a kernel link's program freed from their sockets itself (0 where the switch ports did)
        summ["owned_at_link_pkts"] = owned
    if held := extra.get("backlog_before_flows_pkts"):  # settle_links(): counted into a queue, never out
        summ["backlog_before_flows_pkts"] = held
    missed = {lid: n for lid, dp in ex.dps.items() if (n := getattr(dp, "missed_qdrops", None))}
    if missed:  # queue drops given to their flows only once the queue drained: timeseries.csv's last interval has them
        summ["queue_drops_counted_at_end"] = missed
    if opts.plots and series.link:
        from controller.results import plots

        rundir.write_json(run_dir / "summary.json", summ)
        try:
            plots.plot_run(run_dir)
        except Exception as exc:  # plots are derived; their failure must not lose data
            summ["fidelity"]["notes"].append(f"plotting failed: {exc}")
    rundir.finish(run_dir, summ)
    return summ
