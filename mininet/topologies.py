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
- on the kernel target the rate limiter sits on a's port of the link;
- with `switches = "ovs"` the graph's switches are Open vSwitch bridges
  (`CclabOvsBridge`, programmed by cclab's os-ken app), and an emulated link
  keeps its emulation on Linux bridges: a -- d<link>q -- d<link> -- b, the
  rate limiter on d<link>q's port towards d<link>, the ingress hook on
  d<link>'s port (OVS's userspace datapath reads and writes its ports through
  packet sockets: it reads a frame before tc ingress could drop it, and as a
  sender into a queue it re-sends frames the queue dropped and caps the queue
  at its socket's send buffer).

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

from mininet.node import Host, Switch
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo

# `mn --custom` execs this file without __file__; the code object still knows its file name
REPO = Path(inspect.currentframe().f_code.co_filename).resolve().parents[1]  # type: ignore[union-attr]
if str(REPO) not in sys.path:  # `mn --custom` runs from anywhere
    sys.path.insert(0, str(REPO))

from controller.network import PREFIX_LEN, Graph, GraphError, Link, LinkSpec  # noqa: E402
from controller.network.mininet import BoundedShell  # noqa: E402
from controller.network.presets import dumbbell, multipath, parking_lot  # noqa: E402

#: Offloads off: loss and queueing must act on wire-size packets (with GSO on,
#: tc sees 64 KB super-packets).
OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off")
#: a preset's bottleneck when built by hand (`mn --custom`): not programmed
BY_HAND = LinkSpec(rate_mbps=100.0)


def _run(node: Any, args: list[str], check: bool = True) -> bool:
    """Run a command in a node's namespace; whether it succeeded (check: raise with its stderr if not)."""
    proc = node.popen(args)
    _out, err = proc.communicate()
    if proc.returncode != 0 and check:
        raise RuntimeError(f"{node.name}: {' '.join(args)}: {err.decode().strip()}")
    return proc.returncode == 0


def offloads_off(node: Any, intf: str) -> None:
    _run(node, ["ethtool", "-K", intf, *OFFLOADS_OFF])


class CclabHost(BoundedShell, Host):
    """A Mininet host with offloads off and no IPv6 chatter on its links, whose shell cannot hang a run."""

    def config(self, **params: Any) -> Any:
        r = super().config(**params)
        for intf in self.intfNames():
            if intf != "lo":
                offloads_off(self, intf)
        _run(self, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
        return r


def free_from_socket_at(node: Any, intf: str) -> bool:
    """Let `intf` (a veth) receive through its NAPI path, which frees each frame from its sending socket (GRO's
    preparation orphans an skb), with GRO unable to merge any two frames; False where the kernel or ip refuses."""
    steps = (["ip", "link", "set", "dev", intf, "gro_max_size", "1"], ["ethtool", "-K", intf, "gro", "on"])
    return all(_run(node, args, check=False) for args in steps)


def _peer(intf: Any) -> Any:
    """The interface at the other end of intf's link (None: not linked)."""
    link = intf.link
    if link is None:
        return None
    return link.intf2 if link.intf1 is intf else link.intf1


class CclabBridge(BoundedShell, LinuxBridge):
    """A Linux-bridge switch whose ports have offloads off; its ports that face a host free the host's frames
    from their sockets (sysctls.FREE_AT_HOST_PORTS), else TCP Small Queues would cap what a flow can queue at
    an emulated link.  The bridge and its ports have no IPv6 (as the hosts): a bridge's own neighbour and
    multicast chatter would otherwise cross the emulated links beside the flows."""

    def start(self, controllers: Any) -> None:
        super().start(controllers)
        from controller.dataplane import sysctls

        _run(self, ["sysctl", "-q", "-w", f"net.ipv6.conf.{self.name}.disable_ipv6=1"])
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            _run(self, ["sysctl", "-q", "-w", f"net.ipv6.conf.{intf.name}.disable_ipv6=1"])
            offloads_off(self, intf.name)
            peer = _peer(intf)
            if sysctls.FREE_AT_HOST_PORTS and peer is not None and isinstance(peer.node, Host):
                free_from_socket_at(self, intf.name)


class CclabOvsBridge(BoundedShell, Switch):
    """An Open vSwitch bridge in the OVS a run uses (controller/fabric/ovs.py): OpenFlow 1.3 only, fail
    mode secure (forwards nothing until the controller programs it), its controller on 127.0.0.1, every
    port at the OpenFlow number Mininet gave it, offloads off, and marked as cclab's for clean-up."""

    def __init__(
        self, name: str, db: str = "", datapath_type: str = "netdev", of_port: int = 6653, mark: str = "run",
        **params: Any,
    ) -> None:  # fmt: skip
        super().__init__(name, **params)
        self.db, self.datapath_type, self.of_port, self.mark = db, datapath_type, of_port, mark

    def _vsctl(self, *args: str) -> None:
        import subprocess

        argv = ["ovs-vsctl", f"--db=unix:{self.db}", "--timeout=10", *args]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name}: ovs-vsctl: {' '.join(proc.stderr.split())}")

    def start(self, controllers: Any) -> None:
        br = self.name
        args = [
            "--may-exist", "add-br", br, "--", "set", "Bridge", br, f"datapath_type={self.datapath_type}",
            "fail_mode=secure", "protocols=OpenFlow13", f"other_config:datapath-id={self.dpid}",
            "other_config:disable-in-band=true", f'external_ids:cclab="{self.mark}"',
        ]  # fmt: skip
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            port = str(self.ports[intf])
            args += ["--", "add-port", br, intf.name, "--", "set", "Interface", intf.name, f"ofport_request={port}"]
        args += [
            "--", "--id=@c", "create", "Controller", f'target="tcp:127.0.0.1:{self.of_port}"',
            "max_backoff=1000", "connection_mode=out-of-band", "--", "set", "Bridge", br, "controller=@c",
        ]  # fmt: skip
        self._vsctl(*args)
        for intf in self.intfList():
            if intf.name != "lo":
                _run(self, ["ip", "link", "set", intf.name, "up"])
                offloads_off(self, intf.name)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's name)
        self._vsctl("--if-exists", "del-br", self.name)
        super().stop(deleteIntfs)


def delay_node(link: Link) -> str:
    return f"d{link.id}"


def queue_node(link: Link) -> str:
    """With OVS switches: the Linux bridge whose port holds an emulated link's rate limiter and queue."""
    return f"d{link.id}q"


def p4_node(link: Link) -> str:
    return f"p{link.id}"


def chain(graph: Graph, link: Link, bmv2: bool, ovs: bool = False) -> list[str]:
    """The Mininet nodes a graph link becomes, from a to b."""
    nodes = [link.a]
    if bmv2 and link.spec.emulated:
        nodes.append(p4_node(link))
    if ovs and link.spec.emulated:
        nodes.append(queue_node(link))
    if link.spec.has_delay or (ovs and link.spec.emulated):
        nodes.append(delay_node(link))
    nodes.append(link.b)
    return nodes


class GraphTopo(Topo):
    """Any cclab graph: its hosts, switches and links, with delay (and BMv2) nodes inside links."""

    def build(  # type: ignore[override]
        self, graph: Graph, bmv2: bool = False, p4_params: dict[str, Any] | None = None,
        ovs_params: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """ovs_params: the graph's switches are `CclabOvsBridge`s with these parameters (None: Linux bridges)."""
        self.graph = graph
        ovs = ovs_params is not None
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
        for i, s in enumerate(graph.switches, 1):
            if ovs:
                self.addSwitch(s, cls=CclabOvsBridge, dpid=f"{i:016x}", **(ovs_params or {}))
            else:
                self.addSwitch(s)
        for link in graph.links:
            nodes = chain(graph, link, bmv2, ovs)
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
