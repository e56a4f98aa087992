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
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from controller.clean import VAGRANT_NS_HOLDER, VAGRANT_STATE_ROOT

REPO = Path(__file__).resolve().parents[1]
BUILD_BOX = REPO / "vm" / "box" / "build-box.sh"
BOX_NAME = "cclab-test"

pytestmark = [pytest.mark.vagrant, pytest.mark.slow]

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
DESTROY_TIMEOUT_S = 180
DAEMON_START_S = 30


def box_path() -> Path:
    out = subprocess.run([str(BUILD_BOX), "--path"], capture_output=True, text=True, check=True).stdout
    return Path(out.strip())


#: the tier is not finished (the demo has not yet completed inside the box): it runs where asked for, and is
#: neither in CI nor counted as passed until it has passed there (vm/README.md, "Vagrant")
ENABLED = os.environ.get("CCLAB_VAGRANT_TEST") == "1"


def vagrant_missing() -> str | None:
    """Why the vagrant test cannot run here, or None."""
    if not ENABLED:
        return "the vagrant tier is unfinished and runs only with CCLAB_VAGRANT_TEST=1 (vm/README.md, Vagrant)"
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


def _argv0s(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        out.append(f"{pid} {argv0}")
    return out


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
        }

    def run(self, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """argv inside the namespaces, from the work tree, output captured."""
        ns = ["nsenter", f"--target={self.holder}", "--net", "--mount", "--pid", f"--wd={REPO}", "--"]
        return subprocess.run(
            [*ns, *argv], env=self.env, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )

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

    def inside(self) -> list[str]:
        """The processes in the namespaces other than their PID 1."""
        return _argv0s([p for p in _ns_pids(self.pid_ns) if p != self.holder])

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
        if box is not None:
            for name in reversed(DAEMONS):
                box.stop_daemon(name)
            box.end()
        else:
            unshare.kill()
            unshare.wait(timeout=30)
        shutil.rmtree(state, ignore_errors=True)


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


def _tail(res: subprocess.CompletedProcess[str]) -> str:
    return (res.stdout + res.stderr)[-3000:]


def test_vagrant_up_runs_the_demo_in_the_box_and_leaves_nothing() -> None:
    """`vagrant up --provider=libvirt` on the built box, `make demo` inside over `vagrant ssh` to a complete summary
    with fidelity ok, `vagrant destroy -f`; then no daemon, qemu, domain, network, volume, bridge or rule is left."""
    why = vagrant_missing()
    if why:
        pytest.skip(why)
    times: dict[str, float] = {}
    net_ns = ""
    with sandbox() as box:
        net_ns = box.net_ns
        res, times["box add"] = _vagrant(box, ["box", "add", "--name", BOX_NAME, str(box_path())], BOX_ADD_TIMEOUT_S)
        assert res.returncode == 0, f"vagrant box add: exit {res.returncode}:\n{_tail(res)}"
        try:
            res, times["up"] = _vagrant(box, ["up", "--provider=libvirt"], UP_TIMEOUT_S)
            assert res.returncode == 0, f"vagrant up: exit {res.returncode}:\n{_tail(res)}"
            # the P4 provisioner says in one line why it does not run on this Debian guest
            assert re.search(r"p4: skipped: the p4lang packages are built for Ubuntu", res.stdout), _tail(res)

            demo, times["make demo"] = _vagrant(box, ["ssh", "-c", "cd /vagrant && sudo make demo"], DEMO_TIMEOUT_S)
            assert demo.returncode == 0, f"make demo in the box: exit {demo.returncode}:\n{_tail(demo)}"
            m = re.search(r"^results \((\w+)\): (\S+)$", demo.stdout, re.M)
            assert m, f"make demo printed no results line:\n{_tail(demo)}"
            cat, _ = _vagrant(box, ["ssh", "-c", f"cat /vagrant/{m.group(2)}/summary.json"], 120)
            assert cat.returncode == 0, _tail(cat)
            summ = json.loads(cat.stdout)
        finally:
            res, times["destroy"] = _vagrant(box, ["destroy", "-f"], DESTROY_TIMEOUT_S)
            destroyed = res.returncode == 0
            # vagrant-libvirt keeps the box's image in the pool for the next machine: this test has no next one
            left = _libvirt_objects(box)
            for obj in left:
                if obj.startswith("volume "):
                    pool, vol = obj.removeprefix("volume ").split("/", 1)
                    box.run(["virsh", "vol-delete", "--pool", pool, vol], timeout_s=60)
        print(f"vagrant phases (s): {', '.join(f'{k} {v:.0f}' for k, v in times.items())}")
        assert destroyed, f"vagrant destroy -f: exit {res.returncode}:\n{_tail(res)}"
        left = [obj for obj in _libvirt_objects(box) if not obj.startswith("volume ")]
        assert not left, f"vagrant destroy left in libvirt: {left}"
        assert summ["complete"] is True, summ["reason"]
        assert summ["fidelity"]["ok"] is True, f"fidelity not ok in the box: {summ['fidelity']['notes']}"
    # everything the test started ended with its namespaces
    stray = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _in_net_ns(p, net_ns)]
    assert not stray, f"processes left in the test's network namespace: {_argv0s([int(p.name) for p in stray])}"
    daemons = [
        a
        for a in _argv0s([int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()])
        if os.path.basename(a.split(" ", 1)[-1]) in DAEMONS
    ]
    assert not daemons, f"libvirt daemons left running: {daemons}"
    assert not list(VAGRANT_STATE_ROOT.iterdir()), f"state left: {list(VAGRANT_STATE_ROOT.iterdir())}"


def _in_net_ns(proc: Path, net_ns: str) -> bool:
    try:
        return os.readlink(proc / "ns" / "net") == net_ns
    except OSError:
        return False
