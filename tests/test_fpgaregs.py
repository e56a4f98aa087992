"""The FPGA element's register-access layer (controller/dataplane/fpgaregs.py), without root or hardware.

The BAR transport maps an ordinary file laid out as the element's register
map; the harness transport talks to a small Unix-socket server speaking the
harness's protocol (fpga/sim/regproto.h) over a real socket.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.dataplane import fpgaregs as fr

#: the element's blocks at their reference offsets (fpga/rtl/cclab_bottleneck.v): type, next
REFERENCE = [(fr.ELEMENT, 0x100), (fr.SHAPER, 0x200), (fr.QUEUE, 0x300), (fr.DELAY, 0x400), (fr.LOSS, 0x500),
             (fr.HIST, 0x600), (fr.FLOWS, 0)]  # fmt: skip
VERSION = 0x00010000


def register_image(blocks: list[tuple[int, int]], bases: list[int] | None = None, size: int = 0x2000) -> bytearray:
    """A register space with the given block list: block i at bases[i] (default 0x100 * i)."""
    img = bytearray(size)
    bases = bases or [0x100 * i for i in range(len(blocks))]
    for base, (typ, nxt) in zip(bases, blocks):
        struct.pack_into("<III", img, base, typ, VERSION, nxt)
    return img


@pytest.fixture
def bar(tmp_path: Path) -> Iterator[fr.BarTransport]:
    f = tmp_path / "resource0"
    f.write_bytes(register_image(REFERENCE))
    t = fr.BarTransport(f)
    yield t
    t.close()


def test_walk_finds_every_block_at_its_offset(bar: fr.BarTransport) -> None:
    el = fr.Element(bar)
    found = el.discover()
    assert {t: b.base for t, b in found.items()} == {t: 0x100 * i for i, (t, _) in enumerate(REFERENCE)}
    assert all(b.version == VERSION for b in found.values())


def test_walk_follows_the_next_offsets_not_a_fixed_layout(tmp_path: Path) -> None:
    """Blocks moved and reordered: the driver finds them by type through the `next` words."""
    order = [fr.ELEMENT, fr.FLOWS, fr.LOSS, fr.SHAPER, fr.HIST, fr.QUEUE, fr.DELAY]
    bases = [0x0, 0x800, 0x240, 0x600, 0x180, 0x900, 0xA00]
    blocks = [(t, bases[i + 1] if i + 1 < len(order) else 0) for i, t in enumerate(order)]
    f = tmp_path / "resource0"
    f.write_bytes(register_image(blocks, bases))
    with_file = fr.BarTransport(f)
    el = fr.Element(with_file)
    assert {t: b.base for t, b in el.discover().items()} == dict(zip(order, bases))
    el.write(fr.SHAPER, 0x0C, 0x12345678)
    assert struct.unpack_from("<I", f.read_bytes(), 0x600 + 0x0C)[0] == 0x12345678
    el.close()


def test_walk_refuses_a_loop_a_foreign_map_and_a_missing_block(tmp_path: Path) -> None:
    f = tmp_path / "resource0"
    f.write_bytes(register_image([(fr.ELEMENT, 0x100), (fr.SHAPER, 0x0)], [0, 0x100]))
    with pytest.raises(fr.RegisterError, match="blocks queue, delay, loss, hist, flows are missing"):
        fr.Element(fr.BarTransport(f)).discover()
    f.write_bytes(register_image([(fr.ELEMENT, 0x100), (fr.SHAPER, 0x100)]))
    with pytest.raises(fr.RegisterError, match="loops"):
        fr.Element(fr.BarTransport(f)).discover()
    f.write_bytes(register_image([(0xDEADBEEF, 0)]))
    with pytest.raises(fr.RegisterError, match="no cclab element at offset 0 .type 0xdeadbeef"):
        fr.Element(fr.BarTransport(f)).discover()


def test_bar_reads_and_writes_words_and_64_bit_counters(bar: fr.BarTransport, tmp_path: Path) -> None:
    el = fr.Element(bar)
    el.discover()
    el.write(fr.DELAY, 0x0C, 100_000)
    assert el.read(fr.DELAY, 0x0C) == 100_000
    bar.write32(0x1040, 0x89ABCDEF)
    bar.write32(0x1044, 0x01234567)
    assert el.read64(0x1040) == 0x0123456789ABCDEF
    raw = (tmp_path / "resource0").read_bytes()  # the stores reached the file: MAP_SHARED
    assert struct.unpack_from("<I", raw, 0x30C)[0] == 100_000


def test_bad_addresses_and_values_are_refused_before_any_access(bar: fr.BarTransport) -> None:
    with pytest.raises(fr.RegisterError, match="address 0x3: want a non-negative multiple of 4"):
        bar.read32(3)
    with pytest.raises(fr.RegisterError, match="value 4294967296: want 0 .. 2.32-1"):
        bar.write32(0, 1 << 32)
    with pytest.raises(fr.RegisterError, match="outside the 8192-byte BAR"):
        bar.read32(0x2000)


def test_bar_on_a_missing_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(fr.RegisterError, match="BAR .*resource0"):
        fr.BarTransport(tmp_path / "resource0").read32(0)


class FakeHarness:
    """The harness's register protocol over a Unix socket, on a register image (one client at a time)."""

    def __init__(self, path: Path, img: bytearray) -> None:
        self.img, self.ops = img, 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.srv.accept()
        with conn:
            while True:
                req = b""
                while len(req) < fr.REQUEST.size:
                    chunk = conn.recv(fr.REQUEST.size - len(req))
                    if not chunk:
                        return
                    req += chunk
                op, addr, data = fr.REQUEST.unpack(req)
                self.ops += 1
                if addr + 4 > len(self.img):
                    conn.sendall(fr.ANSWER.pack(-22, 0))
                elif op == fr.OP_READ:
                    conn.sendall(fr.ANSWER.pack(0, struct.unpack_from("<I", self.img, addr)[0]))
                else:
                    struct.pack_into("<I", self.img, addr, data)
                    conn.sendall(fr.ANSWER.pack(0, 0))

    def close(self) -> None:
        self.srv.close()


def test_harness_transport_speaks_the_protocol(tmp_path: Path) -> None:
    img = register_image(REFERENCE)
    srv = FakeHarness(tmp_path / "h.sock", img)
    el = fr.Element(fr.HarnessTransport(tmp_path / "h.sock"))
    try:
        assert set(el.discover()) == {t for t, _ in REFERENCE}
        el.write(fr.LOSS, 0x0C, 0xFFFFFFFF)
        assert struct.unpack_from("<I", img, 0x40C)[0] == 0xFFFFFFFF
        assert el.read(fr.LOSS, 0x0C) == 0xFFFFFFFF
        with pytest.raises(fr.RegisterError, match=r"refused op 1 at 0x2000 \(status -22\)"):
            el.io.read32(0x2000)
    finally:
        el.close()
        srv.close()


def test_harness_transport_with_no_harness_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(fr.RegisterError, match=r"FPGA harness at .*none\.sock"):
        fr.HarnessTransport(tmp_path / "none.sock").read32(0)
