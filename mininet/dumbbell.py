"""cclab topologies and nodes for Mininet (Linux-bridge switches, no OVS needed).

The dumbbell: senders h1..hN on switch s1, receivers r1..rN on switch s2, and
one bottleneck link s1-eth1 <-> s2-eth1 whose s1 side carries the rate
limiter.  The cclab runner programs that link; by hand, with Mininet alone:

    sudo mn --custom mininet/dumbbell.py --topo dumbbell,4 \\
        --switch cclabbr --host cclabhost --controller none

This file is loaded by path (it is not a package: a package named `mininet`
would shadow Mininet itself).
"""

from __future__ import annotations

from typing import Any

from mininet.node import Host
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo

#: Offloads off: loss and queueing must act on wire-size packets (with GSO on,
#: tc sees 64 KB super-packets).
OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off")

SENDER_NET = "10.0.1.{}"
RECEIVER_NET = "10.0.2.{}"
PREFIX_LEN = 16


def _run(node: Any, args: list[str]) -> None:
    """Run a command in a node's namespace; raise with its stderr on failure."""
    proc = node.popen(args)
    _out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{node.name}: {' '.join(args)}: {err.decode().strip()}")


def offloads_off(node: Any, intf: str) -> None:
    _run(node, ["ethtool", "-K", intf, *OFFLOADS_OFF])


class CclabHost(Host):
    """A Mininet host with offloads off and no IPv6 chatter on its links."""

    def config(self, **params: Any) -> Any:
        r = super().config(**params)
        for intf in self.intfNames():
            if intf != "lo":
                offloads_off(self, intf)
        _run(self, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
        return r


class CclabBridge(LinuxBridge):
    """A Linux-bridge switch whose ports have offloads off."""

    def start(self, controllers: Any) -> None:
        super().start(controllers)
        for intf in self.intfNames():
            if intf != "lo":
                offloads_off(self, intf)


class Dumbbell(Topo):
    """Dumbbell: h1..hN -- s1 == bottleneck == s2 -- r1..rN."""

    #: (switch on the rate limiter's side, switch at the link's far end)
    bottleneck = ("s1", "s2")

    def build(self, pairs: int = 2) -> None:  # type: ignore[override]
        s1 = self.addSwitch("s1")
        s2 = self.addSwitch("s2")
        # First link: s1-eth1 <-> s2-eth1 is the bottleneck.
        self.addLink(s1, s2)
        for i in range(1, pairs + 1):
            h = self.addHost(f"h{i}", ip=f"{SENDER_NET.format(i)}/{PREFIX_LEN}")
            r = self.addHost(f"r{i}", ip=f"{RECEIVER_NET.format(i)}/{PREFIX_LEN}")
            self.addLink(h, s1)
            self.addLink(r, s2)


topos = {"dumbbell": Dumbbell}
switches = {"cclabbr": CclabBridge}
hosts = {"cclabhost": CclabHost}
