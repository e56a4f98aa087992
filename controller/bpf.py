"""Minimal bpf(2) access through ctypes: pinned objects, map reads and writes.

The controller polls the data plane's counter maps at 10 Hz for up to thousands
of flows, so a read is one ``BPF_MAP_LOOKUP_BATCH`` syscall, not a process per
poll.  Loading and pinning objects is left to ``bpftool``; this module only
opens what is pinned or registered.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

_SYSCALL_NR = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "riscv64": 280}

# enum bpf_cmd (include/uapi/linux/bpf.h)
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_MAP_GET_NEXT_KEY = 4
BPF_OBJ_GET = 7
BPF_MAP_GET_NEXT_ID = 12
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_MAP_LOOKUP_BATCH = 24

BPF_ANY = 0
BPF_MAP_TYPE_PERCPU_HASH = 5
BPF_MAP_TYPE_PERCPU_ARRAY = 6

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BpfError(OSError):
    """A bpf(2) call failed; the message names the call and the object."""


def _sys_bpf(cmd: int, attr: ctypes.Array[ctypes.c_char], what: str) -> int:
    nr = _SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise BpfError(errno.ENOSYS, f"bpf(2): unsupported machine {platform.machine()}")
    ret = _libc.syscall(nr, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret < 0:
        err = ctypes.get_errno()
        raise BpfError(err, f"bpf({what}): {os.strerror(err)}")
    return int(ret)


def _attr(*fields: tuple[int, int, int]) -> ctypes.Array[ctypes.c_char]:
    """A zeroed 128-byte bpf_attr with (offset, size, value) fields set."""
    buf = ctypes.create_string_buffer(128)
    for off, size, value in fields:
        ctypes.memmove(ctypes.addressof(buf) + off, value.to_bytes(size, "little"), size)
    return buf


def _addr(buf: ctypes.Array[ctypes.c_char] | None) -> int:
    return ctypes.addressof(buf) if buf is not None else 0


def possible_cpus() -> int:
    """Number of possible CPUs: the stride of per-CPU map values."""
    text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def obj_get(path: Path) -> int:
    """Open a pinned BPF object; returns a file descriptor the caller closes."""
    name = ctypes.create_string_buffer(os.fsencode(str(path)))
    return _sys_bpf(BPF_OBJ_GET, _attr((0, 8, _addr(name))), f"open {path}")


def raw_tracepoint_open(prog_fd: int) -> int:
    """Attach a tp_btf program (its target was fixed at load); the link lives with the fd."""
    return _sys_bpf(BPF_RAW_TRACEPOINT_OPEN, _attr((0, 8, 0), (8, 4, prog_fd)), "attach tp_btf")


class MapInfo:
    """The fields of struct bpf_map_info this project reads."""

    def __init__(self, raw: bytes) -> None:
        self.type = int.from_bytes(raw[0:4], "little")
        self.id = int.from_bytes(raw[4:8], "little")
        self.key_size = int.from_bytes(raw[8:12], "little")
        self.value_size = int.from_bytes(raw[12:16], "little")
        self.max_entries = int.from_bytes(raw[16:20], "little")
        self.name = raw[24:40].split(b"\0", 1)[0].decode()


def map_info(fd: int) -> MapInfo:
    info = ctypes.create_string_buffer(88)
    _sys_bpf(
        BPF_OBJ_GET_INFO_BY_FD,
        _attr((0, 4, fd), (4, 4, len(info)), (8, 8, _addr(info))),
        "map info",
    )
    return MapInfo(info.raw)


def map_ids() -> list[int]:
    """IDs of every BPF map on the system."""
    ids: list[int] = []
    start = 0
    while True:
        attr = _attr((0, 4, start))
        try:
            _sys_bpf(BPF_MAP_GET_NEXT_ID, attr, "next map id")
        except BpfError as exc:
            if exc.errno == errno.ENOENT:
                return ids
            raise
        start = int.from_bytes(attr.raw[4:8], "little")
        ids.append(start)


class BpfMap:
    """An open BPF map: fixed-size byte keys and values."""

    def __init__(self, fd: int, what: str) -> None:
        self.fd = fd
        self.what = what
        info = map_info(fd)
        self.info = info
        self.key_size = info.key_size
        self.percpu = info.type in (BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY)
        stride = (info.value_size + 7) // 8 * 8
        self.value_size = stride * possible_cpus() if self.percpu else info.value_size

    @classmethod
    def pinned(cls, path: Path) -> BpfMap:
        return cls(obj_get(path), str(path))

    @classmethod
    def by_id(cls, map_id: int) -> BpfMap:
        fd = _sys_bpf(BPF_MAP_GET_FD_BY_ID, _attr((0, 4, map_id)), f"map id {map_id}")
        return cls(fd, f"map id {map_id}")

    @classmethod
    def by_name(cls, name: str) -> list[BpfMap]:
        """Every map whose (kernel-truncated) name is ``name``."""
        found = []
        for map_id in map_ids():
            try:
                m = cls.by_id(map_id)
            except BpfError:
                continue  # gone meanwhile
            if m.info.name == name[:15]:
                found.append(m)
            else:
                m.close()
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BpfMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key(self, key: bytes) -> ctypes.Array[ctypes.c_char]:
        if len(key) != self.key_size:
            raise ValueError(f"{self.what}: key is {len(key)} bytes, map wants {self.key_size}")
        return ctypes.create_string_buffer(key, len(key))

    def lookup(self, key: bytes) -> bytes | None:
        k = self._key(key)
        v = ctypes.create_string_buffer(self.value_size)
        try:
            _sys_bpf(
                BPF_MAP_LOOKUP_ELEM,
                _attr((0, 4, self.fd), (8, 8, _addr(k)), (16, 8, _addr(v))),
                f"lookup in {self.what}",
            )
        except BpfError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise
        return v.raw

    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
        if len(value) != self.value_size:
            raise ValueError(f"{self.what}: value is {len(value)} bytes, map wants {self.value_size}")
        k = self._key(key)
        v = ctypes.create_string_buffer(value, len(value))
        _sys_bpf(
            BPF_MAP_UPDATE_ELEM,
            _attr((0, 4, self.fd), (8, 8, _addr(k)), (16, 8, _addr(v)), (24, 8, flags)),
            f"update in {self.what}",
        )

    def items(self) -> list[tuple[bytes, bytes]]:
        """Every entry, read in batches (one syscall per 4096 entries)."""
        out: list[tuple[bytes, bytes]] = []
        batch = 4096
        keys = ctypes.create_string_buffer(self.key_size * batch)
        values = ctypes.create_string_buffer(self.value_size * batch)
        token_in = ctypes.create_string_buffer(max(self.key_size, 8))
        token_out = ctypes.create_string_buffer(max(self.key_size, 8))
        first = True
        while True:
            attr = _attr(
                (0, 8, 0 if first else _addr(token_in)),
                (8, 8, _addr(token_out)),
                (16, 8, _addr(keys)),
                (24, 8, _addr(values)),
                (32, 4, batch),
                (36, 4, self.fd),
            )
            done = False
            try:
                _sys_bpf(BPF_MAP_LOOKUP_BATCH, attr, f"read {self.what}")
            except BpfError as exc:
                if exc.errno != errno.ENOENT:
                    raise
                done = True
            count = int.from_bytes(attr.raw[32:36], "little")
            kraw, vraw = keys.raw, values.raw
            ks, vs = self.key_size, self.value_size
            out.extend((kraw[i * ks : (i + 1) * ks], vraw[i * vs : (i + 1) * vs]) for i in range(count))
            if done:
                return out
            ctypes.memmove(token_in, token_out, len(token_out))
            first = False
