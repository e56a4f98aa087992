"""Traffic between Mininet hosts: iperf3 TCP flows, transfers, on-off UDP, MPTCP connections; readiness by polling.

Each flow gets its own server port and a fixed client data port (--cport),
so the data plane's 5-tuple counters name the flow exactly; each generator's
own JSON is kept next to the results.  A TCP flow is iperf3 sending for its
duration; a transfer of a fixed number of bytes, an MPTCP connection and its
sink are hosts/bulk.py (a transfer's completion time is recorded when the
receiver has its last byte); an on-off UDP flow is hosts/udp_onoff.py.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

log = logging.getLogger(__name__)

SERVER_PORT_BASE = 5200
CLIENT_PORT_BASE = 40000
TCP_LISTEN = "0A"


class TrafficError(RuntimeError):
    """A traffic generator failed to start or to report; the message says which flow."""


def listening(pid: int, port: int) -> bool:
    """Whether pid's network namespace has a TCP socket listening on port."""
    want = f"{port:04X}"
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return False
        for line in lines:
            fields = line.split()
            if fields[1].rsplit(":", 1)[1] == want and fields[3] == TCP_LISTEN:
                return True
    return False


@dataclass
class _Generator:
    """What every traffic generator shares: ports fixed by the flow number, output files, the two processes."""

    flow_id: str
    index: int
    """1-based flow number: fixes the ports."""
    src_ip: str
    dst_ip: str
    duration_s: float
    out_dir: Path
    server: subprocess.Popen[bytes] | None = field(default=None, init=False)
    client: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _files: list[IO[bytes]] = field(default_factory=list, init=False)
    #: how long `stop` lets a server whose client has ended finish on its own before it is signalled
    server_grace_s: ClassVar[float] = 0.0

    @property
    def server_port(self) -> int:
        return SERVER_PORT_BASE + self.index

    @property
    def client_port(self) -> int:
        return CLIENT_PORT_BASE + self.index

    def _out(self, name: str) -> IO[bytes]:
        f = (self.out_dir / name).open("wb")
        self._files.append(f)
        return f

    def _popen(self, host: Any, args: list[str], name: str, stderr: int = subprocess.PIPE) -> Any:
        """Start args on host, its stdout to <flow>.<name>.json."""
        return host.popen(args, stdout=self._out(f"{self.flow_id}.{name}.json"), stderr=stderr)

    def done(self) -> bool:
        return self.client is not None and self.client.poll() is not None

    def report(self) -> dict[str, Any]:
        """What summary.json records of the generator's own view (a transfer's completion time, offered bytes)."""
        return {}

    def stop(self) -> None:
        """Stop both ends (SIGINT first, so each still writes its JSON); a server whose client has ended is
        given `server_grace_s` to write its report and exit by itself first."""
        if self.server_grace_s and self.done() and self.server is not None:
            try:
                self.server.wait(timeout=self.server_grace_s)
            except subprocess.TimeoutExpired:
                pass
        for proc in (self.client, self.server):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in (self.client, self.server):
            if proc is None:
                continue
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in self._files:
            f.close()
        self._files.clear()

    def _wait_ready(self, name: str, what: str, timeout_s: float) -> None:
        """Wait for the server's first line, {"ready": true}, in <flow>.<name>.json."""
        assert self.server is not None
        path = self.out_dir / f"{self.flow_id}.{name}.json"
        deadline = time.monotonic() + timeout_s
        while not path.read_bytes().startswith(b'{"ready"'):
            if self.server.poll() is not None:
                raise TrafficError(f"{self.flow_id}: {what} exited ({self.server.returncode})")
            if time.monotonic() > deadline:
                raise TrafficError(f"{self.flow_id}: {what} not listening after {timeout_s:g} s")
            time.sleep(0.01)

    def _json(self, name: str) -> dict[str, Any]:
        """The last JSON line of <flow>.<name>.json (the tool's report), {} if there is none yet."""
        try:
            lines = (self.out_dir / f"{self.flow_id}.{name}.json").read_text().splitlines()
            data: dict[str, Any] = json.loads(lines[-1])
            return data
        except (OSError, ValueError, IndexError):
            return {}

    def _client_error(self) -> str | None:
        if self.client is not None and self.client.returncode not in (0, None, -signal.SIGINT):
            stderr = self.client.stderr.read().decode().strip() if self.client.stderr else ""
            return stderr or f"exit {self.client.returncode}"
        return None


@dataclass
class IperfFlow(_Generator):
    """One TCP flow: iperf3 server on the receiver, client on the sender."""

    algo: str = "cubic"
    mss: int | None = None
    """The sender's TCP_MAXSEG (iperf3 --set-mss); None: the path's."""
    #: iperf3 -s -1 writes its report and exits once its one test has ended: a SIGINT in that moment would
    #: cut the report short
    server_grace_s: ClassVar[float] = 2.0

    def start_server(self, host: Any) -> None:
        # its stderr apart from its JSON: a message printed after the report ("interrupt - the server has
        # terminated") would leave <flow>.server.json no JSON document
        args = ["iperf3", "-s", "-1", "-J", "-B", self.dst_ip, "-p", str(self.server_port)]
        self.server = self._popen(host, args, "server")

    def wait_server(self, timeout_s: float = 5.0) -> None:
        assert self.server is not None
        deadline = time.monotonic() + timeout_s
        while not listening(self.server.pid, self.server_port):
            if self.server.poll() is not None:
                raise TrafficError(f"{self.flow_id}: iperf3 server exited ({self.server.returncode})")
            if time.monotonic() > deadline:
                raise TrafficError(f"{self.flow_id}: iperf3 server not listening after {timeout_s:g} s")
            time.sleep(0.01)

    def start_client(self, host: Any) -> None:
        args = [
            "iperf3",
            "-c",
            self.dst_ip,
            "-p",
            str(self.server_port),
            "-B",
            self.src_ip,
            "--cport",
            str(self.client_port),
            "-C",
            self.algo,
            "-t",
            f"{self.duration_s:g}",
            *(["--set-mss", str(self.mss)] if self.mss else []),
            "-J",
            "--connect-timeout",
            "3000",
        ]
        self.client = self._popen(host, args, "client")

    def result(self) -> dict[str, Any]:
        """The client's JSON: sender and receiver totals."""
        path = self.out_dir / f"{self.flow_id}.client.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data

    def report(self) -> dict[str, Any]:
        """The payload bytes iperf3's sender wrote and its receiver counted."""
        end = self.result().get("end", {})
        return {
            "offered_bytes": end.get("sum_sent", {}).get("bytes"),
            "received_bytes": end.get("sum_received", {}).get("bytes"),
        }

    def goodput_bps(self) -> float | None:
        end = self.result().get("end", {})
        rx = end.get("sum_received", {})
        bps = rx.get("bits_per_second")
        return float(bps) if bps is not None else None

    def error(self) -> str | None:
        err = self.result().get("error")
        if err:
            return f"iperf3: {err}"
        bad = self._client_error()
        return None if bad is None else f"iperf3: {bad}"


UDP_TOOL = Path(__file__).resolve().parent / "udp_onoff.py"


@dataclass
class UdpOnOffFlow(_Generator):
    """Constant-rate UDP with on and off periods (hosts/udp_onoff.py): a sink on the receiver, a sender."""

    rate_bps: int = 0
    on_s: float = 0.0
    off_s: float = 0.0
    on_off: str = "fixed"
    seed: int = 1

    def start_server(self, host: Any) -> None:
        args = [sys.executable, str(UDP_TOOL), "sink", self.dst_ip, str(self.server_port)]
        self.server = self._popen(host, args, "sink")

    def wait_server(self, timeout_s: float = 5.0) -> None:
        self._wait_ready("sink", "UDP sink", timeout_s)

    def start_client(self, host: Any) -> None:
        args = [
            sys.executable, str(UDP_TOOL), "send", self.src_ip, str(self.client_port), self.dst_ip,
            str(self.server_port), "--rate-bps", str(self.rate_bps), "--duration-s", f"{self.duration_s:g}",
            "--on-s", f"{self.on_s:g}", "--off-s", f"{self.off_s:g}", "--on-off", self.on_off, "--seed", str(self.seed),
        ]  # fmt: skip
        self.client = self._popen(host, args, "send")

    def result(self) -> dict[str, Any]:
        """The sender's report: on periods [(start_s, end_s, bytes)], totals, the seed."""
        return self._json("send")

    def report(self) -> dict[str, Any]:
        return {"offered_bytes": self.result().get("wire_bytes")}

    def goodput_bps(self) -> float | None:
        """The sink's received payload rate over the flow's duration."""
        got = self._json("sink").get("bytes")
        return None if got is None else got * 8 / self.duration_s

    def error(self) -> str | None:
        bad = self._client_error()
        return None if bad is None else f"udp_onoff: {bad}"


BULK_TOOL = Path(__file__).resolve().parent / "bulk.py"


@dataclass
class MptcpFlow(_Generator):
    """One MPTCP connection (hosts/bulk.py): a sink listening on every address of the receiver, a
    sender whose first subflow leaves from src_ip:client_port; the kernel adds the other subflows."""

    algo: str = "cubic"
    mss: int | None = None
    """The sender's TCP_MAXSEG on the MPTCP socket (every subflow takes it); None: the path's."""
    #: the tool's socket: MPTCP here, TCP for a TransferFlow
    protocol: tuple[str, ...] = field(default=(), init=False)
    #: what an error names
    what: ClassVar[str] = "mptcp"

    def _amount(self) -> list[str]:
        """How much the sender writes: for its duration."""
        return ["--duration-s", f"{self.duration_s:g}"]

    def start_server(self, host: Any) -> None:
        # on every address: the second subflow joins at the receiver's address on the other path
        args = [sys.executable, str(BULK_TOOL), "sink", "0.0.0.0", str(self.server_port), *self.protocol]
        self.server = self._popen(host, args, "sink")

    def wait_server(self, timeout_s: float = 5.0) -> None:
        self._wait_ready("sink", "MPTCP sink", timeout_s)

    def start_client(self, host: Any) -> None:
        args = [
            sys.executable, str(BULK_TOOL), "send", self.src_ip, str(self.client_port), self.dst_ip,
            str(self.server_port), *self._amount(), "--cc", self.algo,
            *(["--mss", str(self.mss)] if self.mss else []), *self.protocol,
        ]  # fmt: skip
        self.client = self._popen(host, args, "send")

    def report(self) -> dict[str, Any]:
        """Bytes the application sent and the receiver read (payload, not wire bytes)."""
        return {"offered_bytes": self._json("send").get("sent"), "received_bytes": self._json("sink").get("received")}

    def goodput_bps(self) -> float | None:
        """The sink's received bytes over its own time from first byte to last (as iperf3's receiver counts)."""
        sink = self._json("sink")
        got, secs = sink.get("received"), sink.get("seconds")
        return None if got is None or not secs else got * 8 / secs

    def error(self) -> str | None:
        bad = self._client_error()
        return None if bad is None else f"{self.what}: {bad}"


@dataclass
class TransferFlow(MptcpFlow):
    """A TCP transfer of bytes_total (hosts/bulk.py over TCP), complete when the receiver has read its
    last byte: its completion time runs from the sender's connect to that moment (iperf3 -n would end at its
    last write, a send buffer earlier)."""

    bytes_total: int = 0
    protocol: tuple[str, ...] = field(default=("--tcp",), init=False)
    what: ClassVar[str] = "transfer"

    def _amount(self) -> list[str]:
        return ["--bytes", str(self.bytes_total)]

    def report(self) -> dict[str, Any]:
        """The completion time, where the receiver got every byte."""
        send, sink = self._json("send"), self._json("sink")
        done = (sink.get("received") or 0) >= self.bytes_total and "start_at" in send and "last_at" in sink
        return {"completion_s": round(sink["last_at"] - send["start_at"], 6) if done else None}
