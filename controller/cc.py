"""Congestion-control algorithms on this host: what the kernel offers, what cclab loads.

A user names an algorithm once.  cclab's own (hosts/cc/) load as kernel
modules where the kernel takes modules and a tcp_<name>.ko is built for its
release (hosts/cc/build/kmod/<release>/: the lab VM builds its own), and as
eBPF struct_ops otherwise; same name either way.  The exception is mptcpw:
only its eBPF form couples the subflows of a connection (the module cannot
reach the MPTCP token), so it loads as eBPF wherever the kernel takes that
form (6.2 and newer: bpf_rdonly_cast), and as the uncoupled module only where
it does not.

A spec may also name an algorithm of its own, `algo = "<name>.bpf.c"`: a
struct_ops source built here with the flags and headers of cclab's own eBPF
objects (hosts/cc/Makefile, print-bpf-cflags), registered for the run under
the name its tcp_congestion_ops table gives (which must be <name>) and
unregistered after it; /run/cclab/own-cc/ records each one registered, so
that `cclab clean` can unregister what a crashed run left.
"""

from __future__ import annotations

import json
import logging
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import system
from controller.spec import CCLAB_ALGOS, KERNEL_ALGOS, algos

log = logging.getLogger(__name__)

CC_DIR = system.REPO / "hosts" / "cc"
BPF_DIR = CC_DIR / "build" / "bpf"
KMOD_DIR = CC_DIR / "build" / "kmod"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: algorithms whose eBPF form does more than their module, and what
EBPF_FIRST = {"mptcpw": "coupled subflows (its module runs each subflow alone)"}
#: one empty file per algorithm of one's own registered now, by name
OWN_STATE = system.RUN_STATE / "own-cc"
#: compiler lines an error shows at most (the rest: `cclab cc build FILE`)
ERROR_LINES = 30


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


def load(
    names: list[str] | tuple[str, ...],
    params: dict[str, dict[str, int]] | None = None,
    sources: dict[str, Path] | None = None,
) -> list[str]:
    """Register each of cclab's algorithms not yet present; return the names registered now.

    ``params`` sets tunables (hosts/cc/algos.toml) of the ones loaded now; an
    algorithm registered before with tunables asked for is refused, as its
    settings cannot be changed in place.  ``sources`` maps a name to the source
    of an algorithm of one's own (a spec's ``algo = "<name>.bpf.c"``): built and
    registered now; one registered already is refused (an older build of it).
    """
    system.require_root()
    params, sources = params or {}, sources or {}
    done: list[str] = []
    for n in names:
        if n in sources:
            try:
                load_own(n, sources[n])
            except CcError:
                unload(done)
                raise
            done.append(n)
            continue
        if n not in CCLAB_ALGOS:
            if n in available():
                continue
            if intree_module(n):
                system.run(["modprobe", f"tcp_{n}"])
                done.append(n)
                continue
            raise CcError(f"{n} is not one of cclab's algorithms ({', '.join(CCLAB_ALGOS)}) nor in this kernel")
        if n in available():
            if why := unsettable(n, params.get(n, {})):
                unload(done)
                raise CcError(f"{why}; unload it first: cclab cc unload {n}")
            continue
        try:
            form = _load_one(n, params.get(n, {}))
        except CcError:
            unload(done)
            raise
        if n not in available():
            unload(done + [n])
            raise CcError(f"{n} registered but is not in {AVAILABLE}")
        log.info("loaded %s (%s%s)", n, form, f", {show_params(params[n])}" if params.get(n) else "")
        done.append(n)
    return done


def show_params(values: dict[str, int]) -> str:
    """Tunables as a spec or insmod reads them: name=value, by name."""
    return " ".join(f"{k}={v}" for k, v in sorted(values.items()))


def unsettable(n: str, wanted: dict[str, int]) -> str | None:
    """Why a run cannot have `wanted` tunables of `n`, registered already (None where it can: none are wanted,
    or the kernel's copy runs with those very values, as a run side by side with the same setting finds it)."""
    if not wanted:
        return None
    have = registered_params(n)
    if have == algos.with_defaults(n, wanted):
        return None
    now = f"with {show_params(have)}" if have is not None else "with tunables that cannot be read back"
    return f"{n} is already registered ({now}), so it cannot be loaded with {show_params(wanted)}"


def registered_params(n: str) -> dict[str, int] | None:
    """The tunables cclab's algorithm `n` runs with as the kernel holds it now, read back: a module's from
    sysfs, an eBPF struct_ops' from its programs' .rodata (divided by bpf_scale); None where n is not
    registered or they cannot be read."""
    declared = algos.params(n)
    if not declared:
        return {} if n in available() else None
    if _loaded_as_module(n):
        sysfs = Path("/sys/module") / f"tcp_{n}" / "parameters"
        got = {k: _sysfs_int(sysfs / k) for k in declared}
        return None if None in got.values() else {k: v for k, v in got.items() if v is not None}
    rodata = _struct_ops_rodata(n)
    if rodata is None or any(p.bpf not in rodata for p in declared.values()):
        return None
    return {k: rodata[p.bpf] // p.bpf_scale for k, p in declared.items()}


def _struct_ops_rodata(n: str) -> dict[str, int] | None:
    """The .rodata variables of the programs of struct_ops `n` as registered now (bpftool's BTF-formatted dump),
    or None.  Only the map in use counts: an unregistered one of the same name lives on, to be freed, while
    sockets that ran it still hold it (a run's, killed with its namespaces: minutes, measured), and its
    tunables are an earlier run's."""
    dumped = _bpftool_json(["struct_ops", "dump", "name", n])
    in_use = [
        value
        for entry in dumped or []
        if isinstance(entry, dict)
        for key, value in entry.items()
        if key.startswith("bpf_struct_ops_")
        and isinstance(value, dict)
        and value.get("common", {}).get("state") == "BPF_STRUCT_OPS_STATE_INUSE"
    ]
    prog_ids = sorted({int(i) for i in re.findall(r"/prog_id:(\d+)", json.dumps(in_use))})
    if not prog_ids:
        return None
    prog = _bpftool_json(["prog", "show", "id", str(prog_ids[0])])
    for map_id in prog.get("map_ids", []) if isinstance(prog, dict) else []:
        info = _bpftool_json(["map", "show", "id", str(map_id)])
        if not isinstance(info, dict) or not str(info.get("name", "")).endswith(".rodata"):
            continue
        entries = _bpftool_json(["map", "dump", "id", str(map_id)])
        try:
            variables = entries[0]["formatted"]["value"][".rodata"]
            return {k: int(v) for var in variables for k, v in var.items()}
        except (LookupError, TypeError, ValueError, AttributeError):
            return None
    return None


def _bpftool_json(args: list[str]) -> Any:
    proc = system.run(["bpftool", "-j", *args], check=False)
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None
    except ValueError:
        return None


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


class BuildError(CcError):
    """An algorithm of one's own does not compile: the message is one line, `lines` the compiler's output."""

    def __init__(self, source: Path, lines: list[str]) -> None:
        first = next((ln.strip() for ln in lines if "error" in ln), lines[0].strip() if lines else "no output")
        super().__init__(f"{source} does not compile: {first} (the whole output: cclab cc build {source})")
        self.lines = lines


def build_own(source: Path, out: Path) -> None:
    """Compile a struct_ops source as cclab's own eBPF algorithms are (same compiler, flags and headers)."""
    if not (CC_DIR / "build" / "vmlinux.h").exists():
        raise CcError(f"{CC_DIR / 'build' / 'vmlinux.h'} is missing; run `make build` first")
    proc = system.run(["make", "-s", "--no-print-directory", "-C", str(CC_DIR), "print-bpf-cflags"])
    clang, flags = proc.stdout.splitlines()[:2]
    args = [clang, *flags.split(), "-c", str(source.resolve()), "-o", str(out.resolve())]
    log.debug("build %s", args)
    try:  # the -I paths are relative: run from hosts/cc, as the Makefile does
        done = subprocess.run(args, cwd=CC_DIR, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise CcError(f"{clang} is not installed; run `make deps` (as root)") from None
    if done.returncode != 0:
        raise BuildError(source, done.stderr.strip().splitlines())


def load_own(name: str, source: Path) -> None:
    """Build an algorithm of one's own and register it; it must register exactly `name`."""
    if name in available():
        raise CcError(
            f"{name} is registered already (an earlier build of {source.name}?): `cclab clean` unregisters "
            f"what a run left, `bpftool struct_ops unregister name {name}` any other"
        )
    with tempfile.TemporaryDirectory(prefix=f"cclab-{name}-") as tmp:
        obj = Path(tmp) / f"{name}.bpf.o"
        build_own(source, obj)
        before = set(available())
        OWN_STATE.mkdir(parents=True, exist_ok=True)
        (OWN_STATE / name).touch()  # before registering: a crash in between still leaves `cclab clean` its name
        try:
            system.run(["bpftool", "struct_ops", "register", str(obj)])
        except system.SystemError_ as exc:
            (OWN_STATE / name).unlink(missing_ok=True)
            raise CcError(f"registering {source.name}: {exc}") from None
    new = sorted(set(available()) - before)
    if name not in new:
        for other in new:
            system.run(["bpftool", "struct_ops", "unregister", "name", other], check=False)
        (OWN_STATE / name).unlink(missing_ok=True)
        raise CcError(
            f"{source.name} registers {', '.join(new) or 'no congestion control'}, not {name}: "
            f'its tcp_congestion_ops .name must be "{name}", the name of the file'
        )
    log.info("loaded %s (eBPF struct_ops, built from %s)", name, source)


def own_recorded() -> list[str]:
    """The algorithms of one's own a run registered and has not unregistered yet (or a crashed run left)."""
    return sorted(p.name for p in OWN_STATE.iterdir()) if OWN_STATE.is_dir() else []


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


def describe(
    names: tuple[str, ...] | list[str],
    params: dict[str, dict[str, int]],
    loaded: list[str],
    sources: dict[str, Path] | None = None,
) -> dict:
    """For the manifest: each algorithm's form and, for cclab's, the tunables it runs with where they are known;
    for one of one's own, the source it was built from."""
    out: dict[str, dict] = {}
    for n in names:
        entry: dict = {"form": loaded_form(n)}
        if sources and n in sources:
            entry["source"] = str(sources[n])
        if n in CCLAB_ALGOS:
            if n in loaded:
                entry["params"] = algos.with_defaults(n, params.get(n, {}))
            elif (have := registered_params(n)) is not None:
                entry["params"] = have
                entry["note"] = "registered before this run: its tunables as read back from the kernel"
            else:
                entry["params"] = None
                entry["note"] = "registered before this run: its tunables could not be read back"
        out[n] = entry
    return out


def _sysfs_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return {"Y": 1, "N": 0}.get(text, int(text) if text.lstrip("-").isdigit() else None)


def unload(names: list[str] | tuple[str, ...]) -> None:
    """Unload cclab's algorithms and those of one's own by name, module or struct_ops (absent ones are skipped)."""
    for n in names:
        if n in available():
            if _loaded_as_module(n):  # ours or an in-tree one cclab modprobed
                system.run(["rmmod", f"tcp_{n}"], check=False)
            elif n in CCLAB_ALGOS or (OWN_STATE / n).exists():
                system.run(["bpftool", "struct_ops", "unregister", "name", n], check=False)
        (OWN_STATE / n).unlink(missing_ok=True)
