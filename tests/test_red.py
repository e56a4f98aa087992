"""A link's RED queue as a spec field (no root): what it parses into, every refusal in one line naming field,
value and what is allowed, the targets that cannot run it, and the integers the kernel target's program gets."""

from __future__ import annotations

import math

import pytest

from controller import spec
from controller.dataplane import LinkParams
from controller.dataplane.bmv2 import red_idle_inv
from controller.dataplane.red import RED_OFF, red_config
from controller.dataplane.tofino import TofinoBottleneck, TofinoError
from controller.experiment.build import link_params
from controller.network import Red
from controller.spec import tomllib
from tests import test_network, test_spec

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


def test_tofino_refuses_red_before_anything_is_built() -> None:
    """The TNA program has no RED: the spec refuses it on tofino; bmv2 and the kernel target take it."""
    with pytest.raises(spec.SpecError) as exc:
        _parse(SPEC.replace('name = "t"', 'name = "t"\ndataplane = "tofino"'))
    msg = str(exc.value)
    assert "link l1 (s1-s2).red = '{...}': not in the TNA program yet" in msg and "\n" not in msg, msg
    for dataplane in ("kernel", "bmv2"):
        assert _parse(SPEC.replace('name = "t"', f'name = "t"\ndataplane = "{dataplane}"')).bottleneck.red


def test_tofino_refuses_red_at_set_up_too() -> None:
    """A LinkParams with RED that reaches the Tofino target (not through a spec) is refused before any write."""
    dp = TofinoBottleneck("t", bottleneck_port=1, routes=())
    with pytest.raises(TofinoError, match="a RED queue is not in the TNA program yet"):
        dp._set_loss(LinkParams(rate_bps=10_000_000, queue_pkts=100, red=Red(min_pkts=2, max_pkts=8)))


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
