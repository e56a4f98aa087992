"""The tcp_congestion_ops modules build against the installed kernel headers without warnings.

Loading them needs a kernel with module support (the lab VM); building needs
only the headers, which `make deps` installs (Debian: linux-headers-amd64).
"""

from __future__ import annotations

import glob
import re
import subprocess

import pytest

from tests.conftest import REPO

ALGOS = ("tcpw", "tcpwplus", "tcpw_abse", "logwestwood", "btbe", "mptcpw")
HEADERS = sorted(glob.glob("/usr/src/linux-headers-*-amd64") + glob.glob("/lib/modules/*/build"))


@pytest.mark.skipif(not HEADERS, reason="no kernel headers installed (run `make deps`)")
def test_modules_build_without_warnings() -> None:
    proc = subprocess.run(
        ["make", "-C", str(REPO / "hosts" / "cc"), "kmod", "V=1"], capture_output=True, text=True, timeout=900
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    warnings = [line for line in log.splitlines() if re.search(r"\bwarning:", line)]
    assert not warnings, "\n".join(warnings)
    for algo in ALGOS:
        kos = list((REPO / "hosts" / "cc" / "build" / "kmod").glob(f"tcp_{algo}.ko"))
        assert kos, f"tcp_{algo}.ko was not built"
