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
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from controller import system
from controller.spec import CCLAB_ALGOS, KERNEL_ALGOS

log = logging.getLogger(__name__)

CC_DIR = system.REPO / "hosts" / "cc"
BPF_DIR = CC_DIR / "build" / "bpf"
KMOD_DIR = CC_DIR / "build" / "kmod"
ALGOS_TOML = CC_DIR / "algos.toml"
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


def extras(name: str) -> list[str]:
    """Names of the algorithm-specific exported fields x[0..4] (hosts/cc/algos.toml)."""
    try:
        table = tomllib.loads(ALGOS_TOML.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return []
    entry = table.get(name, {})
    return list(entry.get("extras", [])) if isinstance(entry, dict) else []


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


def load(names: list[str] | tuple[str, ...]) -> list[str]:
    """Register each of cclab's algorithms not yet present; return the names registered now."""
    system.require_root()
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
            continue
        try:
            args = _load_one(n)
        except CcError:
            unload(done)
            raise
        if n not in available():
            unload(done + [n])
            raise CcError(f"{n} registered but is not in {AVAILABLE}")
        log.info("loaded %s (%s)", n, "module" if args[0] == "insmod" else "eBPF struct_ops")
        done.append(n)
    return done


def _load_one(n: str) -> list[str]:
    """Register one of cclab's algorithms in the form this kernel takes best; the command that did it."""
    obj = bpf_object(n)
    ebpf = ["bpftool", "struct_ops", "register", str(obj)]
    module = ["insmod", str(kernel_module(n))]
    has_module = module_matches(n)
    if has_module and not (n in EBPF_FIRST and obj.exists()):
        first, fallback = module, None
    elif obj.exists():
        first, fallback = ebpf, (module if has_module else None)
    else:
        raise CcError(f"{obj} is missing; run `make build`")
    try:
        system.run(first)
        return first
    except system.SystemError_ as exc:
        if fallback is None:
            raise CcError(f"loading {n}: {exc}") from None
        log.warning("%s: this kernel refused the eBPF form (%s); loading the module, without %s", n, exc, EBPF_FIRST[n])
    try:
        system.run(fallback)
    except system.SystemError_ as exc:
        raise CcError(f"loading {n}: {exc}") from None
    return fallback


def unload(names: list[str] | tuple[str, ...]) -> None:
    """Unload cclab's algorithms by name, module or struct_ops (absent ones are skipped)."""
    for n in names:
        if n not in available():
            continue
        if _loaded_as_module(n):  # ours or an in-tree one cclab modprobed
            system.run(["rmmod", f"tcp_{n}"], check=False)
        elif n in CCLAB_ALGOS:
            system.run(["bpftool", "struct_ops", "unregister", "name", n], check=False)
