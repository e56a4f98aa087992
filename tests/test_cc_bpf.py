"""The eBPF struct_ops shells (hosts/cc/bpf/) on the running kernel.

For each algorithm of the Westwood family: register it with bpftool, carry
a ~3 s iperf3 flow over a veth pair between two network namespaces with
``iperf3 -C <algo>``, check that data moved and that the algorithm's
``st_<algo>`` state-export map held the flow's entry while it ran, then
unregister.  Everything created (namespaces ``cct-*``, the veth pair inside
them, iperf3 processes, struct_ops registrations) is removed in teardown,
also on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import cc
from controller.spec import algos

CC_DIR = Path(__file__).resolve().parent.parent / "hosts" / "cc"
BPF_DIR = CC_DIR / "build" / "bpf"
ALGOS = algos.names()
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
BPFTOOL = shutil.which("bpftool") or "/usr/sbin/bpftool"
NS_A, NS_B = f"cct-{os.getpid()}-a", f"cct-{os.getpid()}-b"
ADDR_A, ADDR_B = "10.213.7.1", "10.213.7.2"
PORT = 5201
FLOW_S = 3
READY_TIMEOUT_S = 5.0


def _why_skip() -> str | None:
    if os.geteuid() != 0:
        return "needs root (netns, veth, bpftool struct_ops register)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "kernel has no BTF (/sys/kernel/btf/vmlinux): no CO-RE struct_ops"
    for tool in ("ip", "iperf3", "make", "clang"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path(BPFTOOL).exists():
        return "bpftool is not installed"
    return None


pytestmark = [pytest.mark.root, pytest.mark.skipif(_why_skip() is not None, reason=_why_skip() or "")]


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def registered() -> list[str]:
    return AVAILABLE.read_text().split()


@pytest.fixture(scope="module")
def bpf_objects() -> Path:
    proc = sh("make", "-C", str(CC_DIR), "bpf", check=False)
    assert proc.returncode == 0, f"BPF build failed:\n{proc.stdout}\n{proc.stderr}"
    return BPF_DIR


@pytest.fixture(scope="module")
def netns_pair() -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a veth pair created inside them."""
    try:
        sh("ip", "netns", "add", NS_A)
        sh("ip", "netns", "add", NS_B)
        sh("ip", "-n", NS_A, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", NS_B)
        sh("ip", "-n", NS_A, "addr", "add", f"{ADDR_A}/24", "dev", "veth0")
        sh("ip", "-n", NS_B, "addr", "add", f"{ADDR_B}/24", "dev", "veth1")
        for ns, dev in ((NS_A, "veth0"), (NS_B, "veth1")):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up")
        yield NS_A, NS_B
    finally:
        # deleting the namespaces destroys the veth pair inside them
        for ns in (NS_A, NS_B):
            sh("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def iperf_server(netns_pair: tuple[str, str]) -> Iterator[None]:
    server = subprocess.Popen(
        ["ip", "netns", "exec", NS_B, "iperf3", "-s", "-B", ADDR_B, "-p", str(PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            out = sh("ip", "netns", "exec", NS_B, "ss", "-Hltn", f"sport = :{PORT}", check=False).stdout
            if out.strip():
                break
            assert server.poll() is None, f"iperf3 server exited: {server.communicate()[1]}"
            assert time.monotonic() < deadline, "iperf3 server not listening after 5 s"
            time.sleep(0.05)
        yield
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def map_entries(algo: str) -> list[dict]:
    proc = sh(BPFTOOL, "-j", "map", "dump", "name", f"st_{algo}", check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    return json.loads(proc.stdout)


@pytest.mark.parametrize("algo", [a for a in ALGOS if algos.params(a)])
def test_rodata_defaults_are_the_declared_tunables(bpf_objects: Path, algo: str) -> None:
    """hosts/cc/algos.toml's tunables name rodata variables of the object, whose built-in values are the defaults
    it declares (times bpf_scale): a spec that sets none runs what algos.toml and the manifest say."""
    data = (bpf_objects / f"{algo}.bpf.o").read_bytes()
    offsets = cc.rodata_offsets(data)
    declared = algos.params(algo)
    assert declared, f"{algo} declares no tunables"
    for k, p in declared.items():
        assert p.bpf in offsets, f"{algo}.{k}: no rodata variable {p.bpf} in {sorted(offsets)}"
        assert struct.unpack_from("<I", data, offsets[p.bpf])[0] == p.default * p.bpf_scale, f"{algo}.{k}"


@pytest.mark.parametrize("algo", ALGOS)
def test_struct_ops_carries_iperf3(bpf_objects: Path, iperf_server: None, algo: str) -> None:
    obj = bpf_objects / f"{algo}.bpf.o"
    assert obj.exists(), f"{obj} was not built"
    if algo in registered():  # left over by an earlier crashed run
        sh(BPFTOOL, "struct_ops", "unregister", "name", algo, check=False)
    sh(BPFTOOL, "struct_ops", "register", str(obj))
    client = None
    try:
        assert algo in registered(), f"{algo} not in {AVAILABLE}: {registered()}"
        client = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                NS_A,
                "iperf3",
                "-c",
                ADDR_B,
                "-B",
                ADDR_A,
                "-p",
                str(PORT),
                "-t",
                str(FLOW_S),
                "-C",
                algo,
                "-J",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[dict] = []
        deadline = time.monotonic() + FLOW_S + 10
        while client.poll() is None and time.monotonic() < deadline:
            entries = map_entries(algo)
            if len(entries) > len(seen):
                seen = entries
            time.sleep(0.25)
        out, err = client.communicate(timeout=10)
        assert client.returncode == 0, f"iperf3 -C {algo} failed: {err or out[-500:]}"
        result = json.loads(out)
        bps = result["end"]["sum_received"]["bits_per_second"]
        algo_used = result["end"].get("sender_tcp_congestion", algo)
        assert algo_used == algo, f"iperf3 ran {algo_used}, asked for {algo}"
        assert bps > 0, f"{algo}: iperf3 received {bps} bit/s"
        assert seen, f"{algo}: st_{algo} had no entries during a {FLOW_S} s flow ({bps / 1e6:.0f} Mbit/s)"
        values = [e.get("formatted", e).get("value", {}) for e in seen]
        cwnds = [v.get("cwnd", 0) for v in values if isinstance(v, dict)]
        print(f"{algo}: {bps / 1e6:.0f} Mbit/s, {len(seen)} st_{algo} entries, cwnd {cwnds}, first value {values[0]}")
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        sh(BPFTOOL, "struct_ops", "unregister", "name", algo, check=False)
    assert algo not in registered(), f"{algo} still registered after unregister"
