"""The Mininet side of cclab, loaded by path: mininet/topologies.py (nodes, GraphTopo, the presets for
`mn --custom`) and mininet/p4switch.py (the BMv2 node); and what their nodes share, BoundedShell.

They are files, not modules of this package, so that `sudo mn --custom mininet/topologies.py` reads
them as they are; cclab loads the same files.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from controller import system

log = logging.getLogger(__name__)

TOPOLOGY_FILE = system.REPO / "mininet" / "topologies.py"
P4SWITCH_FILE = system.REPO / "mininet" / "p4switch.py"


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_topology_module() -> ModuleType:
    """mininet/topologies.py (nodes, GraphTopo and the presets), loaded by path."""
    return _load_by_path("cclab_topologies", TOPOLOGY_FILE)


def load_p4switch_module() -> ModuleType:
    """mininet/p4switch.py (the BMv2 node), loaded by path like the topology."""
    return _load_by_path("cclab_node_p4switch", P4SWITCH_FILE)


#: seconds a command on a Mininet node's shell may take; a shell that does not answer in that time is killed
SHELL_TIMEOUT_S = 30.0
#: seconds between two looks at a shell that has not answered yet: is it still there?
SHELL_POLL_S = 0.2
#: what marks a shell command that only a shell can run (the root-namespace fallback runs single commands)
_SHELL_SYNTAX = set(";|&<>$`(){}*?~\\\"'")


class BoundedShell:
    """A Mininet node whose shell cannot hang a run (mixed in before Mininet's Host or Switch).

    Mininet runs a node's commands (interface set-up, and in teardown each link's `ip link del`) by writing them
    to a bash on a pseudo-terminal and reading until its prompt comes back, with no time limit; the runner keeps
    the terminal's other end open, so a shell that dies leaves a read that never returns.  Here a command waits
    at most SHELL_TIMEOUT_S, looking every SHELL_POLL_S whether the shell still runs: a shell that exited, or
    did not answer in time (it is killed), is gone, and the node's later commands run without it: on a node in
    the root namespace (a bridge) as a plain process there, on a node in a namespace of its own not at all (its
    links go when their other ends are deleted).  `gone` says why."""

    gone: str | None = None

    def shell_gone(self) -> str | None:
        """Why this node's shell is gone, or None while it runs."""
        shell = getattr(self, "shell", None)
        if self.gone is None and shell is not None and shell.poll() is not None:
            code = shell.returncode
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            self.gone = f"{self}'s shell (pid {shell.pid}) exited ({how})"
            log.warning("%s", self.gone)
        return self.gone

    def _give_up(self, why: str) -> None:
        shell = getattr(self, "shell", None)
        if shell is not None and shell.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(shell.pid, signal.SIGKILL)  # mnexec -d: the shell leads its own process group
            with contextlib.suppress(subprocess.TimeoutExpired):
                shell.wait(timeout=SHELL_TIMEOUT_S)
        self.gone = f"{self}'s shell (pid {getattr(shell, 'pid', '?')}) {why}; killed"
        log.warning("%s", self.gone)

    def cmd(self, *args: Any, **kwargs: Any) -> Any:
        if self.shell_gone() is None:
            return super().cmd(*args, **kwargs)  # type: ignore[misc]
        line = " ".join(str(a) for a in (args[0] if len(args) == 1 and isinstance(args[0], list) else args))
        if getattr(self, "inNamespace", True) or _SHELL_SYNTAX & set(line):
            log.info("%s: not run (%s): %s", self, self.gone, line)
            return ""
        try:
            proc = subprocess.run(shlex.split(line), capture_output=True, text=True, timeout=SHELL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{line}: {exc}"
        return proc.stdout + proc.stderr

    def waitOutput(self, verbose: bool = False, findPid: bool = True) -> str:  # noqa: N802, N803 (Mininet's names)
        """Mininet's waitOutput with a time limit, ending early when the shell is gone.  Mininet's own wait for
        output (monitor's poll) cannot time out: it polls the terminal for writing too, which a terminal always
        is, and then blocks in read(); so the wait here is a poll for input alone, and monitor only reads what is
        there."""
        deadline = time.monotonic() + SHELL_TIMEOUT_S
        readable = select.poll()
        readable.register(self.stdout.fileno(), select.POLLIN)  # type: ignore[attr-defined]
        output = ""
        while getattr(self, "waiting", False):
            left = deadline - time.monotonic()
            if self.shell_gone() is not None or left <= 0:
                if self.gone is None:
                    self._give_up(f"did not answer {getattr(self, 'lastCmd', '?')!r} in {SHELL_TIMEOUT_S:g} s")
                self.waiting = False
                break
            if readable.poll(int(min(left, SHELL_POLL_S) * 1000)):
                output += self.monitor(findPid=findPid)  # type: ignore[attr-defined]
        return output


def gone_shells(nodes: Iterable[Any]) -> list[str]:
    """Why each of these nodes' shells is gone (BoundedShell nodes whose shell exited), in node order."""
    return [why for n in nodes if isinstance(n, BoundedShell) and (why := n.shell_gone()) is not None]
