"""The algorithms' own state over time, from their st_<algo> export maps.

cclab's algorithms publish, per connection, what tcp_info cannot show: the
bandwidth estimate, RTTmin, and their own variables (Wmax, alpha, W_Target...;
names in hosts/cc/algos.toml).  The layout is hosts/cc/core/cc_export.h.
"""

from __future__ import annotations

import ipaddress
import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

from controller import bpf
from controller.spec import CCLAB_ALGOS
from controller.spec import algos as algo_table

log = logging.getLogger(__name__)

_KEY = struct.Struct("=4s4sHHI")
_VALUE = struct.Struct("=QQIII5I")
#: the value's last field, the windows the shells' guard put back (hosts/cc/bpf/cc_bpf.h), after the extras
_REPAIRS = struct.Struct("=I")
COMMON = ["bwe_bps", "rtt_min_us", "cwnd_pkts", "ssthresh_pkts", "window_repairs"]


@dataclass(frozen=True)
class ExportKey:
    src: str
    dst: str
    sport: int
    dport: int


class CcStateReader:
    """Reads the export maps of the cclab algorithms a run uses: the flows of the network namespaces `netns`
    (inode numbers) only, where given.  The maps are the kernel's, one for every run on the machine, and runs
    side by side (`--jobs`) use the same addresses and ports, each in namespaces of its own."""

    def __init__(self, algos: list[str] | tuple[str, ...], netns: frozenset[int] | None = None) -> None:
        self.netns = netns
        # an entry a connection of an earlier run left (same 4-tuple: cclab's ports are fixed) is older than this
        # reader: bpf_ktime_get_ns and time.monotonic_ns are the same clock (CLOCK_MONOTONIC)
        self.since_ns = time.monotonic_ns()
        self.maps: dict[str, list[bpf.BpfMap]] = {}
        self.extras = {a: algo_table.extras(a) for a in algos if a in CCLAB_ALGOS}
        for algo in self.extras:
            found = bpf.BpfMap.by_name(f"st_{algo}")
            if not found:
                log.warning("no export map st_%s: its state will not be recorded", algo)
            self.maps[algo] = found

    @property
    def columns(self) -> list[str]:
        """CSV columns: common fields, then every extra of the run's algorithms once."""
        extra: list[str] = []
        for names in self.extras.values():
            extra += [n for n in names if n not in extra]
        return ["t_s", "flow", "algo", *COMMON, *extra]

    def read(self) -> list[tuple[str, ExportKey, dict[str, Any]]]:
        out: list[tuple[str, ExportKey, dict[str, Any]]] = []
        for algo, maps in self.maps.items():
            names = self.extras[algo]
            for m in maps:
                for kraw, vraw in m.items():
                    saddr, daddr, sport, dport, ns = _KEY.unpack(kraw)
                    ts_ns, bwe, rtt_min, cwnd, ssthresh, *x = _VALUE.unpack(vraw[: _VALUE.size])
                    if ts_ns < self.since_ns or (self.netns is not None and ns not in self.netns):
                        continue
                    tail = vraw[_VALUE.size : _VALUE.size + _REPAIRS.size]
                    repairs = _REPAIRS.unpack(tail)[0] if len(tail) == _REPAIRS.size else None
                    key = ExportKey(str(ipaddress.IPv4Address(saddr)), str(ipaddress.IPv4Address(daddr)), sport, dport)
                    row: dict[str, Any] = {
                        "bwe_bps": bwe,
                        "rtt_min_us": rtt_min,
                        "cwnd_pkts": cwnd,
                        "ssthresh_pkts": ssthresh,
                        "window_repairs": repairs,
                    }
                    row.update(zip(names, x))
                    out.append((algo, key, row))
        return out

    def close(self) -> None:
        for maps in self.maps.values():
            for m in maps:
                m.close()
        self.maps.clear()
