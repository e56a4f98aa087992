"""A link's RED queue as a spec field (no root): what it parses into, every refusal in one line naming field,
value and what is allowed, the targets that cannot run it, and the integers the kernel target's program gets."""

from __future__ import annotations

import math
import re

import pytest

from controller import spec
from controller.dataplane import tofino
from controller.dataplane.bmv2 import red_idle_inv
from controller.dataplane.red import RED_OFF, red_config
from controller.dataplane.tofino import TNA_RED_OFF, TofinoError, red_threshold, tna_red
from controller.experiment.build import link_params
from controller.network import TNA_RED_WLOG, Red
from controller.spec import tomllib
from tests import test_network, test_spec
from tests.conftest import REPO

RED_LINE = "red = {min_pkts = 20, max_pkts = 80, max_p = 0.2}"
SPEC = test_spec.GOOD.replace("rate_mbps = 10", f"rate_mbps = 10\nqueue_pkts = 100\n{RED_LINE}")


def _parse(text: str) -> spec.Spec:
    return spec.parse(tomllib.loads(text))


def test_red_parses_with_defaults_and_reaches_link_params() -> None:
    s = _parse(SPEC)
    red = s.bottleneck.red
    assert red == Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=9)
    assert red.thresholds == (20, 80) and not red.in_bytes
    assert link_params(s.bottleneck).red == red
    in_bytes = _parse(SPEC.replace("queue_pkts = 100", "queue_bytes = 150000").replace(
        RED_LINE, "red = {min_bytes = 30000, max_bytes = 120000, wlog = 4}"
    ))  # fmt: skip
    assert in_bytes.bottleneck.red == Red(min_bytes=30_000, max_bytes=120_000, max_p=0.1, wlog=4)
    assert in_bytes.bottleneck.red is not None and in_bytes.bottleneck.red.in_bytes


def test_red_survives_a_preset_link_override() -> None:
    """[links.l1] merges over [bottleneck]: RED is kept, or replaced as a whole."""
    kept = _parse(SPEC + "[links.l1]\nper = 0.01\n")
    assert kept.bottleneck.red == Red(min_pkts=20, max_pkts=80, max_p=0.2)
    other = _parse(SPEC + "[links.l1]\nred = {min_pkts = 5, max_pkts = 15}\n")
    assert other.bottleneck.red == Red(min_pkts=5, max_pkts=15)


@pytest.mark.parametrize(
    ("red", "needle"),
    [
        ("red = {min_pkts = 20, max_pkts = 180}", "red.max_pkts = 180: must be <= the queue limit, queue_pkts (100)"),
        ("red = {min_pkts = 80, max_pkts = 80}", "red.min_pkts = 80: must be < max_pkts (80)"),
        ("red = {min_pkts = -1, max_pkts = 80}", "red.min_pkts = -1: must be a whole number from 0"),
        ("red = {min_pkts = 2.5, max_pkts = 80}", "red.min_pkts = 2.5: must be a whole number"),
        ("red = {min_pkts = 20}", "red.max_pkts is missing: a RED queue needs min_pkts and max_pkts"),
        ("red = {min_bytes = 3000, max_bytes = 9000}", "red.min_bytes = 3000: give min_pkts and max_pkts"),
        ("red = {min_pkts = 2, max_pkts = 8, max_p = 0}", "red.max_p = 0: must be > 0 and <= 1 (a probability)"),
        ("red = {min_pkts = 2, max_pkts = 8, max_p = 1.5}", "red.max_p = 1.5: must be > 0 and <= 1"),
        ("red = {min_pkts = 2, max_pkts = 8, wlog = 21}", "red.wlog = 21: must be a whole number from 0 to 20"),
        ("red = {min_pkts = 2, max_pkts = 8, weight = 0.002}", "red.weight = 0.002: unknown key; allowed here"),
        ("red = 5", "bottleneck.red = 5: must be a table"),
    ],
)
def test_bad_red_is_refused_in_one_line(red: str, needle: str) -> None:
    with pytest.raises(spec.SpecError) as exc:
        _parse(SPEC.replace(RED_LINE, red))
    msg = str(exc.value)
    assert msg.startswith("spec error: bottleneck.") and needle in msg and "\n" not in msg, msg


def test_red_in_bytes_needs_a_queue_in_bytes_and_fits_it() -> None:
    text = SPEC.replace("queue_pkts = 100", "queue_bytes = 15000")
    with pytest.raises(spec.SpecError, match=r"bottleneck\.red\.min_pkts = 20: give min_bytes and max_bytes"):
        _parse(text)
    with pytest.raises(spec.SpecError, match=r"red\.max_bytes = 20000: must be <= the queue limit, queue_bytes \(15"):
        _parse(text.replace(RED_LINE, "red = {min_bytes = 3000, max_bytes = 20000}"))


def test_red_needs_a_rate_limited_link() -> None:
    """Only a rate-limited link has a queue: RED on a delay-only link is refused."""
    text = test_network.GRAPH.replace("delay_ms = 60\n", "delay_ms = 60\nred = {min_pkts = 2, max_pkts = 8}\n", 1)
    assert text != test_network.GRAPH
    with pytest.raises(spec.SpecError, match=r"topology\.links\[1\]\.red = .*: needs rate_mbps"):
        _parse(text)


def test_tofino_takes_red_with_the_programs_weight_and_refuses_another() -> None:
    """The TNA program's average has its weight built in (TNA_RED_WLOG): the spec takes RED on tofino with that
    red.wlog (the default) and refuses another in one line, before anything is built."""
    tofino = SPEC.replace('name = "t"', 'name = "t"\ndataplane = "tofino"')
    assert _parse(tofino).bottleneck.red == Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=TNA_RED_WLOG)
    with pytest.raises(spec.SpecError) as exc:
        _parse(tofino.replace("max_p = 0.2}", "max_p = 0.2, wlog = 7}"))
    msg = str(exc.value)
    assert "link l1 (s1-s2).red.wlog = 7: the Tofino program's RED average has the weight 2^-9 built in" in msg, msg
    assert "\n" not in msg
    with pytest.raises(TofinoError, match=r"^red.wlog = 7: the TNA program's RED average has the weight 2\^-9$"):
        tna_red(Red(min_pkts=20, max_pkts=80, wlog=7), 10_000_000, 1514)
    assert tna_red(None, 10_000_000, 1514) == TNA_RED_OFF


def test_tna_red_by_hand() -> None:
    """min 20, max 80 packets, max_p 0.2 at 10 Mbit/s, 1514-byte frames (19 cells of 80 bytes), wlog 9."""
    t = tna_red(Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=9), 10_000_000, 1514)
    assert (t.min_c, t.max_c, t.norm) == (20 * 19 << 9, 80 * 19 << 9, 0) == (194_560, 778_240, 0)
    # span 583680 in 64 steps of 9120; the first step's middle (194560 + 203679) // 2 = 199119 is 4559 above min:
    # ceil(round(0.2 * 2^32) * 4559 / 583680) = ceil(858993459 * 4559 / 583680) = ceil(6709414.76)
    assert t.ramp[0] == (194_560, 203_679, 6_709_415) and len(t.ramp) == 64
    # red.py's halving time at 10 Mbit/s: 1211.2 us a frame / -log2(1 - 2^-9) = 429424504 ns, 419359.9 ticks of
    # 1.024 us: the idle rule's ranges from 0.5, 1.5 and 2.5 halvings, rounded up to ticks
    assert red_config(Red(min_pkts=20, max_pkts=80, wlog=9), 10_000_000, 1514).half_ns == 429_424_504
    assert t.decay == (
        (209_680, 629_039, "red_decay_half"),
        (629_040, 1_048_399, "red_decay_quarter"),
        (1_048_400, (1 << 32) - 1, "red_decay_all"),
    )


@pytest.mark.parametrize(
    ("red", "rate_bps"),
    [
        (Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=9), 10_000_000),
        (Red(min_pkts=5, max_pkts=15, max_p=1.0, wlog=9), 100_000_000_000),
        (Red(min_bytes=30_000, max_bytes=120_000, max_p=0.1, wlog=9), 1_000_000_000),
        (Red(min_bytes=0, max_bytes=4_000_000, max_p=0.5, wlog=9), 10_000_000),
        (Red(min_pkts=0, max_pkts=2, max_p=1e-6, wlog=9), 1_000_000),
    ],
)
def test_tna_red_is_red_pys_integers_in_cells(red: Red, rate_bps: int) -> None:
    """What tofino.py programs is red.py's RED in the TNA program's units: thresholds in cells, red.py's norm rule
    for their span, red_ramp's steps covering [min, max) with the v1model program's early-drop threshold at each
    step's middle (so within max_p / 128 of its line everywhere), and the idle rule's ranges in red.py's
    halvings of the program's 1.024 us clock."""
    base = red_config(red, rate_bps, 1514)
    t = tna_red(red, rate_bps, 1514)
    cells = (lambda v: -(-v // 80)) if red.in_bytes else (lambda v: v * 19)
    assert (t.on, t.min_c, t.max_c) == (1, cells(base.min_s), cells(base.max_s))
    span = t.max_c - t.min_c
    assert span >> t.norm < 1 << 31 and (t.norm == 0 or span >> t.norm >= 1 << 30)
    cfg = base._replace(min_s=t.min_c, max_s=t.max_c, norm=t.norm)
    ends = [t.min_c - 1] + [hi for _, hi, _ in t.ramp]
    assert [lo for lo, _, _ in t.ramp] == [e + 1 for e in ends[:-1]] and ends[-1] == t.max_c - 1
    assert len(t.ramp) == min(tofino.RED_RAMP_STEPS, span)
    m = base.max_p_thr
    for lo, hi, thr in t.ramp:
        mid = (lo + hi) // 2
        assert thr == red_threshold(cfg, mid)
        # the v1model program's test at the middle: draw thr - 1 drops, draw thr does not
        over, sp = (mid - t.min_c) >> t.norm, span >> t.norm
        assert (thr - 1) * sp < m * over <= thr * sp or thr == over == 0, (lo, hi, thr)
        for avg in (lo, hi):  # the staircase against the line over the whole step
            line = m * (avg - t.min_c) / span
            assert abs(thr - line) <= m / (2 * len(t.ramp)) + m * (1 << t.norm) / span + 1, (avg, thr, line)
    assert [thr for *_, thr in t.ramp] == sorted(thr for *_, thr in t.ramp)
    ticks = base.half_ns / (1 << tofino.RED_TIME_SHIFT)
    starts = [lo for lo, _, _ in t.decay]
    assert [a for *_, a in t.decay] == ["red_decay_half", "red_decay_quarter", "red_decay_all"]
    for start, (halvings, _) in zip(starts, tofino.RED_DECAY):
        assert start == max(1, math.ceil(halvings * ticks)) or ticks < 1, (start, halvings * ticks)
    assert [hi + 1 for _, hi, _ in t.decay[:-1]] == starts[1:] and t.decay[-1][1] == (1 << 32) - 1


TNA = (REPO / "p4" / "tna" / "bottleneck.p4").read_text()


def test_the_tna_program_has_what_tofino_py_programs() -> None:
    """Every table, action, counter and register tofino.py names is declared in p4/tna/bottleneck.p4, and the
    program's RED constants are tofino.py's."""
    source = (REPO / "controller" / "dataplane" / "tofino.py").read_text()
    named = set(re.findall(r'"(?:pipe\.)?Cclab(?:Ingress|Egress)\.(\w+)', source))
    assert {"red_params", "red_average", "red_ramp", "red_avg", "red_drops", "red_set_threshold"} <= named
    named |= {action for _, action in tofino.RED_DECAY}
    for name in sorted(named):
        assert re.search(rf"\b(table|action|\)) {name}\b|\) {name};", TNA), f"{name} is not in the TNA program"
    assert re.search(rf"#define RED_WLOG {TNA_RED_WLOG}\n", TNA)
    assert re.search(rf"RED_RAMP_STEPS = 32w{tofino.RED_RAMP_STEPS};", TNA)
    assert "global_tstamp[41:10]" in TNA and tofino.RED_TIME_SHIFT == 10


def test_bmv2_idle_inverse_is_the_halving_time_in_us() -> None:
    """The P4 program's halvings, idle_us * idle_inv >> 16 (<< 16), match idle_ns / half_ns within 0.1 % (or
    1/65536 of a halving)."""
    cfg = red_config(Red(min_pkts=20, max_pkts=80, wlog=9), 10_000_000, 1514)
    inv = red_idle_inv(cfg)
    for idle_us in (1_000, 430_000, 5_000_000):
        got = (idle_us * inv) >> 16
        want = idle_us * 1000 / cfg.half_ns * 65536
        assert math.isclose(got, want, rel_tol=1e-3, abs_tol=1), (idle_us, got, want)
    assert red_idle_inv(red_config(Red(min_pkts=1, max_pkts=2, wlog=0), 10_000_000, 1514)) == 1 << 32


def test_kernel_red_config_is_integer_and_fits_the_programs_arithmetic() -> None:
    """The program computes ((avg_s - min_s) >> norm) * max_p_thr / ((max_s - min_s) >> norm) in 64 bits."""
    assert red_config(None, 10_000_000, 1514) == RED_OFF == (0,) * 8
    cases = [
        (Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=6), 10_000_000),
        (Red(min_pkts=0, max_pkts=1_000_000, max_p=1.0, wlog=20), 1_000),
        (Red(min_bytes=0, max_bytes=1_000_000_000, max_p=0.5, wlog=20), 100_000_000_000),
        (Red(min_pkts=2, max_pkts=3, max_p=1e-9, wlog=0), 10_000_000),
    ]
    for red, rate in cases:
        cfg = red_config(red, rate, 1514)
        assert all(isinstance(v, int) for v in cfg), cfg
        on, in_bytes, k, norm, min_s, max_s, thr, half_ns = cfg
        lo, hi = red.thresholds
        assert (on, in_bytes, k) == (1, int(red.in_bytes), red.wlog)
        assert (min_s, max_s) == (lo << k, hi << k)
        span = (max_s - min_s) >> norm
        assert 1 << 30 <= span < 1 << 31 if norm else 0 < span < 1 << 31, (red, norm)
        assert thr == round(red.max_p * (1 << 32)) and span * thr < 1 << 64
        assert max_s <= 1_000_000_000 << 20 and half_ns >= 1  # the average << wlog fits; no division by zero
    # half_ns: m = idle / (frame time) frames leave (1 - 2^-k)^m of the average, i.e. half after half_ns
    frame_ns = 1514 * 8 * 1e9 / 10_000_000
    half_ns = red_config(Red(min_pkts=1, max_pkts=2, wlog=9), 10_000_000, 1514).half_ns
    assert math.isclose((1 - 2**-9) ** (half_ns / frame_ns), 0.5, rel_tol=1e-6)
