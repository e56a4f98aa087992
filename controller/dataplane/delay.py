"""A link's one-way delay on the devices after it: netem where the kernel has it, else cclab-delay.

Every link with a delay has a delay node d<link> in its middle
(mininet/topologies.py); its port towards b delays a -> b and its port towards
a delays b -> a.  Both are after the link's rate limiter and its queue, so the
queue never holds packets of the delay line (netem gets a large limit of its
own).  The same element serves every target that does not delay by itself
(`Bottleneck.delays_itself` False: kernel, bmv2, tofino): the target programs
rate, queue and loss and never touches delay; this programs delay.

The element is chosen before anything is built (`pick_element`): "auto" is
netem where the kernel has it, else cclab-delay, the user-space delay line in
delay/ (controller/dataplane/delayline.py); the manifest and summary.json
record which one delayed the packets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import system
from controller.dataplane import DataPlaneError, delayline
from controller.network.elements import DELAY_ELEMENTS as ELEMENTS

#: netem's own queue must never be the link's queue.
NETEM_LIMIT_PKTS = 1_000_000
NETEM = "netem"


def pick_element(choice: str = "auto") -> str:
    """The element that will delay packets for `choice`; DataPlaneError says why none can."""
    if choice not in ELEMENTS:
        raise DataPlaneError(f"delay element {choice!r} is not one of {', '.join(ELEMENTS)}")
    if choice in ("auto", NETEM) and system.has_netem():
        return NETEM
    if choice == NETEM:
        raise DataPlaneError("delay element netem: this kernel has no netem")
    why = delayline.missing()
    if why:
        raise DataPlaneError(f"delay element {delayline.ELEMENT}: {why}")
    return delayline.ELEMENT


def netem_args(delay_ms: float, jitter_ms: float) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT_PKTS), "delay", f"{delay_ms}ms"]
    if jitter_ms > 0:
        args.append(f"{jitter_ms}ms")
    return args


@dataclass
class LinkDelay:
    """The delay element on a set of devices; changeable while running; removed on teardown."""

    devs: tuple[str, ...]
    """The devices whose outgoing packets are delayed (root namespace)."""
    pin: Path
    """bpffs directory cclab-delay may use (its steering program); removed by teardown."""
    element: str = NETEM
    """NETEM or delayline.ELEMENT (from pick_element)."""
    seed: int = 1
    """Seed of cclab-delay's jitter draws."""
    delay_ms: float = field(default=0.0, init=False)
    jitter_ms: float = field(default=0.0, init=False)
    stats: dict[str, Any] | None = field(default=None, init=False)
    """cclab-delay's last counters (drops, lateness), kept by teardown."""
    _line: delayline.DelayLine | None = field(default=None, init=False)
    _touched: list[str] = field(default_factory=list, init=False)

    def setup(self, delay_ms: float, jitter_ms: float) -> None:
        """Start delaying; on failure the caller's teardown() removes what was made."""
        if self.element == NETEM:
            for dev in self.devs:
                self._touched.append(dev)
                system.run(
                    ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *netem_args(delay_ms, jitter_ms)]
                )
        else:
            self._line = delayline.DelayLine(self.pin, self.devs, self.seed)
            self._line.start(delay_ms, jitter_ms)
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms

    def apply(self, delay_ms: float, jitter_ms: float) -> None:
        if (delay_ms, jitter_ms) == (self.delay_ms, self.jitter_ms):
            return
        if self._line is not None:
            self._line.set_delay(delay_ms, jitter_ms)
        else:
            for dev in self.devs:
                system.run(
                    ["tc", "qdisc", "change", "dev", dev, "root", "handle", "1:", *netem_args(delay_ms, jitter_ms)]
                )
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms

    def stats_now(self) -> dict[str, Any] | None:
        """cclab-delay's counters while it runs (None for netem, which keeps none)."""
        return self._line.stats() if self._line is not None else None

    def teardown(self) -> None:
        """Remove the element; safe to call twice and after a partial set-up."""
        if self._line is not None:
            self._line.teardown()
            self.stats = self._line.final_stats
            self._line = None
        for dev in dict.fromkeys(self._touched):
            if Path(f"/sys/class/net/{dev}").exists():
                system.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
        self._touched.clear()
