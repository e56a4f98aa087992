"""Open vSwitch for `switches = "ovs"`: the daemons, the datapath, and cclab's own bridges in them.

Where no OVS runs, cclab starts its own ovsdb-server and ovs-vswitchd with a run directory of their
own (/run/cclab/ovs) and stops them with the run.  Where the user already runs OVS (its database
socket answers), cclab adds its bridges to that one, marks each with external_ids:cclab, and removes
only those: the user's daemons and bridges are left alone.

The datapath is the kernel's (`system`) where the openvswitch module is loaded or loads, else the
userspace one (`netdev`: ovs-vswitchd forwards, reading and writing the veth ports through packet
sockets).  Nothing here is a shell string: every call is an argument list.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from controller import system

log = logging.getLogger(__name__)

OVS_STATE = system.RUN_STATE / "ovs"
#: where Debian's openvswitch-switch keeps the database schema
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
#: the database socket of an OVS the user runs (Debian's default)
SYSTEM_DB = Path("/var/run/openvswitch/db.sock")
TOOLS = ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl")
#: the external_ids key that marks a bridge as cclab's
MARK = "cclab"
DAEMONS = ("ovs-vswitchd", "ovsdb-server")


def missing() -> str | None:
    """What this machine lacks to run OVS switches, in one line with the fix; None when nothing is."""
    gone = [t for t in TOOLS if shutil.which(t) is None]
    if gone or not SCHEMA.exists():
        return f"missing {', '.join(gone) or SCHEMA}; install Debian's openvswitch-switch (`make deps`)"
    return None


def kernel_datapath() -> bool:
    """Whether the kernel has the openvswitch module (loaded, or loading now)."""
    if Path("/sys/module/openvswitch").exists():
        return True
    if shutil.which("modprobe") is not None:
        system.run(["modprobe", "-q", "openvswitch"], check=False)
    return Path("/sys/module/openvswitch").exists()


def _alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if system.alive(pid) else None


def user_ovs_running() -> bool:
    """An OVS that cclab did not start answers on its default database socket."""
    if not SYSTEM_DB.exists():
        return False
    return system.run(["ovs-vsctl", f"--db=unix:{SYSTEM_DB}", "--timeout=2", "show"], check=False).returncode == 0


@dataclass
class Ovs:
    """One OVS instance cclab uses for a run: its own daemons or the user's."""

    datapath_type: str
    """"system" (kernel datapath) or "netdev" (userspace)."""
    db: Path
    """The database socket ovs-vsctl talks to."""
    owned: bool
    """cclab started the daemons (and stops them); False: the user's OVS, left running."""

    def vsctl(self, *args: str, timeout: float = 10.0) -> str:
        return system.run(["ovs-vsctl", f"--db=unix:{self.db}", f"--timeout={int(timeout)}", *args]).stdout

    def describe(self) -> dict[str, object]:
        return {
            "datapath_type": self.datapath_type,
            "datapath": "kernel" if self.datapath_type == "system" else "userspace",
            "daemons": "cclab" if self.owned else "the user's",
            "version": system.tool_version(["ovs-vswitchd", "--version"]),
        }

    def stop(self) -> None:
        """Remove cclab's bridges; stop the daemons if cclab started them."""
        remove_bridges(self.db)
        if self.owned:
            stop_daemons()


def start(datapath_type: str | None = None) -> Ovs:
    """The OVS a run uses: the user's if one runs, else cclab's own daemons (started here)."""
    dp = datapath_type or ("system" if kernel_datapath() else "netdev")
    if user_ovs_running():
        return Ovs(dp, SYSTEM_DB, owned=False)
    stop_daemons()  # a killed run's daemons
    OVS_STATE.mkdir(parents=True, exist_ok=True)
    db = OVS_STATE / "conf.db"
    db.unlink(missing_ok=True)
    system.run(["ovsdb-tool", "create", str(db), str(SCHEMA)])
    sock = OVS_STATE / "db.sock"
    common = ["--detach", "--no-chdir"]
    system.run([
        "ovsdb-server", str(db), f"--remote=punix:{sock}",
        f"--pidfile={OVS_STATE / 'ovsdb-server.pid'}", f"--unixctl={OVS_STATE / 'ovsdb-server.ctl'}",
        f"--log-file={OVS_STATE / 'ovsdb-server.log'}", *common,
    ])  # fmt: skip
    ovs = Ovs(dp, sock, owned=True)
    try:
        ovs.vsctl("--no-wait", "init")
        # OVS_RUNDIR: the bridges' management sockets go there too, never into a user's run directory
        env = {**os.environ, "OVS_RUNDIR": str(OVS_STATE), "OVS_DBDIR": str(OVS_STATE)}
        args = [
            "ovs-vswitchd", f"unix:{sock}",
            f"--pidfile={OVS_STATE / 'ovs-vswitchd.pid'}", f"--unixctl={OVS_STATE / 'ovs-vswitchd.ctl'}",
            f"--log-file={OVS_STATE / 'ovs-vswitchd.log'}", *common,
        ]  # fmt: skip
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise system.SystemError_(f"ovs-vswitchd did not start: {' '.join(proc.stderr.split())}")
    except BaseException:
        stop_daemons()
        raise
    log.info("OVS started in %s (%s datapath)", OVS_STATE, dp)
    return ovs


def stop_daemons(timeout_s: float = 5.0) -> list[str]:
    """Stop the daemons cclab started (by their pidfiles under /run/cclab/ovs); return what was stopped."""
    stopped = []
    for name in DAEMONS:
        pidfile = OVS_STATE / f"{name}.pid"
        pid = _alive(pidfile)
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and system.alive(pid):
            time.sleep(0.02)
        if system.alive(pid):
            os.kill(pid, signal.SIGKILL)
        pidfile.unlink(missing_ok=True)
        stopped.append(f"process {pid} {name}")
    for f in (OVS_STATE / "db.sock", OVS_STATE / "conf.db"):
        f.unlink(missing_ok=True)
    return stopped


def cclab_bridges(db: Path) -> list[str]:
    """The bridges marked as cclab's in the OVS behind `db`."""
    proc = system.run(
        ["ovs-vsctl", f"--db=unix:{db}", "--timeout=5", "--format=csv", "--data=bare", "--no-headings",
         "--columns=name,external_ids", "list", "Bridge"],
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        return []
    out = []
    for line in proc.stdout.splitlines():
        name, _, ids = line.partition(",")
        if f"{MARK}=" in ids:
            out.append(name)
    return out


def remove_bridges(db: Path) -> list[str]:
    """Delete cclab's bridges (never another's) from the OVS behind `db`; return what was removed."""
    names = cclab_bridges(db)
    for name in names:
        system.run(["ovs-vsctl", f"--db=unix:{db}", "--timeout=10", "--if-exists", "del-br", name], check=False)
    return [f"ovs bridge {n}" for n in names]


def clean() -> list[str]:
    """What a killed run left: cclab's bridges in a user's OVS, cclab's own daemons and their files."""
    done: list[str] = []
    if shutil.which("ovs-vsctl") is None:
        return done
    if SYSTEM_DB.exists() and user_ovs_running():
        done += remove_bridges(SYSTEM_DB)
    if _alive(OVS_STATE / "ovsdb-server.pid") is not None:
        done += remove_bridges(OVS_STATE / "db.sock")
    done += stop_daemons()
    return done
