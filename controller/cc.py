"""Congestion-control algorithms on this host: what the kernel offers, what cclab loads.

A user names an algorithm once.  cclab's own (hosts/cc/) load as kernel
modules where the kernel takes modules and a tcp_<name>.ko is built for its
release (hosts/cc/build/kmod/<release>/: the lab VM builds its own), and as
eBPF struct_ops otherwise; same name either way.  The exception is mptcpw:
only its eBPF form couples the subflows of a connection (the module cannot
reach the MPTCP token), so it loads as eBPF wherever the kernel takes that
form (6.2 and newer: bpf_rdonly_cast), and as the uncoupled module only where
it does not.
"""

from __future__ import annotations

import json
import logging
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller import system
from controller.spec import CCLAB_ALGOS, KERNEL_ALGOS, algos

log = logging.getLogger(__name__)

CC_DIR = system.REPO / "hosts" / "cc"
BPF_DIR = CC_DIR / "build" / "bpf"
KMOD_DIR = CC_DIR / "build" / "kmod"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: algorithms whose eBPF form does more than their module, and what
EBPF_FIRST = {"mptcpw": "coupled subflows (its module runs each subflow alone)"}


class CcError(RuntimeError):
    """An algorithm cannot be loaded or used; the message says the fix."""


@dataclass(frozen=True)
class AlgoStatus:
    name: str
    ours: bool
    loaded: bool
    form: str
    """How it is (or would be) present: kernel, builtin, module, ebpf, ebpf (not built: ...)."""


def available() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def bpf_object(name: str) -> Path:
    return BPF_DIR / f"{name}.bpf.o"


def kernel_module(name: str, release: str | None = None) -> Path:
    """Where tcp_<name>.ko for a kernel release (default: this kernel's) is built."""
    return KMOD_DIR / (release or system.kernel_release()) / f"tcp_{name}.ko"


def takes_modules() -> bool:
    """Whether this kernel loads modules (CONFIG_MODULES: /proc/modules exists)."""
    return Path("/proc/modules").exists()


def module_matches(name: str) -> bool:
    """A built tcp_<name>.ko whose vermagic names this kernel's release."""
    ko = kernel_module(name)
    if not takes_modules() or not ko.exists():
        return False
    proc = system.run(["modinfo", "-F", "vermagic", str(ko)], check=False)
    return proc.returncode == 0 and proc.stdout.split()[:1] == [system.kernel_release()]


def intree_module(name: str) -> bool:
    """Whether the kernel can load one of its own algorithms as tcp_<name> (modprobe)."""
    if name not in KERNEL_ALGOS or not takes_modules():
        return False
    return system.run(["modinfo", "-n", f"tcp_{name}"], check=False).returncode == 0


def _loaded_as_module(name: str) -> bool:
    try:
        return any(line.split()[0] == f"tcp_{name}" for line in Path("/proc/modules").read_text().splitlines())
    except OSError:
        return False


def loaded_form(name: str) -> str:
    """How an algorithm is registered now: "module", "ebpf" (struct_ops), "builtin" or "absent"."""
    if name not in available():
        return "absent"
    if _loaded_as_module(name):
        return "module"
    proc = system.run(["bpftool", "-j", "struct_ops", "show"], check=False)
    try:
        maps = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []
    except ValueError:
        maps = []
    if any(m.get("name") == name for m in (maps if isinstance(maps, list) else [maps])):
        return "ebpf"
    return "builtin"


def status() -> list[AlgoStatus]:
    have = available()
    out = [AlgoStatus(n, False, True, "kernel") for n in have if n not in CCLAB_ALGOS]
    for n in CCLAB_ALGOS:
        if n in have:
            how = loaded_form(n)
        elif module_matches(n) and not (n in EBPF_FIRST and bpf_object(n).exists()):
            how = "module"
        else:
            how = "ebpf" if bpf_object(n).exists() else "ebpf (not built: run `make build`)"
        out.append(AlgoStatus(n, True, n in have, how))
    return out


def check_available(names: tuple[str, ...] | list[str]) -> None:
    """Raise CcError unless every name is in the kernel or loadable by cclab."""
    have = available()
    for n in names:
        if n in have:
            continue
        if intree_module(n):
            continue
        if n in CCLAB_ALGOS:
            if not module_matches(n) and not bpf_object(n).exists():
                raise CcError(f"algorithm {n} is not built: {bpf_object(n)} is missing; run `make build`")
            continue
        raise CcError(f"algorithm {n} is not available in this kernel (it has: {', '.join(have)})")


def load(names: list[str] | tuple[str, ...], params: dict[str, dict[str, int]] | None = None) -> list[str]:
    """Register each of cclab's algorithms not yet present; return the names registered now.

    ``params`` sets tunables (hosts/cc/algos.toml) of the ones loaded now; an
    algorithm registered before with tunables asked for is refused, as its
    settings cannot be changed in place.
    """
    system.require_root()
    params = params or {}
    done: list[str] = []
    for n in names:
        if n not in CCLAB_ALGOS:
            if n in available():
                continue
            if intree_module(n):
                system.run(["modprobe", f"tcp_{n}"])
                done.append(n)
                continue
            raise CcError(f"{n} is not one of cclab's algorithms ({', '.join(CCLAB_ALGOS)}) nor in this kernel")
        if n in available():
            if params.get(n):
                unload(done)
                raise CcError(
                    f"{n} is already registered, so it cannot be loaded with {_show(params[n])}; "
                    f"unload it first: cclab cc unload {n}"
                )
            continue
        try:
            form = _load_one(n, params.get(n, {}))
        except CcError:
            unload(done)
            raise
        if n not in available():
            unload(done + [n])
            raise CcError(f"{n} registered but is not in {AVAILABLE}")
        log.info("loaded %s (%s%s)", n, form, f", {_show(params[n])}" if params.get(n) else "")
        done.append(n)
    return done


def _show(values: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(values.items()))


def _load_one(n: str, values: dict[str, int]) -> str:
    """Register one of cclab's algorithms in the form this kernel takes best; which form that was."""
    obj = bpf_object(n)
    has_module = module_matches(n)
    if has_module and not (n in EBPF_FIRST and obj.exists()):
        order = ["module"]
    elif obj.exists():
        order = ["eBPF struct_ops", "module"] if has_module else ["eBPF struct_ops"]
    else:
        raise CcError(f"{obj} is missing; run `make build`")
    for form in order:
        try:
            if form == "module":
                system.run(["insmod", str(kernel_module(n)), *(f"{k}={v}" for k, v in sorted(values.items()))])
            else:
                _register(n, values)
            return form
        except system.SystemError_ as exc:
            if form == order[-1]:
                raise CcError(f"loading {n}: {exc}") from None
            log.warning(
                "%s: this kernel refused the eBPF form (%s); loading the module, without %s", n, exc, EBPF_FIRST[n]
            )
    raise AssertionError("unreachable")


def _register(n: str, values: dict[str, int]) -> None:
    """bpftool struct_ops register, of a copy of the object with its rodata set where tunables are given."""
    if not values:
        system.run(["bpftool", "struct_ops", "register", str(bpf_object(n))])
        return
    declared = algos.params(n)
    data = bytearray(bpf_object(n).read_bytes())
    offsets = rodata_offsets(data)
    for k, v in values.items():
        var = declared[k].bpf
        if var not in offsets:
            raise CcError(f"{bpf_object(n)} has no rodata variable {var} (for {n}'s {k}); run `make build`")
        struct.pack_into("<I", data, offsets[var], v * declared[k].bpf_scale)
    with tempfile.TemporaryDirectory(prefix=f"cclab-{n}-") as tmp:
        obj = Path(tmp) / f"{n}.bpf.o"
        obj.write_bytes(bytes(data))
        system.run(["bpftool", "struct_ops", "register", str(obj)])


def rodata_offsets(elf: bytes | bytearray) -> dict[str, int]:
    """File offsets of the 4-byte variables in a BPF object's .rodata section, by name (ELF64, little endian)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise CcError("not a little-endian ELF64 object")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    # (sh_name, sh_type, sh_offset, sh_size, sh_link) of each section header
    sec = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link = struct.unpack_from("<IIQQQQI", elf, shoff + i * shentsize)
        sec.append((name, typ, off, size, link))

    def cstr(table: int, at: int) -> str:
        start = sec[table][2] + at
        return bytes(elf[start : elf.index(b"\0", start)]).decode()

    names = [cstr(shstrndx, s[0]) for s in sec]
    if ".rodata" not in names:
        return {}
    rodata = names.index(".rodata")
    out: dict[str, int] = {}
    for _name, typ, off, size, link in sec:
        if typ != 2:  # SHT_SYMTAB
            continue
        for j in range(size // 24):
            st_name, _info, _other, shndx, value, st_size = struct.unpack_from("<IBBHQQ", elf, off + 24 * j)
            if shndx == rodata and st_size == 4:
                out[cstr(link, st_name)] = sec[rodata][2] + value
    return out


def describe(names: tuple[str, ...] | list[str], params: dict[str, dict[str, int]], loaded: list[str]) -> dict:
    """For the manifest: each algorithm's form and, for cclab's, the tunables it runs with where they are known."""
    out: dict[str, dict] = {}
    for n in names:
        entry: dict = {"form": loaded_form(n)}
        if n in CCLAB_ALGOS:
            if n in loaded:
                entry["params"] = algos.with_defaults(n, params.get(n, {}))
            elif entry["form"] == "module":
                sysfs = Path("/sys/module") / f"tcp_{n}" / "parameters"
                entry["params"] = {k: _sysfs_int(sysfs / k) for k in algos.params(n)}
            else:
                entry["params"] = None
                entry["note"] = "registered before this run: its tunables are whatever that load set"
        out[n] = entry
    return out


def _sysfs_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return {"Y": 1, "N": 0}.get(text, int(text) if text.lstrip("-").isdigit() else None)


def unload(names: list[str] | tuple[str, ...]) -> None:
    """Unload cclab's algorithms by name, module or struct_ops (absent ones are skipped)."""
    for n in names:
        if n not in available():
            continue
        if _loaded_as_module(n):  # ours or an in-tree one cclab modprobed
            system.run(["rmmod", f"tcp_{n}"], check=False)
        elif n in CCLAB_ALGOS:
            system.run(["bpftool", "struct_ops", "unregister", "name", n], check=False)
