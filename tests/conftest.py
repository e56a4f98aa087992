"""Shared test fixtures: capability checks that skip with the reason, leftover detection,
and the one-pair dumbbells the data-plane tests program (kernel target, BMv2 target)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller import clean
from controller.dataplane import Bottleneck, FlowKey, LinkParams, delayline, fpgasim, sysctls
from controller.dataplane.targets import Placement, make_bottleneck
from controller.measure.metrics import binomial_interval
from tests import hostload
from tests.timing import TRIED_AGAIN

REPO = Path(__file__).resolve().parents[1]
CCLAB = [sys.executable, "-m", "controller.cli"]


def experiment_specs(pattern: str = "**/*.toml") -> list[Path]:
    """The specs under experiments/ whose path matches `pattern`: its TOML files but claims and campaign files."""
    from controller.experiment.campaign import CAMPAIGN_SUFFIX
    from controller.results.claims import CLAIMS_SUFFIX

    found = (REPO / "experiments").glob(pattern)
    return sorted(p for p in found if not p.name.endswith((CLAIMS_SUFFIX, CAMPAIGN_SUFFIX)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--p4-program",
        metavar="PATH",
        default=None,
        help="the BMv2 program the bmv2 conformance bed runs: a v1model source (.p4, compiled with p4/common on the "
        "include path) or p4c-bm2-ss's JSON (.json, its NAME.p4info.txtpb beside it); default "
        "p4/v1model/bottleneck.p4 (docs/conformance.md)",
    )


def p4_program(config: pytest.Config) -> Path | None:
    """--p4-program, resolved against the folder pytest was started in; None: cclab's own program."""
    value = config.getoption("p4_program")
    return None if value is None else (config.invocation_params.dir / value).resolve()


#: The level of the tests' binomial intervals for random drops.  Neither data plane's random source can be
#: seeded, and a suite run makes about a dozen such checks, so at 99 % one run in ten would fail by chance; at
#: 1 - 1e-5 (4.4 standard deviations) one in 10,000 does.  A drop probability off by a factor (a threshold in the
#: wrong scale) still falls far outside.
LOSS_LEVEL = 1 - 1e-5


def loss_interval(n: int, p: float) -> tuple[int, int]:
    """The interval the tests hold a count of random drops of n packets at probability p to (LOSS_LEVEL)."""
    return binomial_interval(n, p, LOSS_LEVEL)


P4C = "p4c-bm2-ss"
#: The P4 tools the bmv2 tests need, those missing from PATH (empty: all there).
BMV2_MISSING = [t for t in (P4C, "simple_switch_grpc", "simple_switch_CLI") if shutil.which(t) is None]
BMV2_SKIP_REASON = f"{', '.join(BMV2_MISSING)} not on PATH (install p4c and BMv2 with PI; README: P4 targets)"
#: The simulator the fpga tier's cocotb testbenches run on, missing from PATH (empty: there).
FPGA_MISSING = [t for t in ("iverilog", "vvp") if shutil.which(t) is None]
FPGA_SKIP_REASON = f"{', '.join(FPGA_MISSING)} not on PATH (run `make deps`; fpga/README.md)"


def missing_capability() -> str | None:
    """Why root tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, BPF)"
    for tool in ("tc", "bpftool", "iperf3", "ethtool", "brctl", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run `make deps`)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "kernel has no BTF (/sys/kernel/btf/vmlinux)"
    if not (REPO / "build" / "bottleneck.bpf.o").exists():
        return "build/bottleneck.bpf.o is not built (run `make build`)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable from this Python (use .venv from `make venv`)"
    return None


def panic_is_ours(trace: str) -> bool:
    """Whether a lab VM kernel's panic report runs through cclab's code: a module's function ([tcp_<algo>]) or
    a BPF program; "Modules linked in" lists the loaded ones without brackets and does not count."""
    from controller.spec import CCLAB_ALGOS

    return bool(re.search(rf"\[tcp_({'|'.join(CCLAB_ALGOS)})\]|bpf_prog_", trace))


#: Software emulation's own faults: under QEMU 7.2 CI saw guest kernels oops in no cclab code (a double fault
#: whose saved RFLAGS had reserved bits set, which no CPU pushes; NULL dereferences in the slab allocator and in
#: net_rx_action), a race in multi-threaded TCG that QEMU 8.1 fixed (vm/README.md).  A lab VM test boots once more
#: after such a panic, printing it; a panic whose trace runs through cclab's code fails at once.
_PANIC_SEEN = re.compile(r"the lab VM's kernel panicked .*?; see (\S+/console\.log)")


def _once_more(trace: str, what: str) -> None:
    if panic_is_ours(trace):
        pytest.fail(f"the lab VM's kernel panicked in cclab's code:\n{trace}")
    print(f"\nlab VM: {what}\n{trace}\nlab VM: the panic's trace names no cclab code; booting once more")


def run_in_lab_vm(argv: list[str], **kwargs: Any) -> Any:
    """vm.run_in_vm(argv, ...), once more after a guest panic in no cclab code (software emulation's)."""
    from controller import vm

    try:
        return vm.run_in_vm(argv, **kwargs)
    except vm.GuestPanic as exc:
        _once_more(exc.trace, str(exc))
        return vm.run_in_vm(argv, **kwargs)


@dataclass(frozen=True)
class Run:
    """One `cclab run [--vm] SPEC` from the host: its process, run directory and summary.json."""

    proc: subprocess.CompletedProcess[str]
    run_dir: Path
    summary: dict[str, Any]


def cclab_run(spec: Path, out: Path, vm: bool, timeout: float = 900) -> Run:
    """`cclab run [--vm] SPEC --results OUT --no-plots` in the repository, asserted to exit 0 with one complete
    run directory; with --vm once more after a guest panic in no cclab code (that boot's run directory stays,
    incomplete, and the second boot's is the one returned)."""
    from controller.vm.share import panic_report

    where = "cclab run --vm" if vm else "cclab run"
    argv = [*CCLAB, "run", *(["--vm"] if vm else []), str(spec), "--results", str(out), "--no-plots"]
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    seen = _PANIC_SEEN.search(proc.stdout + proc.stderr) if vm and proc.returncode else None
    if seen is not None:
        _once_more(panic_report(Path(seen.group(1)).parent), seen.group(0))
        before = set(out.iterdir())
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{where}: exit {proc.returncode}:\n{(proc.stdout + proc.stderr)[-2000:]}"
    new = sorted(set(out.iterdir()) - before)
    assert len(new) == 1, f"{where}: expected one new run directory in {out}, got {new}"
    summary = json.loads((new[0] / "summary.json").read_text())
    assert summary["complete"], f"{where}: incomplete: {summary.get('reason')}"
    return Run(proc, new[0], summary)


#: Under CI=true the bmv2, fpga, lab and vagrant tiers must run: a skipped test of theirs is a failure there.
IN_CI = os.environ.get("CI", "").lower() == "true"
CI_TIERS = ("bmv2", "fpga", "lab", "vagrant")
#: tier -> item nodeid -> outcome, for each tier's own count line
_TIER_OUTCOMES: dict[str, dict[str, str]] = {t: {} for t in CI_TIERS}


def lab_vm_missing() -> str | None:
    """Why the qemu lab VM cannot run a test here, or None."""
    from controller import vm

    if os.geteuid() != 0:
        return "needs root (qemu with 9p shares, the VM's image cache)"
    if shutil.which(vm.QEMU) is None:
        return f"{vm.QEMU} is not installed (make vm installs it)"
    try:
        img = vm.image()
    except vm.VmError as exc:
        return str(exc)
    if not img.complete():
        return f"the lab VM image is not built ({img.dir}); run `make vm`"
    if not (REPO / "build" / "bottleneck.bpf.o").exists():
        return "build/bottleneck.bpf.o is not built; run `make build`"
    return None


#: where the shared `cclab run --vm` of experiments/delay_elements.toml lands (tests/test_delay_elements.py and
#: tests/test_vm.py both assert on it: one boot and one 150 s run instead of two)
DELAY_ELEMENTS_VM_OUT = REPO / "build" / "vm-test" / "results-delay-elements" / "netem"


@pytest.fixture(scope="session")
def delay_elements_in_vm() -> Run:
    """experiments/delay_elements.toml run by `cclab run --vm` (netem in the lab VM), once per session."""
    why = lab_vm_missing()
    if why:
        pytest.skip(why)
    return cclab_run(REPO / "experiments" / "delay_elements.toml", DELAY_ELEMENTS_VM_OUT, vm=True)


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: only the tests that will run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_capability()
    if reason is None:
        left = leftovers() if any("root" in item.keywords for item in items) else []
        if left:
            # one clear line instead of a cascade of "File exists" from every fixture
            pytest.exit(
                f"this host holds what an earlier run left behind ({left[0]}, ...); "
                f"remove it with: sudo {REPO}/.venv/bin/cclab clean",
                returncode=3,
            )
        return
    for item in items:
        if "root" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


#: nodeid -> what the host's CPUs did while a test that failed (or errored) ran (tests/hostload.py)
_HOST_DURING_FAILURES: dict[str, str] = {}
_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    before = hostload.snapshot()
    yield
    if item.stash.get(_FAILED, False):
        _HOST_DURING_FAILURES[item.nodeid] = hostload.during(before, hostload.snapshot())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed:
        item.stash[_FAILED] = True
    tier = next((t for t in CI_TIERS if t in item.keywords), None)
    if tier is None:
        return
    outcomes = _TIER_OUTCOMES[tier]
    if hasattr(report, "wasxfail"):  # an expected, reported deviation (xfail strict): it ran
        outcomes[item.nodeid] = "xfailed"
        return
    if report.skipped and IN_CI:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"the {tier} tier must run in CI (CI=true), but this test was skipped: {reason}"
    if report.when == "call" or report.outcome != "passed":
        # a test counts once, by its worst phase: failed > skipped > xfailed > passed
        rank = ("passed", "xfailed", "skipped", "failed")
        prev = outcomes.get(item.nodeid, "passed")
        outcomes[item.nodeid] = max(prev, report.outcome, key=rank.index)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each CI tier's own count, on a line of its own (CI reads it to see the tier ran); then every try that failed
    and was tried again, and why (`on_time`: its emulator late; a lab's handout: beside a run that failed its
    fidelity check); then, for each test that failed, what the host's CPUs did meanwhile."""
    kinds = ("passed", "failed", "skipped", "xfailed")
    for tier, outcomes in _TIER_OUTCOMES.items():
        if not outcomes:
            continue
        counts = {k: sum(1 for v in outcomes.values() if v == k) for k in kinds}
        terminalreporter.write_line(
            f"{tier} tier: passed {counts['passed']}, failed {counts['failed']}, skipped {counts['skipped']}, "
            f"xfailed {counts['xfailed']}"
        )
    for line in TRIED_AGAIN:
        terminalreporter.write_line(f"tried again: {line}")
    for nodeid, line in _HOST_DURING_FAILURES.items():
        terminalreporter.write_line(f"the host while {nodeid} failed: {line}")


def leftovers() -> list[str]:
    """What a run may leave behind: Mininet shells, iperf3, switch ports, pins, qdiscs."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            argv = [a.decode() for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if argv and (
            os.path.basename(argv[0]) in ("iperf3", "cclab-delay", fpgasim.HARNESS)
            or any(a.startswith("mininet:") for a in argv)
        ):
            found.append(f"process {d.name} {' '.join(argv)}")
    if fpgasim.SOCKET_DIR.exists():
        found += [f"file {f}" for f in sorted(fpgasim.SOCKET_DIR.glob("*.sock"))]
    for dev in os.listdir("/sys/class/net"):
        if clean.PORT.match(dev) or clean.BRIDGE.match(dev) or delayline.CAPTURE_DEV.match(dev):
            found.append(f"device {dev}")
    if sysctls.SAVED.exists():
        found.append(f"host sysctls not put back: {sysctls.SAVED.read_text().strip()}")
    pins = Path("/sys/fs/bpf/cclab")
    if pins.exists() and any(pins.iterdir()):
        found.append(f"bpf pins {sorted(p.name for p in pins.iterdir())}")
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    for name in ("bn_enqueue", "bn_link", "bn_qdrop", "dl_egress"):
        if f'"name":"{name}"' in out:
            found.append(f"bpf program {name}")
    return found


@pytest.fixture
def clean_host() -> Iterator[None]:
    """Assert a test leaves nothing behind; clean up after it either way."""
    before = leftovers()
    assert not before, f"host not clean before the test: {before}"
    yield
    after = leftovers()
    if after:
        subprocess.run([*CCLAB, "clean"], cwd=REPO, capture_output=True)
    assert not after, f"left behind: {after}"


# --- the one-pair dumbbell h1 -- s1 == bottleneck == s2 -- r1, per target ---------------------


def pids(exe: str) -> list[str]:
    """Process ids whose argv[0] is `exe` (e.g. a simple_switch_grpc left running)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv0 = (d / "cmdline").read_bytes().split(b"\0")[0].decode()
            except OSError:
                continue
            if os.path.basename(argv0) == exe:
                out.append(d.name)
    return out


@contextmanager
def kernel_dumbbell(
    run_id: str,
    params: LinkParams,
    static_arp: bool = False,
    target: str = "kernel",
    flows: tuple[FlowKey, ...] = (),
    max_lag_ms: int = fpgasim.MAX_LAG_MS,
) -> Iterator[tuple[Any, Bottleneck]]:
    """A one-pair dumbbell of Linux bridges whose s1-eth1 -> s2-eth1 is the kernel target's bottleneck (or
    `target`'s: fpga-sim takes s1-eth1's frames the same way, its harness with lag limit `max_lag_ms`), with the
    host sysctls a run sets (the bridges without netfilter's hooks)."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from controller.network.mininet import load_p4switch_module, load_topology_module

    setLogLevel("error")
    mod = load_topology_module()
    tuned = sysctls.NetworkSysctls(htb_links=target == "kernel")
    topo = mod.Dumbbell(pairs=1)
    net = tuned.build(lambda: Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None))
    dp = make_bottleneck(target, Placement(run_id, "s1-eth1", "s2-eth1", flows))
    if isinstance(dp, fpgasim.FpgaSimBottleneck):
        dp.max_lag_ms = max_lag_ms
    try:
        net.start()
        if static_arp:
            net.staticArp()
        if target == "fpga-sim":  # the harness re-sends raw frames: checksums must be complete
            load_p4switch_module().checksum_offload_off(net.hosts)
        dp.setup(params, seed=7)
        yield net, dp
    finally:
        dp.teardown()
        net.stop()
        tuned.restore()


@contextmanager
def bmv2_dumbbell(
    run_id: str, out: Path, flows: tuple[FlowKey, ...], params: LinkParams, program: Path | None = None
) -> Iterator[tuple[Any, Bottleneck]]:
    """A one-pair dumbbell whose link is a BMv2 switch pl1 running `program` (a .p4 source compiled into out/, or a
    compiled .json; default: p4/v1model/bottleneck.p4), `flows` declared.

    Asserts that no switch runs before, and that none, nor its socket or pidfile, is left after.
    """
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from controller import network
    from controller.dataplane import bmv2
    from controller.experiment import build
    from controller.network import mininet as topology

    assert not pids("simple_switch_grpc"), "a simple_switch_grpc is already running"
    prog = bmv2.program_files(program or bmv2.PROGRAM, out)  # raises CompileError with the compiler's first error
    problems = bmv2.program_problems(prog.p4info)
    assert not problems, f"{program}: not a program the bmv2 driver can drive: {'; '.join(problems)}"
    setLogLevel("error")
    mod = topology.load_topology_module()
    node = topology.load_p4switch_module()
    # the one-pair dumbbell as cclab builds it for bmv2: s1 -- pl1 (BMv2) -- s2, the bottleneck pl1 -> s2
    graph = network.presets.dumbbell(1, network.LinkSpec(rate_mbps=params.rate_bps / 1e6))
    p4 = dict(cls=node.Bmv2Switch, json_path=prog.json, p4info_path=prog.p4info)
    topo = mod.GraphTopo(graph=graph, bmv2=True, p4_params={**p4, "log_dir": out})
    net = Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None, autoSetMacs=True)
    dp: Bottleneck | None = None
    try:
        net.start()
        net.staticArp()
        node.checksum_offload_off(net.hosts)
        sw = net.get("pl1")
        a, back = sw.intf("pl1-eth2"), sw.intf("pl1-eth1")
        routes = build.p4_routes(graph, graph.links[0], sw.ports[a], sw.ports[back])
        place = Placement(run_id, "pl1-eth2", "s2-eth1", flows, switch=sw, bottleneck_port=sw.ports[a], routes=routes)
        dp = make_bottleneck("bmv2", place)
        dp.setup(params, seed=7)
        yield net, dp
    finally:
        if dp is not None:
            dp.teardown()
        net.stop()
    assert not pids("simple_switch_grpc"), "simple_switch_grpc left running after net.stop()"
    left = [p for p in Path("/run/cclab").glob("bmv2-*") if p.suffix in (".sock", ".pid")]
    assert not left, f"switch socket or pidfile left behind: {left}"
