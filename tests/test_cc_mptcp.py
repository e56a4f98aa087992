"""mptcpw couples the subflows of one MPTCP connection over two real paths.

Two namespaces joined by two veth pairs, each path shaped to 50 Mbit/s; the
server announces its second address, so the connection runs two subflows.
Checked: both subflows carry data, and both find the same coupling state
(the connection's MPTCP token, two live subflows, delta_s < 1 on each).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import cc, system
from controller.measure.ccstate import CcStateReader
from hosts.tcpinfo import TcpInfoSampler

pytestmark = pytest.mark.root

TOOL = Path(__file__).with_name("mptcp_tool.py")
A, B = "ccm-a", "ccm-b"
PATHS = (("ma1", "mb1", "10.71.1"), ("ma2", "mb2", "10.71.2"))
PORT = 5399
SECONDS = 4.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _in(ns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, *args], check=True, capture_output=True, text=True)


@pytest.fixture
def two_paths() -> Iterator[None]:
    try:
        for ns in (A, B):
            _ip("netns", "add", ns)
            _in(ns, "sysctl", "-q", "-w", "net.mptcp.enabled=1")
            _in(ns, "ip", "link", "set", "lo", "up")
        for a, b, net in PATHS:
            _ip("link", "add", a, "netns", A, "type", "veth", "peer", "name", b, "netns", B)
            _in(A, "ip", "addr", "add", f"{net}.1/24", "dev", a)
            _in(B, "ip", "addr", "add", f"{net}.2/24", "dev", b)
            for ns, dev in ((A, a), (B, b)):
                _in(ns, "ip", "link", "set", dev, "up")
                _in(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
            _in(A, "tc", "qdisc", "add", "dev", a, "root", "handle", "1:", "htb", "default", "1")
            _in(A, "tc", "class", "add", "dev", a, "parent", "1:", "classid", "1:1", "htb", "rate", "50mbit")
        for ns in (A, B):
            _in(ns, "ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2")
        _in(B, "ip", "mptcp", "endpoint", "add", f"{PATHS[1][2]}.2", "dev", PATHS[1][1], "signal")
        yield
    finally:
        for ns in (A, B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_two_subflows_share_one_coupling_state(two_paths: None) -> None:
    loaded = cc.load(["mptcpw"])
    reader = CcStateReader(["mptcpw"])
    server = client = None
    try:
        server = subprocess.Popen(
            ["ip", "netns", "exec", B, sys.executable, str(TOOL), "server", "0.0.0.0", str(PORT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        client = subprocess.Popen(
            ["ip", "netns", "exec", A, sys.executable, str(TOOL), "client", f"{PATHS[0][2]}.2", str(PORT),
             str(SECONDS), "mptcpw"],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        # `ip netns exec` enters the namespace after the fork: wait for that before sampling it
        deadline = time.monotonic() + 5
        while system.netns_inode(client.pid) == system.netns_inode():
            assert time.monotonic() < deadline, "the client never entered its namespace"
            time.sleep(0.01)
        sampler = TcpInfoSampler(client.pid)
        try:
            acked: dict[str, int] = {}
            states: dict[str, dict[str, int]] = {}
            deadline = time.monotonic() + SECONDS - 0.5
            while time.monotonic() < deadline:
                time.sleep(0.25)
                for s in sampler.sample():
                    if s.dport == PORT and s.algo == "mptcpw":
                        acked[s.src] = s.bytes_acked
                for _algo, key, row in reader.read():
                    if key.dport == PORT:
                        states[key.src] = row
        finally:
            sampler.close()
        sent = json.loads(client.communicate(timeout=30)[0])["sent"]
        received = json.loads(server.communicate(timeout=30)[0])["received"]
    finally:
        for p in (client, server):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        reader.close()
        cc.unload(loaded)

    assert received == sent, f"received {received} of {sent} bytes"
    paths = {f"{net}.1" for _a, _b, net in PATHS}
    assert set(acked) == paths, f"subflows seen with mptcpw: {acked}"
    for src, n in acked.items():
        assert n > 2_000_000, f"subflow from {src} carried only {n} bytes (all: {acked})"
    assert set(states) == paths, f"exported state for {sorted(states)}"
    tokens = {row["mptcp_token"] for row in states.values()}
    assert len(tokens) == 1 and 0 not in tokens, f"subflows did not find one connection token: {states}"
    for src, row in states.items():
        assert row["subflows"] == 2, f"{src}: coupling state sees {row['subflows']} subflows"
        assert 0 < row["delta_x65536"] < 65536, f"{src}: delta_s = {row['delta_x65536'] / 65536:.3f}, not coupled"
