"""iperf3 flows between Mininet hosts: one server per flow, readiness by polling.

Each flow gets its own server port and a fixed client data port (--cport),
so the data plane's 5-tuple counters name the flow exactly; iperf3's JSON is
kept next to the results.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

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
class IperfFlow:
    """One TCP flow: iperf3 server on the receiver, client on the sender."""

    flow_id: str
    index: int
    """1-based flow number: fixes the ports."""
    algo: str
    src_ip: str
    dst_ip: str
    duration_s: float
    out_dir: Path
    server: subprocess.Popen[bytes] | None = field(default=None, init=False)
    client: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _files: list[IO[bytes]] = field(default_factory=list, init=False)

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

    def start_server(self, host: Any) -> None:
        args = ["iperf3", "-s", "-1", "-J", "-B", self.dst_ip, "-p", str(self.server_port)]
        self.server = host.popen(args, stdout=self._out(f"{self.flow_id}.server.json"), stderr=subprocess.STDOUT)

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
            "-J",
            "--connect-timeout",
            "3000",
        ]
        self.client = host.popen(args, stdout=self._out(f"{self.flow_id}.client.json"), stderr=subprocess.PIPE)

    def done(self) -> bool:
        return self.client is not None and self.client.poll() is not None

    def stop(self) -> None:
        """Stop both ends (SIGINT first, so iperf3 still writes its JSON)."""
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

    def result(self) -> dict[str, Any]:
        """The client's JSON: sender and receiver totals."""
        path = self.out_dir / f"{self.flow_id}.client.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data

    def goodput_bps(self) -> float | None:
        end = self.result().get("end", {})
        rx = end.get("sum_received", {})
        bps = rx.get("bits_per_second")
        return float(bps) if bps is not None else None

    def error(self) -> str | None:
        err = self.result().get("error")
        if err:
            return str(err)
        if self.client is not None and self.client.returncode not in (0, None, -signal.SIGINT):
            stderr = self.client.stderr.read().decode().strip() if self.client.stderr else ""
            return stderr or f"iperf3 exit {self.client.returncode}"
        return None
