"""In-network counts against an independent capture: every flow's bytes and packets at an emulated link, as
the data plane counts them, equal what tcpdump sees arriving after that link, MPTCP subflows included (their
last packet, the ACK of the receiver's FIN, leaves after the data: the sender waits for it before it ends).

The run's counts end at its final read, after the flows ended; what the hosts send after it, while the run
stops its flows and tears down, is captured but not the run's (one uncut run captured two option-less 54-byte
frames on a subflow more than it counted, as resets from closed sockets are), so the capture is cut where that
read returned."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapReader

from controller import spec
from controller.experiment import runner
from controller.measure.monitor import Monitor, Series
from controller.spec import tomllib
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]

DURATION_S = 10


def _spec_text(path: str) -> str:
    text = (REPO / path).read_text().split("[sweep]")[0]
    lines = [f"duration_s = {DURATION_S}" if ln.startswith("duration_s") else ln for ln in text.splitlines()]
    return "\n".join(lines) + "\n"


class Captures:
    """tcpdump on the device after each emulated link (where the data plane counts what the link forwarded),
    started once the network is built and before any flow starts."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.procs: list[subprocess.Popen[bytes]] = []
        self.files: dict[str, Path] = {}
        self.dropped: dict[str, int] = {}
        self.ids: list[str] = []

    def start(self, run_dir: Path) -> None:
        links = json.loads((run_dir / "manifest.json").read_text())["links"]
        for lk in links:
            if "devices" not in lk or "delay_element" in lk:
                continue
            dev = lk["devices"][1]
            pcap = self.out / f"{lk['id']}.pcap"
            # a 64 MiB ring, so the capture drops nothing on a busy machine, and immediate mode, so each packet
            # is handed to tcpdump as it comes instead of in blocks that an interrupted tcpdump never reads
            args = ["tcpdump", "-i", dev, "-Q", "in", "-s", "128", "-B", "65536", "--immediate-mode", "-U", "-w"]
            args.append(str(pcap))
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.procs.append(proc)
            self.files[lk["id"]] = pcap
            self.ids.append(lk["id"])
            assert proc.stderr is not None
            line = proc.stderr.readline()  # "listening on DEV ...": the capture is open
            assert b"listening on" in line, f"tcpdump on {dev}: {line!r}"

    def stop(self, settle_s: float = 1.0, timeout_s: float = 20.0) -> None:
        """Wait until no file has grown for settle_s (tcpdump has written all it was handed: the busy machine may
        leave it behind the wire), then end each capture and keep its own count of packets the kernel dropped."""
        deadline = time.monotonic() + timeout_s
        sizes = [-1] * len(self.procs)
        while time.monotonic() < deadline:
            now = [self.files[lid].stat().st_size if self.files[lid].exists() else 0 for lid in self.ids]
            if now == sizes:
                break
            sizes = now
            time.sleep(settle_s)
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for lid, proc in zip(self.ids, self.procs):
            _out, err = proc.communicate(timeout=10)
            found = re.search(rb"(\d+) packets? dropped by kernel", err)
            self.dropped[lid] = int(found.group(1)) if found else -1


def _tally(pcap: Path, until: float = float("inf")) -> dict[tuple[str, str, int, int, int], tuple[int, int]]:
    """Wire bytes and packets per 5-tuple (the frame's original length, as the data plane charges it) of the
    packets captured at or before `until` (seconds since the epoch, the capture's clock)."""
    size: Counter[tuple[str, str, int, int, int]] = Counter()
    count: Counter[tuple[str, str, int, int, int]] = Counter()
    for data, meta in RawPcapReader(str(pcap)):
        if meta.sec + meta.usec / 1e6 > until:
            continue
        pkt = Ether(data)
        if IP not in pkt or not (TCP in pkt or UDP in pkt):
            continue
        l4 = pkt[TCP] if TCP in pkt else pkt[UDP]
        key = (pkt[IP].src, pkt[IP].dst, l4.sport, l4.dport, pkt[IP].proto)
        size[key] += meta.wirelen
        count[key] += 1
    return {k: (size[k], count[k]) for k in size}


@pytest.mark.parametrize(
    "path",
    ["experiments/multipath.toml", "experiments/mptcpw/shared-bottleneck.toml"],
    ids=["two-paths", "one-path-two-subflows"],
)
def test_every_flow_and_subflow_counted_as_a_capture_sees_it(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = spec.parse(tomllib.loads(_spec_text(path)))
    caps = Captures(tmp_path)
    results = tmp_path / "results"
    run_dirs: list[Path] = []
    final_read: list[float] = []
    monitor_stop = Monitor.stop

    def stop_and_note(self: Monitor) -> Series:
        out = monitor_stop(self)
        final_read.append(time.time())
        return out

    monkeypatch.setattr(Monitor, "stop", stop_and_note)

    def running() -> None:
        run_dirs.append(max(results.iterdir(), key=lambda p: p.stat().st_mtime))
        caps.start(run_dirs[0])

    try:
        out = runner.run(s, runner.RunOptions(results_root=results, plots=False, on_running=running))
    finally:
        caps.stop()
    summ: dict[str, Any] = out.summary
    assert summ["complete"], summ["reason"]
    assert all(n == 0 for n in caps.dropped.values()), f"the capture itself lost packets: {caps.dropped}"
    assert len(final_read) == 1, final_read
    flows = {f["id"]: f for f in summ["flows"]}
    checked = 0
    for lk in summ["links"]:
        seen = _tally(caps.files[lk["id"]], until=final_read[0])
        for fid, counted in lk["flows"].items():
            tup = flows[fid]["five_tuple"]
            key = (tup[0], tup[1], tup[2], tup[3], {"tcp": 6, "udp": 17}[tup[4]])
            got = seen.get(key, (0, 0))
            assert (counted["bytes"], counted["packets"]) == got, (
                f"{lk['id']} {fid} {key}: counted {counted['bytes']} bytes / {counted['packets']} packets, "
                f"captured {got[0]} / {got[1]} up to the final read "
                f"({_tally(caps.files[lk['id']]).get(key, (0, 0))} in all)"
            )
            checked += 1
    subflows = [fid for fid in flows if "." in fid]
    assert len(subflows) == 2 and checked >= 3, f"checked {checked} flows, subflows {subflows}"
    sent = json.loads((out.run_dir / "iperf" / "f1.send.json").read_text())
    assert sent["subflows"] == 2 and sent["subflows_closed"], sent
