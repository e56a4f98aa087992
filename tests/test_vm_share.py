"""What the host reads back from a lab VM that ended (controller/vm/share.py), without booting one.

tests/data/guest-panic-console.log is a real console's end: the guest's kernel
panicked under software emulation (a double fault in the slab allocator) while
the guest suite ran, and left no exit status.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller import vm
from controller.vm.share import read_outcome
from tests.conftest import panic_is_ours as ours

PANIC = Path(__file__).with_name("data") / "guest-panic-console.log"


def _ctl(tmp_path: Path, console: str) -> Path:
    (tmp_path / "console.log").write_text("cclab-init: started\ncclab-init: ready after 6.2 s of uptime\n" + console)
    return tmp_path


def test_a_guest_panic_is_told_apart_with_its_report(tmp_path: Path) -> None:
    ctl = _ctl(tmp_path, PANIC.read_text())
    with pytest.raises(vm.GuestPanic) as exc:
        read_outcome(ctl, 0)
    lines = exc.value.trace.splitlines()
    assert "PANIC: double fault" in lines[0] and "Kernel panic - not syncing" in lines[-1], exc.value.trace
    assert "Oops: double fault" in str(exc.value) and str(ctl / "console.log") in str(exc.value)
    assert not ours(exc.value.trace), "the report names no cclab function (only the loaded modules' list)"


def test_a_panic_through_a_cclab_module_or_bpf_program_is_ours(tmp_path: Path) -> None:
    frame = " logwestwood_cong_avoid+0x3a/0x90 [tcp_logwestwood]\n"
    text = PANIC.read_text().replace("[  219.735279]  __alloc_skb+0x14a/0x1a0\n", frame, 1)
    assert frame in text
    with pytest.raises(vm.GuestPanic) as exc:
        read_outcome(_ctl(tmp_path, text), 0)
    assert ours(exc.value.trace)
    assert ours("RIP: 0010:bpf_prog_3b185187f1855c4c_tcpwplus_cong_avoid+0x21/0x40")


def test_an_end_without_status_or_panic_is_a_plain_vm_error(tmp_path: Path) -> None:
    ctl = _ctl(tmp_path, "[    6.713800] reboot: Power down\n")
    with pytest.raises(vm.VmError) as exc:
        read_outcome(ctl, 0)
    assert not isinstance(exc.value, vm.GuestPanic)
    assert "without the command's exit status" in str(exc.value)


def test_a_panic_told_by_the_command_line_is_found_with_its_console(tmp_path: Path) -> None:
    """`cclab run --vm` prints GuestPanic's message; a lab VM test finds the console in it to read the trace."""
    from tests.conftest import _PANIC_SEEN

    ctl = _ctl(tmp_path, PANIC.read_text())
    with pytest.raises(vm.GuestPanic) as exc:
        read_outcome(ctl, 0)
    seen = _PANIC_SEEN.search(f"cclab: {exc.value}\n")
    assert seen is not None and seen.group(1) == str(ctl / "console.log"), str(exc.value)
