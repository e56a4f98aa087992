"""One TCP flow that watches its own first loss response; run inside a network namespace.

recovery_probe.py sink ADDR PORT             -> prints "ready", then reads each connection until EOF
recovery_probe.py touch ADDR PORT            -> one connection, one byte, closed
recovery_probe.py send ADDR PORT CC SECONDS  -> prints JSON: tcp_info before, in and after the first recovery
recovery_probe.py trace ADDR PORT CC SECONDS -> prints JSON: every tcp_info sample (each 5 ms) of the flow
recovery_probe.py watch ADDR PORT CC SECONDS -> the same samples as they come, one JSON line each after a line
                                                of column names; stops early when its stdin closes or gives a line

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
from collections.abc import Iterator
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
    cc_info = s.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, 16)  # empty for algorithms without get_info
    enabled, rttcnt, rtt_us, minrtt_us = struct.unpack("=4I", cc_info) if len(cc_info) == 16 else (0, 0, 0, 0)
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


class _Bulk:
    """A connected socket with congestion control cc and a thread writing to it until stop()."""

    def __init__(self, addr: str, port: int, cc: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
        self.sock.connect((addr, port))
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._write, daemon=True)
        self._th.start()

    def _write(self) -> None:
        buf = b"\0" * (1 << 14)
        try:
            while not self._stop.is_set():
                self.sock.sendall(buf)
        except OSError:
            pass

    def stop(self) -> None:
        """Abort the connection (RST): nothing lingers unsent, so the socket, and with it its congestion
        control module's reference, is gone when this returns."""
        self._stop.set()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the writer blocked in sendall
        self._th.join(timeout=5)
        self.sock.close()


TRACE_COLUMNS = ["t_s", "cwnd", "ssthresh", "ca_state", "srtt_us"]


def _trace(addr: str, port: int, cc: str, seconds: float, stop: threading.Event) -> Iterator[list[Any]]:
    """A bulk flow's samples (TRACE_COLUMNS) each 5 ms for `seconds` or until `stop` is set; the flow is
    aborted when the samples end."""
    bulk = _Bulk(addr, port, cc)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds and not stop.is_set():
            smp = _sample(bulk.sock, t0)
            yield [smp[c] for c in TRACE_COLUMNS]
            time.sleep(0.005)
    finally:
        bulk.stop()


def trace(addr: str, port: int, cc: str, seconds: float) -> None:
    samples = list(_trace(addr, port, cc, seconds, threading.Event()))
    print(json.dumps({"cc": cc, "columns": TRACE_COLUMNS, "samples": samples}))


def watch(addr: str, port: int, cc: str, seconds: float) -> None:
    stop = threading.Event()

    def wait_for_stdin() -> None:
        sys.stdin.readline()  # a line or EOF: the reader has what it needs
        stop.set()

    threading.Thread(target=wait_for_stdin, daemon=True).start()
    print(json.dumps(TRACE_COLUMNS), flush=True)
    for smp in _trace(addr, port, cc, seconds, stop):
        print(json.dumps(smp), flush=True)


def send(addr: str, port: int, cc: str, seconds: float) -> None:
    bulk = _Bulk(addr, port, cc)
    s = bulk.sock
    t0 = time.monotonic()
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
    bulk.stop()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "touch":
        touch(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "trace":
        trace(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    elif sys.argv[1] == "watch":
        watch(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    else:
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
