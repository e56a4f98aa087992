"""Send and capture raw Ethernet frames inside a Mininet host, for the conformance suite.

    wire.py send IFACE FRAMES.pcap RATE_BPS [LEAD_S]
                                           -> prints {"start": T} then {"sent": N, "end": T}
    wire.py recv IFACE OUT.pcap               -> prints "ready"; on a line (or EOF) on stdin it
                                                 drains, writes OUT.pcap, prints {"received": N}

The sender paces on wire bytes (frame length, no FCS): frame i leaves when the
frames before it would have taken that long at RATE_BPS (sleeping until then: a
late wake-up sends what is due back to back); 0 sends back to back.
LEAD_S > 0 pauses that long after the first frame (it is on the link, alone).
The receiver keeps incoming frames only (not the host's own replies), each
with the kernel's receive time (SO_TIMESTAMPNS), and writes them with
nanosecond timestamps. Scapy reads and writes the pcap files without
dissecting the frames (a dissection per frame would cap the packet rate).
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

from scapy.utils import RawPcapReader, RawPcapWriter

from hosts.rxtime import recv_stamped, stamp_on_receive

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
#: Linux socket options Python may not name
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
LINKTYPE_ETHERNET = 1
#: receive buffer the capture asks for (forced, as root): no frame lost to a slow reader
RCVBUF_BYTES = 64 << 20
#: a drained capture: this long without a frame after the stop line
IDLE_S = 0.2


def _socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, ETH_P_ALL))
    return s


def send(iface: str, pcap: str, rate_bps: float, lead_s: float) -> None:
    frames = [bytes(data) for data, _meta in RawPcapReader(pcap)]
    s = _socket(iface)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    print(json.dumps({"start": time.time()}), flush=True)
    t0 = time.monotonic()
    sent_bits = 0
    for i, frame in enumerate(frames):
        if i == 1 and lead_s > 0:
            t0 += lead_s
            _sleep_until(t0)
        if rate_bps > 0:
            _sleep_until(t0 + sent_bits / rate_bps)
            sent_bits += 8 * len(frame)
        s.send(frame)
    print(json.dumps({"sent": len(frames), "end": time.time()}), flush=True)


def _sleep_until(due: float) -> None:
    """Sleep, not spin, until `due` (time.monotonic()): a spinning sender took a whole core from the target under
    test (fpga-sim's model needs one).  A wake-up some 0.1 ms late sends the frames due by then back to back: the
    schedule is kept on average, never drifts."""
    left = due - time.monotonic()
    if left > 0:
        time.sleep(left)


def recv(iface: str, pcap: str) -> None:
    s = _socket(iface)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    stamp_on_receive(s)
    got: list[tuple[int, bytes]] = []

    def take() -> None:
        data, ts_ns, addr = recv_stamped(s)
        if addr[2] != PACKET_OUTGOING:
            got.append((ts_ns, data))

    print("ready", flush=True)
    stopping = False
    while True:
        ready, _, _ = select.select([s, sys.stdin], [], [], IDLE_S)
        if s in ready:
            take()
        elif stopping:
            break  # nothing for IDLE_S after the stop line: drained
        if sys.stdin in ready and not stopping:
            sys.stdin.readline()
            stopping = True
    write_pcap(pcap, got)
    print(json.dumps({"received": len(got)}), flush=True)


def write_pcap(path: str, frames: list[tuple[int, bytes]]) -> None:
    """Frames with their times (ns since the epoch) into a pcap file with nanosecond timestamps."""
    w = RawPcapWriter(path, linktype=LINKTYPE_ETHERNET, nano=True)
    w.write_header(None)
    for ts_ns, data in frames:
        w.write_packet(data, sec=ts_ns // 1_000_000_000, usec=ts_ns % 1_000_000_000)
    w.close()


if __name__ == "__main__":
    cmd, *a = sys.argv[1:]
    if cmd == "send":
        send(a[0], a[1], float(a[2]), float(a[3]) if len(a) > 3 else 0.0)
    else:
        recv(a[0], a[1])
