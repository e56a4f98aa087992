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


def missing_steer() -> str | None:
    """Why the steering program cannot be loaded here, or None."""
    return None if STEER_OBJECT.exists() else f"{STEER_OBJECT} is missing; run `make build`"


def missing() -> str | None:
    """Why the delay line cannot run here, or None."""
    if not BINARY.exists():
        return f"{BINARY} is missing; run `make build`"
    return missing_steer()


def start(args: list[str]) -> subprocess.Popen[str]:
    """A helper that speaks JSON lines on stdout and stops, printing its last counters, when its stdin closes
    (cclab-delay, cclab-fpga-sim)."""
    log.debug("start %s", args)
    return subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
    )


def read_line(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, Any] | None:
    """The helper's next JSON line, or None when none came within the timeout (or it was not JSON)."""
    assert proc.stdout is not None
    out: IO[str] = proc.stdout
    ready, _, _ = select.select([out], [], [], timeout_s)
    if not ready:
        return None
    text = out.readline()
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def stderr_of(proc: subprocess.Popen[str] | None) -> str:
    """What a helper that exited said on stderr, in one line."""
    if proc is None or proc.stderr is None or proc.poll() is None:
        return "no message"
    return " ".join(proc.stderr.read().split()) or f"exit status {proc.returncode}"


def stop(proc: subprocess.Popen[str], timeout_s: float = 5.0) -> dict[str, Any] | None:
    """Close the helper's stdin and return its last line of counters; killed if it does not stop in time."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        last = out.strip().splitlines()
        value = json.loads(last[-1]) if last else None
        return value if isinstance(value, dict) else None
    except (subprocess.TimeoutExpired, ValueError):
        proc.kill()
        proc.wait()
        return None


def _ns(ms: float) -> int:
    return int(round(ms * 1_000_000))


@dataclass
class Steering:
    """A set of devices whose outgoing frames a user-space process takes and sends on.

    steer.bpf.c on each device's egress redirects unmarked frames into a
    private veth pair, cclabd<ifindex>a -> cclabd<ifindex>b; the process reads
    the b end and sends what it releases back out of the device with DL_MARK,
    which the program lets through.  cclab-delay (this module) and the FPGA
    element's harness (controller/dataplane/fpgasim.py) both take frames so.
    """

    pin: Path
    """bpffs directory for the steering program and its map (removed by remove())."""
    devs: tuple[str, ...]
    whole_frames: bool = False
    """True: the pair's a end has no checksum or segmentation offload, so the kernel hands the reader complete
    frames of at most the MTU (cclab-delay carries offloaded packets whole with a virtio-net header instead)."""
    _captures: list[str] = field(default_factory=list, init=False)
    _steered: list[str] = field(default_factory=list, init=False)

    @staticmethod
    def capture(dev: str) -> str:
        """The capture pair's name stem for `dev` (its ends are <stem>a and <stem>b)."""
        return f"cclabd{system.ifindex(dev)}"

    def build(self) -> list[tuple[str, str]]:
        """Load the program and make the pairs; (read end, device) per device.  Nothing is steered yet."""
        why = missing_steer()
        if why:
            raise system.SystemError_(why)
        self.pin.mkdir(parents=True, exist_ok=True)
        system.run(["bpftool", "prog", "loadall", str(STEER_OBJECT), str(self.pin / "progs"),
                    "pinmaps", str(self.pin / "maps")])  # fmt: skip
        ends = []
        for dev in self.devs:
            cap = self.capture(dev)
            a, b = f"{cap}a", f"{cap}b"
            self._captures.append(a)
            system.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
            for end in (a, b):
                # no addresses, no IPv6: nothing of their own reaches the reader
                system.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{end}.disable_ipv6=1"])
                system.run(["ip", "link", "set", end, "up"])
            if self.whole_frames:
                system.run(["ethtool", "-K", a, "tx", "off", "tso", "off", "gso", "off", "sg", "off"])
            ends.append((f"{cap}b", dev))
        return ends

    def steer(self) -> None:
        """Redirect the devices' outgoing frames to their pairs (the reader is running by now)."""
        with bpf.BpfMap.pinned(self.pin / "maps" / "dl_steer") as steer:
            for dev in self.devs:
                to = system.ifindex(f"{self.capture(dev)}a")
                steer.update(struct.pack("=I", system.ifindex(dev)), struct.pack("=I", to))
        for dev in self.devs:
            self._steered.append(dev)
            system.run(["tc", "qdisc", "replace", "dev", dev, "clsact"])
            system.run(["tc", "filter", "replace", "dev", dev, "egress", "pref", "1", "handle", "1",
                        "bpf", "direct-action", "object-pinned", str(self.pin / "progs" / "dl_egress")])  # fmt: skip

    def unsteer(self) -> None:
        """The devices send on their own again; safe to call twice."""
        for dev in self._steered:
            if Path(f"/sys/class/net/{dev}").exists():
                system.run(["tc", "filter", "del", "dev", dev, "egress", "pref", "1"], check=False)
        self._steered.clear()

    def remove(self) -> None:
        """Unsteer, then remove the pairs and the pins; safe to call twice and after a partial build."""
        self.unsteer()
        for a in self._captures:
            if Path(f"/sys/class/net/{a}").exists():
                system.run(["ip", "link", "del", a], check=False)
        self._captures.clear()
        remove_pins(self.pin)


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
    _steering: Steering | None = field(default=None, init=False)
    final_stats: dict[str, Any] | None = field(default=None, init=False)

    def start(self, delay_ms: float, jitter_ms: float) -> None:
        """Build the capture pairs, start cclab-delay, then steer the devices to it.

        On failure the caller's teardown() removes what was made.
        """
        why = missing()
        if why:
            raise system.SystemError_(why)
        self._steering = Steering(self.pin, self.devs)
        pairs = [f"{end}:{dev}" for end, dev in self._steering.build()]
        args = [str(BINARY), "--delay-ns", str(_ns(delay_ms)), "--jitter-ns", str(_ns(jitter_ms))]
        args += ["--seed", str(self.seed & (2**64 - 1)), *pairs]
        self._proc = start(args)
        first = self._line(READY_TIMEOUT_S)
        if first != {"ready": True}:
            raise system.SystemError_(f"{ELEMENT} did not start: {self._stderr()}")
        self._steering.steer()

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
        assert self._proc is not None
        return read_line(self._proc, timeout_s)

    def _stderr(self) -> str:
        return stderr_of(self._proc)

    def teardown(self) -> None:
        """Unsteer the devices, stop the process (keeping its last counters), remove the pairs and pins."""
        if self._steering is not None:
            self._steering.unsteer()
        if self._proc is not None:
            proc, self._proc = self._proc, None
            self.final_stats = stop(proc)
        if self._steering is not None:
            self._steering.remove()
        else:
            remove_pins(self.pin)
