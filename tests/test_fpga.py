"""The FPGA element's cocotb testbenches (fpga/tb/<module>/), each built and run on Icarus through cocotb's
runner: one pytest test per testbench, failing with the names of the cocotb tests that failed."""

from __future__ import annotations

import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import FPGA_MISSING, FPGA_SKIP_REASON, REPO

RTL = REPO / "fpga" / "rtl"
TB = REPO / "fpga" / "tb"

#: (testbench = its top-level module, the parameters it is built with; the rest are the RTL's defaults), as
#: the testbench Makefiles set them; the element and the shaper in both their forms
BENCHES: list[tuple[str, dict[str, int]]] = [
    ("cclab_bottleneck", {"Q_ADDR_W": 18, "N_FLOWS": 8, "PIPELINE": 1}),
    ("cclab_bottleneck", {"Q_ADDR_W": 15, "N_FLOWS": 8, "PIPELINE": 0}),
    ("cclab_shaper", {"PIPELINE": 0}),
    ("cclab_shaper", {"PIPELINE": 1}),
    ("cclab_delay_line", {"ADDR_W": 6}),
    ("cclab_loss", {}),
]

pytestmark = [pytest.mark.fpga, pytest.mark.skipif(bool(FPGA_MISSING), reason=FPGA_SKIP_REASON)]


def failed_tests(results: Path) -> list[str]:
    """The cocotb tests that failed or errored in a results file (xUnit XML)."""
    return [
        case.get("name", "?")
        for case in ElementTree.parse(results).getroot().iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]


@pytest.mark.parametrize(
    ("bench", "params"), BENCHES, ids=[b + "".join(f"-{k}={v}" for k, v in p.items()) for b, p in BENCHES]
)
def test_testbench(bench: str, params: dict[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    # the simulator's Python imports the test module (and cclab_model) through this process's sys.path
    monkeypatch.syspath_prepend(str(TB / bench))
    monkeypatch.syspath_prepend(str(TB))
    runner = get_runner("icarus")
    runner.build(
        sources=sorted(RTL.glob("*.v")),
        hdl_toplevel=bench,
        parameters=params,
        build_dir=tmp_path / "build",
        timescale=("1ns", "1ps"),
        always=True,
    )
    results = tmp_path / "results.xml"
    env = {f"PARAM_{k}": str(v) for k, v in params.items()}
    try:
        runner.test(
            test_module=f"test_{bench}",
            hdl_toplevel=bench,
            build_dir=tmp_path / "build",
            test_dir=tmp_path,
            results_xml=str(results),
            extra_env={**env, "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")},
        )
    except SystemExit as exc:  # the runner exits under pytest when a cocotb test failed
        if not results.exists():
            pytest.fail(f"{bench}: the simulation ended without results (exit {exc.code})")
    ran, failed = get_results(results)
    assert ran > 0, f"{bench}: no cocotb test ran"
    assert failed == 0, f"{bench}: {failed} of {ran} cocotb tests failed: {', '.join(failed_tests(results))}"
