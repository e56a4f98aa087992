"""Who delays a link's packets: the registry's targets and the runner's decision, without root.

A target that does not delay by itself (kernel, bmv2, tofino) leaves delay to
the link's delay element; one that does (fpga-sim, and a tiny target
registered here for the test) gets no delay element.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from controller import network
from controller.dataplane import DataPlaneError, LinkParams, Snapshot, targets
from controller.experiment.preflight import delay_element_links


class SelfDelaying:
    """The least a target that delays by itself is: it keeps what it is told (nothing of the host is touched)."""

    delays_itself: ClassVar[bool] = True

    def __init__(self, egress_dev: str, ingress_dev: str) -> None:
        self.egress_dev, self.ingress_dev = egress_dev, ingress_dev
        self.params: LinkParams | None = None

    def setup(self, params: LinkParams, seed: int) -> None:
        self.params = params

    def apply(self, params: LinkParams) -> None:
        self.params = params

    def read(self) -> Snapshot:
        return Snapshot(t=0.0)

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        return True

    def describe(self) -> dict[str, Any]:
        return {"target": "self-delaying"}

    def teardown(self) -> None:
        self.params = None


def test_registry_holds_the_spec_names_and_each_target_says_who_delays() -> None:
    assert tuple(targets.TARGETS) == network.DATAPLANES
    for name, t in targets.TARGETS.items():
        assert t.name == name
        assert t.cls.delays_itself is (name == "fpga-sim"), f"{name}: only the FPGA element delays by itself"
    assert targets.in_mininet() == ("kernel", "bmv2", "fpga-sim")


def test_unknown_target_is_named_with_the_choices() -> None:
    at = targets.Placement("x", "a", "b")
    with pytest.raises(DataPlaneError, match=r"dataplane 'fpga' is not one of kernel, bmv2, tofino, fpga-sim$"):
        targets.make_bottleneck("fpga", at)


def test_delay_element_on_every_delayed_link_of_a_target_that_does_not_delay() -> None:
    g = network.presets.parking_lot(2, network.LinkSpec(rate_mbps=10, delay_ms=5))
    delayed = [lk.id for lk in g.links if lk.spec.has_delay]
    assert delayed, "the graph has no delayed link to decide about"
    for name in network.DATAPLANES:
        want = [] if name == "fpga-sim" else delayed
        assert [lk.id for lk in delay_element_links(g, name)] == want, name
    plain = network.presets.dumbbell(1, network.LinkSpec(rate_mbps=10))
    assert delay_element_links(plain, "kernel") == []


def test_no_delay_element_for_a_target_that_delays_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(at: targets.Placement) -> SelfDelaying:
        return SelfDelaying(at.egress_dev, at.ingress_dev)

    monkeypatch.setitem(targets.TARGETS, "selfdelay", targets.Target("selfdelay", SelfDelaying, make, False, ()))
    g = network.presets.parking_lot(2, network.LinkSpec(rate_mbps=10, delay_ms=5))
    assert delay_element_links(g, "kernel"), "the graph has no delayed link to decide about"
    assert delay_element_links(g, "selfdelay") == []
    assert isinstance(targets.make_bottleneck("selfdelay", targets.Placement("x", "a", "b")), SelfDelaying)
