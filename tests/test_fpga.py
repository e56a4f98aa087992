"""The FPGA element's cocotb testbenches (fpga/tb/<module>/), each built and run on Icarus through cocotb's
runner: one pytest test per testbench, failing with the names of the cocotb tests that failed.  The testbenches run
side by side, one per core, each in a process of its own, from the module's first test on."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
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


#: testbenches simulated at once: each is one single-threaded simulator, so one per core
WORKERS = max(1, min(len(BENCHES), os.cpu_count() or 1))


def _ids(bench: str, params: dict[str, int]) -> str:
    return bench + "".join(f"-{k}={v}" for k, v in params.items())


def _simulate(bench: str, params: dict[str, int], where: Path) -> tuple[Path | None, str]:
    """Builds and runs one testbench in a process of its own (the simulator's Python imports the test module and
    cclab_model through this process's sys.path): its results file, or None with why there is none."""
    import sys

    from cocotb_tools.runner import get_runner

    sys.path[:0] = [str(TB / bench), str(TB)]
    runner = get_runner("icarus")
    runner.build(
        sources=sorted(RTL.glob("*.v")),
        hdl_toplevel=bench,
        parameters=params,
        build_dir=where / "build",
        timescale=("1ns", "1ps"),
        always=True,
    )
    results = where / "results.xml"
    env = {f"PARAM_{k}": str(v) for k, v in params.items()}
    try:
        runner.test(
            test_module=f"test_{bench}",
            hdl_toplevel=bench,
            build_dir=where / "build",
            test_dir=where,
            results_xml=str(results),
            extra_env={**env, "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")},
        )
    except SystemExit as exc:  # the runner exits when a cocotb test failed
        if not results.exists():
            return None, f"{bench}: the simulation ended without results (exit {exc.code})"
    return results, ""


@pytest.fixture(scope="module")
def simulations(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[tuple[Path | None, str]]]]:
    """Every testbench started at once, WORKERS at a time, each in a process of its own: by its test id."""
    with ProcessPoolExecutor(max_workers=WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield {_ids(b, p): pool.submit(_simulate, b, p, tmp_path_factory.mktemp(_ids(b, p))) for b, p in BENCHES}


@pytest.mark.parametrize(("bench", "params"), BENCHES, ids=[_ids(b, p) for b, p in BENCHES])
def test_testbench(bench: str, params: dict[str, int], simulations: dict[str, Future[tuple[Path | None, str]]]) -> None:
    from cocotb_tools.check_results import get_results

    results, why = simulations[_ids(bench, params)].result()
    if results is None:
        pytest.fail(why)
    ran, failed = get_results(results)
    assert ran > 0, f"{bench}: no cocotb test ran"
    assert failed == 0, f"{bench}: {failed} of {ran} cocotb tests failed: {', '.join(failed_tests(results))}"
