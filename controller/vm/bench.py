"""TCP throughput through the lab VM's emulated bottleneck, under KVM and under TCG (make vm-bench)."""

from __future__ import annotations

import json

from controller.vm.accel import kvm_verdict
from controller.vm.image import require_image
from controller.vm.run import run_in_vm
from controller.vm.settings import BOOT_TIMEOUT_S, PROBE_TIMEOUT_S, VM_DIR, VmError

#: (bottleneck rate in Mbit/s, one-way delay in ms) of each point
BENCH_POINTS = ((1000, 0), (1000, 20))


def bench_once(accel: str, duration_s: float) -> dict[str, object]:
    """vm/guest/bench.py in one boot under accel; its JSON line plus what the boot was."""
    points = [f"{r}:{d}" for r, d in BENCH_POINTS]
    argv = ["python3", str(VM_DIR / "guest" / "bench.py"), "--duration", str(duration_s), *points]
    res = run_in_vm(argv, timeout_s=BOOT_TIMEOUT_S + len(BENCH_POINTS) * (duration_s + 60) + 60, accel=accel)
    if res.returncode != 0:
        raise VmError(f"the benchmark failed in the lab VM (exit {res.returncode}): {res.output.strip()[-400:]}")
    last = [ln for ln in res.output.splitlines() if ln.startswith("{")]
    data: dict[str, object] = json.loads(last[-1])
    data.update(accel=res.accel, boot_s=res.boot_s, kernel=res.kernel)
    return data


def bench(duration_s: float, as_json: bool) -> int:
    """Print the figures for each acceleration that works here."""
    img = require_image()
    rows = []
    ok, why = kvm_verdict(img)
    if ok is None:  # probe it now: a one-command boot
        try:
            res = run_in_vm(["true"], timeout_s=BOOT_TIMEOUT_S + PROBE_TIMEOUT_S)
            ok, why = res.accel == "kvm", res.accel_note
        except VmError as exc:
            ok, why = False, str(exc)
    for accel in ("kvm", "tcg"):
        if accel == "kvm" and not ok:
            print(f"kvm: unavailable ({why})")
            continue
        data = bench_once(accel, duration_s)
        rows.append(data)
        print(f"{accel}: kernel {data['kernel']}, ready after {data['boot_s']:.1f} s")
        ceiling = data.get("ceiling_bps")
        print(f"  unshaped path (shaper above any rate), {data['flows']} cubic flows: {_mbps(ceiling)} Mbit/s")
        for p in data["points"]:  # type: ignore[attr-defined]
            print(
                f"  bottleneck {p['rate_mbps']:g} Mbit/s, delay {p['delay_ms']:g} ms (RTT {2 * p['delay_ms']:g} ms): "
                f"{_mbps(p['achieved_bps'])} Mbit/s in the network, iperf3 goodput {_mbps(p['goodput_bps'])} Mbit/s, "
                f"base RTT {p['base_rtt_ms'] if p['base_rtt_ms'] is not None else '-'} ms"
            )
    if as_json:
        print(json.dumps(rows))
    return 0


def _mbps(bps: object) -> str:
    return "-" if not isinstance(bps, (int, float)) else f"{bps / 1e6:.1f}"
