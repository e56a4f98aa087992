"""Unit tests of the portable congestion-control cores (hosts/cc/core/).

The userspace harness (hosts/cc/test/harness.c) compiles the same headers the
kernel module and the BPF programs include and prints ``key=value`` lines;
each test compares them with values worked by hand from the papers (docs/papers.md;
paper and section named in every test).
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from controller.spec import CCLAB_ALGOS, algos
from tests import climb

CC_DIR = Path(__file__).resolve().parent.parent / "hosts" / "cc"
HARNESS = CC_DIR / "build" / "harness"


@pytest.fixture(scope="module")
def harness() -> Path:
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make and a C compiler are needed to build the harness")
    proc = subprocess.run(["make", "-C", str(CC_DIR), "harness"], capture_output=True, text=True)
    assert proc.returncode == 0, f"harness build failed:\n{proc.stdout}\n{proc.stderr}"
    return HARNESS


def run(harness: Path, *args: str) -> dict[str, int]:
    proc = subprocess.run([str(harness), *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"harness {args} exited {proc.returncode}: {proc.stderr}"
    out: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if value.isdigit():
            out[key] = int(value)
    return out


@pytest.mark.parametrize("algo", CCLAB_ALGOS)
def test_every_registered_algorithm_has_its_core_and_shells(algo: str) -> None:
    """hosts/cc/algos.toml is the list: each algorithm in it has its core, its eBPF program and, unless its
    forms say it has none, its module."""
    wanted = [CC_DIR / "core" / f"{algo}.h", CC_DIR / "bpf" / f"{algo}.bpf.c"]
    if algo in algos.modules():
        wanted.append(CC_DIR / "kmod" / f"tcp_{algo}.c")
    missing = [str(f.relative_to(CC_DIR)) for f in wanted if not f.is_file()]
    assert not missing, f"{algo} is in hosts/cc/algos.toml but has no {', '.join(missing)}"
    shells = {f.name.removesuffix(".bpf.c") for f in (CC_DIR / "bpf").glob("*.bpf.c")}
    assert shells <= set(CCLAB_ALGOS), f"eBPF programs of no registered algorithm: {sorted(shells - set(CCLAB_ALGOS))}"


# --- TCPW: Tustin filter (MPTCPW paper §III) --------------------------------


def test_tustin_step_response(harness: Path) -> None:
    """A 1e6 B/s step into the filter, tau = 0.5 s, one sample per 10 ms.

    b^_1 = b*D/(2tau+D) (b_0 = 0); then b^_k = a b^_{k-1} + 2bD/(2tau+D)
    with a = (2tau-D)/(2tau+D).  Also the continuous-time check: after
    t = tau the output is near 1 - e^-1 of the step."""
    r = run(harness, "tustin")
    tau, dt, b = r["tau_us"], r["dt_us"], r["rate_Bps"]
    a = (2 * tau - dt) / (2 * tau + dt)
    expect = b * dt / (2 * tau + dt)
    for k in range(1, 301):
        if k > 1:
            expect = a * expect + 2 * b * dt / (2 * tau + dt)
        got = r[f"step_{k}"]
        assert abs(got - expect) <= max(2.0, 1e-3 * expect), (
            f"step {k}: filter output {got} B/s, closed form {expect:.1f} B/s"
        )
    k_tau = tau // dt
    frac = r[f"step_{k_tau}"] / b
    assert abs(frac - (1 - math.exp(-1))) < 0.02, f"after t = tau the output is {frac:.4f} of the step, expected ~0.632"
    assert r["step_300"] / b > 0.99, f"after 6 tau: {r['step_300']} of {b} B/s"


# --- AckedCount (TCPW-ABSE paper §2.2) --------------------------------------


def test_ackedcount_dupacks_then_cumulative(harness: Path) -> None:
    """3 DUPACKs count 1 segment each; the cumulative ACK for 4 segments then
    counts 4 - 3 = 1; a cumulative ACK for 2 with 3 accounted counts 1 and
    leaves 1 accounted, the next 2-segment ACK consumes it."""
    r = run(harness, "ackcount")
    for i in (1, 2, 3):
        assert r[f"a_dup{i}_acked"] == 1, f"DUPACK {i} counted {r[f'a_dup{i}_acked']}"
        assert r[f"a_dup{i}_accounted"] == i, f"accounted_for after DUPACK {i} is {r[f'a_dup{i}_accounted']}"
    assert (r["a_cum_acked"], r["a_cum_accounted"]) == (1, 0), (
        f"cumulative ACK of 4 after 3 DUPACKs: acked={r['a_cum_acked']} "
        f"accounted={r['a_cum_accounted']}, expected 1 and 0"
    )
    assert (r["b_cum_acked"], r["b_cum_accounted"]) == (1, 1), (
        f"cumulative ACK of 2 after 3 DUPACKs: acked={r['b_cum_acked']} "
        f"accounted={r['b_cum_accounted']}, expected 1 and 1"
    )
    assert (r["b_next_acked"], r["b_next_accounted"]) == (1, 0), (
        f"next ACK of 2 with 1 accounted: acked={r['b_next_acked']} accounted={r['b_next_accounted']}, expected 1 and 0"
    )


def test_ackedcount_delayed_ack(harness: Path) -> None:
    """A delayed ACK (2 segments, nothing accounted) counts both."""
    r = run(harness, "ackcount")
    assert (r["c_delayed_acked"], r["c_delayed_accounted"]) == (2, 0), (
        f"delayed ACK: acked={r['c_delayed_acked']} accounted={r['c_delayed_accounted']}, expected 2 and 0"
    )
    assert r["d_single_acked"] == 1, f"single ACK counted {r['d_single_acked']}"


def test_ackedcount_old_ack_counts_as_dupack(harness: Path) -> None:
    """An ACK below the last one (reordered on the way back; §2.2 does not
    say) counts as a DUPACK: one segment, remembered in accounted_for, and
    the next ACK for 2 segments then counts 1."""
    r = run(harness, "ackcount")
    assert (r["e_old_acked"], r["e_old_accounted"]) == (1, 1), (
        f"old ACK: acked={r['e_old_acked']} accounted={r['e_old_accounted']}, expected 1 and 1"
    )
    assert (r["e_next_acked"], r["e_next_accounted"]) == (1, 0), (
        f"ACK of 2 after it: acked={r['e_next_acked']} accounted={r['e_next_accounted']}, expected 1 and 0"
    )


# --- Loss response: ssthresh = BWE * RTTmin / MSS -------------------------


@pytest.mark.parametrize("algo", algos.bwe_decreases())
def test_ssthresh_is_bwe_times_rttmin(harness: Path, algo: str) -> None:
    """TCPW faster-recovery slides, slide 6, LogWestwood+ paper eq. (5),
    abse §2, mptcpw §IV, btbe eq. (2) (W_Bottleneck, from eBW).

    A 1e6 B/s path with RTT 100 ms and 1000-byte segments: the estimate must
    be within 5 % of the true rate (the filters are converged after 20 s)
    and ssthresh must be exactly floor(BWE * RTTmin / MSS), at least 2."""
    r = run(harness, "ssthresh")
    bwe, rtt_min, mss = r[f"{algo}_bwe"], r[f"{algo}_rttmin"], r["mss"]
    assert rtt_min == r["rtt_us"], f"{algo}: RTTmin {rtt_min} us, path RTT {r['rtt_us']}"
    assert abs(bwe - 1_000_000) <= 50_000, f"{algo}: BWE {bwe} B/s, true rate 1e6 B/s"
    expect = max(bwe * rtt_min // (1_000_000 * mss), 2)
    key = "btbe_wb" if algo == "btbe" else f"{algo}_ssthresh"
    assert r[key] == expect, f"{algo}: ssthresh {r[key]}, BWE*RTTmin/MSS = {expect}"
    if algo == "btbe":
        assert r["btbe_ssthresh"] == max(r["btbe_wb"], 2), (
            f"btbe ssthresh {r['btbe_ssthresh']} != max(W_B={r['btbe_wb']}, 2)"
        )


def test_tcpw_recovery_cwnd_is_min(harness: Path) -> None:
    """slide 6: if cwnd > ssthresh then cwnd = ssthresh, else unchanged."""
    r = run(harness, "ssthresh")
    ss = r["tcpw_ssthresh"]
    assert r["tcpw_cwnd_after"] == min(r["cwnd"], ss), f"cwnd {r['cwnd']} > ssthresh {ss}: got {r['tcpw_cwnd_after']}"
    assert r["tcpw_cwnd_after_small"] == 60, f"cwnd 60 < ssthresh {ss}: got {r['tcpw_cwnd_after_small']}, expected 60"


def test_logwestwood_records_wmax_at_loss(harness: Path) -> None:
    r = run(harness, "ssthresh")
    assert r["logwestwood_wmax"] == r["cwnd"], f"Wmax after a loss at cwnd {r['cwnd']} is {r['logwestwood_wmax']}"


# --- LogWestwood+ eq. (7) and alpha (LogWestwood+ paper §II) ----------------


@pytest.mark.parametrize(
    "w,wmax,alpha",
    [(100, 200, 4), (10, 100, 2), (199, 200, 4), (683, 733, 4), (300, 200, 4), (50, 0, 4)],
)
def test_logwestwood_eq7_step(harness: Path, w: int, wmax: int, alpha: int) -> None:
    """W += max((Wmax - W)/(alpha W), 1/W), in Q20 packets (truncated)."""
    r = run(harness, "logww")
    got = r[f"step_{w}_{wmax}_{alpha}"] / 2**20
    expect = max((wmax - w) / (alpha * w), 1 / w)
    assert abs(got - expect) <= 2 / 2**20, (
        f"eq.(7) step at W={w} Wmax={wmax} alpha={alpha}: {got:.7f}, expected {expect:.7f}"
    )


def test_logwestwood_per_ack_trace(harness: Path) -> None:
    """W = 10, Wmax = 100, alpha = 2, one ACK at a time: 10 + 4.5 -> 14
    (0.5 carried), 14 + 86/28 + 0.5 -> 17, 17 + 83/34 + 0.57 -> 20."""
    r = run(harness, "logww")
    w, frac, expect = 10, 0.0, []
    for _ in range(5):
        frac += max((100 - w) / (2 * w), 1 / w)
        w += int(frac)
        frac -= int(frac)
        expect.append(w)
    got = [r[f"trace_{i}"] for i in range(1, 6)]
    assert got == expect == [14, 17, 20, 22, 23], f"per-ACK trace {got}, expected {expect}"


def test_logwestwood_delayed_ack_counts_packets(harness: Path) -> None:
    """The shells call logww_cong_avoid with the kernel's acked (2 for a
    delayed ACK): by default eq. (7) runs once per acknowledged packet, at the
    W the ACK found (10 + 2 x 4.5 = 19, 19 + 2 x 81/38 -> 23, ...); with
    per_ack = 1 once per ACK, which is the per-ACK trace above."""
    r = run(harness, "logww")
    w, frac, per_pkt = 10, 0.0, []
    for _ in range(3):
        frac += 2 * max((100 - w) / (2 * w), 1 / w)
        w += int(frac)
        frac -= int(frac)
        per_pkt.append(w)
    got = [r[f"delack_per_pkt_{i}"] for i in range(1, 4)]
    assert got == per_pkt, f"acked = 2 per packet: {got}, expected {per_pkt}"
    got = [r[f"delack_per_ack_{i}"] for i in range(1, 4)]
    assert got == [14, 17, 20], f"acked = 2 with per_ack: {got}, expected the per-ACK trace [14, 17, 20]"


def test_logwestwood_alpha_adaptation(harness: Path) -> None:
    """x2 on a loss before Wmax, /2 per errorless climb to Wmax, floor 2."""
    r = run(harness, "logww")
    unit = 1024
    seq = [
        ("alpha_0", 4),
        ("alpha_1_first_loss", 4),
        ("alpha_2_loss_below", 8),
        ("alpha_3_reached", 4),
        ("alpha_4_loss_after", 4),
        ("alpha_5_reached", 2),
        ("alpha_6_floor", 2),
    ]
    for key, expect in seq:
        assert r[key] == expect * unit, f"{key}: alpha {r[key] / unit}, expected {expect}"
    assert (r["wmax_1"], r["wmax_2"]) == (100, 80), f"Wmax {r['wmax_1']}, {r['wmax_2']}"


# --- BTBE (BTBE paper §III) -------------------------------------------------


def _alpha_btbe(w: float, wb: float, wt: float, lam: float) -> float:
    ws = wb + 0.2 * (wt - wb)
    if ws <= w <= wt:
        return 1 + 15 * math.exp(-lam / (wt - wb) * (w - ws))
    return 16.0


def test_btbe_alpha_calibration_two_thirds(harness: Path) -> None:
    """§III-B: at 2/3 of the way from W_B to W_T, alpha = a_min + 0.2
    (a_max - a_min) = 4.  With W_B = 300, W_T = 600 that is w = 500.

    The paper's stated LAMBDA = 7.25 does not satisfy its own calibration
    (it gives 1 + 15 e^-3.383 = 1.51); LAMBDA = ln5/(2/3 - 0.2) = 3.449 does.
    Both are checked: the calibrated constant gives 4.0, the paper's
    number gives the formula's 1.51 (see the NOTE in core/btbe.h)."""
    r = run(harness, "btbe")
    calib = r["alpha_calib_500"] / 1024
    assert abs(calib - (1 + 0.2 * 15)) < 0.01, (
        f"alpha at 2/3 with calibrated lambda: {calib:.4f}, paper's calibration says 4.0"
    )
    paper = r["alpha_paper_500"] / 1024
    assert abs(paper - _alpha_btbe(500, 300, 600, 7.25)) < 0.01, (
        f"alpha at 2/3 with LAMBDA = 7.25: {paper:.4f}, formula gives {_alpha_btbe(500, 300, 600, 7.25):.4f}"
    )


@pytest.mark.parametrize("w", [300, 350, 360, 400, 500, 600, 601])
@pytest.mark.parametrize("which,lam", [("paper", 7.25), ("calib", 3.449)])
def test_btbe_alpha_curve(harness: Path, w: int, which: str, lam: float) -> None:
    """alpha(w) against the float formula: a_max below W_S = 360 and above
    W_T = 600, the exponential between, within 0.3 % (table + Q10)."""
    r = run(harness, "btbe")
    got = r[f"alpha_{which}_{w}"] / 1024
    expect = _alpha_btbe(w, 300, 600, lam)
    assert abs(got - expect) <= 0.003 * expect + 1 / 1024, (
        f"alpha({w}) with LAMBDA {lam}: {got:.4f}, expected {expect:.4f}"
    )


def test_btbe_exp_table(harness: Path) -> None:
    r = run(harness, "btbe")
    for key, val in r.items():
        if key.startswith("exp_"):
            x = int(key[4:]) / 1024
            expect = math.exp(-x) * 2**24
            assert abs(val - expect) <= 2e-4 * expect + 2, f"e^-{x:.4f}: table {val}, exact {expect:.1f} (Q24)"


def test_btbe_estimator_and_decrease(harness: Path) -> None:
    """eBW 1.25e6 B/s over the receiver clock, baseRTT 100 ms, 1000-byte
    segments: W_B = 125.  Rounds at 150 ms with cwnd 200:
    eQ = 200/150 * (150 - 100) = 66.7, W_T = 191.  RTO resets RTT_max."""
    r = run(harness, "btbe")
    assert abs(r["est_ebw"] - 1_250_000) <= 1250, f"eBW {r['est_ebw']} B/s, expected 1.25e6"
    assert r["est_base_rtt"] == 100_000, f"baseRTT {r['est_base_rtt']} us"
    assert r["est_rtt_max"] == 150_000, f"RTT_max {r['est_rtt_max']} us"
    assert r["est_wb"] == 125, f"W_Bottleneck {r['est_wb']}, expected 125"
    assert r["est_wt"] == 125 + 66, f"W_Target {r['est_wt']}, expected 191"
    assert r["est_ssthresh"] == 125, f"ssthresh {r['est_ssthresh']}, expected W_B = 125"
    assert r["rto_rtt_max"] == 0, f"RTT_max after RTO {r['rto_rtt_max']}, expected 0"
    # eq. (1): below W_S alpha = 16, a window of 320 ACKs adds ~16 packets
    # (a little less: W grows during the window, each ACK adds 16/W)
    inc = r["inc_from_320"] - 320
    assert 14 <= inc <= 16, f"one window of ACKs at alpha 16 added {inc} packets"


# --- MPTCPW eq. (8) (MPTCPW paper §IV) --------------------------------------


def _delta(ws: list[int], rtts: list[int]) -> list[float]:
    s = sum(w / r for w, r in zip(ws, rtts))
    m = max(w / r**2 for w, r in zip(ws, rtts))
    return [w * m / s**2 for w in ws]


@pytest.mark.parametrize(
    "tag,ws,rtts",
    [
        ("d_eqrate", [10, 20], [100_000, 200_000]),
        ("d_uneven", [30, 10], [50_000, 100_000]),
        ("d_single", [40], [80_000]),
        ("d_three", [25, 25, 25], [60_000] * 3),
    ],
)
def test_mptcpw_delta_eq8(harness: Path, tag: str, ws: list[int], rtts: list[int]) -> None:
    """delta_s = w_s max_r(w_r/RTT_r^2) / (sum_r w_r/RTT_r)^2, gamma = 1;
    e.g. (10, 20) pkts at (100, 200) ms -> 0.25, 0.5; one path -> 1;
    three equal paths -> 1/9.  Q16, within 0.1 %."""
    r = run(harness, "mptcpw")
    for i, expect in enumerate(_delta(ws, rtts)):
        got = r[f"{tag}_{i}"] / 65536
        expect = min(expect, 1.0)
        assert abs(got - expect) <= 1e-3 * expect + 1 / 65536, (
            f"{tag} path {i}: delta {got:.5f}, eq. (8) gives {expect:.5f}"
        )


def test_mptcpw_increase(harness: Path) -> None:
    """min(delta/w, 1/w) per ACK with delta = 0.25 at w = 100: 400 ACKs add 1."""
    r = run(harness, "mptcpw")
    assert r["inc_quarter_400acks"] == 101, f"cwnd {r['inc_quarter_400acks']}, expected 101"


def test_mptcpw_delta_during_a_peers_recovery(harness: Path) -> None:
    """Eq. (8) takes every path's current window.  Subflow A (RTT 50 ms)
    falls from 100 to 50 packets at a loss and stays in fast recovery, where
    the kernel calls no cong_avoid; B (RTT 100 ms) keeps increasing.  B's
    delta on the next ACK must use A's 50 (refreshed by A's in_ack_event),
    not the 100 A had before the loss."""
    r = run(harness, "mptcpw_recovery")
    assert (r["slot_a_cwnd"], r["slot_a_rtt_us"]) == (50, 50_000), (
        f"A's slot holds cwnd {r['slot_a_cwnd']}, rtt {r['slot_a_rtt_us']} us during recovery, expected 50, 50000"
    )
    got = r["delta_b_recovery"] / 65536
    live = min(_delta([r["wa_recovery"], r["wb_recovery"]], [50_000, 100_000])[1], 1.0)
    stale = min(_delta([r["wa_before"], r["wb_recovery"]], [50_000, 100_000])[1], 1.0)
    assert abs(got - live) <= 1e-3 * live + 1 / 65536, (
        f"B's delta {got:.5f} during A's recovery; eq. (8) with A at {r['wa_recovery']} gives {live:.5f} "
        f"(with A's window before the loss, {r['wa_before']}: {stale:.5f})"
    )
    assert abs(live - stale) > 0.1 * live, f"the case cannot tell the two apart: {live:.5f} vs {stale:.5f}"


# --- TCPW-ABSE T_k (TCPW-ABSE paper §2.1) -----------------------------------


def test_abse_adaptive_interval(harness: Path) -> None:
    """Uncongested (Th*RTT > cwnd): T_k = T_min, here one bucket (RTT/8 =
    12.5 ms, longer than 8 ACK gaps of 1 ms).  Congested, cwnd 400 pkts,
    Th*RTTmin = 100 pkts: T_k = RTT*300/400 = 75 ms (eq. 4), and the
    estimate stays within 1 % of the 1e6 B/s rate."""
    r = run(harness, "abse")
    assert r["uncong_tk_us"] == 100_000 // 8, f"T_k uncongested {r['uncong_tk_us']} us"
    assert r["cong_tk_us"] == r["cong_tk_expect_us"], (
        f"T_k congested {r['cong_tk_us']} us, eq. (4) gives {r['cong_tk_expect_us']} us"
    )
    for key in ("uncong_bw", "cong_bw"):
        assert abs(r[key] - 1_000_000) <= 10_000, f"{key} {r[key]} B/s, rate 1e6 B/s (tolerance 1 %)"
    assert 100_000 <= r["uncong_tau_us"] <= 100_000 * 5, (
        f"tau_k {r['uncong_tau_us']} us outside [RTT, (1+N) RTT] of eq. (6)"
    )


def test_abse_slow_path_delayed_acks(harness: Path) -> None:
    """10 Mbit/s, 1448-byte segments, one ACK per two segments (2.3 ms apart),
    RTT = RTTmin = 20 ms, 30 s.  The path's BDP is 17.3 packets, so ssthresh
    (§2: ABSE * RTTmin / seg_size) must be 17, and the estimate must stay
    within 5 % of the rate over the whole second half.  A sample window that
    ends at the ACK it is taken on over-counts by half an ACK: with windows of
    a bucket (2.5 ms) that read 1.69e6 B/s and ssthresh 23."""
    r = run(harness, "abse_trace", "1250000", "1448", "2", "20000", "30")
    rate = r["rate_Bps"]
    for key in ("bw", "bw_lo", "bw_hi"):
        assert abs(r[key] - rate) <= 0.05 * rate, f"{key} {r[key]} B/s, rate {rate} B/s (tolerance 5 %)"
    assert r["ssthresh"] == 17, f"ssthresh {r['ssthresh']}, BDP 17.3 packets gives 17 (estimate {r['bw']} B/s)"
    # T_min = 8 ACK gaps (18.5 ms) rounds up to the whole ring, 7 buckets of 2.5 ms
    assert r["tk_us"] == 7 * 2500, f"T_k {r['tk_us']} us, T_min of 8 gaps of {r['ack_gap_us']} us is 17500 us"


@pytest.mark.parametrize("rate_Bps", [125_000, 3_125_000, 12_500_000, 125_000_000])
def test_abse_estimate_across_rates(harness: Path, rate_Bps: int) -> None:
    """The same path from 1 to 1000 Mbit/s: the estimate within 5 % of the
    rate.  At 1 Mbit/s ACKs are 23 ms apart, more than the 20 ms ring: the
    sample is then one ACK over its gap."""
    r = run(harness, "abse_trace", str(rate_Bps), "1448", "2", "20000", "10")
    for key in ("bw", "bw_lo", "bw_hi"):
        assert abs(r[key] - rate_Bps) <= 0.05 * rate_Bps, f"{key} {r[key]} B/s, rate {rate_Bps} B/s"


# --- The LogWestwood+ climb (LogWestwood+ paper §III) -----------------------

PAPER_CLIMB_S = {"reno": 60.0, "tcpwplus": 12.0, "logwestwood": 1.6}


def _climb(harness: Path, algo: str, count: str) -> float:
    r = run(harness, "climb", algo, "2", count)
    return r["climb_us"] / 1e6


def test_climb_times_match_paper_ordering(harness: Path) -> None:
    """683-packet pipe, 50-packet queue: time from the post-loss window back
    to 733 packets, counted as the paper's ns-2 did: a delayed-ACK receiver
    (one ACK per 2 packets) and one increase step per ACK.  That is what
    makes NewReno's climb from 367 to 733 take the paper's 60 s (732 rounds
    of 82 ms).  LogWestwood+ runs with per_ack = 1, called as the kernel calls
    it (acked = 2).

    Tolerance: each time within a factor 2 of the paper's.  The paper's
    numbers are read off one ns-2 trace (Fig. 3) whose BWE after the loss
    is not reported; in this model Westwood+'s BWE equals the 683-packet
    pipe exactly, so its climb covers 50 packets (8.5 s vs 12 s) and
    LogWestwood+'s geometric approach to Wmax takes ~26 rounds (2.2 s vs
    1.6 s).  The ordering and a >= 10x gain of LogWestwood+ over NewReno
    must hold exactly."""
    t = {}
    for algo in PAPER_CLIMB_S:
        t[algo] = _climb(harness, algo, "ack")
        print(f"climb per ACK  {algo:12s} {t[algo]:7.2f} s   paper {PAPER_CLIMB_S[algo]:5.1f} s")
    assert t["reno"] > t["tcpwplus"] > t["logwestwood"], f"ordering broken: {t}"
    assert t["reno"] / t["logwestwood"] >= 10, f"LogWestwood+ gain over NewReno {t}"
    for algo, paper in PAPER_CLIMB_S.items():
        assert paper / 2 <= t[algo] <= paper * 2, f"{algo}: climb {t[algo]:.2f} s, paper {paper} s (tolerance x2)"
    assert abs(t["reno"] - 60.0) / 60.0 < 0.05, f"NewReno climb {t['reno']:.2f} s vs 60 s"


def test_climb_as_the_kernel_calls_cong_avoid(harness: Path) -> None:
    """The same path as the kernel runs it: cong_avoid(acked = 2) per delayed
    ACK, Reno's 1/W per acknowledged packet (tcp_cong_avoid_ai) and
    LogWestwood+'s eq. (7) per acknowledged packet (the shells' default,
    per_ack = 0).  Every climb takes half its per-ACK time (+-1 round),
    NewReno 30 s instead of 60 s, so LogWestwood+'s gain over NewReno and
    over Westwood+ is the paper's, and its climb (1.1 s) stays within a
    factor 2 of the paper's 1.6 s."""
    t = {a: _climb(harness, a, "packet") for a in PAPER_CLIMB_S}
    for algo, paper in PAPER_CLIMB_S.items():
        per_ack = _climb(harness, algo, "ack")
        print(f"climb per packet {algo:12s} {t[algo]:7.2f} s (per ACK {per_ack:6.2f} s, paper {paper:5.1f} s)")
        assert abs(t[algo] - per_ack / 2) <= 0.082, (
            f"{algo}: {t[algo]:.3f} s per packet, {per_ack:.3f} s per ACK: not half of it"
        )
    assert t["reno"] / t["logwestwood"] >= 10, f"LogWestwood+ gain over NewReno {t}"
    assert t["tcpwplus"] / t["logwestwood"] >= 3, f"LogWestwood+ gain over Westwood+ {t}"
    lw = t["logwestwood"]
    assert PAPER_CLIMB_S["logwestwood"] / 2 <= lw <= PAPER_CLIMB_S["logwestwood"] * 2, (
        f"LogWestwood+ climb {lw:.2f} s as the kernel runs it, paper 1.6 s (tolerance x2)"
    )


def test_climb_judge_counts_the_cores_rtts(harness: Path) -> None:
    """tests/climb.py, by which the lab VM's guest suite judges LogWestwood+'s climbs, against the C core on the
    paper's path as the kernel calls it (per packet, 82 ms rounds): LogWestwood+'s climb from BWE x RTTmin back
    to the first window that loses (capacity + 1) sits near eq. (7)'s count (0), NewReno's at Reno's (1).  The
    harness times a climb from the end of the loss round; the judge counts one RTT of recovery before it."""
    placed = {}
    for algo in ("logwestwood", "reno"):
        r = run(harness, "climb", algo, "2", "packet")
        rtts = r["climb_us"] / r["rtt_us"] + 1
        placed[algo] = climb.place(rtts, r["start_w"], r["cap_pkts"] + 1)
        print(f"climb per packet {algo:12s} {rtts:6.1f} RTTs from {r['start_w']}: placed {placed[algo]}")
    assert abs(placed["logwestwood"]) <= 0.25, f"eq. (7)'s count is not the core's: {placed}"
    assert abs(placed["reno"] - 1) <= 0.05, f"Reno's count is not the core's: {placed}"


def test_climb_judge_places_no_gap_where_its_counts_meet() -> None:
    """Under climb.MIN_GAP packets eq. (7)'s RTT count comes within one RTT of Reno's (below 8 they meet, below 5
    eq. (7)'s passes Reno's), so a place there would divide by zero or judge nothing: it is refused."""
    for gap in range(1, climb.MIN_GAP):
        with pytest.raises(ValueError, match=f"gap {gap} packets"):
            climb.place(5.0, 300, 300 + gap)
        assert climb.eq7_rtts(300, 300 + gap) >= climb.reno_rtts(300, 300 + gap) - 1
    gap = climb.MIN_GAP
    assert climb.reno_rtts(300, 300 + gap) - climb.eq7_rtts(300, 300 + gap) >= 2
    assert climb.place(climb.eq7_rtts(300, 300 + gap), 300, 300 + gap) == 0
    assert climb.place(climb.reno_rtts(300, 300 + gap), 300, 300 + gap) == 1
