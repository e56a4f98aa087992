"""`cclab clean`: remove what a crashed run left behind, like `mn -c`.

It removes Mininet host shells (and with them their namespaces and the
processes inside), iperf3 processes, cclab's BMv2 switches (and their
sockets and pidfiles under /run/cclab), cclab-delay processes and their
capture veth pairs, the dumbbell's switch bridges and veth ports, cclab's
pinned BPF objects, and cclab's registered algorithms; for `switches = "ovs"`, the
os-ken process, cclab's OVS bridges (also those added to an OVS the user runs, which
is otherwise left alone), the OVS daemons cclab started and the bridge devices a
killed ovs-vswitchd left; the namespaces the
Vagrant test brings its box up in (with the libvirtd, virtlogd, dnsmasq and qemu
inside them) and their state directories; the scratch directories a killed run
or module build left in the temporary directory (cclab-p4-*, cclab-kmod-*); and it puts back
the host sysctls a killed run left changed (controller/dataplane/sysctls.py).  It
never touches a network device or process that cclab's naming does not match.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

from controller import cc, system
from controller.dataplane import delayline, fpgasim, remove_pins, sysctls
from controller.fabric import ovs

log = logging.getLogger(__name__)

#: Mininet names switch ports <switch>-eth<M>: cclab's switches are s<N>, and each link's delay node and
#: BMv2 node are d<link> and p<link> (link ids start with l); the bridges are s<N> and d<link>;
#: benchmarks make cclab-bench<N>.
PORT = re.compile(r"^((s\d+|dl\w*|pl\w*)-eth\d+|cclab-bench\d+)$")
BRIDGE = re.compile(r"^(s\d+|dl\w*)$")

#: argv[0] of the process the Vagrant test (tests/test_vagrant.py) holds its namespaces with: PID 1 of their PID
#: namespace, so killing it ends every process inside (libvirtd, virtlogd, dnsmasq, qemu) and with the last of them
#: the network namespace, its bridge and its firewall rules
VAGRANT_NS_HOLDER = "cclab-vagrant-ns"
#: the scratch directories of a run (its P4 program's staging) and of a module build (controller/vm/kmod.py), in
#: the temporary directory: each removes its own unless it is killed
SCRATCH = ("cclab-p4-*", "cclab-kmod-*")
#: the state directories of those namespaces (libvirt's configuration, images and sockets, Vagrant's home):
#: VAGRANT_STATE_ROOT/<run>
VAGRANT_STATE_ROOT = Path("/var/tmp/cclab-vagrant")


def _procs() -> list[tuple[int, list[str]]]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        out.append((int(d.name), [a.decode(errors="replace") for a in argv if a]))
    return out


def _is_ours(argv: list[str]) -> bool:
    if not argv:
        return False
    exe = os.path.basename(argv[0])
    if exe in ("iperf3", delayline.ELEMENT, fpgasim.HARNESS):
        return True
    # BMv2 switches of mininet/p4switch.py: P4Runtime on a socket under /run/cclab
    if exe == "simple_switch_grpc" and any(a.startswith(f"unix:{system.RUN_STATE}/bmv2-") for a in argv):
        return True
    # the os-ken process of switches = "ovs" (controller/fabric/launch.py)
    if exe.startswith("python") and "controller.fabric.launch" in argv:
        return True
    # Mininet host shells: `bash --norc --noediting -is mininet:h1`
    return exe == "bash" and any(a.startswith("mininet:") for a in argv)


def remove_vagrant_sandboxes() -> list[str]:
    """End the Vagrant test's namespaces (everything in them dies with their PID 1) and remove their state."""
    done = []
    holders = [pid for pid, argv in _procs() if argv and argv[0] == VAGRANT_NS_HOLDER]
    for pid in holders:
        try:
            os.kill(pid, signal.SIGKILL)
            done.append(f"vagrant namespaces of process {pid}")
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in holders):
        time.sleep(0.05)
    if VAGRANT_STATE_ROOT.exists():
        for d in sorted(VAGRANT_STATE_ROOT.iterdir()):
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"vagrant state {d}")
    return done


def kill_processes() -> list[str]:
    victims = [(pid, argv) for pid, argv in _procs() if _is_ours(argv) and pid != os.getpid()]
    for pid, _ in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid, _ in victims):
        time.sleep(0.02)
    return [f"process {pid} {' '.join(argv)}" for pid, argv in victims]


def remove_links() -> list[str]:
    removed = []
    for dev in sorted(os.listdir("/sys/class/net")):
        if PORT.match(dev) or delayline.CAPTURE_DEV.match(dev):
            system.run(["ip", "link", "del", dev], check=False)
            removed.append(f"link {dev}")
    # the userspace datapath's bridges are persistent taps: ovs-vswitchd removes them when it stops, and a
    # vswitchd killed outright (SIGKILL, a machine's stop) leaves them; with no vswitchd left to own them
    # (ovs.clean stopped cclab's) they are dead devices
    vswitchd = any(argv and os.path.basename(argv[0]) == "ovs-vswitchd" for _, argv in _procs())
    for dev in sorted(os.listdir("/sys/class/net")):
        if not BRIDGE.match(dev):
            continue
        if Path(f"/sys/class/net/{dev}/bridge").exists():
            system.run(["ip", "link", "del", dev], check=False)
            removed.append(f"bridge {dev}")
        elif not vswitchd and Path(f"/sys/class/net/{dev}/tun_flags").exists():
            system.run(["ip", "tuntap", "del", "dev", dev, "mode", "tap"], check=False)
            removed.append(f"ovs bridge device {dev}")
    return removed


def scratch_dirs() -> list[Path]:
    """The SCRATCH directories in the temporary directory now."""
    tmp = Path(tempfile.gettempdir())
    return sorted(d for pattern in SCRATCH for d in tmp.glob(pattern) if d.is_dir())


def clean() -> list[str]:
    """Remove leftovers; return a line per thing removed."""
    system.require_root()
    done = remove_vagrant_sandboxes()
    done += kill_processes()
    done += ovs.clean()
    done += remove_links()
    for f in sorted(system.RUN_STATE.glob("bmv2-*")) if system.RUN_STATE.exists() else []:
        if f.suffix in (".sock", ".pid"):
            f.unlink(missing_ok=True)
            done.append(f"file {f}")
    for f in sorted(fpgasim.SOCKET_DIR.glob("*.sock")) if fpgasim.SOCKET_DIR.exists() else []:
        f.unlink(missing_ok=True)
        done.append(f"file {f}")
    if system.PIN_ROOT.exists():
        for d in sorted(system.PIN_ROOT.iterdir()):
            done.append(f"bpf pins {d}")
        remove_pins(system.PIN_ROOT)
    for d in scratch_dirs():
        shutil.rmtree(d, ignore_errors=True)
        done.append(f"directory {d}")
    done += sysctls.restore_saved()
    from controller.experiment import executors

    if executors.HOLD.exists():  # what runs side by side held: put back just above and below
        executors.HOLD.unlink()
        done.append(f"file {executors.HOLD}")
    ours = [n for n in cc.available() if n in cc.CCLAB_ALGOS]
    own = cc.own_recorded()  # a stale record (its algorithm gone) is removed with the others
    if ours or own:
        cc.unload(ours + own)
        done += [f"algorithm {n}" for n in ours + own]
    return done
