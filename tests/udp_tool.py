"""Exactly-counted UDP for data-plane tests, run inside a Mininet host.

    udp_tool.py send SRC SPORT DST DPORT COUNT SIZE RATE_BPS   -> prints {"sent": N, "stalls": K}
    udp_tool.py recv ADDR PORT IDLE_S                          -> prints {"received": N, "bytes": B}

The sender paces by spinning on the clock; a stall is a gap of over STALL_S between
two of its sends (the host gave it no CPU), after which it catches up at once.
The receiver prints "ready" once bound, then counts until no datagram arrived
for IDLE_S seconds after the first one.
"""

from __future__ import annotations

import json
import socket
import sys
import time

#: a gap between two sends this long (s) is a stall of the sender, not its pacing
STALL_S = 0.005


def send(src: str, sport: int, dst: str, dport: int, count: int, size: int, rate_bps: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, sport))
    payload = b"\0" * size
    gap = size * 8 / rate_bps
    stalls = 0
    t0 = last = time.monotonic()
    for i in range(count):
        due = t0 + i * gap
        while (now := time.monotonic()) < due:
            pass
        stalls += now - last > max(STALL_S, 2 * gap)
        last = now
        s.sendto(payload, (dst, dport))
    print(json.dumps({"sent": count, "stalls": stalls}), flush=True)


def recv(addr: str, port: int, idle_s: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((addr, port))
    print("ready", flush=True)
    n = nbytes = 0
    s.settimeout(30.0)
    while True:
        try:
            data = s.recv(65536)
        except TimeoutError:
            break
        n += 1
        nbytes += len(data)
        s.settimeout(idle_s)
    print(json.dumps({"received": n, "bytes": nbytes}), flush=True)


if __name__ == "__main__":
    cmd, *a = sys.argv[1:]
    if cmd == "send":
        send(a[0], int(a[1]), a[2], int(a[3]), int(a[4]), int(a[5]), float(a[6]))
    else:
        recv(a[0], int(a[1]), float(a[2]))
