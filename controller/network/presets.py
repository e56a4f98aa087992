"""Preset networks: the classic shapes a spec names by kind, each expanded into one `Graph`.

Host names carry their role (h: sender, r: receiver), which gives them their
addresses (`graph.ADDRESS_GROUPS`).
"""

from __future__ import annotations

from controller.network.graph import Graph, Link, LinkSpec


def dumbbell(pairs: int, bottleneck: LinkSpec, access: dict[str, float] | None = None) -> Graph:
    """h1..hN -- s1 == l1 == s2 -- r1..rN; the bottleneck emulated s1 -> s2."""
    hosts = [f"h{i}" for i in range(1, pairs + 1)] + [f"r{i}" for i in range(1, pairs + 1)]
    links = [Link("l1", "s1", "s2", bottleneck)]
    links += _access([(f"h{i}", "s1") for i in range(1, pairs + 1)], access)
    links += _access([(f"r{i}", "s2") for i in range(1, pairs + 1)], access)
    return Graph(_interleave(hosts, pairs), ("s1", "s2"), tuple(renumber(links)), kind="dumbbell")


def parking_lot(hops: int, bottleneck: LinkSpec, access: dict[str, float] | None = None, cross: int = 1) -> Graph:
    """s1 == l1 == s2 == l2 == ... s(k+1); the long flow's hosts h0 at s1 and r0 at s(k+1), and `cross`
    pairs per bottleneck i, numbered n = (i-1)*cross + j: hn at si and rn at s(i+1)."""
    switches = tuple(f"s{i}" for i in range(1, hops + 2))
    links = [Link(f"l{i}", f"s{i}", f"s{i + 1}", bottleneck) for i in range(1, hops + 1)]
    attach = [("h0", "s1"), ("r0", f"s{hops + 1}")]
    for i in range(1, hops + 1):
        for j in range(1, cross + 1):
            n = (i - 1) * cross + j
            attach += [(f"h{n}", f"s{i}"), (f"r{n}", f"s{i + 1}")]
    links += _access(attach, access)
    hosts = tuple(h for h, _s in attach)
    return Graph(hosts, switches, tuple(renumber(links)), kind="parking_lot")


def multipath(background: tuple[int, int], bottleneck: LinkSpec, access: dict[str, float] | None = None) -> Graph:
    """Two disjoint paths between h0 and r0: s1 == l1 == s2 and s3 == l2 == s4, each its own switch group
    (subnet), h0 on s1 and s3, r0 on s2 and s4; `background` pairs per path, numbered on from 1: hn at the
    path's first switch, rn at its last."""
    links = [Link("l1", "s1", "s2", bottleneck), Link("l2", "s3", "s4", bottleneck)]
    attach = [("h0", "s1"), ("h0", "s3"), ("r0", "s2"), ("r0", "s4")]
    n = 0
    for first, last, pairs in (("s1", "s2", background[0]), ("s3", "s4", background[1])):
        for _ in range(pairs):
            n += 1
            attach += [(f"h{n}", first), (f"r{n}", last)]
    links += _access(attach, access)
    hosts = tuple(dict.fromkeys(h for h, _s in attach))
    return Graph(hosts, ("s1", "s2", "s3", "s4"), tuple(renumber(links)), kind="multipath")


def _access(attach: list[tuple[str, str]], access: dict[str, float] | None) -> list[Link]:
    delays = access or {}
    return [Link("", h, s, LinkSpec(delay_ms=delays.get(h, 0.0))) for h, s in attach]


def renumber(links: list[Link]) -> list[Link]:
    """Give unnamed links the next free l<n> after the named ones."""
    used = {lk.id for lk in links if lk.id}
    n, out = 0, []
    for lk in links:
        if not lk.id:
            n += 1
            while f"l{n}" in used:
                n += 1
            used.add(f"l{n}")
            lk = Link(f"l{n}", lk.a, lk.b, lk.spec, lk.both)
        out.append(lk)
    return out


def _interleave(hosts: list[str], pairs: int) -> tuple[str, ...]:
    """h1, r1, h2, r2, ...: the order Mininet creates them in (for stable interface names)."""
    return tuple(x for i in range(pairs) for x in (hosts[i], hosts[pairs + i]))
