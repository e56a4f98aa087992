"""Host-wide sysctls a run changes for the speed of the emulated path, always put back.

Measured here (perf, 4 saturating flows through the unshaped dumbbell): with
`net.bridge.bridge-nf-call-iptables = 1` every frame the Linux-bridge switches
forward also crosses netfilter's bridge hooks (br_netfilter: header checks, an
skb extension, the IP hooks), about a sixth of all CPU samples; the switches
live in the host's own network namespace, where these sysctls are the host's.
cclab adds no netfilter rules, so with the hooks off the bridges forward the
same frames.  And every tcp_info sample (a sock_diag dump, 10 per second per
sending host) walks the whole TCP established hash when the hosts' namespaces
share the host's (262144 buckets here): a namespace made while
`net.ipv4.tcp_child_ehash_entries` is set gets a hash of its own.

Before it changes anything, a change saves the values it found in
/run/cclab/sysctls.json, so that `cclab clean` puts them back after a run that
was killed; `restore()` puts them back on teardown.  Values the host does not
have (no br_netfilter loaded) are left alone and recorded as "absent".
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from controller import system

log = logging.getLogger(__name__)
T = TypeVar("T")

SAVED = system.RUN_STATE / "sysctls.json"

#: while a network exists: the Linux-bridge switches forward without netfilter's bridge hooks
BRIDGE_NF_OFF = (
    ("net.bridge.bridge-nf-call-iptables", "0"),
    ("net.bridge.bridge-nf-call-ip6tables", "0"),
    ("net.bridge.bridge-nf-call-arptables", "0"),
)
#: while the hosts' namespaces are made: each gets an established hash of its own (buckets)
CHILD_EHASH = (("net.ipv4.tcp_child_ehash_entries", "4096"),)


def _path(name: str) -> Path:
    return Path("/proc/sys", *name.split("."))


def _read_saved() -> dict[str, str]:
    try:
        data = json.loads(SAVED.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_saved(saved: dict[str, str]) -> None:
    if not saved:
        SAVED.unlink(missing_ok=True)
        return
    SAVED.parent.mkdir(parents=True, exist_ok=True)
    tmp = SAVED.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=2) + "\n")
    os.replace(tmp, SAVED)


def _write(name: str, value: str) -> None:
    try:
        _path(name).write_text(value + "\n")
    except OSError as exc:
        raise system.SystemError_(f"cannot set {name} = {value}: {exc.strerror}") from None


@dataclass
class HostSysctls:
    """A set of host sysctls set for a while; `changed` is what the manifest records."""

    wanted: tuple[tuple[str, str], ...]
    changed: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    """name -> {"was": value found, "set": value cclab set} (or {"was": "absent"} where the host lacks it)."""

    def apply(self) -> dict[str, dict[str, str]]:
        """Save the values found (first saver wins, so a crashed run's originals stay), then set ours."""
        saved = _read_saved()
        for name, value in self.wanted:
            now = system.read_sysctl(name)
            if now == "absent":
                self.changed[name] = {"was": "absent"}
                continue
            saved.setdefault(name, now)
            self.changed[name] = {"was": saved[name], "set": value}
        _write_saved(saved)
        for name, entry in self.changed.items():
            if "set" in entry and system.read_sysctl(name) != entry["set"]:
                log.info("sysctl %s = %s (was %s; put back on teardown)", name, entry["set"], entry["was"])
                _write(name, entry["set"])
        return self.changed

    def restore(self) -> None:
        """Put back the values found; safe to call twice and after a partial apply."""
        saved = _read_saved()
        for name, entry in self.changed.items():
            if "set" in entry:
                _write(name, saved.pop(name, entry["was"]))
        _write_saved(saved)
        self.changed = {}


def make_namespaces(make: Callable[[], T]) -> tuple[T, dict[str, dict[str, str]]]:
    """make() (which creates the hosts' namespaces) with CHILD_EHASH set, put back as soon as it returns."""
    ehash = HostSysctls(CHILD_EHASH)
    try:
        changed = dict(ehash.apply())
        return make(), changed
    finally:
        ehash.restore()


@dataclass
class NetworkSysctls:
    """What a cclab network is built under: BRIDGE_NF_OFF while it exists, CHILD_EHASH while its hosts are made."""

    enabled: bool = True
    """False: build under the host's own values, changing nothing (a host whose firewall filters bridged frames)."""
    changed: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    """Everything changed, for the manifest: name -> {"was", "set"}."""
    _bridges: HostSysctls = field(default_factory=lambda: HostSysctls(BRIDGE_NF_OFF), init=False)

    def build(self, make: Callable[[], T]) -> T:
        """make() the network (Mininet(...)) under these sysctls; on failure put everything back and raise."""
        if not self.enabled:
            return make()
        try:
            self.changed.update(self._bridges.apply())
            net, ehash = make_namespaces(make)
        except BaseException:
            self.restore()
            raise
        self.changed.update(ehash)
        return net

    def restore(self) -> None:
        """Put back what build() changed (call it after the network is stopped); safe to call twice."""
        self._bridges.restore()


def restore_saved() -> list[str]:
    """`cclab clean`: put back every value a killed run left changed; a line per value."""
    saved = _read_saved()
    done = []
    for name, value in saved.items():
        if system.read_sysctl(name) not in ("absent", value):
            _write(name, value)
            done.append(f"sysctl {name} = {value}")
    _write_saved({})
    return done
