"""A BMv2 switch (simple_switch_grpc) as a Mininet node, for the cclab P4 bottleneck.

The switch runs in its own network namespace, so none of its listeners can be
reached from outside: P4Runtime (gRPC) listens on a Unix socket under
/run/cclab (root only), and BMv2's Thrift server, which binds every address of
its namespace, has only that namespace's loopback to bind (the switch ports
carry no addresses).  The node checks the binary and its listeners up front,
starts the switch with the ports of its interfaces (port number = Mininet's
port number), waits for P4Runtime by polling against a timeout, pushes the
pipeline (P4Info + BMv2 JSON: build/p4/'s, or those of the program it is
given), and stops the switch on stop()/terminate() (also when Mininet is torn
down after Ctrl-C).

This file is loaded by path (it is not a package: a package named `mininet`
would shadow Mininet itself).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from mininet.node import Switch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `mn --custom` runs from anywhere
    sys.path.insert(0, str(REPO))

from controller.dataplane.p4runtime import P4RuntimeClient, P4RuntimeError  # noqa: E402
from controller.network.mininet import BoundedShell  # noqa: E402

BUILD_P4 = REPO / "build" / "p4"
JSON = BUILD_P4 / "bottleneck.json"
P4INFO = BUILD_P4 / "bottleneck.p4info.txtpb"
RUN_DIR = Path("/run/cclab")
SWITCH_BINARY = "simple_switch_grpc"
CLI_BINARY = "simple_switch_CLI"
THRIFT_PORT = 9090
#: seconds simple_switch_grpc gets to answer P4Runtime
READY_TIMEOUT_S = 20.0
OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off")


class P4SwitchError(P4RuntimeError):
    """The switch could not start or be configured; the message says why and what to do."""


def _run(node: Any, args: list[str]) -> str:
    """Run a command in the node's namespace; raise with its stderr on failure."""
    proc = node.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=30)
    if proc.returncode != 0:
        raise P4SwitchError(f"{node.name}: {' '.join(args)}: {err.decode().strip()}")
    return str(out.decode())


def checksum_offload_off(hosts: list[Any]) -> None:
    """Hosts whose packets cross a BMv2 switch (or OVS's userspace datapath) must fill in their checksums.

    With transmit checksum offload a veth hands on frames whose TCP/UDP
    checksum is not computed yet; a Linux bridge passes that state along, but
    BMv2 and OVS's userspace datapath capture and re-send raw frames, and the
    receiver drops them as corrupt (with OVS here: not one TCP handshake).
    (The p4lang tutorials turn it off on their hosts for this reason.)
    """
    for host in hosts:
        for intf in host.intfNames():
            if intf != "lo":
                _run(host, ["ethtool", "-K", intf, "tx", "off"])


def _cli_command() -> list[str]:
    """simple_switch_CLI, run by this interpreter when it is a Python script.

    Its `#!/usr/bin/env python3` would pick whatever python3 is first on PATH
    (a pyenv or conda build may lack the thrift module the distribution's
    Python has); this process's interpreter is the one chosen on purpose.
    """
    path = shutil.which(CLI_BINARY)
    if path is None:
        raise P4SwitchError(f"{CLI_BINARY} is not on PATH; install BMv2 (see README: P4 targets)")
    with open(path, "rb") as f:
        first = f.readline()
    return [sys.executable, path] if first.startswith(b"#!") and b"python" in first else [path]


class Bmv2Switch(BoundedShell, Switch):
    """simple_switch_grpc in its own namespace, P4Runtime on a Unix socket, pipeline pushed at start."""

    def __init__(
        self,
        name: str,
        json_path: Path | str = JSON,
        p4info_path: Path | str = P4INFO,
        device_id: int = 1,
        thrift_port: int = THRIFT_PORT,
        log_dir: Path | str | None = None,
        **params: Any,
    ) -> None:
        params["inNamespace"] = True  # listeners unreachable from outside the switch
        super().__init__(name, **params)
        self.json_path = Path(json_path)
        self.p4info_path = Path(p4info_path)
        self.device_id = device_id
        self.thrift_port = thrift_port
        self.log_dir = Path(log_dir) if log_dir is not None else RUN_DIR
        self.grpc_socket = RUN_DIR / f"bmv2-{name}-{os.getpid()}.sock"
        self.pidfile = RUN_DIR / f"bmv2-{name}.pid"
        self.proc: subprocess.Popen[bytes] | None = None
        self.client: P4RuntimeClient | None = None
        self._log: IO[bytes] | None = None

    @property
    def grpc_address(self) -> str:
        return f"unix:{self.grpc_socket}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"bmv2-{self.name}.log"

    def port_map(self) -> dict[str, int]:
        """Interface name -> BMv2 port number (Mininet's own port numbers)."""
        return {str(i): self.ports[i] for i in self.intfList() if str(i) != "lo"}

    # --- checks up front -----------------------------------------------------------

    def check(self) -> None:
        for binary in (SWITCH_BINARY, CLI_BINARY):
            if shutil.which(binary) is None:
                raise P4SwitchError(
                    f"{binary} is not on PATH; install BMv2 with PI (the p4lang packages, see README: P4 targets)"
                )
        for path in (self.json_path, self.p4info_path):
            if not path.exists():
                raise P4SwitchError(f"{path} is missing; run `make build` with p4c-bm2-ss on PATH")
        if self.grpc_socket.exists():
            raise P4SwitchError(f"{self.grpc_socket} exists: another switch uses it, or run `cclab clean`")
        if self.pidfile.exists():
            pid = self.pidfile.read_text().strip()
            if pid.isdigit() and Path(f"/proc/{pid}").exists():
                raise P4SwitchError(f"a switch {self.name} already runs (pid {pid}); stop it or run `cclab clean`")
        listening = _run(self, ["ss", "-Hltn", f"sport = :{self.thrift_port}"]).strip()
        if listening:
            raise P4SwitchError(f"{self.name}: Thrift port {self.thrift_port} is taken in its namespace")

    # --- start / stop ----------------------------------------------------------------

    def start(self, controllers: Any) -> None:
        self.check()
        _run(self, ["ip", "link", "set", "lo", "up"])
        _run(self, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
        args = [SWITCH_BINARY, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port)]
        for intf, port in sorted(self.port_map().items(), key=lambda kv: kv[1]):
            _run(self, ["ethtool", "-K", intf, *OFFLOADS_OFF])
            args += ["-i", f"{port}@{intf}"]
        args += ["--log-level", "warn", "--no-p4", "--", "--grpc-server-addr", self.grpc_address]
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.proc = self.popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        self.pidfile.write_text(str(self.proc.pid))
        try:
            self.client = P4RuntimeClient(self.grpc_address, self.device_id)
            self.client.wait_ready(READY_TIMEOUT_S, alive=lambda: self.proc is not None and self.proc.poll() is None)
            self.client.become_primary()
            self.client.set_pipeline(self.p4info_path, self.json_path)
        except P4RuntimeError as exc:
            self.stop_switch()
            raise P4SwitchError(f"{self.name}: {exc} (log: {self.log_path})") from None

    def cli(self, commands: list[str]) -> str:
        """Run simple_switch_CLI commands (Thrift, inside the switch's namespace); raise on an error reply."""
        proc = self.popen(
            [*_cli_command(), "--thrift-port", str(self.thrift_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        out, _ = proc.communicate("\n".join(commands).encode() + b"\n", timeout=30)
        text = out.decode(errors="replace")
        bad = [ln for ln in text.splitlines() if "Error" in ln or "Invalid" in ln or "exception" in ln.lower()]
        if proc.returncode != 0 or bad:
            raise P4SwitchError(f"{self.name}: simple_switch_CLI {commands}: {' '.join(bad) or text.strip()}")
        return text

    def stop_switch(self) -> None:
        """Stop simple_switch_grpc and close the P4Runtime connection; safe to call twice."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        for path in (self.grpc_socket, self.pidfile):
            path.unlink(missing_ok=True)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's name)
        self.stop_switch()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self.stop_switch()
        super().terminate()


switches = {"bmv2": Bmv2Switch}
