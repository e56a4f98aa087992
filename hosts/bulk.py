"""A bulk MPTCP transfer, or with --tcp a plain TCP one, run inside Mininet hosts (stdlib only).

    bulk.py sink ADDR PORT [--tcp]
    bulk.py send SRC SPORT DST DPORT (--duration-s T | --bytes N) --cc ALGO [--mss BYTES] [--tcp]

The sink listens with an MPTCP socket (IPPROTO_MPTCP; with --tcp, TCP) on
ADDR:PORT, prints {"ready": true} once listening, accepts one connection and
counts what it reads; at the connection's end (or on SIGINT) it prints
{"received": bytes, "seconds": from the first byte to the last, "first_at" and
"last_at": those two moments on CLOCK_MONOTONIC}.  The sender binds SRC:SPORT,
sets the congestion control ALGO on the socket before it connects (the kernel
gives every subflow the same) and, with --mss, TCP_MAXSEG (every subflow takes
it), connects and writes for T seconds, with at most NOTSENT_LOWAT_BYTES
written but not yet sent (TCP_NOTSENT_LOWAT: what it wrote by T is on its way
by T, not a send buffer behind), or writes N bytes as fast as the socket takes
them.  Then it half-closes and waits for the sink to close (all it wrote has
arrived, as iperf3 ends), closes, and waits until every subflow has sent its
last packet (its ACK of the sink's FIN: the subflow reaches TIME_WAIT), so
that the data plane's last read, taken when this process has ended, counts
every packet the subflows sent; it prints {"sent": bytes, "seconds": T and
that wait, "start_at": when it began to connect, on CLOCK_MONOTONIC,
"drained": whether the sink had it all}.

After T the sink gets at most DRAIN_S to close: an MPTCP socket's
TCP_NOTSENT_LOWAT holds back only what its scheduler has not yet handed to a
subflow, and each subflow's own queue may hold megabytes, which a connection
slowed by loss takes longer than the run's grace to send (seen: LIA over two
10 Mbit/s paths at 1 % loss, 3 MB still to send at the end of a 600 s run,
12 s more).  Past DRAIN_S the sender resets the connection (SO_LINGER 0): what
it had not sent is dropped, as iperf3's data connections are at its test's
end, and "drained" is false.

A transfer of N bytes is complete when the sink has read its last byte:
last_at - start_at, one clock, as Mininet's hosts are namespaces of one kernel.
(iperf3 -n ends at its last write, a send buffer ahead of the last byte's
arrival: about two round trips short for a 100 kB fetch.)  Which paths an MPTCP
connection's subflows take is the kernel path manager's business, set up by the
experiment (endpoints and limits).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import signal
import socket
import struct
import time
from pathlib import Path
from types import FrameType

IPPROTO_MPTCP = 262
TCP_CONGESTION = 13
TCP_NOTSENT_LOWAT = 25
CHUNK_BYTES = 1 << 16
#: unsent bytes the sender keeps in the socket: two writes' worth keeps every subflow fed, while a whole send
#: buffer (megabytes, sized for the path's BDP) would take a connection slowed by loss tens of seconds to drain
#: after T (seen: LIA over two 10 Mbit/s paths at 1 % loss still sending 13 s after a 60 s run's end)
NOTSENT_LOWAT_BYTES = 2 * CHUNK_BYTES
#: getsockopt(SOL_MPTCP, MPTCP_SUBFLOW_ADDRS) (linux/mptcp.h, kernel >= 5.16): a struct mptcp_subflow_data header
#: (size_subflow_data, num_subflows, size_kernel, size_user: four u32) then one struct mptcp_subflow_addrs per
#: subflow, its local and its remote address each in a union as large as a sockaddr_storage
SOL_MPTCP = 284
MPTCP_SUBFLOW_ADDRS = 3
MAX_SUBFLOWS = 8
SUBFLOW_HDR = struct.Struct("4I")
SOCKADDR_BYTES = 128
#: /proc/net/tcp states of a subflow that may still send: ESTABLISHED, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT,
#: LAST_ACK, CLOSING (TIME_WAIT, CLOSE or gone: it has sent its last packet)
STILL_SENDING = {"01", "04", "05", "08", "09", "0B"}
#: how long the sender waits for its subflows to finish closing (a few RTTs of the longest path)
CLOSE_WAIT_S = 10.0
#: how long after T the sender of a timed transfer waits for the sink to have it all, before it resets the
#: connection: tens of round trips of the slowest path, within the grace a run gives its flows to end
DRAIN_S = 3.0


class _Stop(Exception):
    pass


def _stop(_sig: int, _frame: FrameType | None) -> None:
    raise _Stop


def _protocol(a: argparse.Namespace) -> int:
    return socket.IPPROTO_TCP if a.tcp else IPPROTO_MPTCP


def sink(a: argparse.Namespace) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, _protocol(a))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a.addr, a.port))
    s.listen(1)
    print(json.dumps({"ready": True}), flush=True)
    total, first, last = 0, 0.0, 0.0
    try:
        conn, _peer = s.accept()
        try:
            while chunk := conn.recv(CHUNK_BYTES):
                last = time.monotonic()
                if not total:
                    first = last
                total += len(chunk)
        except ConnectionResetError:
            pass  # a timed sender's end when its data did not drain in time (DRAIN_S): what arrived counts
        conn.close()  # the sender waits for this: everything it wrote has arrived
    except _Stop:
        pass
    out = {"received": total, "seconds": round(last - first, 6), "first_at": first, "last_at": last}
    print(json.dumps(out), flush=True)


def _hex_endpoint(sa: bytes) -> str | None:
    """A sockaddr_in as /proc/net/tcp writes it (ADDR:PORT in hex, the address in host byte order); None
    for another family."""
    family, port = struct.unpack_from("=HH", sa)  # sa_family in host order, sin_port in network order
    if family != socket.AF_INET:
        return None
    return _hex(sa[4:8], socket.ntohs(port))


def _hex(packed_addr: bytes, port: int) -> str:
    """ADDR:PORT as /proc/net/tcp writes them, from the address's four bytes in network order."""
    return f"{struct.unpack('=I', packed_addr)[0]:08X}:{port:04X}"


def _endpoints(s: socket.socket, tcp: bool) -> set[tuple[str, str]]:
    """The connection's (local, remote) per subflow, or its one pair for a TCP socket."""
    if not tcp:
        return subflow_endpoints(s)
    (la, lp), (ra, rp) = s.getsockname(), s.getpeername()
    return {(_hex(socket.inet_aton(la), lp), _hex(socket.inet_aton(ra), rp))}


def subflow_endpoints(s: socket.socket) -> set[tuple[str, str]]:
    """Each subflow's (local, remote) as /proc/net/tcp writes them; empty where the kernel cannot say."""
    size = SUBFLOW_HDR.size + MAX_SUBFLOWS * 2 * SOCKADDR_BYTES
    # the header goes in as well as out (the sizes the caller expects), which socket.getsockopt cannot pass
    buf = ctypes.create_string_buffer(SUBFLOW_HDR.pack(SUBFLOW_HDR.size, 0, 0, 2 * SOCKADDR_BYTES), size)
    length = ctypes.c_uint32(size)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.getsockopt(s.fileno(), SOL_MPTCP, MPTCP_SUBFLOW_ADDRS, buf, ctypes.byref(length)) != 0:
        return set()
    out = buf.raw[: length.value]
    _size, count, _kernel, user = SUBFLOW_HDR.unpack_from(out)
    ends = set()
    for k in range(min(count, MAX_SUBFLOWS)):
        at = SUBFLOW_HDR.size + k * user
        local, remote = _hex_endpoint(out[at : at + SOCKADDR_BYTES]), _hex_endpoint(out[at + SOCKADDR_BYTES :])
        if local and remote:
            ends.add((local, remote))
    return ends


def wait_subflows_closed(ends: set[tuple[str, str]], timeout_s: float = CLOSE_WAIT_S) -> bool:
    """Poll /proc/net/tcp until none of the subflows may still send (True), or until timeout_s (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy = False
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            col = line.split()
            if (col[1], col[2]) in ends and col[3] in STILL_SENDING:
                busy = True
                break
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def send(a: argparse.Namespace) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, _protocol(a))
    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
    if a.bytes is None:
        s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, NOTSENT_LOWAT_BYTES)
    if a.mss:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, a.mss)
    s.bind((a.src, a.sport))
    start_at = time.monotonic()
    s.connect((a.dst, a.dport))
    buf = memoryview(b"\0" * CHUNK_BYTES)
    total = 0
    ends: set[tuple[str, str]] = set()
    drained = True
    t0 = time.monotonic()
    try:
        if a.bytes is None:
            while (left := a.duration_s - (time.monotonic() - t0)) > 0:
                s.settimeout(left)  # a write blocked at T (the sink not reading) ends with T
                try:
                    total += s.send(buf)
                except TimeoutError:
                    break
        else:
            while total < a.bytes:
                total += s.send(buf[: min(CHUNK_BYTES, a.bytes - total)])
        ends = _endpoints(s, a.tcp)  # before the close: afterwards the subflows have no owner to ask
        # like iperf3, end when the receiver has it all: half-close, then wait for the sink's close (a timed
        # transfer for DRAIN_S at most)
        s.settimeout(DRAIN_S if a.bytes is None else None)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(CHUNK_BYTES):
                pass
        except TimeoutError:
            drained = False
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except _Stop:
        pass
    s.close()
    try:
        closed = wait_subflows_closed(ends) if ends else False
    except _Stop:
        closed = False  # stopped again while its subflows still sent: the report says they had not closed
    out = {"sent": total, "seconds": round(time.monotonic() - t0, 6), "cc": a.cc, "start_at": start_at}
    print(json.dumps({**out, "subflows": len(ends), "subflows_closed": closed, "drained": drained}), flush=True)


def main() -> None:
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("sink")
    pk.add_argument("addr")
    pk.add_argument("port", type=int)
    pk.add_argument("--tcp", action="store_true", help="a TCP socket instead of an MPTCP one")
    ps = sub.add_parser("send")
    ps.add_argument("src")
    ps.add_argument("sport", type=int)
    ps.add_argument("dst")
    ps.add_argument("dport", type=int)
    amount = ps.add_mutually_exclusive_group(required=True)
    amount.add_argument("--duration-s", type=float, help="write for this long")
    amount.add_argument("--bytes", type=int, help="write this many bytes")
    ps.add_argument("--cc", required=True)
    ps.add_argument("--mss", type=int, help="TCP_MAXSEG of the connection, bytes")
    ps.add_argument("--tcp", action="store_true", help="a TCP socket instead of an MPTCP one")
    a = p.parse_args()
    if a.cmd == "send":
        send(a)
    else:
        sink(a)


if __name__ == "__main__":
    main()
