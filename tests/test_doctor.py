"""`cclab doctor`: its table and --json say what the probes say, each no with its reason and fix; and in the
lab VM it differs from this host's exactly where the two kernels differ."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from controller import capabilities, cc, cli, system
from controller.dataplane import DataPlaneError, delay
from controller.experiment import preflight
from controller.spec import algos
from tests.conftest import CCLAB, REPO, lab_vm_missing, run_in_lab_vm

#: rows that report a fact and have no fix to give (a "no" there is not something to repair here)
NO_FIX_EXPECTED = {"sysctl.bridge-nf"}


def _doctor(env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run([*CCLAB, "doctor", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in doc["capabilities"]}


def _btf_has_func(name: str) -> bool:
    """bpftool's own reading of the kernel's BTF: is there a FUNC of this name (a kfunc)?"""
    proc = subprocess.run(
        ["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "raw"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return f"FUNC '{name}'" in proc.stdout


def test_doctor_json_agrees_with_the_probes() -> None:
    rows = _rows(_doctor())
    assert rows["delay.netem"]["ok"] == system.has_netem()
    assert rows["cc.module"]["ok"] == (cc.takes_modules() and any(cc.module_matches(n) for n in cc.CCLAB_ALGOS))
    assert rows["cc.ebpf"]["ok"] == all(cc.bpf_object(n).exists() for n in cc.CCLAB_ALGOS)
    assert rows["delay.cclab-delay"]["ok"] == (delay.delayline.missing() is None)
    assert rows["dataplane.bmv2"]["ok"] == (preflight.dataplane_missing("bmv2") is None)
    assert rows["dataplane.tofino"]["ok"] is False
    assert rows["p4.bmv2"]["ok"] == all(shutil.which(t) for t in preflight.BMV2_TOOLS)
    assert rows["root"]["ok"] == (os.geteuid() == 0)
    try:
        element: str | None = delay.pick_element("auto")
    except DataPlaneError:
        element = None
    assert rows["delay"]["ok"] == (element is not None)
    if element is not None:
        assert rows["delay"]["reason"].startswith(element), rows["delay"]
    mptcp_on = system.read_sysctl("net.mptcp.enabled") == "1"
    assert rows["mptcp"]["ok"] == mptcp_on
    if shutil.which("bpftool") and Path("/sys/kernel/btf/vmlinux").exists():
        assert rows["kfunc.bpf_rdonly_cast"]["ok"] == _btf_has_func("bpf_rdonly_cast")
    for key, row in rows.items():
        assert row["reason"], f"{key} gives no reason"
        if not row["ok"] and key not in NO_FIX_EXPECTED:
            assert row["fix"], f"{key} is missing a piece but gives no fix: {row}"


def test_doctor_says_bmv2_is_missing_without_the_p4_tools() -> None:
    """PATH without /opt/p4/bin (where CI and this machine keep BMv2): the same probes then say no, with the fix."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p.rstrip("/") != "/opt/p4/bin")
    if any(shutil.which(t, path=path) for t in preflight.BMV2_TOOLS):
        pytest.skip("BMv2 is installed outside /opt/p4/bin: it cannot be hidden by PATH")
    rows = _rows(_doctor({**os.environ, "PATH": path}))
    assert rows["p4.bmv2"]["ok"] is False
    assert rows["dataplane.bmv2"]["ok"] is False
    assert "simple_switch_grpc" in rows["dataplane.bmv2"]["reason"]
    assert "BMv2" in rows["dataplane.bmv2"]["fix"]


def test_doctor_table_shows_every_probe_at_80_columns() -> None:
    caps = capabilities.probe_all()
    console = Console(width=80, record=True, color_system=None)
    console.print(cli.doctor_table(caps))
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    for c in caps:
        row = next((ln for ln in lines if ln.startswith(f"│ {c.key} ")), None)
        assert row is not None, f"{c.key} not in the table:\n{text}"
        assert ("│ yes │" if c.ok else "│ no  │") in row, row
        if c.fix:
            assert "fix: " in text


def test_coupled_mptcpw_is_refused_exactly_where_neither_form_loads() -> None:
    """The runner's refusal and doctor's row follow the same kfunc probe (bpftool's reading of the BTF here)."""
    if not (shutil.which("bpftool") and Path("/sys/kernel/btf/vmlinux").exists()):
        pytest.skip("no bpftool or kernel BTF to read the kfuncs from")
    kfunc = _btf_has_func("bpf_rdonly_cast")
    module = cc.module_matches("mptcpw")
    why = capabilities.algo_missing("mptcpw")
    assert (why is None) == (kfunc or module or "mptcpw" in cc.available()), why
    assert capabilities.algo_missing("tcpwplus") is None
    rows = _rows(_doctor())
    assert rows["kfunc.bpf_rdonly_cast"]["ok"] == kfunc


def test_manifest_records_the_same_probes() -> None:
    rec = capabilities.record()
    assert set(rec) == {c.key for c in capabilities.probe_all()}
    assert rec["delay.netem"]["ok"] == system.has_netem()


@pytest.mark.root
@pytest.mark.slow
def test_doctor_in_the_lab_vm_differs_where_the_kernels_differ() -> None:
    """One boot runs `cclab doctor --json` in the guest; its kernel rows follow the guest's own kernel facts."""
    why = lab_vm_missing()
    if why:
        pytest.skip(why)

    if not all(cc.kernel_module(n).exists() for n in algos.modules()):
        pytest.skip("the .ko modules are not built; run `make -C hosts/cc kmod`")
    # the guest prints its doctor, then its own raw kernel facts, read without cclab's probes
    facts = (
        "import json, os, subprocess; "
        "btf = open('/sys/kernel/btf/vmlinux', 'rb').read() if os.path.exists('/sys/kernel/btf/vmlinux') else b''; "
        "netem = subprocess.run(['unshare', '-n', 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', "
        "'1ms'], capture_output=True).returncode == 0; "
        "print('FACTS ' + json.dumps({'netem': netem, 'modules': os.path.exists('/proc/modules'), "
        "'rdonly_cast': b'\\0bpf_rdonly_cast\\0' in btf}))"
    )
    script = f'python3 -m controller.cli doctor --json && python3 -c "{facts}"'
    res = run_in_lab_vm(["sh", "-c", script], timeout_s=300)
    assert res.returncode == 0, res.output[-2000:]
    lines = res.output.splitlines()
    guest_doc = json.loads(next(ln for ln in lines if ln.startswith("{")))
    guest_facts = json.loads(next(ln for ln in lines if ln.startswith("FACTS "))[6:])
    guest, host = _rows(guest_doc), _rows(_doctor())
    assert guest_doc["in_lab_vm"] is True and guest_doc["kernel"] != system.kernel_release()
    assert guest["delay.netem"]["ok"] == guest_facts["netem"]
    assert guest["cc.module"]["ok"] == guest_facts["modules"]
    assert guest["kfunc.bpf_rdonly_cast"]["ok"] == guest_facts["rdonly_cast"]
    host_facts = {
        "netem": system.has_netem(),
        "modules": cc.takes_modules(),
        "rdonly_cast": capabilities.kernel_has_btf_name("bpf_rdonly_cast"),
    }
    differ = {k for k in host_facts if host_facts[k] != guest_facts[k]}
    assert differ, f"the lab VM's kernel differs from this one in none of {sorted(host_facts)}: nothing to compare"
    # every kernel row whose answer differs follows from a fact that differs, and each such fact shows
    follows = {
        "netem": {"delay.netem", "delay"},
        "modules": {"cc.module", "ovs.kernel"},
        "rdonly_cast": {"kfunc.bpf_rdonly_cast", "cc.mptcpw_coupled"},
    }
    kernel_rows = {k for k, row in guest.items() if row["layer"] == capabilities.KERNEL}
    rows_differ = {k for k in kernel_rows if guest[k]["ok"] != host[k]["ok"]}
    explained = set().union(*(follows[f] for f in differ))
    assert rows_differ <= explained, f"kernel rows differ without a kernel fact behind them: {rows_differ - explained}"
    names = {"delay.netem": "netem", "cc.module": "modules", "kfunc.bpf_rdonly_cast": "rdonly_cast"}
    assert {names[k] for k in rows_differ if k in names} == differ, (rows_differ, differ)
    print("host :", {k: host[k]["ok"] for k in sorted(kernel_rows)})
    print("guest:", {k: guest[k]["ok"] for k in sorted(kernel_rows)})


def test_a_qemu_with_the_tcg_race_is_told_by_its_version() -> None:
    """QEMU before 8.1 lets a software-emulated guest's kernel oops at random; vm.accel says so there."""
    from controller.vm.accel import qemu_version, tcg_race

    assert tcg_race("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)")
    assert tcg_race("QEMU emulator version 8.0.4 (Debian 1:8.0.4+dfsg-1ubuntu3.23.10.3)")
    assert not tcg_race("QEMU emulator version 8.1.0")
    assert not tcg_race("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)")
    assert not tcg_race("absent")
    row = _rows(_doctor())["vm.accel"]
    if tcg_race(qemu_version()) and "KVM works" not in row["reason"]:
        assert not row["ok"] and "QEMU 8.1" in row["reason"], row
    else:
        assert "TCG race" not in row["reason"], row
