"""Reference models and frame builders shared by the element's cocotb testbenches.

`Xoshiro128pp` is the loss generator of cclab_loss.v, draw for draw, so a testbench can predict
exactly which frames the element drops; `flow_frame` builds test frames with Scapy, a sequence
number in the payload so that a lost or reordered frame is seen.
"""

from __future__ import annotations

import struct

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

M32 = 0xFFFFFFFF


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & M32


class Xoshiro128pp:
    """xoshiro128++ seeded as cclab_loss.v seeds it (seed spread over four words)."""

    def __init__(self, seed: int) -> None:
        seed &= M32
        self.s = [
            seed ^ 0x9E3779B9,
            (~seed & M32) ^ 0x7F4A7C15,
            (((seed & 0xFFFF) << 16) | (seed >> 16)) ^ 0xBF58476D,
            0x94D049BB,
        ]

    def next(self) -> int:
        s = self.s
        result = (_rotl((s[0] + s[3]) & M32, 7) + s[0]) & M32
        t = (s[1] << 9) & M32
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 11)
        return result


def flow_frame(seq: int, size: int, *, src: str = "10.0.0.1", dst: str = "10.0.1.1", sport: int = 40000,
               dport: int = 5201, proto: str = "tcp", ip_opts: bytes = b"", frag: int = 0) -> bytes:
    """An Ethernet/IPv4/TCP-or-UDP frame of exactly `size` bytes (no FCS) carrying `seq`."""
    l4: Packet = TCP(sport=sport, dport=dport) if proto == "tcp" else UDP(sport=sport, dport=dport)
    ip = IP(src=src, dst=dst, options=ip_opts, frag=frag) if ip_opts else IP(src=src, dst=dst, frag=frag)
    head = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / l4 / Raw(struct.pack("!I", seq)))
    if len(head) > size:
        raise ValueError(f"size {size} is below the {len(head)} bytes of the headers")
    return head + bytes(size - len(head))


def seq_of(frame: bytes, at: int = 54) -> int:
    """The sequence number flow_frame put after the headers (TCP without options: byte 54)."""
    return int(struct.unpack_from("!I", frame, at)[0])
