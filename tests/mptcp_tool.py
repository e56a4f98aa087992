"""MPTCP bulk transfer for tests, run inside a network namespace.

mptcp_tool.py server ADDR PORT            -> prints "ready", then {"received": bytes}
mptcp_tool.py client ADDR PORT SECONDS CC -> prints {"sent": bytes}
"""

from __future__ import annotations

import json
import socket
import sys
import time

IPPROTO_MPTCP = 262
TCP_CONGESTION = 13


def server(addr: str, port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    print("ready", flush=True)
    conn, _ = s.accept()
    total = 0
    while chunk := conn.recv(1 << 16):
        total += len(chunk)
    print(json.dumps({"received": total}), flush=True)


def client(addr: str, port: int, seconds: float, cc: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    s.connect((addr, port))
    buf = b"\0" * (1 << 16)
    total = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        total += s.send(buf)
    s.close()
    print(json.dumps({"sent": total}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
