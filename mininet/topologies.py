"""cclab topologies and nodes for Mininet (Linux-bridge switches, no OVS needed).

Every network is a graph of hosts, switches and links (controller/network/);
the presets expand into one, and `GraphTopo` builds any graph:

- a link with a delay gets a delay node d<link> (a Linux bridge) in its
  middle: a -- d<link> -- b.  The delay is applied on d<link>'s ports (towards
  b for a -> b, towards a for b -> a), after the link's rate limiter, never on
  its queue;
- on the bmv2 target an emulated link gets a two-port BMv2 switch p<link> at
  its a end: a -- p<link> -- (d<link> --) b, whose port towards b is the
  bottleneck; the other switches stay Linux bridges;
- on the kernel target the rate limiter sits on a's port of the link.

By hand, with Mininet alone (the data plane is then not programmed):

    sudo mn --custom mininet/topologies.py --topo dumbbell,4 \\
        --switch cclabbr --host cclabhost --controller none
    sudo mn --custom mininet/topologies.py --topo parking_lot,3 \\
        --switch cclabbr --host cclabhost --controller none
    sudo mn --custom mininet/topologies.py --topo multipath,2,1 \\
        --switch cclabbr --host cclabhost --controller none

This file is loaded by path (it is not a package: a package named `mininet`
would shadow Mininet itself).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from mininet.node import Host
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo

# `mn --custom` execs this file without __file__; the code object still knows its file name
REPO = Path(inspect.currentframe().f_code.co_filename).resolve().parents[1]  # type: ignore[union-attr]
if str(REPO) not in sys.path:  # `mn --custom` runs from anywhere
    sys.path.insert(0, str(REPO))

from controller.network import PREFIX_LEN, Graph, GraphError, Link, LinkSpec  # noqa: E402
from controller.network.presets import dumbbell, multipath, parking_lot  # noqa: E402

#: Offloads off: loss and queueing must act on wire-size packets (with GSO on,
#: tc sees 64 KB super-packets).
OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off")
#: a preset's bottleneck when built by hand (`mn --custom`): not programmed
BY_HAND = LinkSpec(rate_mbps=100.0)


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


def delay_node(link: Link) -> str:
    return f"d{link.id}"


def p4_node(link: Link) -> str:
    return f"p{link.id}"


def chain(graph: Graph, link: Link, bmv2: bool) -> list[str]:
    """The Mininet nodes a graph link becomes, from a to b."""
    nodes = [link.a]
    if bmv2 and link.spec.emulated:
        nodes.append(p4_node(link))
    if link.spec.has_delay:
        nodes.append(delay_node(link))
    nodes.append(link.b)
    return nodes


class GraphTopo(Topo):
    """Any cclab graph: its hosts, switches and links, with delay (and BMv2) nodes inside links."""

    def build(self, graph: Graph, bmv2: bool = False, p4_params: dict[str, Any] | None = None) -> None:  # type: ignore[override]
        self.graph = graph
        names = set(graph.hosts) | set(graph.switches)
        # each host's addresses by link, in link order (the first is Mininet's default interface)
        by_host: dict[str, list[tuple[Link, str]]] = {}
        for link in graph.links:
            for host, peer in ((link.a, link.b), (link.b, link.a)):
                if host in graph.hosts:
                    ip = graph.addresses[(host, graph.segment_of[peer])]
                    by_host.setdefault(host, []).append((link, f"{ip}/{PREFIX_LEN}"))
        for h in graph.hosts:
            first = by_host[h][0][1]
            self.addHost(h, ip=first)
        for s in graph.switches:
            self.addSwitch(s)
        for link in graph.links:
            nodes = chain(graph, link, bmv2)
            for inner in nodes[1:-1]:
                if inner in names:
                    raise GraphError(f"spec error: node {inner!r} clashes with link {link.id}'s own node; rename it")
                names.add(inner)
                if inner == p4_node(link):
                    self.addSwitch(inner, **(p4_params or {}))
                else:
                    self.addSwitch(inner)
            for x, y in zip(nodes, nodes[1:]):
                params: dict[str, Any] = {}
                for end, node in (("params1", x), ("params2", y)):
                    ips = dict(by_host.get(node, []))
                    if link in ips and ips[link] != by_host[node][0][1]:
                        params[end] = {"ip": ips[link]}
                self.addLink(x, y, **params)


class Dumbbell(GraphTopo):
    """Dumbbell: h1..hN -- s1 == bottleneck == s2 -- r1..rN."""

    def build(self, pairs: int = 2, **kw: Any) -> None:  # type: ignore[override]
        super().build(dumbbell(pairs, BY_HAND), **kw)


class ParkingLot(GraphTopo):
    """Parking lot: k bottlenecks s1 == s2 == ... s(k+1); h0 -> r0 crosses all, hi -> ri crosses li."""

    def build(self, hops: int = 3, cross: int = 1, **kw: Any) -> None:  # type: ignore[override]
        super().build(parking_lot(hops, BY_HAND, cross=cross), **kw)


class Multipath(GraphTopo):
    """Two disjoint paths h0 -- s1 == l1 == s2 -- r0 and h0 -- s3 == l2 == s4 -- r0, each its own subnet;
    background pairs on path 1 and path 2."""

    def build(self, background1: int = 0, background2: int = 0, **kw: Any) -> None:  # type: ignore[override]
        super().build(multipath((background1, background2), BY_HAND), **kw)


topos = {"dumbbell": Dumbbell, "parking_lot": ParkingLot, "multipath": Multipath}
switches = {"cclabbr": CclabBridge}
hosts = {"cclabhost": CclabHost}
