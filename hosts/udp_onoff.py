"""On-off UDP cross traffic, run inside a Mininet host (stdlib only).

    udp_onoff.py send SRC SPORT DST DPORT --rate-bps R --duration-s T --on-s A --off-s B
                 [--on-off fixed|exponential] [--seed N]
    udp_onoff.py sink ADDR PORT

The sender alternates on periods (full-size datagrams at R bit/s on the wire,
Ethernet header included, paced against absolute deadlines) and off periods
(silence), starting on; period lengths are fixed or exponentially distributed
with means A and B, drawn from a generator seeded with N.  At the end (or on
SIGINT) it prints one JSON line: every on period as [start_s, end_s, packets,
wire_bytes] and the totals.  The sink prints {"ready": true} once bound, and
its totals (datagrams, payload bytes) on SIGINT.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import time
from types import FrameType

#: payload of a full-size datagram: 1500-byte IP packet less IP and UDP headers
PAYLOAD_BYTES = 1472
#: what one datagram takes on the wire: payload + UDP 8 + IP 20 + Ethernet 14
WIRE_BYTES = PAYLOAD_BYTES + 8 + 20 + 14
#: sleep only when the next deadline is further away than this (pacing precision)
SPIN_S = 0.0002


class _Stop(Exception):
    pass


def _stop(_sig: int, _frame: FrameType | None) -> None:
    raise _Stop


def send(a: argparse.Namespace) -> None:
    rng = random.Random(a.seed)

    def length(mean: float) -> float:
        return rng.expovariate(1.0 / mean) if a.on_off == "exponential" and mean > 0 else mean

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.src, a.sport))
    s.connect((a.dst, a.dport))
    payload = b"\0" * PAYLOAD_BYTES
    gap = WIRE_BYTES * 8 / a.rate_bps
    periods: list[list[float]] = []
    t0 = time.monotonic()
    end = t0 + a.duration_s
    try:
        start = t0
        while start < end:
            stop_at = min(end, start + length(a.on_s))
            n, due = 0, start
            while due < stop_at:
                now = time.monotonic()
                if due - now > SPIN_S:
                    time.sleep(due - now - SPIN_S)
                    continue
                try:
                    s.send(payload)
                except ConnectionRefusedError:  # an ICMP error from the sink's side; keep the rate
                    pass
                n += 1
                due = start + n * gap
            periods.append([round(start - t0, 6), round(stop_at - t0, 6), n, n * WIRE_BYTES])
            start = stop_at + length(a.off_s) if a.off_s > 0 else stop_at
            if start < end and a.off_s > 0:
                time.sleep(max(0.0, start - time.monotonic()))
    except _Stop:
        pass
    pkts = sum(int(p[2]) for p in periods)
    print(
        json.dumps(
            {
                "periods": periods,
                "packets": pkts,
                "wire_bytes": pkts * WIRE_BYTES,
                "payload_bytes": pkts * PAYLOAD_BYTES,
                "rate_bps": a.rate_bps,
                "seed": a.seed,
                "on_off": a.on_off,
            }
        ),
        flush=True,
    )


def sink(a: argparse.Namespace) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((a.addr, a.port))
    print(json.dumps({"ready": True}), flush=True)
    n = nbytes = 0
    try:
        while True:
            nbytes += len(s.recv(65536))
            n += 1
    except _Stop:
        pass
    print(json.dumps({"datagrams": n, "bytes": nbytes}), flush=True)


def main() -> None:
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("send")
    ps.add_argument("src")
    ps.add_argument("sport", type=int)
    ps.add_argument("dst")
    ps.add_argument("dport", type=int)
    ps.add_argument("--rate-bps", type=float, required=True)
    ps.add_argument("--duration-s", type=float, required=True)
    ps.add_argument("--on-s", type=float, required=True)
    ps.add_argument("--off-s", type=float, default=0.0)
    ps.add_argument("--on-off", choices=("fixed", "exponential"), default="fixed")
    ps.add_argument("--seed", type=int, default=1)
    pk = sub.add_parser("sink")
    pk.add_argument("addr")
    pk.add_argument("port", type=int)
    a = p.parse_args()
    if a.cmd == "send":
        send(a)
    else:
        sink(a)


if __name__ == "__main__":
    main()
