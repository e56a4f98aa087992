"""A socket's datagrams or frames with the time the kernel received them.

A probe that stamps arrivals itself, after recv returns, adds the time it
waited for a core; on a busy host that is most of what it would measure.  The
kernel's stamp (SO_TIMESTAMPNS, CLOCK_REALTIME) is taken when the packet
reached the socket, however late the probe reads it.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

#: SO_TIMESTAMPNS's control message: struct timespec
_TIMESPEC = struct.Struct("=qq")
#: Linux's value, where Python does not name it
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def stamp_on_receive(s: socket.socket) -> None:
    """Have the kernel stamp each datagram or frame `s` receives."""
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def recv_stamped(s: socket.socket, bufsize: int = 65536) -> tuple[bytes, int, Any]:
    """One datagram or frame from a socket set up by stamp_on_receive: its bytes, its kernel receive
    time (ns since the epoch) and the sender's address."""
    data, anc, _flags, addr = s.recvmsg(bufsize, socket.CMSG_SPACE(_TIMESPEC.size))
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(value[: _TIMESPEC.size])
            return data, sec * 1_000_000_000 + nsec, addr
    raise RuntimeError("a packet came without its receive time: stamp_on_receive was not called on its socket")
