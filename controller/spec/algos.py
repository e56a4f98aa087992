"""What hosts/cc/algos.toml says about cclab's algorithms: which there are, their exported fields and their
tunables.  It is the registry: the spec's vocabulary, the build (hosts/cc/Makefile) and the tests read the
algorithms from it, so adding one is adding its table there and its sources under hosts/cc/.

A tunable is named once, as its module parameter (``insmod tcp_<algo>.ko <name>=N``);
the eBPF form holds it in a rodata variable (``bpf``) as N * ``bpf_scale``, set in a
copy of the object before it registers (controller.cc).  Values are integers: no
floats reach kernel or eBPF code.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from controller import system

ALGOS_TOML = system.REPO / "hosts" / "cc" / "algos.toml"
#: an algorithm of one's own (a spec's algo = "<name>.bpf.c"): its source's name ends so, the rest is its name
OWN_SUFFIX = ".bpf.c"
#: a name the kernel takes (TCP_CA_NAME_MAX is 16 bytes with the NUL)
OWN_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,14}$")


@dataclass(frozen=True)
class Param:
    """One tunable of one algorithm."""

    name: str
    """The module parameter's name; a spec's [algorithms.<algo>] key."""
    default: int
    lo: int
    hi: int
    bpf: str
    """The eBPF object's rodata variable (u32)."""
    bpf_scale: int
    help: str


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    try:
        return tomllib.loads(ALGOS_TOML.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def names() -> tuple[str, ...]:
    """cclab's algorithms in the registry's order: the top-level tables of algos.toml."""
    found = tuple(k for k, v in _table().items() if isinstance(v, dict))
    if not found:
        raise RuntimeError(f"{ALGOS_TOML} names no algorithm (missing or not TOML)")
    return found


def modules() -> tuple[str, ...]:
    """cclab's algorithms with a module form (``forms`` in algos.toml, both forms unless it says otherwise)."""
    return tuple(n for n in names() if "kmod" in _table()[n].get("forms", ("bpf", "kmod")))


def bwe_decreases() -> tuple[str, ...]:
    """cclab's algorithms whose loss response is ssthresh = BWE * RTTmin / MSS (``bwe_decrease`` in algos.toml)."""
    return tuple(n for n in names() if _table()[n].get("bwe_decrease", False))


def extras(name: str) -> list[str]:
    """Names of the algorithm-specific exported fields x[0..4] (see core/cc_export.h)."""
    entry = _table().get(name, {})
    return list(entry.get("extras", [])) if isinstance(entry, dict) else []


def params(name: str) -> dict[str, Param]:
    """The tunables of one of cclab's algorithms, by name (none for the kernel's own)."""
    entry = _table().get(name, {})
    raw = entry.get("params", {}) if isinstance(entry, dict) else {}
    return {
        k: Param(
            k,
            int(v["default"]),
            int(v["min"]),
            int(v["max"]),
            str(v["bpf"]),
            int(v.get("bpf_scale", 1)),
            str(v["help"]),
        )
        for k, v in raw.items()
    }


def with_defaults(name: str, given: dict[str, int]) -> dict[str, int]:
    """Every tunable of an algorithm: the given values over the defaults."""
    return {k: given.get(k, p.default) for k, p in params(name).items()}


def own_name(source: Path) -> str | None:
    """The name an algorithm of one's own registers under (its file's name before .bpf.c), None if it has none."""
    name = source.name.removesuffix(OWN_SUFFIX)
    return name if source.name.endswith(OWN_SUFFIX) and OWN_NAME.match(name) else None
