"""Register access to the FPGA bottleneck element (fpga/rtl/cclab_bottleneck.v): one driver, two transports.

The element's registers are 32-bit words on an AXI4-Lite map that describes
itself: blocks from offset 0, each starting with its type, version and the
offset of the next block (0 ends the list), as Corundum's register blocks do.
`Element` walks that list once and then reads and writes by block type and
offset, so nothing here depends on where a block sits.

Two transports carry the words:

    HarnessTransport  the Verilated element in the loop (fpga/sim/): a Unix
                      stream socket under /run/cclab, one 12-byte request,
                      one 8-byte answer (fpga/sim/regproto.h)
    BarTransport      a board: the PCIe BAR the shell maps the register bus
                      to, as the `resource0` file of the device in sysfs,
                      mmap()ed; 32-bit aligned loads and stores

The second is unit-tested against an ordinary file; it has not run on a board.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from controller.dataplane import DataPlaneError

#: block types of the element's register map
ELEMENT, SHAPER, QUEUE, DELAY, LOSS, HIST, FLOWS = (0xCC1B0000 + i for i in range(7))
BLOCK_NAMES = {ELEMENT: "element", SHAPER: "shaper", QUEUE: "queue", DELAY: "delay", LOSS: "loss",
               HIST: "hist", FLOWS: "flows"}  # fmt: skip
#: the block headers' words: type, version, next
TYPE, VERSION, NEXT = 0x00, 0x04, 0x08
#: a register map is at most this long (the walk refuses a longer or looping list)
MAX_BLOCKS = 64

#: the harness protocol (fpga/sim/regproto.h): request {op, addr, data}, answer {status, data}; little-endian
REQUEST = struct.Struct("<III")
ANSWER = struct.Struct("<iI")
OP_READ, OP_WRITE, OP_STATS = 1, 2, 3


class RegisterError(DataPlaneError):
    """A register could not be read or written, or the map is not the element's; the message says which."""


class Transport(Protocol):
    """32-bit reads and writes at byte offsets of the register space."""

    def read32(self, addr: int) -> int: ...

    def write32(self, addr: int, value: int) -> None: ...

    def close(self) -> None: ...


def _check(addr: int, value: int = 0) -> None:
    if addr < 0 or addr % 4:
        raise RegisterError(f"register address {addr:#x}: want a non-negative multiple of 4")
    if not 0 <= value < 1 << 32:
        raise RegisterError(f"register value {value}: want 0 .. 2^32-1")


@dataclass
class HarnessTransport:
    """The in-the-loop harness's Unix socket (fpga/sim/harness.cpp serves it)."""

    path: Path
    timeout_s: float = 5.0
    _sock: socket.socket | None = field(default=None, init=False)

    def _conn(self) -> socket.socket:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout_s)
            try:
                s.connect(str(self.path))
            except OSError as exc:
                s.close()
                raise RegisterError(f"FPGA harness at {self.path}: {exc.strerror or exc}") from None
            self._sock = s
        return self._sock

    def _recv(self, n: int) -> bytes:
        s, buf = self._conn(), b""
        try:
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise RegisterError(f"FPGA harness at {self.path} closed the connection")
                buf += chunk
        except OSError as exc:
            self.close()
            raise RegisterError(f"FPGA harness at {self.path}: {exc}") from None
        return buf

    def _call(self, op: int, addr: int, data: int) -> int:
        try:
            self._conn().sendall(REQUEST.pack(op, addr, data))
        except OSError as exc:
            self.close()
            raise RegisterError(f"FPGA harness at {self.path}: {exc}") from None
        status, value = ANSWER.unpack(self._recv(ANSWER.size))
        if status != 0:
            raise RegisterError(f"FPGA harness refused op {op} at {addr:#x} (status {status})")
        return int(value)

    def read32(self, addr: int) -> int:
        _check(addr)
        return self._call(OP_READ, addr, 0)

    def write32(self, addr: int, value: int) -> None:
        _check(addr, value)
        self._call(OP_WRITE, addr, value)

    def stats(self) -> dict[str, Any]:
        """The harness's own counters (simulated cycles, cycles per second, frames, lag) as it reports them."""
        value: dict[str, Any] = json.loads(self._recv(self._call(OP_STATS, 0, 0)))
        return value

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@dataclass
class BarTransport:
    """A PCIe BAR through sysfs: /sys/bus/pci/devices/<BDF>/resource0, mmap()ed (root on a board).

    Any file of at least `size` bytes works the same way, which is how it is tested.
    """

    path: Path
    size: int | None = None
    """Bytes to map (None: the file's size)."""
    _fd: int = field(default=-1, init=False)
    _map: mmap.mmap | None = field(default=None, init=False)

    def _mapped(self) -> mmap.mmap:
        if self._map is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_SYNC)
                size = self.size if self.size is not None else os.fstat(self._fd).st_size
                self._map = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except (OSError, ValueError) as exc:
                self.close()
                raise RegisterError(f"BAR {self.path}: {exc}") from None
        return self._map

    def _at(self, addr: int) -> tuple[mmap.mmap, int]:
        m = self._mapped()
        if addr + 4 > len(m):
            raise RegisterError(f"register address {addr:#x} is outside the {len(m)}-byte BAR {self.path}")
        return m, addr

    def read32(self, addr: int) -> int:
        _check(addr)
        m, a = self._at(addr)
        # a memoryview cast to 32-bit words: one aligned load, as a device register needs (not four bytes)
        with memoryview(m) as mv, mv.cast("I") as words:
            return int(words[a // 4])

    def write32(self, addr: int, value: int) -> None:
        _check(addr, value)
        m, a = self._at(addr)
        with memoryview(m) as mv, mv.cast("I") as words:
            words[a // 4] = value

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass(frozen=True)
class Block:
    """One register block found by the walk."""

    type: int
    version: int
    base: int


@dataclass
class Element:
    """The element's registers by block and offset, over any transport."""

    io: Transport
    blocks: dict[int, Block] = field(default_factory=dict, init=False)

    def discover(self) -> dict[int, Block]:
        """Walk the block headers from 0; RegisterError on a loop, an overlong list or a missing block."""
        found: dict[int, Block] = {}
        base, seen = 0, set[int]()
        while True:
            if base in seen or len(seen) >= MAX_BLOCKS:
                raise RegisterError(f"register map: the block list loops or is longer than {MAX_BLOCKS} at {base:#x}")
            seen.add(base)
            typ = self.io.read32(base + TYPE)
            found.setdefault(typ, Block(typ, self.io.read32(base + VERSION), base))
            nxt = self.io.read32(base + NEXT)
            if nxt == 0:
                break
            base = nxt
        if ELEMENT not in found or found[ELEMENT].base != 0:
            raise RegisterError(f"register map: no cclab element at offset 0 (type {self.io.read32(0):#010x})")
        lacking = [BLOCK_NAMES[t] for t in BLOCK_NAMES if t not in found]
        if lacking:
            raise RegisterError(f"register map: blocks {', '.join(lacking)} are missing")
        self.blocks = found
        return found

    def _addr(self, block: int, offset: int) -> int:
        if not self.blocks:
            self.discover()
        b = self.blocks.get(block)
        if b is None:
            raise RegisterError(f"register block {block:#010x} is not in the map")
        return b.base + offset

    def read(self, block: int, offset: int) -> int:
        return self.io.read32(self._addr(block, offset))

    def write(self, block: int, offset: int, value: int) -> None:
        self.io.write32(self._addr(block, offset), value)

    def read64(self, addr: int) -> int:
        """The 64-bit counter at byte offset `addr` (the flow table is addressed from 0, not by block): the low
        word first, as the element latches the high word then."""
        lo = self.io.read32(addr)
        return lo | self.io.read32(addr + 4) << 32

    def close(self) -> None:
        self.io.close()
