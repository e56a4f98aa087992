"""The `cclab` command: run experiments, clean up, benchmark, manage algorithms.

The CLI owns the terminal: library code logs, this module prints.  Every
expected failure ends in one clear line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from controller import bench, capabilities, cc, clean, lab, lab_cli, spec, system, vm
from controller.dataplane import DataPlaneError
from controller.experiment import campaign, executors, preflight, runner, sweep
from controller.measure.live import final_table, render
from controller.measure.monitor import LiveState
from controller.network import units
from controller.results import rundir
from controller.results.claims import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, ClaimsError
from controller.spec import algos
from controller.spec import sweep as sweep_spec
from controller.vm.share import require_inside
from hosts.traffic import TrafficError

EXPECTED = (
    spec.SpecError,
    preflight.RunError,
    cc.CcError,
    DataPlaneError,
    TrafficError,
    system.SystemError_,
    vm.VmError,
    sweep_spec.SweepError,
    executors.ExecutorError,
    ClaimsError,
    lab.LabError,
)

KEEP_SYSCTLS_HELP = (
    "keep the host's bridge-nf-call-iptables, HTB hysteresis and tcp_child_ehash_entries as they are (README: "
    "The host's sysctls; each costs CPU: the bridges' netfilter hook where the host has it on, HTB's timer per "
    "packet where hysteresis is off)"
)

err = Console(stderr=True)
out = Console()


def _cmd_run(args: argparse.Namespace) -> int:
    s = spec.load(Path(args.spec))
    if args.vm:
        # the guest runs the same command; its output comes back on this terminal
        flags = (
            ("--allow-no-delay", args.allow_no_delay),
            ("--no-plots", args.no_plots),
            ("--json", args.json),
            ("--keep-host-sysctls", args.keep_host_sysctls),
        )
        extra = [f for f, on in flags if on]
        if args.results:
            extra += ["--results", str(Path(args.results).resolve())]
        # the guest has no git: the shared tree's commit and source hash go into its manifest from here
        return vm.run_spec_in_vm(Path(args.spec), extra, env=rundir.tree_env(s.dataplane))
    title = f"{s.name}: {s.topology.describe()}, {s.bottleneck.rate_mbps:g} Mbit/s, {s.dataplane}"
    live: Live | None = None

    def running() -> None:  # the experiment is built and its traffic starts: only now is there a view to show
        nonlocal live
        if not args.no_live:
            live = Live(render(LiveState(duration_s=s.duration_s), title), console=out, auto_refresh=False)
            live.start(refresh=True)

    def update(state: LiveState) -> None:
        if live is not None:
            live.update(render(state, title), refresh=True)

    opts = runner.RunOptions(
        allow_no_delay=args.allow_no_delay,
        on_update=update,
        on_running=running,
        plots=not args.no_plots,
        host_sysctls=not args.keep_host_sysctls,
    )
    if args.results:
        opts.results_root = Path(args.results)
    try:
        outcome = runner.run(s, opts)
    finally:
        if live is not None:
            live.stop()
            out.print()
    summ = outcome.summary
    if args.json:
        print(json.dumps(summ))
        return 0 if summ["complete"] else 130
    out.print(final_table(summ))
    b = summ["bottleneck"]
    ach, loss, jain = b["achieved_bps"], b["measured_loss"], summ["jain"]
    out.print(  # two lines, each within 80 columns
        f"bottleneck: {'-' if ach is None else f'{units.mbps(ach):.2f}'} of {units.mbps(b['rate_bps']):g} Mbit/s; "
        f"random loss {'-' if loss is None else f'{loss:.3g}'} (spec {b['per']:g})\n"
        f"Jain's index {'-' if jain is None else f'{jain:.4f}'} over {summ['jain_n']} flows"
    )
    if len(summ.get("links", [])) > 1:
        for lk in summ["links"]:
            ach, j = lk["achieved_bps"], lk["jain"]
            out.print(
                f"  {lk['id']}: {'-' if ach is None else f'{units.mbps(ach):.2f}'} "
                f"of {units.mbps(lk['rate_bps']):g} Mbit/s; "
                f"drops {lk['random_drops']} random, {lk['queue_drops']} queue; "
                f"Jain {'-' if j is None else f'{j:.4f}'} over {', '.join(lk['jain_flows'])}"
            )
    fid = summ["fidelity"]
    if fid["ok"]:
        out.print("fidelity: ok")
    else:
        out.print("[yellow]fidelity: spec not fully met[/yellow]")
        for n in fid["notes"]:
            out.print(f"  - {n}")
    state = "complete" if summ["complete"] else "INCOMPLETE"
    out.print(f"results ({state}): {outcome.run_dir}")
    return 0 if summ["complete"] else 130


def _cmd_check(args: argparse.Namespace) -> int:
    if "sweep" in spec.read_raw(Path(args.spec)):
        sw = sweep_spec.load(Path(args.spec))
        n = f"{sw.n_grid} points x {sw.repetitions} repetitions = {len(sw.points)} runs"
        out.print(f"{args.spec}: ok (a sweep: {n})", soft_wrap=True)
        return 0
    s = spec.load(Path(args.spec))
    out.print(f"{args.spec}: ok ({len(s.flows)} flows, algorithms {', '.join(s.algos)})")
    try:  # the refusals `cclab run` would make here, before anything is built
        element, notes = preflight.preflight(s)
    except (preflight.RunError, system.SystemError_, cc.CcError) as exc:
        # valid, but this machine cannot run it: say what is missing (one plain line)
        print(f"cclab: {exc}", file=sys.stderr)
        return 0
    delay = f"delay by {element}" if element else ("no delay" if not s.wants_delay else "; ".join(notes))
    delay = delay or "delay by the data plane itself"  # a target that delays (fpga-sim's delay line)
    out.print(f"runs here: {s.dataplane} data plane, {delay}", soft_wrap=True)
    return 0


def _short(line: str, width: int = 44) -> str:
    """The progress bar's live line, short enough to share an 80-column line with the bar."""
    return line if len(line) <= width else line[: width - 1] + "…"


def _cmd_sweep(args: argparse.Namespace) -> int:
    sw = sweep_spec.load(Path(args.spec))
    if args.executor == "dask" and not args.scheduler:
        raise executors.ExecutorError("--executor dask needs --scheduler ADDR (e.g. tcp://10.0.0.1:8786)")
    if args.scheduler and args.executor != "dask":
        raise executors.ExecutorError("--scheduler is for --executor dask")
    if args.jobs < 1 or (args.jobs > 1 and args.executor != "local"):
        raise executors.ExecutorError(
            f"--jobs {args.jobs}: a number >= 1, above 1 only for --executor local "
            f"(a Dask worker takes N runs at a time with --resources {executors.RESOURCE}=N)"
        )
    sweep_dir = Path(args.dir) if args.dir else sweep.default_dir(sw)
    if args.executor == "vm":  # refused here, before any run, not once per run
        vm.require_image()
        require_inside(sweep_dir, system.REPO.resolve(), "the sweep directory")
    execute = {"local": executors.side_by_side(args.jobs), "vm": executors.vm}.get(
        args.executor
    ) or executors.dask_executor(args.scheduler)
    prog = _sweep_live(sw, sweep_dir, execute, args.executor, args.plots, args.no_live)
    return 0 if not prog.failed else 1


def _sweep_live(
    sw: sweep_spec.Sweep, sweep_dir: Path, execute: sweep.Executor, executor: str, plots: bool, no_live: bool
) -> sweep.Progress:
    """Run a sweep with its progress bar (or one line per run), then say what is left."""
    by_key = {pt.key: pt for pt in sw.points}
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        TextColumn("{task.fields[line]}"),
        console=out,
        disable=no_live,
    )
    task = bar.add_task(sw.name, total=len(sw.points), line="", eta="-")
    t0 = time.monotonic()

    def on_start(key: str, prog: sweep.Progress) -> None:
        if bar.tasks[task].completed == 0 and prog.skipped:
            bar.update(task, completed=prog.skipped)
        verb = "submitted" if executor == "dask" else "running"
        bar.update(task, line=_short(f"{verb} {key}: {by_key[key].describe()}"))

    def on_end(res: sweep.TaskResult, prog: sweep.Progress) -> None:
        run_dir = sweep.complete_run(sweep_dir, res.key)
        if run_dir is None:
            line = f"{res.key}: INCOMPLETE ({res.error or f'exit {res.returncode}'})"
        else:
            summ = json.loads((run_dir / "summary.json").read_text())
            ach = summ["bottleneck"]["achieved_bps"]
            fid = "ok" if summ["fidelity"]["ok"] else "NOT ok"
            line = f"{res.key}: {'-' if ach is None else f'{units.mbps(ach):.2f}'} Mbit/s, fidelity {fid}"
        # the mean time of the runs this invocation made, times the runs left (skipped runs took no time)
        left_s = (time.monotonic() - t0) / prog.done * (prog.total - prog.skipped - prog.done)
        eta = f"{int(left_s // 3600)}:{int(left_s % 3600 // 60):02d}:{int(left_s % 60):02d}"
        bar.update(task, completed=prog.skipped + prog.done, line=_short(line), eta=eta)
        if no_live:
            out.print(f"[{prog.skipped + prog.done}/{prog.total}, ETA {eta}] {line}", highlight=False, soft_wrap=True)

    with bar:
        prog = sweep.run(sw, sweep_dir, execute, plots=plots, on_start=on_start, on_end=on_end)
    left = prog.total - prog.skipped - prog.done
    out.print(
        f"sweep {sw.name}: {prog.total} runs ({sw.n_grid} points x {sw.repetitions}); {prog.skipped} were complete, "
        f"{prog.done} ran now, {len(prog.failed)} incomplete"
        + (f", {left} not started" if left else "")
        + f": {sweep_dir}",
        soft_wrap=True,
    )
    for key in prog.failed:
        out.print(f"  - {key}: no complete run; `cclab sweep` again redoes it", soft_wrap=True)
    return prog


def _cmd_campaign(args: argparse.Namespace) -> int:
    if args.campaign_cmd == "stop":
        pid = campaign.request_stop(now=args.now)
        if pid is None:
            out.print("campaign: none is running")
            return 0
        how = "ends its runs under way now, marked incomplete" if args.now else "stops after the runs under way"
        out.print(f"campaign (pid {pid}): {how}", highlight=False)
        while args.wait and campaign.running() is not None:
            time.sleep(1)
        return 0
    specs = campaign.load(Path(args.file))
    listed = campaign.jobs(Path(args.file))
    if args.campaign_cmd == "save":
        for sv in campaign.save(specs):
            name = sv.state.name
            for m in sv.moved:
                out.print(f"{name}: its archive's runs of another source moved to {system.shown(m)}", highlight=False)
            if not sv.parts:
                out.print(f"{name}: its {sv.state.complete} runs are archived already", highlight=False)
            for a, n in sv.parts:
                size = a.stat().st_size / 1e6
                out.print(f"{name}: {n} runs -> {system.shown(a)} ({size:.2f} MB)", highlight=False)
        return 0
    if args.campaign_cmd == "report":
        rows = campaign.verdict_rows(specs, plots=not args.no_plots, again=args.again)
        text = campaign.table(rows)
        if args.write:
            campaign.write_table(Path(args.write), text)
            words = ", ".join(
                f"{sum(r['verdict'] == w for r in rows)} {w}" for w in (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)
            )
            out.print(f"{args.write}: {len(rows)} claims ({words})", highlight=False)
        else:
            print(text, end="")
        return 0
    if args.campaign_cmd == "restore":
        for name, what in campaign.restore(specs):
            out.print(f"{name}: {what}", highlight=False)
        return 0
    if args.campaign_cmd == "status":
        states = [campaign.state(p) for p in specs]
        t = Table("sweep", "runs complete", "fidelity failed", "hours left (runs only)", "at a time", "directory")
        at_a_time = [listed.get(st.spec, args.jobs) for st in states]
        for st, n in zip(states, at_a_time, strict=True):
            failed = f"{len(st.fidelity_failed)}" + (
                f" ({', '.join(st.fidelity_failed)})" if st.fidelity_failed else ""
            )
            runs = f"{st.complete} / {st.total}" + (
                f" ({st.other_sources} of other sources)" if st.other_sources else ""
            )
            t.add_row(st.name, runs, failed, f"{st.hours_left:.1f}", str(n), system.shown(st.dir))
        out.print(t)
        pid = campaign.running()
        other = sum(s.other_sources for s in states)
        mixed = f" ({other} of other sources than this tree's)" if other else ""
        out.print(
            f"campaign: {'running, pid ' + str(pid) if pid else 'not running'}; "
            f"{sum(s.complete for s in states)} of {sum(s.total for s in states)} runs complete{mixed}, "
            f"{sum(s.hours_left for s in states):.1f} h of runs left, "
            f"{sum(s.hours_left / n for s, n in zip(states, at_a_time, strict=True)):.1f} h at the runs at a time "
            "above",
            highlight=False,
        )
        return 0
    if args.jobs < 1:
        raise executors.ExecutorError(f"--jobs {args.jobs}: want a number >= 1")

    def jobs_of(sw: sweep_spec.Sweep) -> int:
        return listed.get(sw.path, args.jobs) if sw.path else int(args.jobs)

    def run_sweep(sw: sweep_spec.Sweep, d: Path) -> sweep.Progress:
        n = jobs_of(sw)
        if sweep.pending(sw, d):
            err.print(f"campaign: {sw.name}, {n} run{'s' if n > 1 else ''} at a time", highlight=False)
        execute = executors.side_by_side(n, stop=campaign.should_stop)
        return _sweep_live(sw, d, execute, "local", plots=False, no_live=args.no_live)

    if why := campaign.tree_changed():
        raise sweep_spec.SweepError(f"campaign: {why}: commit them or make them in another worktree, then run again")
    with campaign.claimed():
        for name, what in campaign.restore(specs, this_tree=True):
            err.print(f"campaign: {name}: {what}", highlight=False)
        done = campaign.run(specs, run_sweep, stop=campaign.should_stop, at_a_time=jobs_of)
    stopped = len(done) < len(specs) or any(p.skipped + p.done < p.total for _, p in done)
    why = campaign.tree_changed() if stopped else None
    ended = f"stopped: {why}" if why else "stopped on request" if stopped else "every sweep ran"
    out.print(
        f"campaign: {ended}; `cclab campaign status` says how far each has got",
        highlight=False,
    )
    return 0 if not any(p.failed for _, p in done) else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from controller.results import pool, report

    if args.from_reference and (args.sweep_dir or args.pack):
        raise sweep_spec.SweepError(
            "--from-reference FILE takes no sweep directory and no --pack: it reports what FILE holds"
        )
    if args.from_reference:
        archives = [Path(a) for a in args.from_reference]
        with pool.unpacked(archives) as unpacked:
            dirs = [d for ds in unpacked for d in ds]
            names = pool.labels(archives, unpacked)
            first = archives[0]
            dest = Path(args.out) if args.out else first.parent / first.name.removesuffix(".tar.xz")
            written = report.write(dirs, dest, args.source_hash, everything=args.all_runs, labels=names)
    else:
        dirs = [Path(d) for d in args.sweep_dir]
        if args.pack:  # first: the raw runs are kept even where none can be pooled yet
            out.print(str(pool.pack(dirs, Path(args.pack))))
        out_dir = Path(args.out) if args.out else None
        written = report.write(dirs, out_dir, args.source_hash, everything=args.all_runs)
    for p in written:
        out.print(str(p))
    return 0


def _cmd_clean(_args: argparse.Namespace) -> int:
    done = clean.clean()
    for line in done:
        out.print(f"removed {line}")
    out.print("clean: nothing left behind" if done else "clean: nothing to remove")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from controller.results import plots

    for p in plots.plot_run(Path(args.run_dir)):
        out.print(str(p))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    def progress(msg: str) -> None:
        err.print(f"bench dataplane: {msg}", highlight=False)

    res = bench.dataplane(
        duration_s=args.duration,
        flows=args.flows,
        shaper=args.shaper,
        repeats=args.repeats,
        progress=progress,
        target=args.target,
        host_sysctls=not args.keep_host_sysctls,
    )
    if args.json:
        print(json.dumps(res))
        return 0
    for r in res.get("targets", [res]):
        _print_dataplane(r)
    return 0


def _mbps(x: float | None, fmt: str = ".0f") -> str:
    return "-" if x is None else f"{units.mbps(x):{fmt}} Mbit/s"


def _print_dataplane(r: dict[str, Any]) -> None:
    """One target's `bench dataplane` figures: each rate tried, then the highest accurate one."""
    mbps = _mbps
    out.print(f"{r['target']} ({r['shaper']}), medians of {r['repeats']} runs per rate:")
    for st in r["steps"]:
        runs = st["runs"]
        achieved = ", ".join(mbps(p["achieved_bps"], ".1f").removesuffix(" Mbit/s") for p in runs)
        busy = [p["cpu_busy"] for p in runs if p["cpu_busy"] is not None]
        out.print(
            f"  {mbps(st['rate_bps'], '8.1f')}: {'ok  ' if st['ok'] else 'MISS'} median error "
            f"{st['median_error']:.2%} (achieved {achieved}; CPU busy "
            f"{'-' if not busy else f'{max(busy):.0%}'})"
        )
    ceil = ", ".join(mbps(c).removesuffix(" Mbit/s") for c in r["ceiling_runs_bps"])
    ratio = r["ratio_to_ceiling"]
    out.print(
        f"{r['target']}: max accurate rate (<= {r['rate_error_max']:.0%} error, bisection to "
        f"{r['resolution']:.0%}): {mbps(r['max_accurate_rate_bps'])} = "
        f"{'-' if ratio is None else f'{ratio:.1%}'} of the ceiling {mbps(r['ceiling_bps'])} "
        f"(median of {ceil}, runs at {mbps(r['ceiling_rate_bps'])}) measured in the same run"
    )


def _cmd_bench_fpga(args: argparse.Namespace) -> int:
    from controller.bench import fpga_element

    def progress(msg: str) -> None:
        err.print(f"bench fpga: {msg}", highlight=False)

    if args.demo:
        res = fpga_element.demo(Path(args.dir) if args.dir else None, progress)
        if args.json:
            print(json.dumps(res))
            return 0
        _print_fpga_demo(res)
        return 0
    res = {"model": fpga_element.model_speed(args.model_runs)}
    m = res["model"]
    out.print(
        f"model: {m['cycles_per_s'] / 1e6:.2f} M simulated cycles/s (median of {len(m['runs_cycles_per_s'])}: "
        f"{min(m['runs_cycles_per_s']) / 1e6:.2f}-{max(m['runs_cycles_per_s']) / 1e6:.2f}), "
        f"{m['headroom']:.2f} x the {m['clock_khz'] / 1000:g} MHz clock the harness keeps",
        soft_wrap=True,
    )
    res.update(fpga_element.carried(args.duration, args.flows, args.repeats, progress))
    if args.json:
        print(json.dumps(res))
        return 0
    for target in ("fpga-sim", "bmv2"):
        _print_dataplane(res[target])
    return 0


def _print_fpga_demo(res: dict[str, Any]) -> None:
    for r in res["runs"]:
        ratios = [x for x in r["payload_over_goodput"].values() if x is not None]
        lag = "" if r["max_lag_ms"] is None else f", model at most {r['max_lag_ms']:.1f} ms behind"
        drops = "; ".join(f"{k.split('.')[0] if '.' in k else 'l1'} {v[0]} in [{v[1]}, {v[2]}]"
                          for k, v in r["random_drops"].items())  # fmt: skip
        out.print(
            f"  {r['dataplane']:8} seed {r['seed']}: Jain {r['jain']:.3f}, utilization {r['utilization']:.3f}, "
            f"payload/goodput {min(ratios, default=0):.4f}-{max(ratios, default=0):.4f}, random drops {drops}"
            f"{lag}{'' if r['fidelity_ok'] else ' (fidelity: spec not fully met)'}",
            soft_wrap=True,
        )
    for dp, t in res["targets"].items():
        lo, hi = t["jain_ci95"]
        rng = t["payload_over_goodput_range"]
        out.print(
            f"{dp}: n = {t['n']}, Jain {t['jain_mean']:.3f} (95 % interval "
            f"{'-' if lo is None else f'{lo:.3f}-{hi:.3f}'}); in-network after headers over iperf3's goodput "
            f"{'-' if rng is None else f'{rng[0]:.4f}-{rng[1]:.4f}'} "
            f"({'within' if t['payload_within_2pct'] else 'NOT within'} 2 %); random drops in their 99 % "
            f"interval in {t['loss_ok_runs']} of {t['n']} runs",
            soft_wrap=True,
        )
    out.print(f"Jain's intervals overlap: {res['jain_intervals_overlap']} ({res['sweep_dir']})")


def _cmd_bench_ovs(args: argparse.Namespace) -> int:
    from controller import bench

    res = bench.fabric_ceiling(
        seconds=args.seconds, repeats=args.repeats, progress=lambda m: err.print(f"bench ovs: {m}", highlight=False)
    )
    if args.json:
        print(json.dumps(res))
        return 0
    for sw in ("linux", "ovs"):
        runs = ", ".join(f"{units.mbps(r['goodput_bps']):.0f}" for r in res["runs"] if r["switches"] == sw)
        name = "Linux bridges" if sw == "linux" else f"OVS ({res['ovs_datapath']} datapath)"
        out.print(
            f"  {name:28} {units.mbps(res[f'{sw}_ceiling_bps']):7.0f} Mbit/s  (runs {runs}; CPU busy "
            f"{res[f'{sw}_cpu_busy']:.0%})"
        )
    out.print(
        f"one cubic flow through the unshaped one-pair dumbbell, medians of {res['repeats']} interleaved runs of "
        f"{res['seconds']:g} s; OVS/Linux {res['ovs_over_linux']:.2f}; runs with OVS are refused above "
        f"{res['netdev_limit_mbps']:g} Mbit/s on the userspace datapath"
    )
    return 0


def _cmd_bench_cc(args: argparse.Namespace) -> int:
    def progress(msg: str) -> None:
        err.print(f"bench cc: {msg}", highlight=False)

    res = bench.cc_loopback(seconds=args.seconds, repeats=args.repeats, progress=progress)
    if args.json:
        print(json.dumps(res))
        return 0

    def spread(runs: list[float]) -> str:
        return f"runs {min(runs) / 1e9:.1f}-{max(runs) / 1e9:.1f}"

    out.print(f"  {'reno (built-in)':20} {res['reno_bps'] / 1e9:7.2f} Gbit/s  {'':14} {spread(res['reno_runs_bps'])}")
    for name, r in res["algos"].items():
        out.print(
            f"  {name + ' (eBPF)':20} {r['median_bps'] / 1e9:7.2f} Gbit/s  {r['ratio_to_reno']:6.1%} of reno  "
            f"{spread(r['runs_bps'])}, retransmits {sum(r['retransmits']) / len(r['retransmits']):.0f}/run"
        )
    out.print(f"loopback, medians of {res['repeats']} interleaved runs of {res['seconds']:g} s")
    return 0


def _cmd_bench_delay(args: argparse.Namespace) -> int:
    res = bench.delay(seconds=args.seconds, progress=lambda m: err.print(f"bench delay: {m}", highlight=False))
    if args.json:
        print(json.dumps(res))
        return 0
    for p in res["points"]:
        owd, late = p["one_way_ms"], p["element_late_us"] or {}
        out.print(
            f"  {units.mbps(p['rate_bps']):6.0f} Mbit/s -> {units.mbps(p['achieved_bps']):7.1f} "
            f"(error {p['error']:.2%}); "
            f"one-way p50/p90/max {owd['p50']:.3f}/{owd['p90']:.3f}/{owd['max']:.3f} ms "
            f"(spec {res['one_way_delay_ms']:g}); element late p50/p99 {late.get('p50')}/{late.get('p99')} us, "
            f"drops {p['element_drops']}"
        )
    m = res["max_accurate_rate_bps"]
    out.print(
        f"{res['delay_element']}: highest rate with the one-way delay within {res['one_way_error_max_ms']:g} ms "
        f"of {res['one_way_delay_ms']:g} ms: {'-' if m is None else f'{units.mbps(m):g} Mbit/s'}"
    )
    return 0


def _cmd_bench_sweep(args: argparse.Namespace) -> int:
    jobs = _jobs_list(args.jobs)
    specs = dict(bench.sweep.specs_of(Path(f)) for f in args.spec) if args.spec else None
    if args.runs < 1:
        raise executors.ExecutorError(f"--runs {args.runs}: want a number >= 1")
    res = bench.side_by_side(
        duration_s=args.duration_s,
        runs=args.runs,
        progress=lambda m: err.print(f"bench sweep: {m}", highlight=False),
        specs=specs,
        jobs=jobs,
        keep=args.keep_failed,
    )
    if args.json:
        print(json.dumps(res))
        return 0
    out.print(f"{res['runs']} runs of {res['duration_s']:g} s per N, each in namespaces of its own")
    out.print(f"  {'spec':24} " + "  ".join(f"{f'N = {n}':>22}" for n in jobs), soft_wrap=True)
    for name, points in res["specs"].items():
        cells = [f"{p['runs_per_hour']:6.0f} runs/h {p['fidelity_ok']:2d}/{p['runs']} ok" for p in points]
        out.print(f"  {name:24} " + "  ".join(f"{c:>22}" for c in cells), soft_wrap=True)
    for name, points in res["specs"].items():
        for p in points:
            for why in p["failed"]:
                out.print(f"  {name} at N = {p['jobs']}, {why}", soft_wrap=True)
    out.print(
        "the largest N whose pass rate is that of N = 1 is what this machine holds (measure it quiet)", soft_wrap=True
    )
    return 0


def _jobs_list(text: str) -> tuple[int, ...]:
    """--jobs of `cclab bench sweep`: "1,2,4" -> (1, 2, 4), or a one-line error."""
    try:
        jobs = tuple(int(j) for j in text.split(","))
    except ValueError:
        jobs = ()
    if not jobs or min(jobs) < 1 or list(jobs) != sorted(set(jobs)):
        raise executors.ExecutorError(f"--jobs {text}: want rising numbers >= 1, comma-separated, e.g. 1,2,4")
    return jobs


def _cmd_bench_setup(args: argparse.Namespace) -> int:
    shapes = (("dumbbell", args.pairs), ("parking_lot", args.cross)) if args.topology == "all" else None
    results = []
    for topology, size in shapes or ((args.topology, args.pairs if args.topology == "dumbbell" else args.cross),):
        res = bench.setup_teardown(topology=topology, size=size, repeats=args.repeats)
        results.append(res)
        if args.json:
            print(json.dumps(res))
            continue
        what = "dumbbell" if topology == "dumbbell" else f"{res['emulated_links']}-bottleneck parking lot"
        out.print(
            f"{what} with {res['hosts']} hosts: set-up {res['setup_s']:.2f} s + teardown {res['teardown_s']:.2f} s "
            f"= {res['total_s']:.2f} s (median of {len(res['runs_total_s'])})"
        )
    return 0


def _cmd_bench_controller(args: argparse.Namespace) -> int:
    for links in sorted(set(args.links)):
        res = bench.controller_polling(flows=args.flows, rate_hz=args.rate_hz, seconds=args.seconds, links=links)
        if args.json:
            print(json.dumps(res))
            continue
        out.print(
            f"monitor polling {res['flows']} flows on {links} emulated link{'s' if links > 1 else ''} at "
            f"{res['rate_hz']:g} Hz: {res['cpu_share_of_one_core']:.1%} of one core "
            f"({res['ms_per_poll']:.2f} ms CPU per poll, {res['polls']} polls)"
        )
    return 0


def doctor_table(caps: list[capabilities.Capability]) -> Table:
    """`cclab doctor`'s table: one row per capability, yes/no, why, and the fix for a no."""
    where = "the lab VM" if capabilities.in_lab_vm() else "this machine"
    t = Table(title=f"cclab doctor: {where}, kernel {system.kernel_release()}", title_justify="left")
    t.add_column("capability", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("why, and the fix", overflow="fold")
    for c in caps:
        text = Text(c.reason)
        if c.fix:
            text.append(f"\nfix: {c.fix}", style="bold")
        t.add_row(c.key, Text("yes", style="green") if c.ok else Text("no", style="red"), text)
    t.caption = f"{sum(c.ok for c in caps)} of {len(caps)} yes; --json for scripts"
    return t


def _cmd_doctor(args: argparse.Namespace) -> int:
    caps = capabilities.probe_all()
    if args.json:
        doc = {
            "kernel": system.kernel_release(),
            "in_lab_vm": capabilities.in_lab_vm(),
            "capabilities": [c.to_json() for c in caps],
        }
        print(json.dumps(doc))
        return 0
    out.print(doctor_table(caps))
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from controller.spec import schema

    text = json.dumps(schema.spec_schema(), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        out.print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _cmd_cc(args: argparse.Namespace) -> int:
    if args.cc_cmd == "list":
        for st in cc.status():
            mark = "loaded" if st.loaded else "-"
            who = "cclab" if st.ours else "kernel"
            out.print(f"{st.name:14} {who:7} {mark:7} {st.form}")
        return 0
    if args.cc_cmd == "build":
        return _cc_build(Path(args.source), args.out)
    if args.cc_cmd == "load":
        loaded = cc.load(args.names)
        for n in args.names:
            out.print(f"{n}: {'loaded (eBPF struct_ops)' if n in loaded else 'already available'}")
        return 0
    cc.unload(args.names)
    out.print(f"unloaded: {', '.join(args.names)}")
    return 0


def _cc_build(source: Path, out_arg: str | None) -> int:
    """`cclab cc build X.bpf.c`: compile an algorithm of one's own as a run would, with the compiler's whole output."""
    name = algos.own_name(source)
    if name is None:
        raise cc.CcError(
            f"{source}: the file's name must be <name>.bpf.c, <name> of a-z, 0-9 and _ (at most 15): its algorithm's"
        )
    if not source.is_file():
        raise cc.CcError(f"{source}: no such file")
    out_path = Path(out_arg) if out_arg else source.with_name(f"{name}.bpf.o")
    try:
        cc.build_own(source, out_path)
    except cc.BuildError as exc:
        for line in exc.lines:
            out.print(line, markup=False, highlight=False)
        raise
    out.print(
        f'built {out_path}: a spec runs it as algo = "{source.name}" (registered as {name})',
        highlight=False,
        soft_wrap=True,
    )
    return 0


def _cmd_p4(args: argparse.Namespace) -> int:
    """`cclab p4 build X.p4`: compile a v1model program of one's own as a bmv2 run would, with the compiler's
    whole output, and say whether cclab's bmv2 driver can drive it."""
    from controller.dataplane import bmv2

    source = Path(args.source)
    if source.suffix != ".p4":
        raise bmv2.Bmv2Error(f"{source}: a v1model program's source ends in .p4")
    out_dir = Path(args.out) if args.out else source.parent / "build"
    try:
        prog = bmv2.compile_program(source, out_dir)
    except bmv2.CompileError as exc:
        for line in exc.lines:
            out.print(line, markup=False, highlight=False)
        raise
    for line in prog.output:
        out.print(line, markup=False, highlight=False)
    problems = bmv2.program_problems(prog.p4info)
    for line in problems:
        out.print(f"  {line}", markup=False, highlight=False)
    if problems:
        raise bmv2.Bmv2Error(
            f"{source} compiles, but cclab's bmv2 driver cannot drive it ({len(problems)} problem(s) above): keep "
            "the names of p4/v1model/bottleneck.p4's tables, actions and counters"
        )
    out.print(f'built {prog.json} and {prog.p4info.name}: a bmv2 spec runs it as p4_program = "{source.name}"',
              highlight=False, soft_wrap=True)  # fmt: skip
    if bmv2.program_problems(prog.p4info, red=True):
        out.print("  (it has no RED table, red_params: a spec with a RED queue is refused with it)", highlight=False)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cclab",
        description="cclab: a testbed for TCP congestion control. Emulated bottlenecks (rate, queue, delay, "
        "random loss) measured in the network: per-flow throughput, Jain's index, drops by cause.",
        epilog="Run as root. Start with: cclab run experiments/demo.toml",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log what cclab does (to stderr)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "run",
        help="run an experiment spec (TOML)",
        description="Run an experiment: build the "
        "network, program the bottleneck, run the flows with a live table, write results/<run>/.",
    )
    r.add_argument("spec", help="experiment spec, e.g. experiments/demo.toml")
    r.add_argument(
        "--allow-no-delay",
        action="store_true",
        help="on a kernel without netem, run a spec with delay anyway (recorded in fidelity notes)",
    )
    r.add_argument(
        "--vm",
        action="store_true",
        help="run it in the qemu lab VM (Debian's stock kernel: netem, .ko modules); `make vm` builds the image",
    )
    r.add_argument("--results", metavar="DIR", help="results root (default: results/ in the repository)")
    r.add_argument("--no-live", action="store_true", help="no live table (for logs and scripts)")
    r.add_argument("--no-plots", action="store_true", help="skip plots/*.png")
    r.add_argument("--json", action="store_true", help="print summary.json on stdout at the end")
    r.add_argument("--keep-host-sysctls", action="store_true", help=KEEP_SYSCTLS_HELP)
    r.set_defaults(func=_cmd_run)

    c = sub.add_parser("check", help="validate a spec without running it")
    c.add_argument("spec")
    c.set_defaults(func=_cmd_check)

    d = sub.add_parser(
        "doctor",
        help="what this machine can do and why: data planes, delay, algorithm forms, lab VM, OVS; the fix for each no",
        description="Probe this machine the way `cclab run` does (the same probes decide what a run may do) and "
        "print one table: each capability, yes or no, why, and the fix for each missing piece.",
    )
    d.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    d.set_defaults(func=_cmd_doctor)

    sc = sub.add_parser(
        "schema",
        help="the JSON Schema of a spec, for editors that complete and check TOML (taplo, Even Better TOML)",
        description="Print the JSON Schema of an experiment spec (with [sweep]), generated from the typed "
        "settings a spec is validated into. spec.schema.json in the repository is its output; .taplo.toml "
        "points editors at it.",
    )
    sc.add_argument("--out", metavar="FILE", help="write it to FILE instead of stdout")
    sc.set_defaults(func=_cmd_schema)

    sw = sub.add_parser(
        "sweep",
        help="run a sweep spec: every grid point x repetition, resumable",
        description="Run every point x repetition of a spec's [sweep] grid, each as its own experiment "
        "(`cclab run`), into a sweep directory with sweep.json. Run it again to resume: complete runs are "
        "skipped, incomplete ones redone in a new run directory.",
    )
    sw.add_argument("spec", help="spec with a [sweep] table")
    sw.add_argument("--dir", metavar="DIR", help="sweep directory (default results/sweeps/<name>)")
    sw.add_argument(
        "--executor",
        choices=executors.EXECUTORS,
        default="local",
        help="where runs go: local (default), vm (each run in the qemu lab VM: netem, .ko modules), dask",
    )
    sw.add_argument("--scheduler", metavar="ADDR", help="Dask scheduler address for --executor dask")
    _run_options(sw, "default 1; local only")
    sw.add_argument("--plots", action="store_true", help="draw each run's plots/*.png (seconds per run)")
    sw.set_defaults(func=_cmd_sweep)

    cp = sub.add_parser(
        "campaign",
        help="sweeps run one after another for hours, resumable, stopped between runs",
        description="A campaign file lists sweep specs (`sweeps = [...]`, relative to it; an entry "
        '{spec = "...", jobs = N} runs N of that sweep\'s runs side by side); `run` takes each in '
        "turn into its default directory, skipping what is complete, so running it again goes on where it "
        "stopped; `stop` lets the runs under way finish and starts no other; `status` reads the directories; "
        "`save` packs each sweep's complete runs into results/reference/campaign/ (commit them: a campaign "
        "outlives the machine), and `restore` unpacks them into a new checkout's sweep directories; `report` "
        "reports each sweep from its archive alone and gathers every claim's verdict into one table.",
    )
    csub = cp.add_subparsers(dest="campaign_cmd", required=True, metavar="ACTION")
    for name, text in (
        ("run", "run the campaign's sweeps in turn (resumes)"),
        ("status", "runs complete, fidelity failures and hours left, per sweep"),
        (
            "save",
            "pack each sweep's new complete runs into results/reference/campaign/<sweep>[.K].tar.xz (45 MB parts)",
        ),
        ("restore", "unpack those archives into sweep directories that hold no run yet"),
        ("report", "report each sweep from its archive and print every claim's verdict, n and fidelity passes"),
    ):
        c = csub.add_parser(name, help=text)
        c.add_argument(
            "file",
            nargs="?",
            default=str(campaign.DEFAULT),
            help="campaign file (default experiments/papers.campaign.toml)",
        )
        if name == "run":
            _run_options(
                c,
                "for the sweeps whose entry names no `jobs`; default 1; `cclab bench sweep --spec` says how many "
                "this machine holds",
            )
        if name == "report":
            c.add_argument(
                "--write",
                metavar="MD",
                help="put the table into MD between its two marker lines (EXPERIMENTS.md) instead of printing it",
            )
            c.add_argument("--no-plots", action="store_true", help="the tables and verdicts of each report, no PNGs")
            c.add_argument(
                "--again",
                action="store_true",
                help="report every sweep again, also one whose report was made from today's archives, claims and code",
            )
        if name == "status":
            c.add_argument(
                "--jobs", type=int, default=1, metavar="N", help="as `run --jobs`, for the hours at a time (default 1)"
            )
    cs = csub.add_parser("stop", help="the running campaign finishes its runs under way and starts no other")
    cs.add_argument("--wait", action="store_true", help="return when it has stopped")
    cs.add_argument(
        "--now",
        action="store_true",
        help="end the runs under way too (SIGTERM: each tears down, marked incomplete; `run` redoes them)",
    )
    cp.set_defaults(func=_cmd_campaign)

    rp = sub.add_parser(
        "report",
        help="tables (mean, 95 %% CI, n) and plots of a sweep, from its runs' files",
        description="Pool the complete runs of one or more sweep directories of a sweep (clean tree, one source "
        "hash, fidelity passed), and write CSV tables, PNG plots and the verdicts of the spec's claims file "
        "(docs/claims.md) under report/.",
    )
    rp.add_argument("sweep_dir", nargs="*", help="sweep directories of one sweep, pooled")
    rp.add_argument("--out", metavar="DIR", help="where to write (default FIRST_SWEEP_DIR/report)")
    rp.add_argument("--source-hash", metavar="HASH", help="pool the runs with this source hash (default: most runs')")
    rp.add_argument(
        "--all-runs",
        action="store_true",
        help="take every complete run, dirty tree, other hash or failed fidelity too (a look; no verdicts)",
    )
    rp.add_argument("--pack", metavar="FILE", help="also write what the report needs as FILE (.tar.xz)")
    rp.add_argument(
        "--from-reference",
        metavar="FILE",
        action="append",
        help="regenerate the report from a .tar.xz that --pack wrote (repeat it for each part of a campaign's archive)",
    )
    rp.set_defaults(func=_cmd_report)

    cl = sub.add_parser(
        "clean",
        help="remove what a crashed run left behind (like mn -c)",
        description="Kill Mininet host shells and iperf3, delete the dumbbell's bridges and ports, "
        "cclab's pinned BPF objects and registered algorithms.",
    )
    cl.set_defaults(func=_cmd_clean)

    pl = sub.add_parser("plot", help="(re)draw plots/*.png of a run directory from its files")
    pl.add_argument("run_dir")
    pl.set_defaults(func=_cmd_plot)

    b = sub.add_parser("bench", help="benchmarks that print figures")
    bsub = b.add_subparsers(dest="bench_cmd", required=True, metavar="BENCH")
    bd = bsub.add_parser(
        "dataplane", help="highest rate emulated within 2 %% error (bisection), as a share of the unshaped ceiling"
    )
    bd.add_argument("--json", action="store_true", help="print one JSON line")
    bd.add_argument("--duration", type=float, default=6.0, help="seconds per point (default 6)")
    bd.add_argument("--flows", type=int, default=4, help="saturating cubic flows (default 4)")
    bd.add_argument("--shaper", choices=spec.SHAPERS, default="htb", help="kernel rate limiter (default htb)")
    bd.add_argument("--repeats", type=int, default=3, help="runs per rate; the median judges it (default 3)")
    bd.add_argument("--keep-host-sysctls", action="store_true", help=KEEP_SYSCTLS_HELP)
    bd.add_argument(
        "--target",
        choices=(*bench.TARGETS, "all"),
        default="kernel",
        help="data plane to measure; all: each in one run, one JSON (default kernel)",
    )
    bd.set_defaults(func=_cmd_bench)

    bf = bsub.add_parser(
        "fpga",
        help="the FPGA element in the loop: model speed, the rate it carries within 2 %% beside bmv2's; "
        "--demo: the demo on it beside the kernel target",
    )
    bf.add_argument("--json", action="store_true", help="print one JSON line")
    bf.add_argument("--duration", type=float, default=6.0, help="seconds per point (default 6)")
    bf.add_argument("--flows", type=int, default=4, help="saturating cubic flows (default 4)")
    bf.add_argument("--repeats", type=int, default=3, help="runs per rate; the median judges it (default 3)")
    bf.add_argument("--model-runs", type=int, default=5, help="runs of the model alone (default 5)")
    bf.add_argument(
        "--demo", action="store_true", help="run experiments/fpga_demo.toml (3 runs per target) and judge it"
    )
    bf.add_argument("--dir", help="with --demo: the sweep directory (default results/sweeps/fpga_demo)")
    bf.set_defaults(func=_cmd_bench_fpga)

    bc = bsub.add_parser("cc", help="each cclab algorithm's loopback throughput beside built-in reno")
    bc.add_argument("--json", action="store_true", help="print one JSON line")
    bc.add_argument("--seconds", type=float, default=3.0, help="seconds per run (default 3)")
    bc.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    bc.set_defaults(func=_cmd_bench_cc)

    bl = bsub.add_parser("delay", help="the delay element's accuracy under load and its ceiling (40 ms each way)")
    bl.add_argument("--json", action="store_true", help="print one JSON line")
    bl.add_argument("--seconds", type=float, default=8.0, help="seconds per rate (default 8)")
    bl.set_defaults(func=_cmd_bench_delay)

    bs = bsub.add_parser("setup", help="seconds to set up and tear down a network with its emulated links")
    bs.add_argument("--json", action="store_true", help="print one JSON line per network")
    bs.add_argument(
        "--topology", choices=("dumbbell", "parking_lot", "all"), default="all", help="which network (default all)"
    )
    bs.add_argument("--pairs", type=int, default=16, help="dumbbell sender/receiver pairs (default 16)")
    bs.add_argument(
        "--cross",
        type=int,
        default=5,
        help="parking lot (3 bottlenecks): cross pairs per bottleneck (default 5: 32 hosts)",
    )
    bs.add_argument("--repeats", type=int, default=3, help="repetitions (default 3)")
    bs.set_defaults(func=_cmd_bench_setup)
    bm = bsub.add_parser("controller", help="CPU the monitor needs to poll many flows' counters")
    bm.add_argument("--json", action="store_true", help="print one JSON line")
    bm.add_argument("--flows", type=int, default=1000, help="flows in the counter map (default 1000)")
    bm.add_argument("--rate-hz", type=float, default=10.0, help="polls per second (default 10)")
    bm.add_argument("--seconds", type=float, default=10.0, help="how long to poll (default 10)")
    bm.add_argument(
        "--links", type=int, nargs="+", default=[1, 3], help="emulated links every flow crosses (default: 1 and 3)"
    )
    bm.set_defaults(func=_cmd_bench_controller)
    bo = bsub.add_parser("ovs", help='what OVS switches carry beside Linux bridges (switches = "ovs")')
    bo.add_argument("--json", action="store_true", help="print one JSON line")
    bo.add_argument("--seconds", type=float, default=8.0, help="seconds per run (default 8)")
    bo.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    bo.set_defaults(func=_cmd_bench_ovs)
    bw = bsub.add_parser(
        "sweep",
        help="runs per hour and fidelity pass rate at 1, 2, 3 runs side by side",
        description="How many runs side by side this machine holds: the same runs at each N, runs per hour and "
        "the fidelity pass rate (and the checks that failed). The largest N whose pass rate is that of N = 1 is "
        "what `--jobs` (and a campaign sweep's `jobs`) may be. Measure on a quiet machine.",
    )
    bw.add_argument("--json", action="store_true", help="print one JSON line")
    bw.add_argument(
        "--spec",
        action="append",
        metavar="FILE",
        help="a spec or sweep spec to measure (a sweep: run i is grid point i, repetition by repetition); "
        "repeatable (default: the demo and the BTBE paper's path at 200 Mbit/s)",
    )
    bw.add_argument("--jobs", default="1,2,3", help="the N to measure, comma-separated (default 1,2,3)")
    bw.add_argument("--duration-s", type=float, default=20.0, help="seconds per run, replacing the spec's (default 20)")
    bw.add_argument("--runs", type=int, default=6, help="runs per spec and N (default 6; below N, N never has N going)")
    bw.add_argument(
        "--keep-failed",
        type=Path,
        metavar="DIR",
        help="where the directories of the runs that failed stay, DIR/s<spec>-n<N>/r<i> (default "
        "results/bench-sweep/<UTC time>; made only if one failed)",
    )
    bw.set_defaults(func=_cmd_bench_sweep)

    k = sub.add_parser("cc", help="congestion-control algorithms: list, load, unload")
    ksub = k.add_subparsers(dest="cc_cmd", required=True, metavar="ACTION")
    ksub.add_parser("list", help="what the kernel offers and what cclab can load")
    kb = ksub.add_parser(
        "build",
        help="compile a congestion control of your own (NAME.bpf.c, struct_ops) as a run would; no root needed",
        description="Compile NAME.bpf.c with the compiler, flags and headers of cclab's own eBPF algorithms "
        '(hosts/cc), printing the compiler\'s whole output. A spec runs it with algo = "NAME.bpf.c".',
    )
    kb.add_argument("source", metavar="NAME.bpf.c")
    kb.add_argument("-o", "--out", metavar="FILE", help="the object to write (default NAME.bpf.o beside the source)")
    for name, text in (("load", "register cclab algorithms (eBPF struct_ops here)"), ("unload", "unregister them")):
        kp = ksub.add_parser(name, help=text)
        kp.add_argument("names", nargs="+", metavar="NAME", choices=spec.CCLAB_ALGOS + spec.KERNEL_ALGOS)
    k.set_defaults(func=_cmd_cc)
    p4 = sub.add_parser("p4", help="BMv2 programs of your own: build one")
    p4sub = p4.add_subparsers(dest="p4_cmd", required=True, metavar="ACTION")
    pb = p4sub.add_parser(
        "build",
        help="compile a v1model program of your own (NAME.p4) as a bmv2 run would; no root needed",
        description='Compile NAME.p4 with p4c-bm2-ss, p4/common/ on the include path (#include "headers.p4"), '
        "printing the compiler's whole output, and check it has the tables, actions and counters cclab's bmv2 "
        'driver writes and reads. A bmv2 spec runs it with p4_program = "NAME.p4".',
    )
    pb.add_argument("source", metavar="NAME.p4")
    pb.add_argument(
        "-o", "--out", metavar="DIR", help="where NAME.json and NAME.p4info.txtpb go (default build/ beside it)"
    )
    p4.set_defaults(func=_cmd_p4)
    lab_cli.add_parser(sub)
    return p


def _run_options(p: argparse.ArgumentParser, jobs_note: str) -> None:
    """--jobs and --no-live, as `cclab sweep` and `cclab campaign run` take them."""
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help=f"runs at a time, each in network and mount namespaces of its own ({jobs_note})",
    )
    p.add_argument("--no-live", action="store_true", help="one line per run instead of the progress bar")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args))
    except EXPECTED as exc:
        # one plain line, never wrapped: scripts and tests read it
        print(f"cclab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cclab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
