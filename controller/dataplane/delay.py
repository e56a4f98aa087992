"""A link's one-way delay, in both directions, on the devices of its delay node.

Every link with a delay has a delay node d<link> in its middle
(mininet/topologies.py); its port towards b delays a -> b and its port towards
a delays b -> a.  Both are after the link's rate limiter and its queue, so the
queue never holds packets of the delay line (netem has a large limit of its
own).  The same element serves every target: the kernel and bmv2 data planes
program rate, queue and loss; this programs delay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from controller import system

#: netem's own queue must never be the link's queue.
NETEM_LIMIT_PKTS = 1_000_000


def netem_args(delay_ms: float, jitter_ms: float) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT_PKTS), "delay", f"{delay_ms}ms"]
    if jitter_ms > 0:
        args.append(f"{jitter_ms}ms")
    return args


@dataclass
class LinkDelay:
    """netem on a delay node's two ports; changeable while running; removed on teardown."""

    link_id: str
    devs: tuple[str, ...]
    """The delay node's ports (root namespace)."""
    delay_ms: float = field(default=0.0, init=False)
    jitter_ms: float = field(default=0.0, init=False)
    _touched: list[str] = field(default_factory=list, init=False)

    def setup(self, delay_ms: float, jitter_ms: float) -> None:
        for dev in self.devs:
            self._touched.append(dev)
            system.run(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *netem_args(delay_ms, jitter_ms)])
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms

    def apply(self, delay_ms: float, jitter_ms: float) -> None:
        if (delay_ms, jitter_ms) == (self.delay_ms, self.jitter_ms):
            return
        for dev in self.devs:
            system.run(["tc", "qdisc", "change", "dev", dev, "root", "handle", "1:", *netem_args(delay_ms, jitter_ms)])
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms

    def teardown(self) -> None:
        for dev in dict.fromkeys(self._touched):
            if Path(f"/sys/class/net/{dev}").exists():
                system.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
        self._touched.clear()
