"""Host-wide sysctls a run sets for the fidelity and speed of the emulated path, always put back.

A packet keeps its sending socket as owner across veth pairs and bridges, and
TCP Small Queues holds a sender back once about two packets (or 1 ms of its
pacing rate) are not yet freed: a TCP flow through an emulated link with delay
could not fill the link's queue (measured: one reno flow, 10 Mbit/s, a
100-packet queue, 20 ms: the backlog peaked at 7-8 packets, nothing dropped in
10 s; freed, it reaches 100 and drops, tests/test_run.py).  So each packet is
freed from its socket before the link, as a router's IP input would, in one of
three places, cheapest first:
- the switch port that faces the sending host (FREE_AT_HOST_PORTS,
  mininet/topologies.py), the rule: a veth that receives through NAPI
  orphans each frame as it prepares it for GRO, and gro_max_size 1 keeps GRO
  from merging any two, so frames stay wire size;
- else, under --keep-host-sysctls on a host that has it on, netfilter's
  bridge hook for IPv4 (br_netfilter).  It costs about a sixth of the CPU on
  the bridged path (perf, 4 saturating flows), all of it wasted once the
  ports have freed the frames, so runs turn it off (BRIDGE_NF) while their
  network exists; cclab adds no netfilter rules;
- else the emulated link's BPF program (p4/ebpf/bottleneck.bpf.c,
  bn_enqueue) queues an unowned clone and drops the original, which costs
  the most; summary.json's owned_at_link_pkts counts them (0 where the ports
  freed every frame; a kernel whose veth does not, or whose ip cannot set
  gro_max_size, falls to here).
Side by side, the ports against the hook (HTB hysteresis on in both, 4 cubic
flows, medians of 3 interleaved runs, every run within 1 % of its rate): CPU
busy 0.46 against 0.55 at 1.4 Gbit/s, 0.67 against 0.80 at 2.2 Gbit/s; the
unshaped path carried 2740 against 2632 Mbit/s.

While the kernel target shapes links here, HTB runs with hysteresis
(`htb_hysteresis`, a module parameter of sch_htb).  Without it a backlogged
class that has spent its bucket is let through one packet per timer: HTB arms
its watchdog for the next packet's tokens, every packet, and on this VM-hosted
machine kind each arming is a costly exit to the hypervisor (perf, 4 cubic
flows at 1.4 Gbit/s: about a quarter of all samples where htb_dequeue arms its
timer).  With it, a class that may send goes on until it is one bucket ahead
of its rate (kernel.burst_time_s(), 1 ms) and then waits until it is not: a
timer per bucket, not per packet.  Measured side by side (medians of 3, every
run within 1 % of its rate): CPU busy 0.49 against 0.95 at 1.4 Gbit/s, 0.29
against 0.70 at 700 Mbit/s.  The rate over any interval longer than the bucket
is unchanged; within one, the link sends in bunches of at most two buckets.
Not in the lab VM, whose 20 ms bucket would make those bunches coarse beside
its delays (kernel.htb_hysteresis_wanted()).

And every tcp_info sample (a sock_diag dump, 10 per second per sending host)
walks the whole TCP established hash when the hosts' namespaces share the
host's (262144 buckets here): a namespace made while
`net.ipv4.tcp_child_ehash_entries` is set gets a hash of its own.

Before it changes anything, a change saves the values it found in
/run/cclab/sysctls.json, so that `cclab clean` puts them back after a run that
was killed; `restore()` puts them back on teardown.  Values the host does not
have even after loading their module are left alone and recorded as "absent".
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from controller import system
from controller.dataplane.kernel import htb_hysteresis_wanted

log = logging.getLogger(__name__)
T = TypeVar("T")

SAVED = system.RUN_STATE / "sysctls.json"

#: the switch ports that face hosts free the hosts' frames from their sockets (mininet/topologies.py)
FREE_AT_HOST_PORTS = True
#: while a network exists: the frames the bridges forward skip br_netfilter, which would free them again at
#: a sixth of the bridged path's CPU
BRIDGE_NF = (("net.bridge.bridge-nf-call-iptables", "0"),)
#: while a network with HTB links exists, where the bucket is 1 ms (kernel.htb_hysteresis_wanted()): HTB sends
#: a bucket at a time, not a packet per timer (a module parameter, named by its path)
HTB_HYSTERESIS = (("/sys/module/sch_htb/parameters/htb_hysteresis", "1"),)
#: the module that provides each setting where it is a module and not loaded
MODULES = {"/sys/module/sch_htb/": "sch_htb"}
#: while the hosts' namespaces are made: each gets an established hash of its own (buckets)
CHILD_EHASH = (("net.ipv4.tcp_child_ehash_entries", "4096"),)


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


def _load_module_for(name: str) -> bool:
    """modprobe the module that provides `name` (none, a kernel without loadable modules or without it: False)."""
    module = next((m for prefix, m in MODULES.items() if name.startswith(prefix)), None)
    if module is None or not Path("/proc/modules").exists() or shutil.which("modprobe") is None:
        return False
    proc = system.run(["modprobe", "-q", module], check=False)
    return proc.returncode == 0


def _write(name: str, value: str) -> None:
    try:
        system.sysctl_path(name).write_text(value + "\n")
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
            if now == "absent" and _load_module_for(name):  # (not br_netfilter: absent is as good as 0)
                now = system.read_sysctl(name)  # the module stays loaded: unloading it could race other users
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
    """What a cclab network is built under: BRIDGE_NF (and HTB_HYSTERESIS where it has HTB links and the
    bucket is 1 ms) while it exists, CHILD_EHASH while its hosts are made."""

    enabled: bool = True
    """False: build under the host's own values, changing nothing."""
    htb_links: bool = False
    """The kernel target shapes some of the network's links with HTB."""
    changed: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    """Everything changed, for the manifest: name -> {"was", "set"}."""
    _bridges: HostSysctls = field(init=False)

    def __post_init__(self) -> None:
        hysteresis = HTB_HYSTERESIS if self.htb_links and htb_hysteresis_wanted() else ()
        self._bridges = HostSysctls(BRIDGE_NF + hysteresis)

    @property
    def wanted(self) -> tuple[tuple[str, str], ...]:
        """Every (name, value) build() sets, for a while or for the network's life."""
        return self._bridges.wanted + CHILD_EHASH

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
