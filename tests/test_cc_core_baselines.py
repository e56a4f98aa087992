"""Unit tests of the baselines' cores (hosts/cc/core/cc_illinois.h, cc_highspeed.h, cc_lia.h, unmptcpw.h), through the
userspace harness as tests/test_cc_core.py drives the Westwood family.

Expected values are worked here from the algorithms' definitions: TCP-Illinois as Liu, Basar and Srikant define
alpha and beta (Performance Evaluation 2008) in the fixed point Linux's tcp_illinois.c uses; HighSpeed TCP's
a(w), b(w) from RFC 3649 Appendix B; LIA's alpha from RFC 6356 §3; unMPTCPW's (1/2)^2 split from the MPTCPW
paper (Le, Hong, Huh, "Coordinated TCP Westwood Congestion Control for Multiple Paths over Wireless Networks" §V).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cc_core import harness, run

__all__ = ["harness"]

# --- TCP-Illinois ------------------------------------------------------------

#: alpha_min is the paper's 0.3 as Q7 holds it (Linux's 3 * 128 / 10 = 38)
ALPHA_MAX, ALPHA_MIN = 10.0, 38 / 128
BETA_MIN, BETA_MAX = 1 / 8, 1 / 2


def _illinois_alpha(da: float, dm: float) -> float:
    """alpha = k1 / (k2 + d_a): alpha_max at d_1 = d_m / 100, alpha_min at d_m."""
    d1 = dm / 100
    if da <= d1:
        return ALPHA_MAX
    k1 = (dm - d1) * ALPHA_MIN * ALPHA_MAX / (ALPHA_MAX - ALPHA_MIN)
    k2 = (dm - d1) * ALPHA_MIN / (ALPHA_MAX - ALPHA_MIN) - d1
    return k1 / (k2 + da)


def _illinois_beta(da: float, dm: float) -> float:
    """beta_min up to d_2 = d_m / 10, beta_max from d_3 = 8 d_m / 10, linear between."""
    d2, d3 = dm / 10, 8 * dm / 10
    if da <= d2:
        return BETA_MIN
    if da >= d3:
        return BETA_MAX
    return BETA_MIN + (BETA_MAX - BETA_MIN) * (da - d2) / (d3 - d2)


@pytest.mark.parametrize("da", [0, 100, 101, 1000, 1001, 4500, 7999, 8000, 10000])
def test_illinois_alpha_beta_against_the_curves(harness: Path, da: int) -> None:
    """d_m = 10 ms: alpha (Q7) and beta (Q6) on the paper's curves, within the fixed point's rounding (alpha
    within 1/128, beta within 1/64 below)."""
    r = run(harness, "illinois")
    alpha, beta = r[f"alpha_{da}"] / 128, r[f"beta_{da}"] / 64
    want_a, want_b = _illinois_alpha(da, 10_000), _illinois_beta(da, 10_000)
    assert abs(alpha - want_a) <= 1 / 128, f"d_a {da} us: alpha {alpha:.4f}, curve {want_a:.4f}"
    assert -1 / 64 <= beta - want_b <= 0, f"d_a {da} us: beta {beta:.4f}, line {want_b:.4f}"


def test_illinois_theta_low_delay_rounds(harness: Path) -> None:
    """Never above d_1: alpha_max at once.  After a round above it, alpha stays where it was for theta - 1 = 4 low
    rounds and is alpha_max again on the 5th (Linux's theta)."""
    r = run(harness, "illinois")
    assert r["alpha_fresh_low"] == 1280
    held = [r[f"alpha_low_round_{i}"] for i in range(1, 6)]
    assert held == [r["alpha_8000"]] * 4 + [1280], held


def test_illinois_round_sets_alpha_beta_from_the_rounds_delays(harness: Path) -> None:
    """A round of 100 samples at 110 ms and one at 150 ms over a base of 100 ms: d_a = 110396 - 100000 us,
    d_m = 50000 us; alpha and beta from the curves, ssthresh = W - beta W (W = 100).  The round ends only on an
    ACK past snd_nxt at its start.  Below 15 packets: alpha 1, beta 1/2."""
    r = run(harness, "illinois")
    assert r["round_mid_cnt"] == 101, "the round ended before an ACK passed its end"
    assert (r["round_base_us"], r["round_max_us"]) == (100_000, 150_000)
    da, dm = (100 * 110_000 + 150_000) // 101 - 100_000, 50_000
    alpha, beta = r["round_alpha"] / 128, r["round_beta"] / 64
    assert abs(alpha - _illinois_alpha(da, dm)) <= 1 / 128, f"alpha {alpha}, curve {_illinois_alpha(da, dm)}"
    assert -1 / 64 <= beta - _illinois_beta(da, dm) <= 0, f"beta {beta}, line {_illinois_beta(da, dm)}"
    assert r["round_ssthresh_100"] == 100 - (100 * r["round_beta"]) // 64
    assert (r["small_alpha"], r["small_beta"], r["small_ssthresh_10"]) == (128, 32, 5)


def test_illinois_increase_and_rto(harness: Path) -> None:
    """alpha packets per window of ACKs: 100 ACKs at W = 100 add 10 at alpha 10 (in +1 steps, the credit
    restarting at each) and 1 at alpha 1.  A sample's packet count (2, a delayed ACK) counts once, later ACKs 1.
    An RTO: alpha 1, beta 1/2, a new round from snd_nxt."""
    r = run(harness, "illinois")
    assert r["inc_alpha10_w100_100acks"] == 109, "the 10th step needs an 11th ACK at W = 109"
    assert r["inc_alpha1_w100_100acks"] == 101
    assert r["cnt_after_delack_and_one"] == 3
    assert (r["rto_alpha"], r["rto_beta"], r["rto_end_seq"]) == (128, 32, 5000)


# --- HighSpeed TCP (RFC 3649 Appendix B) --------------------------------------

#: rows of RFC 3649 Appendix B (w, a(w), b(w)) the cases below fall on
RFC3649_ROWS = {38: (1, 0.50), 118: (2, 0.44), 221: (3, 0.41), 1058: (8, 0.33), 1284: (9, 0.32),
                84035: (71, 0.10), 89053: (72, 0.10)}  # fmt: skip


@pytest.mark.parametrize(
    ("w", "row_end"),
    [(1, 38), (38, 38), (39, 118), (118, 118), (119, 221), (1000, 1058), (1058, 1058), (1059, 1284),
     (84035, 84035), (89053, 89053), (89054, 89053), (1_000_000, 89053)],
)  # fmt: skip
def test_highspeed_row_and_decrease(harness: Path, w: int, row_end: int) -> None:
    """W falls in the first row whose window is >= W (the last past 89053): a(w) = row + 1, and ssthresh =
    W - b(w) W with b(w) in 1/256, within 1/128 of the RFC's two-decimal b(w) (at least 2)."""
    r = run(harness, "highspeed")
    a, b = RFC3649_ROWS[row_end]
    assert r[f"row_{w}"] + 1 == a, f"W {w}: row {r[f'row_{w}']} (a = {r[f'row_{w}'] + 1}), RFC row a(w) = {a}"
    assert abs(r[f"md_{w}"] / 256 - b) <= 1 / 128, f"W {w}: b = {r[f'md_{w}'] / 256:.4f}, RFC {b}"
    assert r[f"ssthresh_{w}"] == max(w - (w * r[f"md_{w}"]) // 256, 2)


def test_highspeed_increase_counts_acks(harness: Path) -> None:
    """At W = 1000 (a = 8): +1 on the 125th ACK; 1000 ACKs add 7 (the 8th step needs sum(1000..1007) / 8 = 1004
    ACKs).  At 38, Reno: 38 ACKs add 1.  The clamp holds.  A loss before any increase (the first slow start)
    halves W, as Linux's row 0 does."""
    r = run(harness, "highspeed")
    assert (r["w_after_124_acks"], r["w_after_125_acks"]) == (1000, 1001)
    assert r["w_after_1000_acks"] == 1007 and r["row_after"] == 7
    assert r["reno_w_after_38_acks"] == 39
    assert r["clamped_w"] == 50
    assert r["first_loss_ssthresh_1000"] == 500


# --- LIA (RFC 6356 §3) -------------------------------------------------------------

LIA_CASES = {  # tag: (windows, RTTs in us), as the harness sets them
    "equal": ([10, 10], [100_000, 100_000]),
    "eqrate": ([10, 20], [100_000, 200_000]),
    "uneven": ([30, 10], [50_000, 100_000]),
    "single": ([40], [80_000]),
    "three": ([20, 5, 5], [10_000, 10_000, 10_000]),
    "farpath": ([100, 2], [10_000, 400_000]),
}
#: alpha worked by hand from RFC 6356 §3, alpha = W_total max(w/rtt^2) / (sum w/rtt)^2
LIA_ALPHA = {
    "equal": 20 * (10 / 0.1**2) / (200.0**2),  # 0.5: two equal paths
    "eqrate": 30 * (10 / 0.1**2) / (200.0**2),  # 0.75
    "uneven": 40 * (30 / 0.05**2) / (700.0**2),  # 0.97959
    "single": 1.0,  # one path: Reno
    "three": 30 * (20 / 0.01**2) / (3000.0**2),  # 2/3
    "farpath": 102 * (100 / 0.01**2) / (10005.0**2),  # 1.01898
}


@pytest.mark.parametrize("tag", sorted(LIA_CASES))
def test_lia_alpha_and_increase_rfc6356(harness: Path, tag: str) -> None:
    """alpha (Q16) within 0.01 % + 1 of the hand-computed value; each subflow's increase per packet,
    delta_i / w_i with delta_i in Q16, is min(alpha / W_total, 1 / w_i) within 0.01 % + 1/65536 of a packet."""
    r = run(harness, "lia")
    ws, rtts = LIA_CASES[tag]
    alpha = LIA_ALPHA[tag]
    got = r[f"{tag}_alpha"] / 65536
    assert abs(got - alpha) <= 1e-4 * alpha + 1 / 65536, f"{tag}: alpha {got:.6f}, RFC 6356 {alpha:.6f}"
    total = sum(ws)
    for i, w in enumerate(ws):
        inc = r[f"{tag}_delta_{i}"] / 65536 / w
        want = min(alpha / total, 1 / w)
        assert abs(inc - want) <= 1e-4 * want + 1 / 65536 / w, f"{tag} path {i}: {inc:.6f}/pkt, RFC {want:.6f}"


def test_lia_coupled_increase_and_decrease(harness: Path) -> None:
    """Two subflows of 100 packets at 100 ms: alpha = 1/2, alpha / W_total = 1/400 per packet, so one subflow's
    400 packets add one (not 199); alone (no peers) it is Reno, 100 packets add one.  A loss halves, at least 2."""
    r = run(harness, "lia")
    assert (r["coupled_w_after_199"], r["coupled_w_after_400"]) == (100, 101)
    assert r["alone_w_after_100"] == 101
    assert (r["ssthresh_100"], r["ssthresh_3"]) == (50, 2)


def test_unmptcpw_split_quarter(harness: Path) -> None:
    """unMPTCPW's increase is TCPW's scaled by (1/2)^2: delta 0.25 (Q16), 400 packets at w = 100 add one (399 do
    not); split 1.0 is TCPW, and it never exceeds 1."""
    r = run(harness, "unmptcpw")
    assert (r["delta_default"], r["delta_one"], r["delta_over"]) == (16384, 65536, 65536)
    assert (r["w_after_399"], r["w_after_400"]) == (100, 101)
