"""One TCP flow that watches its own first loss response; run inside a network namespace.

recovery_probe.py sink ADDR PORT             -> prints "ready", then reads each connection until EOF
recovery_probe.py touch ADDR PORT            -> one connection, one byte, closed
recovery_probe.py send ADDR PORT CC SECONDS  -> prints JSON: tcp_info before, in and after the first recovery

The sender writes from one thread while the main thread reads the socket's
tcp_info (and TCP_CC_INFO, the algorithm's vegas-style get_info: bandwidth
estimate, RTT, RTTmin) every half millisecond.  "before" is the last sample
in Open or Disorder before the first Recovery or Loss state, "recovery" the
first sample in it, "after" the first sample back in Open.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hosts.tcpinfo import parse_tcp_info  # noqa: E402

TCP_CONGESTION = 13
TCP_INFO = 11
TCP_CC_INFO = 26
CA_OPEN, CA_DISORDER, CA_RECOVERY, CA_LOSS = 0, 1, 3, 4
POLL_S = 0.0005


def sink(addr: str, port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = s.accept()
        while conn.recv(1 << 16):
            pass
        conn.close()


def touch(addr: str, port: int) -> None:
    with socket.create_connection((addr, port)) as s:
        s.sendall(b"\0")


def _sample(s: socket.socket, t0: float) -> dict[str, Any]:
    info = parse_tcp_info(s.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 232))
    enabled, rttcnt, rtt_us, minrtt_us = struct.unpack("=4I", s.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, 16))
    return {
        "t_s": round(time.monotonic() - t0, 4),
        "ca_state": info["ca_state"],
        "cwnd": info["snd_cwnd"],
        "ssthresh": info["snd_ssthresh"],
        "mss": info["snd_mss"],
        "srtt_us": info["srtt_us"],
        "min_rtt_us": info["min_rtt_us"],
        "total_retrans": info["total_retrans"],
        "cc_bwe_kbps": rttcnt if enabled else None,
        "cc_rtt_us": rtt_us if enabled else None,
        "cc_rtt_min_us": minrtt_us if enabled else None,
    }


def send(addr: str, port: int, cc: str, seconds: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    s.connect((addr, port))
    stop = threading.Event()

    def writer() -> None:
        buf = b"\0" * (1 << 14)
        try:
            while not stop.is_set():
                s.sendall(buf)
        except OSError:
            pass

    th = threading.Thread(target=writer, daemon=True)
    t0 = time.monotonic()
    th.start()
    out: dict[str, Any] = {"cc": cc, "before": None, "recovery": None, "after": None}
    while time.monotonic() - t0 < seconds:
        smp = _sample(s, t0)
        if out["recovery"] is None:
            if smp["ca_state"] in (CA_OPEN, CA_DISORDER):
                out["before"] = smp
            elif smp["ca_state"] in (CA_RECOVERY, CA_LOSS):
                out["recovery"] = smp
        elif smp["ca_state"] == CA_OPEN:
            out["after"] = smp
            break
        time.sleep(POLL_S)
    stop.set()
    s.shutdown(socket.SHUT_RDWR)
    th.join(timeout=5)
    s.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "touch":
        touch(sys.argv[2], int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
