"""Sender-side tcp_info sampling through sock_diag netlink, one socket per host.

A netlink socket belongs to the network namespace it was created in, so the
controller opens one inside each Mininet host's namespace (a short-lived
thread calls setns(2), creates the socket and returns) and then dumps every
interval from its own process: no subprocess per sample, no `ss` parsing.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2
INET_DIAG_VEGASINFO = 3
INET_DIAG_CONG = 4
CLONE_NEWNET = 0x40000000
TCP_ESTABLISHED_ANY = 0xFFF  # every TCP state but LISTEN/CLOSE matter; filter below

_NLMSG = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_SOCKID = struct.Struct(">HH16s16sI8s")  # sport, dport, src, dst, if, cookie
_DIAG_MSG = struct.Struct("=BBBB")  # family, state, timer, retrans
_RTA = struct.Struct("=HH")

_libc = ctypes.CDLL(None, use_errno=True)
#: tcpi_options' bit for SACK (include/uapi/linux/tcp.h)
TCPI_OPT_SACK = 2
#: TCP_SYN_SENT, TCP_SYN_RECV (include/net/tcp_states.h): a socket's options are not agreed yet
HANDSHAKE_STATES = (2, 3)


@dataclass(frozen=True)
class TcpSample:
    """The tcp_info fields cclab records (units in the names)."""

    sport: int
    dport: int
    dst: str
    state: int
    ca_state: int
    cwnd_pkts: int
    ssthresh_pkts: int
    srtt_us: int
    rttvar_us: int
    min_rtt_us: int
    mss: int
    """The sender's segment size, bytes (tcpi_snd_mss: payload, TCP options taken off)."""
    sack: bool | None
    """Both ends agreed on selective acknowledgements at the handshake (tcpi_options & TCPI_OPT_SACK); None while
    the handshake is under way (SYN_SENT, SYN_RECV: nothing agreed yet)."""
    total_retrans: int
    bytes_acked: int
    delivery_rate_Bps: int
    pacing_rate_Bps: int
    algo: str
    src: str = ""
    cc_bwe_bps: int | None = None
    """The algorithm's bandwidth estimate where its module reports one (vegas-style get_info)."""
    cc_rtt_min_us: int | None = None


def parse_tcp_info(raw: bytes) -> dict[str, int]:
    """Decode struct tcp_info (include/uapi/linux/tcp.h); absent tail fields read as 0."""
    raw = raw.ljust(168, b"\0")
    u32 = struct.unpack_from("=24I", raw, 8)  # rto .. total_retrans
    pacing, _max_pacing, bytes_acked, _bytes_received = struct.unpack_from("=4Q", raw, 104)
    (min_rtt,) = struct.unpack_from("=I", raw, 148)
    (delivery_rate,) = struct.unpack_from("=Q", raw, 160)
    return {
        "state": raw[0],
        "ca_state": raw[1],
        "options": raw[5],
        "snd_mss": u32[2],
        "srtt_us": u32[15],
        "rttvar_us": u32[16],
        "snd_ssthresh": u32[17],
        "snd_cwnd": u32[18],
        "total_retrans": u32[23],
        "pacing_rate": pacing,
        "bytes_acked": bytes_acked,
        "min_rtt_us": min_rtt,
        "delivery_rate": delivery_rate,
    }


def _socket_in_netns(pid: int) -> socket.socket:
    """A NETLINK_SOCK_DIAG socket created inside pid's network namespace."""
    result: list[socket.socket | BaseException] = []

    def worker() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            if _libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into the namespace of pid {pid}")
            try:
                result.append(socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG))
            finally:
                _libc.setns(own, CLONE_NEWNET)
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)
        finally:
            os.close(own)
            os.close(target)

    t = threading.Thread(target=worker, name=f"netns-{pid}")
    t.start()
    t.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


class TcpInfoSampler:
    """Dumps the TCP sockets of one namespace, keeping those with a wanted local port."""

    def __init__(self, pid: int) -> None:
        self.sock = _socket_in_netns(pid)
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def _request(self) -> bytes:
        self.seq += 1
        ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1)) | (1 << (INET_DIAG_VEGASINFO - 1))
        body = _REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, ext, 0, TCP_ESTABLISHED_ANY)
        body += _SOCKID.pack(0, 0, b"", b"", 0, b"\xff" * 8)
        return _NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, self.seq, 0) + body

    def sample(self, sports: set[int] | None = None) -> list[TcpSample]:
        """tcp_info of the sockets whose local port is in sports (all when None)."""
        self.sock.send(self._request())
        out: list[TcpSample] = []
        while True:
            data = self.sock.recv(1 << 16)
            off = 0
            while off + _NLMSG.size <= len(data):
                length, mtype, _flags, _seq, _pid = _NLMSG.unpack_from(data, off)
                if mtype == NLMSG_DONE:
                    return out
                if mtype == NLMSG_ERROR:
                    (err,) = struct.unpack_from("=i", data, off + _NLMSG.size)
                    raise OSError(-err, "sock_diag dump failed")
                s = self._decode(data[off + _NLMSG.size : off + length], sports)
                if s is not None:
                    out.append(s)
                off += (length + 3) & ~3
            if off == 0:
                return out

    @staticmethod
    def _decode(msg: bytes, sports: set[int] | None) -> TcpSample | None:
        _family, state, _timer, _retrans = _DIAG_MSG.unpack_from(msg, 0)
        sport, dport, src, dst, _ifi, _cookie = _SOCKID.unpack_from(msg, 4)
        if sports is not None and sport not in sports:
            return None
        info: dict[str, int] | None = None
        vegas: tuple[int, ...] = ()
        algo = ""
        off = 4 + _SOCKID.size + 20  # expires, rqueue, wqueue, uid, inode
        while off + _RTA.size <= len(msg):
            alen, atype = _RTA.unpack_from(msg, off)
            if alen < _RTA.size:
                break
            payload = msg[off + _RTA.size : off + alen]
            if atype == INET_DIAG_INFO:
                info = parse_tcp_info(payload)
            elif atype == INET_DIAG_CONG:
                algo = payload.split(b"\0", 1)[0].decode()
            elif atype == INET_DIAG_VEGASINFO and len(payload) >= 16:
                vegas = struct.unpack_from("=4I", payload)  # enabled, rttcnt, rtt, minrtt
            off += (alen + 3) & ~3
        if info is None:
            return None
        return TcpSample(
            sport=sport,
            dport=dport,
            dst=socket.inet_ntoa(dst[:4]),
            state=info["state"],
            ca_state=info["ca_state"],
            cwnd_pkts=info["snd_cwnd"],
            ssthresh_pkts=info["snd_ssthresh"],
            srtt_us=info["srtt_us"],
            rttvar_us=info["rttvar_us"],
            min_rtt_us=info["min_rtt_us"],
            mss=info["snd_mss"],
            sack=None if state in HANDSHAKE_STATES else bool(info["options"] & TCPI_OPT_SACK),
            total_retrans=info["total_retrans"],
            bytes_acked=info["bytes_acked"],
            delivery_rate_Bps=info["delivery_rate"],
            pacing_rate_Bps=info["pacing_rate"],
            algo=algo,
            src=socket.inet_ntoa(src[:4]),
            # cclab's modules put the estimate in kbit/s where vegas has its RTT count
            cc_bwe_bps=vegas[1] * 1000 if vegas and vegas[0] else None,
            cc_rtt_min_us=vegas[3] if vegas and vegas[0] else None,
        )
