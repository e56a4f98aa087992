"""Guest-side tests: they run inside the lab VM (make vm-test boots it), nowhere else.

Every test records what it measured in one report (JSON) that the host side,
tests/test_vm.py, reads from the VM's control share and prints.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPORT = Path(os.environ.get("CCLAB_VM_REPORT", "/run/cclab-ctl/report.json"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vm: runs inside the qemu lab VM (make vm-test); skips elsewhere")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CCLAB_IN_VM") == "1":
        return
    skip = pytest.mark.skip(reason="runs inside the qemu lab VM only: make vm-test")
    for item in items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def report() -> Iterator[dict[str, Any]]:
    """What the tests measured, keyed by topic; written for the host at the end."""
    data: dict[str, Any] = {"kernel": os.uname().release, "modules": {}, "baselines": {}, "ebpf": {}}
    yield data
    tmp = REPORT.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.rename(REPORT)
