"""cclab-delay: the user-space delay line for kernels without netem (source in delay/).

For each device it serves (a device after the emulated link, where netem
would be the root qdisc), set-up makes:

    dev egress:  clsact / dl_egress       (steer.bpf.c: redirect to cap A)
    cap A -> B:  a private veth pair,     cclabd<ifindex of dev>a / ...b
    cclab-delay: reads B, holds each packet for the delay, sends it out of
                 dev with a mark dl_egress lets through

One cclab-delay process serves all devices of a link.  It exits when its
stdin closes (this object's teardown, or the controller dying) or on
SIGTERM (also sent by the kernel when its parent dies).
"""

from __future__ import annotations

import json
import logging
import re
import select
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from controller import bpf, system
from controller.dataplane import remove_pins

log = logging.getLogger(__name__)

#: the name summary.json and the manifest give this element
ELEMENT = "cclab-delay"
BINARY = system.BUILD / "cclab-delay"
STEER_OBJECT = system.BUILD / "delay_steer.bpf.o"
#: capture veth pairs: cclabd<ifindex>a (redirect target) and cclabd<ifindex>b (read)
CAPTURE_DEV = re.compile(r"^cclabd\d+[ab]$")
READY_TIMEOUT_S = 10.0
STATS_TIMEOUT_S = 5.0


def missing() -> str | None:
    """Why the delay line cannot run here, or None."""
    for f in (BINARY, STEER_OBJECT):
        if not f.exists():
            return f"{f} is missing; run `make build`"
    return None


def _ns(ms: float) -> int:
    return int(round(ms * 1_000_000))


@dataclass
class DelayLine:
    """The delay line of one emulated link: one process, a capture pair per device."""

    pin: Path
    """bpffs directory for the steering program and its map (removed by teardown)."""
    devs: tuple[str, ...]
    """Devices whose outgoing packets are delayed."""
    seed: int
    """Seed of the jitter draws."""
    _proc: subprocess.Popen[str] | None = field(default=None, init=False)
    _captures: list[str] = field(default_factory=list, init=False)
    _steered: list[str] = field(default_factory=list, init=False)
    final_stats: dict[str, Any] | None = field(default=None, init=False)

    def start(self, delay_ms: float, jitter_ms: float) -> None:
        """Build the capture pairs, start cclab-delay, then steer the devices to it.

        On failure the caller's teardown() removes what was made.
        """
        why = missing()
        if why:
            raise system.SystemError_(why)
        self._load_steer()
        pairs = []
        for dev in self.devs:
            cap = f"cclabd{system.ifindex(dev)}"
            self._make_capture(cap)
            pairs.append(f"{cap}b:{dev}")
        args = [str(BINARY), "--delay-ns", str(_ns(delay_ms)), "--jitter-ns", str(_ns(jitter_ms))]
        args += ["--seed", str(self.seed & (2**64 - 1)), *pairs]
        log.debug("start %s", args)
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        first = self._line(READY_TIMEOUT_S)
        if first != {"ready": True}:
            raise system.SystemError_(f"{ELEMENT} did not start: {self._stderr()}")
        with bpf.BpfMap.pinned(self.pin / "maps" / "dl_steer") as steer:
            for dev in self.devs:
                to = system.ifindex(f"cclabd{system.ifindex(dev)}a")
                steer.update(struct.pack("=I", system.ifindex(dev)), struct.pack("=I", to))
        for dev in self.devs:
            self._steered.append(dev)
            system.run(["tc", "qdisc", "replace", "dev", dev, "clsact"])
            system.run(["tc", "filter", "replace", "dev", dev, "egress", "pref", "1", "handle", "1",
                        "bpf", "direct-action", "object-pinned", str(self.pin / "progs" / "dl_egress")])  # fmt: skip

    def _load_steer(self) -> None:
        self.pin.mkdir(parents=True, exist_ok=True)
        system.run(["bpftool", "prog", "loadall", str(STEER_OBJECT), str(self.pin / "progs"),
                    "pinmaps", str(self.pin / "maps")])  # fmt: skip

    def _make_capture(self, cap: str) -> None:
        a, b = f"{cap}a", f"{cap}b"
        self._captures.append(a)
        system.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
        for dev in (a, b):
            # no addresses, no IPv6: nothing of their own reaches the line
            system.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1"])
            system.run(["ip", "link", "set", dev, "up"])

    def set_delay(self, delay_ms: float, jitter_ms: float) -> None:
        """New delay for packets arriving from now on; those held keep theirs (order is kept)."""
        self._send(f"delay {_ns(delay_ms)} {_ns(jitter_ms)}")

    def stats(self) -> dict[str, Any]:
        """cclab-delay's counters now (see delay/cclab_delay.c)."""
        self._send("stats")
        out = self._line(STATS_TIMEOUT_S)
        if out is None:
            raise system.SystemError_(f"{ELEMENT} did not answer: {self._stderr()}")
        return out

    def _send(self, cmd: str) -> None:
        if self._proc is None or self._proc.stdin is None or self._proc.poll() is not None:
            raise system.SystemError_(f"{ELEMENT} is not running: {self._stderr()}")
        self._proc.stdin.write(cmd + "\n")
        self._proc.stdin.flush()

    def _line(self, timeout_s: float) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdout is not None
        out: IO[str] = self._proc.stdout
        ready, _, _ = select.select([out], [], [], timeout_s)
        if not ready:
            return None
        text = out.readline()
        if not text:
            return None
        value: dict[str, Any] = json.loads(text)
        return value

    def _stderr(self) -> str:
        if self._proc is None or self._proc.stderr is None or self._proc.poll() is None:
            return "no message"
        return " ".join(self._proc.stderr.read().split()) or f"exit status {self._proc.returncode}"

    def teardown(self) -> None:
        """Unsteer the devices, stop the process (keeping its last counters), remove the pairs and pins."""
        for dev in self._steered:
            if Path(f"/sys/class/net/{dev}").exists():
                system.run(["tc", "filter", "del", "dev", dev, "egress", "pref", "1"], check=False)
        self._steered.clear()
        if self._proc is not None:
            proc, self._proc = self._proc, None
            try:
                out, _ = proc.communicate(timeout=5)  # closes stdin: the element stops, printing its counters
                last = out.strip().splitlines()
                self.final_stats = json.loads(last[-1]) if last else None
            except (subprocess.TimeoutExpired, ValueError):
                proc.kill()
                proc.wait()
        for a in self._captures:
            if Path(f"/sys/class/net/{a}").exists():
                system.run(["ip", "link", "del", a], check=False)
        self._captures.clear()
        remove_pins(self.pin)
