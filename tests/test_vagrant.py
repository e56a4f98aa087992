"""`vagrant up` for real: the box `make box` builds, brought up by vagrant-libvirt with libvirt's `qemu` domain type
(software emulation), the demo run inside over `vagrant ssh`, then torn down.

libvirtd and virtlogd run in namespaces the test makes (network, mount, PID): libvirt's configuration, images,
sockets and logs are directories of the test's own bound over libvirt's paths, its management network (bridge,
dnsmasq, NAT rules) lives in the test's network namespace, and every process in them is ended with that namespace's
PID 1 (`cclab clean` ends one a killed run left: controller/clean.py).  The host's networking is not touched.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from controller.clean import VAGRANT_NS_HOLDER, VAGRANT_STATE_ROOT
from controller.results.summary import Check, is_rtt_check
from controller.vm.baseline import MAX_LIFT_MS, PING_INTERVAL_S, PINGED_TOL_MS, PINGS, min_rtt_of
from tests.timing import TIMER_LATE_MS, on_time

REPO = Path(__file__).resolve().parents[1]
BUILD_BOX = REPO / "vm" / "box" / "build-box.sh"
BOX_NAME = "cclab-test"

# root: it needs root and namespaces, and `make check` (not root) must not boot a VM
pytestmark = [pytest.mark.vagrant, pytest.mark.root, pytest.mark.slow]

#: the daemons the test starts, and what they start (all of them in the test's namespaces)
DAEMONS = ("libvirtd", "virtlogd")
#: libvirt's paths the test's own directories are bound over, inside its mount namespace
LIBVIRT_PATHS = {
    "etc": "/etc/libvirt",
    "lib": "/var/lib/libvirt",
    "cache": "/var/cache/libvirt",
    "log": "/var/log/libvirt",
    "run": "/run/libvirt",
}
#: qemu as root with no security driver, no cgroups and no namespaces of its own: there is no systemd, dbus or
#: AppArmor to hand the guest's files and devices over to another user
QEMU_CONF = """user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
"""
#: root on the socket, no polkit (there is no dbus)
LIBVIRTD_CONF = """auth_unix_rw = "none"
auth_unix_ro = "none"
unix_sock_rw_perms = "0700"
"""
#: the holder: PID 1 of the namespaces, so it reaps what is left to it (libvirt's qemu probes daemonize; a zombie
#: that nobody reaps never dies for libvirt, which then waits 40 s for each)
REAPER = """
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
"""
#: the namespaces' set-up, run as their PID 1's shell: libvirt's paths bound to the test's directories ($1), a
#: sysfs of the new network namespace (libvirt reads bridges there), loopback up; then the holder ($2, $3)
NS_SETUP = r"""
set -eu
state=$1
for pair in etc:/etc/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt run:/run/libvirt; do
    mkdir -p "${pair#*:}"
    mount --bind "$state/${pair%%:*}" "${pair#*:}"
done
mount -t sysfs sysfs /sys
ip link set lo up
exec -a "$2" /usr/bin/python3 -c "$3"
"""

#: steps, seconds at most (the demo under emulation: its build dominates)
BOX_ADD_TIMEOUT_S = 180
UP_TIMEOUT_S = 420
DEMO_TIMEOUT_S = 900
#: the demo the box runs: under software emulation the box's two vCPUs carry the 100 Mbit/s demo only with the CPU
#: over its fidelity bound (82 of 100 Mbit/s, 95.5 % busy), and 40 Mbit/s with none to spare (95.4 % busy in one
#: run of three, 0.977 of the rate), so the same demo at 20 Mbit/s
DEMO = "experiments/demo-small.toml"
DESTROY_TIMEOUT_S = 180
DAEMON_START_S = 30
#: a command in the guest, its output as it writes it (no terminal: no carriage returns, no colours)
SSH = ["ssh", "--no-tty", "-c"]
#: $2 pings, $3 s apart, in the box across a veth pair with netem's delay ($1 ms) each way, in namespaces removed
#: on the way out: what the box's timers make of the demo's delay in the same boot (controller/vm/baseline.py)
PING_OVER_NETEM = r"""
set -eu
a=cclab-ping-a b=cclab-ping-b
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null' EXIT
ip netns add $a
ip netns add $b
ip link add va netns $a type veth peer vb netns $b
ip -n $a addr add 10.9.9.1/24 dev va
ip -n $b addr add 10.9.9.2/24 dev vb
ip -n $a link set va up
ip -n $b link set vb up
tc -n $a qdisc add dev va root netem delay "$1"ms
tc -n $b qdisc add dev vb root netem delay "$1"ms
ip netns exec $a ping -n -q -c "$2" -i "$3" 10.9.9.2
"""


def box_path() -> Path:
    out = subprocess.run([str(BUILD_BOX), "--path"], capture_output=True, text=True, check=True).stdout
    return Path(out.strip())


def vagrant_missing() -> str | None:
    """Why the vagrant test cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (libvirtd, namespaces)"
    for tool in ("vagrant", "libvirtd", "virtlogd", "virsh", "qemu-system-x86_64", "unshare", "nsenter", "rsync"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make box installs it: vm/provision.sh --vagrant-host)"
    plugins = subprocess.run(["vagrant", "plugin", "list"], capture_output=True, text=True).stdout
    if "vagrant-libvirt" not in plugins:
        return "the vagrant-libvirt plugin is not installed (make box installs it)"
    box = box_path()
    if not box.is_file():
        return f"the cclab box is not built ({box}); run `make box`"
    return None


def _ns_pids(ns_link: str) -> list[int]:
    """Host pids of the processes whose PID namespace is ns_link (a /proc/<pid>/ns/pid link's target)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "ns" / "pid") == ns_link:
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _host_pid(ns_link: str, ns_pid: int) -> int | None:
    """The host pid of the process that is ns_pid inside the PID namespace ns_link."""
    for pid in _ns_pids(ns_link):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        m = re.search(r"^NSpid:\s+(.*)$", status, re.M)
        if m and int(m.group(1).split()[-1]) == ns_pid:
            return pid
    return None


class Sandbox:
    """The test's namespaces: their PID 1 (the holder), its state directory, and commands run inside."""

    def __init__(self, state: Path, unshare: subprocess.Popen[bytes], holder: int) -> None:
        self.state = state
        self.unshare = unshare
        self.holder = holder
        self.pid_ns = os.readlink(f"/proc/{holder}/ns/pid")
        self.net_ns = os.readlink(f"/proc/{holder}/ns/net")
        self.env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(state / "home"),
            "LANG": "C.UTF-8",
            "VAGRANT_HOME": str(state / "vagrant.d"),
            "VAGRANT_DOTFILE_PATH": str(state / "dot"),
            "VAGRANT_CHECKPOINT_DISABLE": "1",
            "VAGRANT_DEFAULT_PROVIDER": "libvirt",
            "LIBVIRT_DEFAULT_URI": "qemu:///system",
            "CCLAB_BOX": BOX_NAME,
            "CCLAB_SYNC": "rsync",
            # the guest's serial console, for the failure message of a boot that does not reach sshd
            "CCLAB_VM_CONSOLE_LOG": str(self.console_log),
        }

    @property
    def console_log(self) -> Path:
        return self.state / "log" / "console.log"

    def run(self, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """argv inside the namespaces, from the work tree, output captured; a session of its own, so that a Ctrl-C
        reaches the test alone, which ends the namespaces.  A command that times out returns exit -1 with the output
        it had written."""
        ns = ["nsenter", f"--target={self.holder}", "--net", "--mount", "--pid", f"--wd={REPO}", "--"]
        try:
            return subprocess.run(
                [*ns, *argv],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
            return subprocess.CompletedProcess(argv, -1, out, err + f"\n(timed out after {timeout_s:g} s)")

    def start_daemon(self, name: str, argv: list[str]) -> None:
        pidfile = self.state / f"{name}.pid"
        res = self.run([*argv, "--daemon", f"--pid-file={pidfile}"], timeout_s=DAEMON_START_S)
        assert res.returncode == 0, f"{name} did not start: {res.stderr[-1000:]}"
        deadline = time.monotonic() + DAEMON_START_S
        while time.monotonic() < deadline and not (pidfile.exists() and pidfile.read_text().strip()):
            time.sleep(0.1)
        assert pidfile.exists(), f"{name} wrote no pid file in {DAEMON_START_S} s"

    def stop_daemon(self, name: str) -> None:
        """SIGTERM to the daemon's pid (its pid file holds the pid inside the namespace), then wait for it."""
        pidfile = self.state / f"{name}.pid"
        try:
            ns_pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        pid = _host_pid(self.pid_ns, ns_pid)
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)

    def end(self) -> None:
        """SIGKILL to PID 1: the kernel ends every process left inside, and the namespaces go with them."""
        try:
            os.kill(self.holder, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.unshare.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _ns_pids(self.pid_ns):
            time.sleep(0.1)


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    """libvirtd and virtlogd started in namespaces of their own; everything ended and removed on the way out."""
    VAGRANT_STATE_ROOT.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(dir=VAGRANT_STATE_ROOT))
    state.chmod(0o755)
    for sub in [*LIBVIRT_PATHS, "home", "vagrant.d", "dot"]:
        (state / sub).mkdir(mode=0o755)
    shutil.copytree("/etc/libvirt", state / "etc", dirs_exist_ok=True)
    # no network of libvirt's own: vagrant-libvirt makes its management network
    shutil.rmtree(state / "etc" / "qemu" / "networks", ignore_errors=True)
    (state / "etc" / "qemu.conf").write_text(QEMU_CONF)
    (state / "etc" / "libvirtd.conf").write_text(LIBVIRTD_CONF)
    # PID 1 of the new PID namespace is the holder; it dies if unshare does
    argv = ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--propagation=private"]
    argv += ["--kill-child", "--", "bash", "-c", NS_SETUP, "bash", str(state), VAGRANT_NS_HOLDER, REAPER]
    unshare = subprocess.Popen(argv, start_new_session=True)
    holder = None
    box: Sandbox | None = None
    try:
        deadline = time.monotonic() + 30
        while holder is None and time.monotonic() < deadline:
            children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
            for c in children.read_text().split() if children.exists() else []:
                if Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")[0] == VAGRANT_NS_HOLDER.encode():
                    holder = int(c)
            time.sleep(0.05)
            assert unshare.poll() is None, f"the namespaces' set-up failed (unshare exit {unshare.returncode})"
        assert holder is not None, "the namespaces' holder did not start in 30 s"
        box = Sandbox(state, unshare, holder)
        box.start_daemon("virtlogd", ["virtlogd"])
        box.start_daemon("libvirtd", ["libvirtd"])
        yield box
    finally:
        # a second Ctrl-C must not cut the teardown short (it takes seconds)
        sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if box is not None:
                for name in reversed(DAEMONS):
                    box.stop_daemon(name)
                box.end()
            else:
                unshare.kill()
                unshare.wait(timeout=30)
            shutil.rmtree(state, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, sigint)


def _libvirt_objects(box: Sandbox) -> list[str]:
    """libvirt's domains, networks and volumes (in any pool), as `kind name` lines."""
    out = []
    for kind, args in (("domain", ["list", "--all", "--name"]), ("network", ["net-list", "--all", "--name"])):
        res = box.run(["virsh", *args], timeout_s=60)
        out += [f"{kind} {n}" for n in res.stdout.split()]
    pools = box.run(["virsh", "pool-list", "--all", "--name"], timeout_s=60).stdout.split()
    for pool in pools:
        vols = box.run(["virsh", "vol-list", pool, "--details"], timeout_s=60).stdout.splitlines()[2:]
        out += [f"volume {pool}/{v.split()[0]}" for v in vols if v.strip()]
    return out


def _vagrant(box: Sandbox, args: list[str], timeout_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    res = box.run(["vagrant", *args], timeout_s=timeout_s)
    return res, time.monotonic() - t0


def _tail(res: subprocess.CompletedProcess[str], box: Sandbox | None = None) -> str:
    out = (res.stdout + res.stderr)[-3000:]
    if box is not None and box.console_log.exists():
        out += "\nthe guest's console, its end:\n" + box.console_log.read_text(errors="replace")[-3000:]
    return out


# --- what the test leaves on the host: nothing -----------------------------------------------------------------

#: the host's libvirt directories (the test binds its own over them inside its mount namespace)
HOST_LIBVIRT_DIRS = (Path("/etc/libvirt/qemu"), Path("/var/lib/libvirt/images"), Path("/run/libvirt/qemu"))
#: what libvirt's management network puts into a firewall: its chains and its subnet (vagrant-libvirt's default)
FIREWALL_MARKS = ("LIBVIRT", "virbr", "192.168.121.")


def _host_network() -> tuple[set[str], set[str]]:
    """The host's bridges, and its firewall lines that carry a mark of libvirt's network."""
    bridges = {d.name for d in Path("/sys/class/net").iterdir() if (d / "bridge").exists()}
    rules: set[str] = set()
    for argv in (["iptables-save"], ["ip6tables-save"], ["nft", "list", "ruleset"]):
        if shutil.which(argv[0]) is None:
            continue
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        rules |= {ln.strip() for ln in out.splitlines() if any(m in ln for m in FIREWALL_MARKS)}
    return bridges, rules


def _host_libvirt_files() -> set[str]:
    return {str(f) for d in HOST_LIBVIRT_DIRS if d.is_dir() for f in d.iterdir()}


class HostState:
    """What the test may leave on the host, before it ran: left() says what is there now and was not then."""

    def __init__(self) -> None:
        self.bridges, self.rules = _host_network()
        self.libvirt_files = _host_libvirt_files()
        self.namespaces: set[str] = set()
        self.procs = {pid for pid, _ in self._procs()}  # e.g. a libvirtd of the host's own

    def watch(self, holder: int) -> None:
        """The namespaces of the test's holder: no process may be left in them."""
        self.namespaces |= _namespaces(holder)

    def _procs(self) -> list[tuple[int, str]]:
        """libvirt's daemons, its dnsmasq and its qemu, holders, and whatever runs in the watched namespaces."""
        found = []
        for pid, argv in _procs():
            exe = os.path.basename(argv[0]) if argv else ""
            if (
                exe in DAEMONS
                or argv[:1] == [VAGRANT_NS_HOLDER]
                or _guest_qemu(argv)
                or (exe == "dnsmasq" and any("libvirt" in a for a in argv))
                or _namespaces(pid) & self.namespaces
            ):
                found.append((pid, " ".join(argv)[:120]))
        return found

    def left(self) -> list[str]:
        found = [f"process {pid} {argv}" for pid, argv in self._procs() if pid not in self.procs]
        bridges, rules = _host_network()
        found += [f"bridge {b}" for b in sorted(bridges - self.bridges)]
        found += [f"firewall rule {r}" for r in sorted(rules - self.rules)]
        found += [f"libvirt file {f} on the host" for f in sorted(_host_libvirt_files() - self.libvirt_files)]
        if VAGRANT_STATE_ROOT.exists():
            found += [f"state {d}" for d in sorted(VAGRANT_STATE_ROOT.iterdir())]
        return found

    def wait_left(self, timeout_s: float = 30) -> list[str]:
        """left(), once what is dying (the namespaces' last processes) has had timeout_s to go."""
        deadline = time.monotonic() + timeout_s
        while (found := self.left()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found


def _guest_qemu(argv: list[str]) -> bool:
    """A guest's qemu (libvirt names it `-name guest=<domain>`), not the short-lived qemu libvirtd starts at its
    start to probe the binary's capabilities (`-machine none`), which ends by itself."""
    return (
        bool(argv) and os.path.basename(argv[0]).startswith("qemu-system") and any(a.startswith("guest=") for a in argv)
    )


def _procs() -> list[tuple[int, list[str]]]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                argv = [a.decode(errors="replace") for a in (d / "cmdline").read_bytes().split(b"\0") if a]
            except OSError:
                continue
            out.append((int(d.name), argv))
    return out


def _namespaces(pid: int) -> set[str]:
    out = set()
    for kind in ("pid", "net"):
        try:
            out.add(os.readlink(f"/proc/{pid}/ns/{kind}"))
        except OSError:
            pass
    return out


# --- the tests ---------------------------------------------------------------------------------------------------


@pytest.fixture
def vagrant_here() -> None:
    """Skips with the reason where the box cannot be brought up."""
    why = vagrant_missing()
    if why:
        pytest.skip(why)


def test_vagrant_up_runs_the_demo_in_the_box_and_leaves_nothing(vagrant_here: None) -> None:
    """`vagrant up --provider=libvirt` on the built box, `make demo` inside over `vagrant ssh` to a complete summary
    with fidelity ok, `vagrant destroy -f`; then no daemon, qemu, domain, network, volume, bridge or rule is left."""
    host = HostState()
    times: dict[str, float] = {}
    with sandbox() as box:
        host.watch(box.holder)
        res, times["box add"] = _vagrant(box, ["box", "add", "--name", BOX_NAME, str(box_path())], BOX_ADD_TIMEOUT_S)
        assert res.returncode == 0, f"vagrant box add: exit {res.returncode}:\n{_tail(res)}"
        interrupted = False
        try:
            res, times["up"] = _vagrant(box, ["up", "--provider=libvirt"], UP_TIMEOUT_S)
            assert res.returncode == 0, f"vagrant up: exit {res.returncode}:\n{_tail(res, box)}"
            # the P4 provisioner says in one line why it does not run on this Debian guest
            assert re.search(r"p4: skipped: the p4lang packages are built for Ubuntu", res.stdout), _tail(res)

            # the run's RTT and rates are the box's timers' (software-emulated): tried again where they woke late
            late = [0]
            on_time(lambda: _demo_in_the_box(box, times, late), lambda: late[0], "the box's timers")
        except KeyboardInterrupt:
            # no `vagrant destroy` to wait for: the namespaces end, and the domain, its network and its volumes
            # (all in the test's state directory) with them
            interrupted = True
            raise
        finally:
            if not interrupted:
                res, times["destroy"] = _vagrant(box, ["destroy", "-f"], DESTROY_TIMEOUT_S)
                destroyed = res.returncode == 0
                # vagrant-libvirt keeps the box's image in the pool for the next machine: this test has no next one
                for obj in _libvirt_objects(box):
                    if obj.startswith("volume "):
                        pool, vol = obj.removeprefix("volume ").split("/", 1)
                        box.run(["virsh", "vol-delete", "--pool", pool, vol], timeout_s=60)
            print(f"vagrant phases (s): {', '.join(f'{k} {v:.0f}' for k, v in times.items())}")
        assert destroyed, f"vagrant destroy -f: exit {res.returncode}:\n{_tail(res)}"
        left = _libvirt_objects(box)
        assert not left, f"vagrant destroy left in libvirt: {left}"
    left = host.wait_left()
    assert not left, f"the vagrant test left behind: {left}"


def _demo_in_the_box(box: Sandbox, times: dict[str, float], late: list[int]) -> dict[str, Any]:
    """`make demo` over `vagrant ssh` to a complete run with fidelity ok: its summary.  late[0] counts the demos
    whose controller woke from a poll's sleep over TIMER_LATE_MS late (the box's timers, not cclab, were slow)."""
    n = sum(k.startswith("make demo") for k in times) + 1
    demo, times[f"make demo {n}"] = _vagrant(box, [*SSH, f"cd /vagrant && sudo make demo DEMO={DEMO}"], DEMO_TIMEOUT_S)
    assert demo.returncode == 0, f"make demo in the box: exit {demo.returncode}:\n{_tail(demo, box)}"
    m = re.search(r"^results \((\w+)\): (\S+)$", demo.stdout, re.M)
    assert m, f"make demo printed no results line:\n{_tail(demo)}"
    # the run's directory as cclab printed it (absolute, or relative to the tree)
    cat, _ = _vagrant(box, [*SSH, f"cd /vagrant && cat {m.group(2)}/summary.json"], 120)
    assert cat.returncode == 0, _tail(cat)
    summ: dict[str, Any] = json.loads(cat.stdout)
    print("make demo in the box, its end:\n" + "\n".join(demo.stdout.splitlines()[-12:]))
    assert summ["complete"] is True, summ["reason"]
    polls = summ.get("monitor") or {}
    print(f"the box's polls (ms late): {polls}")
    late[0] += (polls.get("wake_ms_max") or 0) > TIMER_LATE_MS
    want = 2 * summ["bottleneck"]["delay_ms"]
    command = f"sudo sh -c {shlex.quote(PING_OVER_NETEM)} sh {want / 2:g} {PINGS} {PING_INTERVAL_S}"
    ping, _ = _vagrant(box, [*SSH, command], 120)
    pinged = min_rtt_of(ping.stdout)
    assert ping.returncode == 0 and pinged is not None, f"pings over netem in the box:\n{_tail(ping)}"
    print(f"pings over {want / 2:g} ms of netem each way in the box: {pinged} ms")
    assert want <= pinged <= want + MAX_LIFT_MS, f"pings over a {want:g} ms netem path in the box: {pinged} ms"
    notes = _unfaithful(summ["fidelity"], pinged)
    assert not notes, f"fidelity not ok in the box: {notes}"
    return summ


def _unfaithful(fidelity: dict[str, Any], pinged_ms: float) -> list[str]:
    """The demo's fidelity notes, but for base-RTT checks above their bound by no more than the box's timers lift an
    RTT: at most PINGED_TOL_MS over pings across the same netem delay in the same boot (the lab VM's netem runs are
    judged so: vm/guest_tests/test_guest.py).  Software emulation lifts the demo's 20 ms above its 2 ms tolerance in
    some runs: 21.0 to 23.1 ms in 10 demos over four boots (six of them with pings, 21.0 to 21.2 ms)."""
    lifted = {
        name: c["value"]
        for name, c in fidelity["checks"].items()
        if is_rtt_check(name) and c["hi"] is not None and c["hi"] < c["value"] <= pinged_ms + PINGED_TOL_MS
    }
    if lifted:
        print(f"base RTTs the box's timers lifted past their bound (pings {pinged_ms} ms): {lifted}")
    notes = {Check.from_dict(name, fidelity["checks"][name]).failure_note() for name in lifted}
    return [n for n in fidelity["notes"] if n not in notes]


#: the test above, run by the tests below as a user runs it, to be interrupted in its `vagrant up`
UP_TEST = f"tests/{Path(__file__).name}::test_vagrant_up_runs_the_demo_in_the_box_and_leaves_nothing"
#: seconds from the start of that run to its guest's qemu (namespaces, daemons, box add, the image's upload)
QEMU_START_S = 240
#: cclab clean, as a user runs it after a killed test
CCLAB_CLEAN = [sys.executable, "-m", "controller.cli", "clean"]


@contextmanager
def up_test() -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
    """The up test in a pytest of its own, in a session of its own (as a shell runs a command), its output in a
    temporary file; killed with its session if still running on the way out."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", UP_TEST]
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc, log
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _output(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


@dataclass
class Booting:
    """The up test in its own pytest, its guest booting: its process, its output, its namespaces' holder and
    qemu, and the host as it was before it."""

    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    holder: int
    qemu: list[int]
    host: HostState


@contextmanager
def up_test_booting() -> Iterator[Booting]:
    """The up test started (up_test), once its guest's qemu runs."""
    host = HostState()
    with up_test() as (proc, log):
        deadline = time.monotonic() + QEMU_START_S
        while time.monotonic() < deadline:
            assert proc.poll() is None, (
                f"the up test ended before its guest ran (exit {proc.returncode}):\n{_output(log)}"
            )
            for holder in [pid for pid, argv in _procs() if argv[:1] == [VAGRANT_NS_HOLDER]]:
                inside = set(_ns_pids(os.readlink(f"/proc/{holder}/ns/pid")))
                qemu = [pid for pid, argv in _procs() if pid in inside and _guest_qemu(argv)]
                if qemu:
                    host.watch(holder)
                    yield Booting(proc, log, holder, qemu, host)
                    return
            time.sleep(1)
        raise AssertionError(f"no guest ran within {QEMU_START_S} s:\n{_output(log)}")


def test_vagrant_ctrl_c_in_vagrant_up_leaves_nothing(vagrant_here: None) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while `vagrant up` boots the guest: the test
    ends within seconds, and no daemon, qemu, domain, network, volume, bridge or rule is left."""
    with up_test_booting() as up:
        t0 = time.monotonic()
        os.killpg(up.proc.pid, signal.SIGINT)
        rc = up.proc.wait(timeout=120)
        took = time.monotonic() - t0
        out = _output(up.log)
    assert rc == 2 and "KeyboardInterrupt" in out, f"the up test was not interrupted (exit {rc}):\n{out}"
    left = up.host.wait_left()
    if left:  # not to fail the next test as well
        subprocess.run(CCLAB_CLEAN, cwd=REPO, capture_output=True, timeout=120)
    assert not left, f"after Ctrl-C in the guest's boot (qemu {up.qemu}), left behind: {left}"
    print(f"Ctrl-C: the up test ended {took:.1f} s after it")


def test_vagrant_killed_in_vagrant_up_cclab_clean_removes_what_is_left(vagrant_here: None) -> None:
    """SIGKILL to the up test while its guest boots leaves its namespaces (daemons, qemu) running; `cclab clean`
    ends them and removes their state, and then nothing is left."""
    with up_test_booting() as up:
        os.killpg(up.proc.pid, signal.SIGKILL)
    try:
        left = up.host.left()
        assert any(f"process {up.holder} " in x for x in left), (
            f"the killed test's namespaces did not outlive it: {left}"
        )
        assert any(f"process {q} " in x for q in up.qemu for x in left), f"its qemu did not outlive it: {left}"
    finally:
        res = subprocess.run(CCLAB_CLEAN, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"cclab clean: exit {res.returncode}: {res.stderr[-2000:]}"
    assert f"vagrant namespaces of process {up.holder}" in res.stdout, res.stdout
    left = up.host.wait_left()
    assert not left, f"after cclab clean, left behind: {left}"
