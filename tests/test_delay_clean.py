"""`cclab clean` removes what a killed controller leaves of cclab-delay.

A separate module: clean removes every cclab network device and shell, so it
must not run while test_delay.py's dumbbell is up.
"""

from __future__ import annotations

import pytest

from controller import system
from controller.dataplane import delayline
from tests.test_delay import _leftovers


@pytest.mark.root
def test_clean_removes_a_left_delay_line() -> None:
    """What a killed controller leaves (the process, capture pair, steering pins): `cclab clean` removes it."""
    from controller import clean

    assert not _leftovers(), f"host not clean before the test: {_leftovers()}"
    a, b = "cclab-bench91", "cclab-bench92"
    system.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
    line = delayline.DelayLine(system.PIN_ROOT / "pytest-delay-clean" / "delay", (a,), seed=1)
    try:
        system.ensure_bpffs()
        line.start(1.0, 0.0)
        assert _leftovers(), "the delay line did not start"
        clean.clean()
        assert not _leftovers(), f"left behind by cclab clean: {_leftovers()}"
        assert not (system.PIN_ROOT / "pytest-delay-clean").exists()
    finally:
        line.teardown()
        system.run(["ip", "link", "del", a], check=False)
