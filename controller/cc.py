"""Congestion-control algorithms on this host: what the kernel offers, what cclab loads.

A user names an algorithm once.  cclab's own (hosts/cc/) are registered as
eBPF struct_ops under that same name; where the kernel takes modules and a
built module matches it, the module form is used instead (lab VM).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from controller import system
from controller.spec import CCLAB_ALGOS

log = logging.getLogger(__name__)

CC_DIR = system.REPO / "hosts" / "cc"
BPF_DIR = CC_DIR / "build" / "bpf"
ALGOS_TOML = CC_DIR / "algos.toml"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class CcError(RuntimeError):
    """An algorithm cannot be loaded or used; the message says the fix."""


@dataclass(frozen=True)
class AlgoStatus:
    name: str
    ours: bool
    loaded: bool
    form: str
    """How it is (or would be) present: builtin, ebpf, ebpf (not built), unavailable."""


def available() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def bpf_object(name: str) -> Path:
    return BPF_DIR / f"{name}.bpf.o"


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
        built = bpf_object(n).exists()
        form = "ebpf" if built else "ebpf (not built: run `make build`)"
        out.append(AlgoStatus(n, True, n in have, form))
    return out


def check_available(names: tuple[str, ...] | list[str]) -> None:
    """Raise CcError unless every name is in the kernel or loadable by cclab."""
    have = available()
    for n in names:
        if n in have:
            continue
        if n in CCLAB_ALGOS:
            if not bpf_object(n).exists():
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
            raise CcError(f"{n} is not one of cclab's algorithms ({', '.join(CCLAB_ALGOS)}) nor in this kernel")
        if n in available():
            continue
        obj = bpf_object(n)
        if not obj.exists():
            raise CcError(f"{obj} is missing; run `make build`")
        try:
            system.run(["bpftool", "struct_ops", "register", str(obj)])
        except system.SystemError_ as exc:
            unload(done)
            raise CcError(f"loading {n}: {exc}") from None
        if n not in available():
            unload(done + [n])
            raise CcError(f"{n} registered but is not in {AVAILABLE}")
        log.info("loaded %s (eBPF struct_ops)", n)
        done.append(n)
    return done


def unload(names: list[str] | tuple[str, ...]) -> None:
    """Unregister cclab's struct_ops algorithms by name (absent ones are skipped)."""
    for n in names:
        if n not in CCLAB_ALGOS or n not in available():
            continue
        system.run(["bpftool", "struct_ops", "unregister", "name", n], check=False)
