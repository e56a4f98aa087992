"""Inside the lab VM (Debian's stock kernel): what this project's host kernel cannot do.

- cclab's modules build here, against this kernel's own headers, without a
  warning (hosts/cc/build/kmod/<release>/: beside any the host built for its own);
- each of cclab's algorithms with a module form loads as that module
  (hosts/cc/build/kmod/<release>/tcp_<algo>.ko), registers under its name and carries a
  TCP flow between two network namespaces, then unloads;
- the in-tree baselines (westwood, illinois, highspeed) load with modprobe;
- the host-built eBPF struct_ops objects (CO-RE) load against this kernel's BTF;
- a netem-delayed dumbbell run through the real runner applies and measures
  an 80 ms base RTT;
- one segment dropped from a 20 Mbit/s, 10.1 ms flow: the in-tree westwood's
  ssthresh in the recovery is cwnd/2, tcpwplus's BWE * RTTmin / MSS;
- LogWestwood+ climbs back to Wmax on the path of the LogWestwood+ paper §III.

Run by tests/test_vm.py (make vm-test) as ``python3 -m pytest vm/guest_tests``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import tomllib

from controller.vm.baseline import MAX_LIFT_MS, PINGED_TOL_MS, ping_min_rtt_ms
from tests import climb
from tests.timing import TIMER_LATE_MS, on_time

REPO = Path(__file__).resolve().parents[2]
KMOD_DIR = REPO / "hosts" / "cc" / "build" / "kmod" / os.uname().release
BPF_DIR = REPO / "hosts" / "cc" / "build" / "bpf"
SPEC = Path(__file__).with_name("netem-80ms.toml")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: cclab's algorithms, their tunables and defaults: the registry (controller.spec.algos reads it the same way)
REGISTRY = tomllib.loads((REPO / "hosts" / "cc" / "algos.toml").read_text())
CCLAB_ALGOS = tuple(k for k, v in REGISTRY.items() if isinstance(v, dict))
#: the ones with a module form (the registry's forms: cc_lia couples through the MPTCP token, which a module
#: cannot reach)
CCLAB_MODULES = tuple(a for a in CCLAB_ALGOS if "kmod" in REGISTRY[a].get("forms", ("bpf", "kmod")))
BASELINES = ("westwood", "illinois", "highspeed")
FLOW_S = 3
#: RTT the netem spec asks for (2 x 40 ms one way) and the tolerance on it: the fidelity check's 2 ms below, and above
#: PINGED_TOL_MS over pings in the same boot across a veth pair with the same netem delay (software emulation, TCG,
#: lifts every RTT of a boot: 0 to 2.1 ms on a quiet host, measured 80.0, 80.86, 81.75, 82.03, 82.13 ms; more beside a
#: busy core); the summary's own check must then say the run missed its 2 ms
WANT_RTT_MS = 80.0
RTT_TOL_MS = 2.0
#: kfuncs an eBPF shell needs beyond what every struct_ops kernel has (Debian 12's 6.1 lacks these)
NEEDS_KFUNC = {"mptcpw": "bpf_rdonly_cast", "cc_lia": "bpf_rdonly_cast"}
KERNEL_TROUBLE = re.compile(r"BUG:|WARNING:|Oops|general protection|Call Trace")

pytestmark = pytest.mark.vm


def sh(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def available() -> list[str]:
    return AVAILABLE.read_text().split()


def poll(what: str, cond: Any, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.05)


def kernel_kfuncs() -> set[str]:
    """The kernel's BTF function names (kfuncs are among them)."""
    out = sh("bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux").stdout
    return {ln.split("'")[1] for ln in out.splitlines() if "] FUNC '" in ln}


def dmesg() -> list[str]:
    return sh("dmesg").stdout.splitlines()


def del_netns(*names: str) -> None:
    """Delete network namespaces, aborting their TCP sockets first (`ss -K`, the kernel's sock_diag destroy): a
    socket left closing (a FIN not yet acknowledged when the veth between the namespaces went) keeps the namespace
    alive and retransmits into nothing for up to about 100 s, holding its algorithm's module all that time, so that
    the rmmod after it fails."""
    for ns in names:
        sh("ip", "netns", "exec", ns, "ss", "-K", "-t", "-a", check=False)
    for ns in names:
        sh("ip", "netns", "del", ns, check=False)


@contextmanager
def veth_namespaces() -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a veth pair: (client ns, server ns), 10.9.0.1 -> 10.9.0.2."""
    a, b = "cclab-vm-a", "cclab-vm-b"
    sh("ip", "netns", "add", a)
    try:
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", "veth-a", "netns", a, "type", "veth", "peer", "name", "veth-b", "netns", b)
        for ns, dev, ip in ((a, "veth-a", "10.9.0.1/24"), (b, "veth-b", "10.9.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield a, b
    finally:
        del_netns(a, b)


@pytest.fixture
def veth_pair() -> Iterator[tuple[str, str]]:
    with veth_namespaces() as pair:
        yield pair


def iperf_flow(client_ns: str, server_ns: str, algo: str, seconds: float) -> dict[str, Any]:
    """One TCP flow with congestion control algo; iperf3's JSON result."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-B", "10.9.0.2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll(
            "iperf3 server listening",
            lambda: "5201" in sh("ip", "netns", "exec", server_ns, "ss", "-Hltn", "sport", "=", ":5201").stdout,
        )
        argv = ["ip", "netns", "exec", client_ns, "iperf3", "-c", "10.9.0.2", "-t", str(seconds), "-C", algo, "-J"]
        res = json.loads(sh(*argv, timeout=seconds + 30).stdout)
        with suppress(subprocess.TimeoutExpired):  # -1: it closes its sockets and exits once the client is done
            server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert "error" not in res, f"iperf3 -C {algo}: {res.get('error')}"
    return res


#: how long the probe sleeps at a time
TIMER_SLICE_S = 0.002


class TimerLateness:
    """A thread that sleeps TIMER_SLICE_S at a time and counts the wake-ups that come more than TIMER_LATE_MS
    late: the guest's timers firing late, HTB's and netem's with them, as they do when the host takes its CPUs
    from the emulator. The lab VM's measure of running late, for `on_time`."""

    def __init__(self) -> None:
        self.late = 0
        self.worst_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="timer-lateness", daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            time.sleep(TIMER_SLICE_S)
            over_ms = (time.monotonic() - t0 - TIMER_SLICE_S) * 1000
            self.worst_ms = max(self.worst_ms, over_ms)
            if over_ms > TIMER_LATE_MS:
                self.late += 1

    def __enter__(self) -> TimerLateness:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def flow_summary(res: dict[str, Any]) -> dict[str, Any]:
    end = res["end"]
    return {
        "bytes": end["sum_sent"]["bytes"],
        "sender_bps": end["sum_sent"]["bits_per_second"],
        "receiver_bps": end["sum_received"]["bits_per_second"],
        "congestion": end.get("sender_tcp_congestion"),
    }


def test_stock_kernel_with_netem_and_modules(report: dict[str, Any]) -> None:
    want = os.environ.get("CCLAB_VM_KERNEL")
    rel = os.uname().release
    assert want is None or rel == want, f"guest kernel {rel}, image built for {want}"
    assert Path("/proc/modules").exists(), "this kernel takes no modules"
    proc = sh("unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", check=False)
    assert proc.returncode == 0, f"netem unavailable in the lab VM: {proc.stderr.strip()}"
    report["netem_available"] = True
    report["cpus"] = os.cpu_count()


def test_modules_build_against_this_kernel(report: dict[str, Any]) -> None:
    """make -C hosts/cc kmod here, a job per CPU: KDIR is /lib/modules/<release>/build, the image's linux-headers.
    tests/test_vm.py has built them natively in a chroot of this image (controller/vm/kmod.py), so make finds
    them up to date; it compiles here what that did not build, and says how many files it compiled."""
    t0 = time.monotonic()
    proc = sh(
        "make", "-C", str(REPO / "hosts" / "cc"), "kmod", "V=1", f"-j{os.cpu_count() or 1}", check=False, timeout=900
    )
    took = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    warnings = [ln for ln in log.splitlines() if re.search(r"\bwarning:", ln)]
    assert not warnings, "\n".join(warnings)
    for algo in CCLAB_MODULES:
        ko = KMOD_DIR / f"tcp_{algo}.ko"
        vermagic = sh("modinfo", "-F", "vermagic", str(ko)).stdout.split()[:1]
        assert vermagic == [os.uname().release], f"{ko.name}: vermagic {vermagic}"
    report["kmod_build_s"] = round(took, 1)
    report["kmod_compiled_here"] = sum(1 for ln in log.splitlines() if re.match(r"\s*# CC \[M\]", ln))
    print(f"\n  modules built against {os.uname().release}'s headers in {took:.0f} s")


#: the host suite's MPTCP case over two netem paths, which the host's kernel cannot run (no netem there)
MPTCP_NETEM_TEST = "tests/test_cc_mptcp.py::test_two_subflows_share_one_coupling_state[netem]"


def test_coupled_mptcpw_with_netem(report: dict[str, Any], tmp_path: Path) -> None:
    """The host suite's netem case of coupled MPTCPW, run here with the modules just built (so the uncoupled
    tcp_mptcpw.ko is there to choose); its JUnit report says it ran once and passed, nothing skipped.  Its
    subflows and RTTs are the guest's timers' (netem's, HTB's, the path manager's): tried again where they
    fired late, each try in the report."""
    tries: list[dict[str, Any]] = []
    report["mptcp_netem"] = {"tries": tries}
    with TimerLateness() as timers:
        on_time(lambda: _mptcp_netem_try(tmp_path, report, tries, timers), lambda: timers.late, "the lab VM's timers")


def _mptcp_netem_try(tmp: Path, report: dict[str, Any], tries: list[dict[str, Any]], timers: TimerLateness) -> None:
    import xml.etree.ElementTree as ET

    late0 = timers.late
    junit = tmp / f"mptcp-netem-{len(tries) + 1}.xml"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-rA", f"--junitxml={junit}"]
    proc = subprocess.run([*argv, MPTCP_NETEM_TEST], cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    suite = ET.parse(junit).getroot() if junit.exists() else None
    suite = suite[0] if suite is not None and suite.tag != "testsuite" else suite
    counts = (
        {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")} if suite is not None else {}
    )
    failed = next((ln.strip() for ln in out.splitlines() if ln.startswith("E ")), None) if proc.returncode else None
    tries.append({"returncode": proc.returncode, "timers_late": timers.late - late0, "failed": failed})
    report["mptcp_netem"].update(returncode=proc.returncode, counts=counts)
    assert proc.returncode == 0, f"{MPTCP_NETEM_TEST}: exit {proc.returncode}:\n{out[-3000:]}"
    assert counts == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}, f"{counts}\n{out[-3000:]}"


#: how long a module may stay in use after its flow's namespaces are deleted: their sockets go with the namespaces'
#: cleanup, which the kernel does in the background, slower where the VM is emulated beside a busy host
UNLOAD_WAIT_S = 60


def unload(module: str) -> None:
    """rmmod the module once nothing holds it, waiting up to UNLOAD_WAIT_S; else fail naming its reference count (left
    loaded, it would keep its algorithm's name from the tests after it)."""
    try:
        poll(f"rmmod {module}", lambda: sh("rmmod", module, check=False).returncode == 0, UNLOAD_WAIT_S)
    except AssertionError as exc:
        refcnt = Path("/sys/module", module, "refcnt")
        held = refcnt.read_text().strip() if refcnt.exists() else "?"
        raise AssertionError(f"{exc}: still in use ({held} references)") from None


@pytest.mark.parametrize("algo", CCLAB_MODULES)
def test_cclab_module_loads_and_carries_a_flow(algo: str, veth_pair: tuple[str, str], report: dict[str, Any]) -> None:
    ko = KMOD_DIR / f"tcp_{algo}.ko"
    assert ko.exists(), f"{ko} is not built (test_modules_build_against_this_kernel builds it)"
    assert algo not in available(), f"{algo} is registered before the test"
    before = len(dmesg())
    sh("insmod", str(ko))
    try:
        assert algo in available(), f"insmod {ko.name}: {algo} not in {available()}"
        declared = REGISTRY[algo].get("params", {})
        sysfs = Path("/sys/module") / f"tcp_{algo}" / "parameters"
        got = {k: {"Y": "1", "N": "0"}.get(v, v) for k in declared for v in [(sysfs / k).read_text().strip()]}
        assert got == {k: str(p["default"]) for k, p in declared.items()}, "module defaults vs hosts/cc/algos.toml"
        res = flow_summary(iperf_flow(*veth_pair, algo, FLOW_S))
        assert res["congestion"] in (None, algo), f"iperf3 ran {res['congestion']}, not {algo}"
        assert res["bytes"] > 1_000_000, f"{algo} carried only {res['bytes']} bytes in {FLOW_S} s"
    finally:
        del_netns(*veth_pair)
        unload(f"tcp_{algo}")
    assert algo not in available(), f"{algo} still registered after rmmod"
    trouble = [ln for ln in dmesg()[before:] if KERNEL_TROUBLE.search(ln)]
    assert not trouble, f"kernel complained while {algo} ran: {trouble[:5]}"
    report["modules"][algo] = {"form": "ko", **res}
    print(f"\n  module tcp_{algo}.ko: loaded, {res['receiver_bps'] / 1e6:.0f} Mbit/s over veth, unloaded")


@pytest.mark.parametrize("algo", BASELINES)
def test_intree_baseline_modprobes(algo: str, veth_pair: tuple[str, str], report: dict[str, Any]) -> None:
    sh("modprobe", f"tcp_{algo}")
    assert algo in available(), f"modprobe tcp_{algo}: not in {available()}"
    res = flow_summary(iperf_flow(*veth_pair, algo, 1))
    assert res["bytes"] > 100_000, f"{algo} carried only {res['bytes']} bytes"
    report["baselines"][algo] = res
    print(f"\n  in-tree {algo}: modprobed, {res['receiver_bps'] / 1e6:.0f} Mbit/s over veth")


@pytest.mark.parametrize("algo", CCLAB_ALGOS)
def test_host_built_ebpf_registers(algo: str, report: dict[str, Any]) -> None:
    """CO-RE: the objects built against the host kernel's BTF relocate to this kernel's."""
    obj = BPF_DIR / f"{algo}.bpf.o"
    assert obj.exists(), f"{obj} is not built (make build on the host)"
    proc = sh("bpftool", "struct_ops", "register", str(obj), check=False)
    try:
        first_error = next((ln for ln in proc.stderr.splitlines() if ln.strip()), f"exit {proc.returncode}")
        report["ebpf"][algo] = "registers" if proc.returncode == 0 else f"does not register: {first_error}"
        if proc.returncode != 0 and algo in NEEDS_KFUNC and NEEDS_KFUNC[algo] not in kernel_kfuncs():
            # the .ko form is this kernel's way to run it (test_cclab_module_loads_and_carries_a_flow)
            assert NEEDS_KFUNC[algo] in proc.stderr, proc.stderr
            kfunc, rel = NEEDS_KFUNC[algo], os.uname().release
            pytest.xfail(f"{algo}.bpf.o needs the {kfunc} kfunc (Linux 6.2+); {rel} lacks it")
        assert proc.returncode == 0, f"bpftool struct_ops register {obj.name}: {proc.stderr.strip()[-600:]}"
        assert algo in available(), f"{algo} registered but not in {available()}"
    finally:
        sh("bpftool", "struct_ops", "unregister", "name", algo, check=False)


def test_netem_dumbbell_run_measures_80ms_rtt(veth_pair: tuple[str, str], report: dict[str, Any]) -> None:
    for ns, dev in zip(veth_pair, ("veth-a", "veth-b")):
        sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{WANT_RTT_MS / 2:g}ms")
    pinged_ms = ping_min_rtt_ms(veth_pair[0], "10.9.0.2")
    del_netns(*veth_pair)
    assert WANT_RTT_MS <= pinged_ms <= WANT_RTT_MS + MAX_LIFT_MS, (
        f"pings over {WANT_RTT_MS:g} ms of netem: {pinged_ms} ms"
    )
    # the run's rate and RTT are the guest kernel's timers' (HTB's, netem's): tried again where they fired late
    tries: list[dict[str, Any]] = []
    with TimerLateness() as timers:
        try:
            on_time(lambda: _netem_run(pinged_ms, report, tries, timers), lambda: timers.late, "the lab VM's timers")
        finally:
            report.setdefault("netem", {})["tries"] = tries


def _netem_run(pinged_ms: float, report: dict[str, Any], tries: list[dict[str, Any]], timers: TimerLateness) -> None:
    """One `cclab run` of the netem spec and the checks on it; each try's departure rate, the timers' late
    wake-ups meanwhile and its failure, if any, go in `tries`."""
    late0, failed = timers.late, None
    try:
        _netem_checks(pinged_ms, report)
    except AssertionError as exc:
        failed = str(exc)[:300]
        raise
    finally:
        n = report.get("netem", {})
        rate = (n.get("checks") or {}).get("backlogged_rate_over_rate", {})
        tries.append(
            {
                "run_dir": n.get("run_dir"),
                "backlogged_rate_over_rate": rate.get("value"),
                "timers_late": timers.late - late0,
                "timer_late_ms": TIMER_LATE_MS,
                "worst_timer_ms": round(timers.worst_ms, 1),
                "failed": failed,
            }
        )


def _netem_checks(pinged_ms: float, report: dict[str, Any]) -> None:
    results = Path(os.environ.get("CCLAB_VM_RESULTS", REPO / "build" / "vm-test" / "results"))
    results.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "controller.cli", "run", str(SPEC), "--no-live", "--json", "--results", str(results)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, f"cclab run: exit {proc.returncode}: {proc.stderr.strip()[-800:]}"
    summ = json.loads(proc.stdout.strip().splitlines()[-1])
    runs = sorted(results.glob("vm-netem-80ms-*"), key=lambda p: p.stat().st_mtime)
    assert runs, f"no run directory under {results}"
    run_dir = runs[-1]
    b = summ["bottleneck"]
    rtt_check = summ["fidelity"]["checks"].get("base_rtt_ms", {})
    min_rtt = [int(r["min_rtt_us"]) for r in _csv(run_dir / "cwnd.csv") if r.get("min_rtt_us") not in (None, "", "0")]
    base_ms = min(min_rtt) / 1000 if min_rtt else None
    report["netem"] = {
        "run_dir": str(run_dir),
        "delay_applied": b["delay_applied"],
        "rtt_spec_ms": WANT_RTT_MS,
        "base_rtt_ms": rtt_check.get("value"),
        "base_rtt_ms_cwnd_csv": base_ms,
        "pinged_rtt_ms": pinged_ms,
        "achieved_bps": b["achieved_bps"],
        "rate_bps": b["rate_bps"],
        "jain": summ["jain"],
        "flows": [
            {k: f[k] for k in ("id", "algo", "throughput_bps", "iperf_goodput_bps", "queue_drops")}
            for f in summ["flows"]
        ],
        "fidelity": summ["fidelity"]["ok"],
        "notes": summ["fidelity"]["notes"],
        "checks": summ["fidelity"]["checks"],
        "monitor": summ.get("monitor"),
    }
    assert summ["complete"], f"run incomplete: {summ['reason']}"
    assert b["delay_applied"] is True, "the runner did not apply the delay (netem)"
    assert not [n for n in summ["fidelity"]["notes"] if "delay" in n], summ["fidelity"]["notes"]
    assert base_ms is not None, "cwnd.csv has no min_rtt samples"
    assert WANT_RTT_MS - RTT_TOL_MS <= base_ms <= pinged_ms + PINGED_TOL_MS, (
        f"base RTT {base_ms:.2f} ms, spec {WANT_RTT_MS:g} (-{RTT_TOL_MS:g}; at most {PINGED_TOL_MS:g} above the "
        f"{pinged_ms} ms pinged over the same netem delay)"
    )
    within = abs(base_ms - WANT_RTT_MS) <= RTT_TOL_MS
    assert rtt_check.get("ok") is within, f"summary's base_rtt_ms check against a base RTT of {base_ms} ms: {rtt_check}"
    rate_check = summ["fidelity"]["checks"].get("backlogged_rate_over_rate", {})
    assert rate_check.get("ok") is True, f"departure rate while backlogged, under emulated timers: {rate_check}"
    print(
        f"\n  netem run: base RTT {base_ms:.2f} ms (spec {WANT_RTT_MS:g}; pinged {pinged_ms} ms), "
        f"{b['achieved_bps'] / 1e6:.2f} of "
        f"{b['rate_bps'] / 1e6:g} Mbit/s, Jain {summ['jain']:.3f}; {run_dir}"
    )


#: ssthresh against BWE x RTTmin / MSS from the polls either side of each loss (100 ms
#: apart, more than one RTT here: the estimate at the loss lies between them or near)
SSTHRESH_RATIO = (0.85, 1.15)
#: losses in slow start are left out: there the rate doubles per RTT and the filtered
#: estimate lags it by design (LogWestwood+ paper §II), so the rule is checked after it
AFTER_SLOW_START_S = 3.0


def _check_ssthresh_follows_bwe(run_dir: Path, report: dict[str, Any]) -> None:
    """tcpwplus (loaded as a module here) at each loss: ssthresh = BWE * RTTmin / MSS (LogWestwood+ paper §II eq. 5).

    With an 80 ms RTT the rule gives tens of packets, unlike on a host without
    netem where RTTmin is microseconds and ssthresh sits at its floor of 2. The
    state is polled, not traced at the loss, so each ssthresh is held to the band
    spanned by the estimate in the poll before the loss and the poll after it
    (CI once saw the estimate fall from the loss to the next poll: ssthresh 18
    against 12.6 packets after it). A reduction the stack undid as spurious is
    not eq. (5)'s (CI: ssthresh 22 = 3/4 of cwnd 31, cwnd kept, state Open;
    and ssthresh 16 against an estimate of 10).
    """
    rows = [r for r in _csv(run_dir / "ccstate.csv") if r["algo"] == "tcpwplus"]
    cwnd_rows = {r["t_s"]: r for r in _csv(run_dir / "cwnd.csv") if r["algo"] == "tcpwplus"}
    mss = int(next(iter(cwnd_rows.values()))["mss"])

    def undone(before: dict[str, str], r: dict[str, str]) -> bool:
        """The stack undid a reduction it found spurious (DSACKs, timestamps, F-RTO): tcp_undo_cwnd_reduction
        puts back the window W the loss found and prior_ssthresh, which tcp_current_ssthresh made 3/4 of W, and
        the state is Open or Disorder; eq. (5) is not what set it.  W lies between the polls' windows: at least
        the one before (the window grew up to the loss) and at most the one after (the window put back, grown
        since).  A reduction that stood leaves the window near ssthresh, below 4/3 of it."""
        b, a = cwnd_rows.get(before["t_s"]), cwnd_rows.get(r["t_s"])
        if b is None or a is None or a["ca_state"] not in ("0", "1"):
            return False
        ssthresh = int(r["ssthresh_pkts"])
        return any((w >> 1) + (w >> 2) == ssthresh for w in range(int(b["cwnd_pkts"]), int(a["cwnd_pkts"]) + 1))

    def want(r: dict[str, str]) -> float:
        return round(max(2, int(r["bwe_bps"]) / 8 * int(r["rtt_min_us"]) / 1e6 / mss), 1)

    events: list[tuple[float, int, float, float]] = []
    undos: list[tuple[float, int, float, float]] = []
    for before, r in zip(rows, rows[1:]):
        ssthresh = int(r["ssthresh_pkts"])
        if ssthresh < 0x7FFFFFFF and ssthresh != int(before["ssthresh_pkts"]) and float(r["t_s"]) >= AFTER_SLOW_START_S:
            (undos if undone(before, r) else events).append((float(r["t_s"]), ssthresh, want(before), want(r)))
    report["ssthresh_rule"] = {"events (t, ssthresh, BWE*RTTmin/MSS before, after)": events, "undone": undos}
    assert len(events) >= 2, f"only {len(events)} losses after slow start in {run_dir}"
    lo, hi = SSTHRESH_RATIO
    for t, ssthresh, w_before, w_after in events:
        # eq. (5) in whole packets, rounded down (core/cc_common.h cc_bdp_pkts): one packet below the band is the
        # rounding (CI: ssthresh 5 for 6.0 before and after)
        assert lo * min(w_before, w_after) - 1 <= ssthresh <= hi * max(w_before, w_after), (
            f"t = {t} s: ssthresh {ssthresh}, BWE*RTTmin/MSS {w_before} before and {w_after} after ({events})"
        )
    assert max(e[1] for e in events) > 10, f"ssthresh never above 10 packets: the check would be trivial ({events})"


def test_tcpwplus_beside_intree_westwood(report: dict[str, Any]) -> None:
    """tcpwplus is Westwood+ under its own name (the in-tree westwood's estimator; the two differ in when eq. (5)
    applies and in RTT units, test_recovery_ssthresh_westwood_halves_tcpwplus_uses_bwe): beside the kernel's
    westwood on one lossy path they share it, and after each loss its ssthresh follows its estimate."""
    results = Path(os.environ.get("CCLAB_VM_RESULTS", REPO / "build" / "vm-test" / "results"))
    spec = SPEC.with_name("westwood-pair.toml")
    argv = [sys.executable, "-m", "controller.cli", "run", str(spec), "--no-live", "--json", "--results", str(results)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, f"cclab run: exit {proc.returncode}: {proc.stderr.strip()[-800:]}"
    summ = json.loads(proc.stdout.strip().splitlines()[-1])
    tput = {f["algo"]: f["throughput_bps"] for f in summ["flows"]}
    report["westwood_pair"] = {"throughput_bps": tput, "jain": summ["jain"]}
    assert summ["complete"], summ["reason"]
    assert summ["jain"] >= 0.8, f"tcpwplus vs westwood: {tput}, Jain {summ['jain']:.3f}"
    runs = sorted(results.glob("vm-westwood-pair-*"), key=lambda p: p.stat().st_mtime)
    _check_ssthresh_follows_bwe(runs[-1], report)


def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


#: the recovery check's path: one flow, 20 Mbit/s, 10.1 ms RTT (all of it on the data direction)
RECOVERY_RATE = "20mbit"
RECOVERY_DELAY_MS = 10.1
#: the one data segment dropped (the DROP_NTH-th full-size segment of the flow), in congestion avoidance
DROP_NTH = 3000
#: initial ssthresh (a locked route metric): the flow leaves slow start early and meets the drop in CA
ROUTE_SSTHRESH = 30
PROBE = Path(__file__).with_name("recovery_probe.py")


def _jiffy_us() -> int:
    for ln in Path(f"/boot/config-{os.uname().release}").read_text().splitlines():
        if ln.startswith("CONFIG_HZ="):
            return 1_000_000 // int(ln.split("=")[1])
    raise AssertionError("CONFIG_HZ not in the kernel's config")


def _load_algo(algo: str) -> tuple[str, str]:
    """insmod cclab's module or modprobe the in-tree one; returns the unload argv."""
    if algo in CCLAB_ALGOS:
        sh("insmod", str(KMOD_DIR / f"tcp_{algo}.ko"))
    else:
        sh("modprobe", f"tcp_{algo}")
    assert algo in available(), f"{algo} not registered: {available()}"
    return ("rmmod", f"tcp_{algo}")


def _probe_recovery(client_ns: str, server_ns: str, algo: str) -> dict[str, Any]:
    """One flow over the shaped veth with the DROP_NTH-th segment dropped; the probe's JSON.

    Both the shaping and the drop must be past the sender's stack: a drop in
    its own qdiscs is local congestion, which TCP retries without a loss.  So
    netem (rate, delay) is the client's egress with room for any window, and
    the drop is at the server's ingress."""
    a, b = client_ns, server_ns
    sh("ip", "netns", "exec", a, "ethtool", "-K", "veth-a", "tso", "off", "gso", "off")
    sh("ip", "netns", "exec", b, "ethtool", "-K", "veth-b", "gro", "off")
    # a locked route ssthresh is the flow's initial one: with the metrics' ssthresh honoured, and (6.1 reads
    # the route's metrics only through an existing tcp_metrics entry) after one connection has created it
    sh("ip", "netns", "exec", a, "sysctl", "-q", "-w", "net.ipv4.tcp_no_ssthresh_metrics_save=0")
    sh("ip", "-n", a, "route", "add", "10.9.0.2/32", "dev", "veth-a", "ssthresh", "lock", str(ROUTE_SSTHRESH))
    sh("tc", "-n", a, "qdisc", "add", "dev", "veth-a", "root", "netem", "delay", f"{RECOVERY_DELAY_MS}ms",
       "rate", RECOVERY_RATE, "limit", "100000")  # fmt: skip
    sh("tc", "-n", b, "qdisc", "add", "dev", "veth-b", "clsact")
    # full-size data segments to the sink (IP total length 1500 at offset 2); gact drops the DROP_NTH-th
    sh("tc", "-n", b, "filter", "add", "dev", "veth-b", "ingress", "protocol", "ip", "u32",
       "match", "ip", "dport", "5201", "0xffff", "match", "u16", "1500", "0xffff", "at", "2",
       "action", "gact", "pass", "random", "determ", "drop", str(DROP_NTH))  # fmt: skip
    sink = subprocess.Popen(
        ["ip", "netns", "exec", server_ns, sys.executable, str(PROBE), "sink", "10.9.0.2", "5201"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        sh("ip", "netns", "exec", a, sys.executable, str(PROBE), "touch", "10.9.0.2", "5201")
        argv = ["ip", "netns", "exec", a, sys.executable, str(PROBE), "send", "10.9.0.2", "5201", algo, "8"]
        out: dict[str, Any] = json.loads(sh(*argv, timeout=60).stdout)
    finally:
        sink.kill()
        sink.wait()
    return out


def _clean_start(before: dict[str, Any] | None) -> bool:
    """The flow met the dropped segment in congestion avoidance from the route's ssthresh, nothing lost before."""
    return before is not None and before["total_retrans"] == 0 and before["ssthresh"] <= ROUTE_SSTHRESH


@pytest.mark.parametrize("algo", ["westwood", "tcpwplus"])
def test_recovery_ssthresh_westwood_halves_tcpwplus_uses_bwe(algo: str, report: dict[str, Any]) -> None:
    """One segment dropped at 20 Mbit/s, 10.1 ms RTT: during the recovery that follows, the in-tree westwood's
    ssthresh is cwnd/2 (tcp_reno_ssthresh at detection) and tcpwplus's is BWE * RTTmin / MSS (LogWestwood+ paper
    §II eq. (5) at detection).  westwood also reports its RTTmin in whole jiffies."""
    unload = _load_algo(algo)
    try:
        for attempt in (1, 2):
            with veth_namespaces() as pair:
                out = _probe_recovery(*pair, algo)
            if _clean_start(out["before"]) or attempt == 2:
                break
            # beside a busy host the guest's flow has retransmitted before the dropped segment (1, 3 and 4 segments,
            # ssthresh 51, 51 and 37: emulated timers lagging into a timeout) and met the drop from that ssthresh;
            # a clean start is tried once more, then a flow in congestion avoidance at the drop is taken as it is
            print(f"\n  {algo}: the flow retransmitted before the dropped segment ({out['before']}); once more")
    finally:
        poll(f"unload {algo}", lambda: sh(*unload, check=False).returncode == 0 or algo not in available(), 20)
    report.setdefault("recovery", {})[algo] = out
    before, rec = out["before"], out["recovery"]
    assert before and rec, f"{algo}: no recovery seen in the flow: {out}"
    assert before["cwnd"] > before["ssthresh"], f"the flow met the drop in slow start: {before}"
    mss = rec["mss"]
    bdp = 20e6 / 8 * RECOVERY_DELAY_MS / 1e3 / mss
    half = max(before["cwnd"] // 2, 2)
    bwe_rule = None
    if rec["cc_bwe_kbps"]:
        bwe_rule = max(2, int(rec["cc_bwe_kbps"] * 1000 / 8 * rec["cc_rtt_min_us"] / 1e6 / mss))
    print(
        f"\n  {algo}: cwnd {before['cwnd']} at t = {before['t_s']} s, ssthresh in recovery {rec['ssthresh']} "
        f"(cwnd/2 = {half}, BWE*RTTmin/MSS = {bwe_rule}, path BDP {bdp:.1f}); RTTmin it reports "
        f"{rec['cc_rtt_min_us']} us, tcp_info min_rtt {rec['min_rtt_us']} us"
    )
    assert half > bdp + 5, f"cwnd {before['cwnd']} at the drop is too small to tell cwnd/2 from the BDP ({bdp:.1f})"
    if algo == "westwood":
        assert abs(rec["ssthresh"] - half) <= max(2, half // 20), (
            f"westwood: ssthresh {rec['ssthresh']} in recovery, cwnd/2 = {half} ({out})"
        )
        jiffy = _jiffy_us()
        assert rec["cc_rtt_min_us"] % jiffy == 0 and rec["cc_rtt_min_us"] > rec["min_rtt_us"], (
            f"westwood's RTTmin {rec['cc_rtt_min_us']} us is not the path's {rec['min_rtt_us']} us rounded up to "
            f"jiffies of {jiffy} us"
        )
    else:
        assert bwe_rule is not None, f"tcpwplus reported no bandwidth estimate: {rec}"
        assert abs(rec["ssthresh"] - bwe_rule) <= max(2, bwe_rule // 10), (
            f"tcpwplus: ssthresh {rec['ssthresh']} in recovery, BWE*RTTmin/MSS = {bwe_rule} ({out})"
        )
        assert rec["ssthresh"] < half - 5, f"tcpwplus: ssthresh {rec['ssthresh']} is near cwnd/2 = {half}"
        # in us, near the kernel's own min_rtt, which also saw the handshake's small segments (data segments add
        # 0.6 ms of serialization at 20 Mbit/s; measured 0.95 ms apart); westwood's jiffies round up to a tick
        # (4 ms at HZ 250). Software emulation (TCG) lifts both above the path's delay by up to ~2 ms in some boots
        assert rec["cc_rtt_min_us"] >= RECOVERY_DELAY_MS * 1000, f"tcpwplus's RTTmin {rec['cc_rtt_min_us']} us"
        assert 0 <= rec["cc_rtt_min_us"] - rec["min_rtt_us"] <= 2000, (
            f"tcpwplus's RTTmin {rec['cc_rtt_min_us']} us vs tcp_info min_rtt {rec['min_rtt_us']} us"
        )


#: LogWestwood+ paper §III: 100 Mbit/s, 82 ms (a 683-packet pipe), a 50-packet drop-tail queue; from the loss back to
#: the window at the loss the paper's Fig. 3 (ns-2, alpha = 4) shows 1.6 s.  Under software emulation (TCG) the
#: VM forwards about 50 Mbit/s on this path, so the windows saturate near 350 packets, not 733.
CLIMB_RATE_MBPS = 100
CLIMB_RTT_MS = 82
CLIMB_QUEUE_PKTS = 50
#: the flow runs CLIMB_S, and on to CLIMB_MAX_S until it holds the climbs the check asks for: a flow that leaves
#: slow start far below the pipe climbs at Reno's pace for half a minute first (one boot saw its first loss
#: after slow start's at 39 s)
CLIMB_S = 40
CLIMB_MAX_S = 120
PAPER_CLIMB_S = 1.6
PAPER_RTT_MS = 82
#: losses in the first seconds are slow start's overshoot and its aftermath, not the sawtooth
CLIMB_AFTER_S = 5.0


@pytest.fixture
def routed_path() -> Iterator[tuple[str, str, str]]:
    with routed_namespaces() as names:
        yield names


@contextmanager
def routed_namespaces() -> Iterator[tuple[str, str, str]]:
    """Sender, router, receiver namespaces: 10.9.1.1 -> (10.9.1.2 | 10.9.2.2) -> 10.9.2.1."""
    names = ("cclab-cl-a", "cclab-cl-r", "cclab-cl-b")
    a, r, b = names
    try:
        for ns in names:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", "cl-a", "netns", a, "type", "veth", "peer", "name", "cl-ra", "netns", r)
        sh("ip", "link", "add", "cl-b", "netns", b, "type", "veth", "peer", "name", "cl-rb", "netns", r)
        for ns, dev, ip in ((a, "cl-a", "10.9.1.1/24"), (r, "cl-ra", "10.9.1.2/24"), (r, "cl-rb", "10.9.2.2/24"),
                            (b, "cl-b", "10.9.2.1/24")):  # fmt: skip
            sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
        sh("ip", "-n", a, "route", "add", "default", "via", "10.9.1.2")
        sh("ip", "-n", b, "route", "add", "default", "via", "10.9.2.2")
        sh("ip", "netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        yield a, r, b
    finally:
        del_netns(*names)


def _climbs(rows: list[dict[str, int | float]]) -> list[dict[str, float]]:
    """Each loss after CLIMB_AFTER_S (ssthresh changes): the peak cwnd sampled before it (Wmax), the ssthresh it
    set, and the time from the loss's first sample to the first sample with cwnd >= Wmax again."""
    out: list[dict[str, float]] = []
    peak, prev_ss, wmax, ss = 0, -1, 0, 0
    t_loss: float | None = None
    for row in rows:
        t, cwnd, ssthresh = float(row["t_s"]), int(row["cwnd"]), int(row["ssthresh"])
        if prev_ss >= 0 and ssthresh != prev_ss and ssthresh < 0x7FFFFFFF and t >= CLIMB_AFTER_S:
            t_loss, wmax, ss = t, peak, ssthresh  # a new loss (a climb cut short by it is not counted)
        elif t_loss is not None and cwnd >= wmax:
            out.append({"t_loss_s": t_loss, "wmax_pkts": wmax, "ssthresh_pkts": ss, "climb_s": round(t - t_loss, 3)})
            t_loss = None
        peak = cwnd if ssthresh != prev_ss else max(peak, cwnd)
        prev_ss = ssthresh
    return out


def test_logwestwood_climb_on_the_papers_path(report: dict[str, Any]) -> None:
    """LogWestwood+ climbs back fast (_climb_trial), tried again where the guest's timers ran late: its rate,
    delay and the sender's pace are theirs."""
    with TimerLateness() as timers:
        on_time(lambda: _climb_trial(report), lambda: timers.late, "the lab VM's timers")


def _climb_trial(report: dict[str, Any]) -> None:
    """LogWestwood+ (module, alpha = 4 fixed as in §III, eq. (7) per acknowledged packet) on the paper's path
    (100 Mbit/s, 82 ms, 50 packets): the time from each loss back to the window at the loss, beside the paper's
    1.6 s, and nearer eq. (7)'s RTTs over the same gap than Reno's +1 per RTT (tests/climb.py).

    The router holds the 50-packet queue behind the shaper towards the receiver and the whole RTT's delay on
    the ACK direction, so that no data segment waits in a delay line while still charged to the sender's socket
    (TCP small queues would then cap what it has in flight)."""
    sh("insmod", str(KMOD_DIR / "tcp_logwestwood.ko"), "alpha_adapt=0")
    try:
        with routed_namespaces() as (a, r, b):
            rows = _climb_trace(a, r, b)
    finally:
        # once the namespaces, and the flow's sockets with them, are gone
        unload("tcp_logwestwood")
    _check_climbs(rows, report)


def _climb_trace(a: str, r: str, b: str) -> list[dict[str, int | float]]:
    """The sender's samples of one LogWestwood+ flow (the module loaded) over the routed path (recovery_probe.py's
    watch), from CLIMB_S on stopped as soon as they hold what _check_climbs asks for, at CLIMB_MAX_S at most."""
    # netem's rate paces each packet by its size (no token bucket for late emulated timers to starve); with no
    # delay of its own its limit is the drop-tail queue
    sh("tc", "-n", r, "qdisc", "add", "dev", "cl-rb", "root", "netem", "rate", f"{CLIMB_RATE_MBPS}mbit", "limit",
       str(CLIMB_QUEUE_PKTS))  # fmt: skip
    sh("tc", "-n", r, "qdisc", "add", "dev", "cl-ra", "root", "netem", "delay", f"{CLIMB_RTT_MS}ms", "limit",
       "100000")  # fmt: skip
    sh("ip", "netns", "exec", a, "sysctl", "-q", "-w", "net.ipv4.tcp_wmem=4096 16384 33554432")
    sh("ip", "netns", "exec", b, "sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 131072 33554432")
    sink_argv = ["ip", "netns", "exec", b, sys.executable, str(PROBE), "sink", "10.9.2.1", "5201"]
    sink = subprocess.Popen(sink_argv, stdout=subprocess.PIPE, text=True)
    rows: list[dict[str, int | float]] = []
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        argv = ["ip", "netns", "exec", a, sys.executable, str(PROBE), "watch", "10.9.2.1", "5201", "logwestwood",
                str(CLIMB_MAX_S)]  # fmt: skip
        with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as probe:
            assert probe.stdin is not None and probe.stdout is not None
            columns = json.loads(probe.stdout.readline())
            checked_s = float(CLIMB_S)
            for line in probe.stdout:
                rows.append(dict(zip(columns, json.loads(line))))
                t = float(rows[-1]["t_s"])
                if t >= checked_s and not probe.stdin.closed:
                    checked_s = t + 5  # the climbs are counted each 5 s of the flow
                    if _enough(_climbs(rows)):
                        probe.stdin.close()  # the probe stops its flow; its last samples are read to EOF
            assert probe.wait(timeout=60) == 0, f"recovery_probe.py watch: exit {probe.returncode}"
    finally:
        sink.kill()
        sink.wait()
    return rows


def _placed(climbs: list[dict[str, float]]) -> list[float]:
    """The climbs over a gap of climb.MIN_GAP or more, each placed between eq. (7)'s RTTs for its gap (0) and
    Reno's (1) (tests/climb.py); the median must be nearer eq. (7)'s.  Measured in the lab VM (6 boots, 12 such
    climbs): -3.9 to -0.03, the slowest a 21-packet gap in 11.4 RTTs where eq. (7) takes 12 and Reno 22."""
    return sorted(
        climb.place(c["climb_s"] * 1000 / CLIMB_RTT_MS, int(c["ssthresh_pkts"]), int(c["wmax_pkts"]))
        for c in climbs
        if c["wmax_pkts"] - c["ssthresh_pkts"] >= climb.MIN_GAP
    )


def _enough(climbs: list[dict[str, float]]) -> bool:
    """Climbs enough for _check_climbs to judge: two or more, one of them over climb.MIN_GAP or more."""
    return len(climbs) >= 2 and bool(_placed(climbs))


def _check_climbs(rows: list[dict[str, int | float]], report: dict[str, Any]) -> None:
    """The climbs in `rows` against the paper's time and Reno's +1 per RTT; what they measured in the report."""
    climbs = _climbs(rows)
    rtts = sorted(c["climb_s"] * 1000 / CLIMB_RTT_MS for c in climbs)
    median = round(rtts[len(rtts) // 2], 1) if rtts else None
    paper = round(PAPER_CLIMB_S * 1000 / PAPER_RTT_MS, 1)
    pipe = CLIMB_RATE_MBPS * 1e6 / 8 * CLIMB_RTT_MS / 1e3 / 1500
    report["climb"] = {
        "path": f"{CLIMB_RATE_MBPS} Mbit/s, {CLIMB_RTT_MS} ms, {CLIMB_QUEUE_PKTS} pkts (pipe {pipe:.0f} pkts)",
        "climbs": climbs,
        "median_rtts": median,
        "median_s_at_82ms": round(median * PAPER_RTT_MS / 1000, 2) if median is not None else None,
        "paper_rtts": paper,
        "paper_s": PAPER_CLIMB_S,
        "samples": len(rows),
    }
    print(f"\n  LogWestwood+ climbs, {report['climb']['path']}: {climbs}; median {median} RTTs "
          f"({report['climb']['median_s_at_82ms']} s at 82 ms); paper {paper} RTTs ({PAPER_CLIMB_S} s)")  # fmt: skip
    places = _placed(climbs)
    report["climb"]["median_place"] = places[len(places) // 2] if places else None
    report["climb"]["flow_s"] = float(rows[-1]["t_s"]) if rows else 0.0
    assert _enough(climbs), (
        f"not two climbs, one over {climb.MIN_GAP}+ packets, from {CLIMB_AFTER_S} s to "
        f"{report['climb']['flow_s']} s: {climbs} ({len(rows)} samples)"
    )
    assert places[len(places) // 2] < climb.MAX_PLACE, (
        f"climbs placed at {places} between eq. (7)'s RTTs (0) and Reno's (1): median not below {climb.MAX_PLACE}"
    )
