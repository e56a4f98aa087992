"""The tcp_congestion_ops modules build against the installed kernel headers without warnings.

Loading them needs a kernel with module support (the lab VM); building needs
only the headers, which `make deps` installs (Debian: linux-headers-amd64).
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from controller.spec import algos
from tests.conftest import REPO

#: every algorithm with a module form (algos.toml's forms)
ALGOS = algos.modules()
HEADERS = sorted(glob.glob("/usr/src/linux-headers-*-amd64") + glob.glob("/lib/modules/*/build"))


def _kdir_release() -> str:
    """The release hosts/cc/Makefile builds for: its KDIR's UTS_RELEASE (the running kernel's tree, else the
    newest Debian headers)."""
    kdir = Path(f"/lib/modules/{os.uname().release}/build")
    if not kdir.exists():
        kdir = Path(sorted(glob.glob("/usr/src/linux-headers-*-amd64"))[-1])
    m = re.search(r'UTS_RELEASE "(.*)"', (kdir / "include" / "generated" / "utsrelease.h").read_text())
    assert m, f"{kdir} names no release"
    return m.group(1)


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
        ko = REPO / "hosts" / "cc" / "build" / "kmod" / _kdir_release() / f"tcp_{algo}.ko"
        assert ko.exists(), f"{ko} was not built"
