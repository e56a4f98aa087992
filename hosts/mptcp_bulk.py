"""A bulk MPTCP transfer, run inside Mininet hosts (stdlib only).

    mptcp_bulk.py sink ADDR PORT
    mptcp_bulk.py send SRC SPORT DST DPORT --duration-s T --cc ALGO

The sink listens with an MPTCP socket (IPPROTO_MPTCP) on ADDR:PORT, prints
{"ready": true} once listening, accepts one connection and counts what it
reads; at the connection's end (or on SIGINT) it prints {"received": bytes,
"seconds": from the first byte to the last}.  The sender binds SRC:SPORT, sets
the congestion control ALGO on the connection (the kernel gives every subflow
the same), connects and writes for T seconds, then half-closes and waits for
the sink to close (all it wrote has arrived, as iperf3 ends); it prints
{"sent": bytes, "seconds": T and that wait}.  Which paths the subflows take is the kernel path manager's
business, set up by the experiment (endpoints and limits).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import time
from types import FrameType

IPPROTO_MPTCP = 262
TCP_CONGESTION = 13
CHUNK_BYTES = 1 << 16


class _Stop(Exception):
    pass


def _stop(_sig: int, _frame: FrameType | None) -> None:
    raise _Stop


def sink(a: argparse.Namespace) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a.addr, a.port))
    s.listen(1)
    print(json.dumps({"ready": True}), flush=True)
    total, first, last = 0, 0.0, 0.0
    try:
        conn, _peer = s.accept()
        while chunk := conn.recv(CHUNK_BYTES):
            last = time.monotonic()
            if not total:
                first = last
            total += len(chunk)
        conn.close()  # the sender waits for this: everything it wrote has arrived
    except _Stop:
        pass
    print(json.dumps({"received": total, "seconds": round(last - first, 6)}), flush=True)


def send(a: argparse.Namespace) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
    s.bind((a.src, a.sport))
    s.connect((a.dst, a.dport))
    buf = b"\0" * CHUNK_BYTES
    total = 0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < a.duration_s:
            total += s.send(buf)
        # like iperf3, end when the receiver has it all: half-close, then wait for the sink's close
        s.shutdown(socket.SHUT_WR)
        while s.recv(CHUNK_BYTES):
            pass
    except _Stop:
        pass
    s.close()
    print(json.dumps({"sent": total, "seconds": round(time.monotonic() - t0, 6), "cc": a.cc}), flush=True)


def main() -> None:
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("sink")
    pk.add_argument("addr")
    pk.add_argument("port", type=int)
    ps = sub.add_parser("send")
    ps.add_argument("src")
    ps.add_argument("sport", type=int)
    ps.add_argument("dst")
    ps.add_argument("dport", type=int)
    ps.add_argument("--duration-s", type=float, required=True)
    ps.add_argument("--cc", required=True)
    a = p.parse_args()
    if a.cmd == "send":
        send(a)
    else:
        sink(a)


if __name__ == "__main__":
    main()
