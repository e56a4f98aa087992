"""What this machine can do, and why: the one place that decides.

Each probe answers one question (does the kernel have netem? are the P4 tools
on PATH? can the lab VM boot?) with a Capability: yes or no, what was found,
and the fix when it is no.  `cclab doctor` shows them all; the runner's
refusals (controller/experiment/preflight.py) and the manifest ask the same
probes, so the table a user reads is what a run will do.

``layer`` says what a capability depends on: "kernel" (the running kernel's
configuration: qdiscs, modules, BPF kfuncs), "install" (what is installed or
built in this tree), "host" (the machine: root, KVM, the lab VM image).  In the
lab VM, the kernel rows change with the guest's kernel; the others change with
what the guest has installed.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from controller import cc, system
from controller.dataplane import DataPlaneError, delay, delayline, fpgasim

KERNEL, INSTALL, HOST = "kernel", "install", "host"
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
P4_BUILD = system.BUILD / "p4"
P4_JSON = P4_BUILD / "bottleneck.json"
P4_INFO = P4_BUILD / "bottleneck.p4info.txtpb"
P4C = "p4c-bm2-ss"
#: what the bmv2 target needs on PATH
BMV2_TOOLS = ("simple_switch_grpc", "simple_switch_CLI")
#: what the kernel target needs on PATH
KERNEL_TOOLS = ("tc", "bpftool", "iperf3", "ethtool", "brctl", "unshare")
#: what the bmv2 target needs on PATH besides its own tools
BMV2_HOST_TOOLS = ("tc", "iperf3", "ethtool", "brctl", "unshare", "ss")
OVS_TOOLS = ("ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
#: the kfunc through which coupled mptcpw reaches a subflow's MPTCP connection
RDONLY_CAST = "bpf_rdonly_cast"
#: a struct_ops congestion control needs this type in the kernel's BTF
CA_STRUCT_OPS = "bpf_struct_ops_tcp_congestion_ops"
TOFINO_WHY = (
    "the tofino target needs Intel's P4 Studio SDE (bf_switchd, bfrt_grpc) and a Tofino switch; "
    "p4/tna/bottleneck.p4 and controller/dataplane/tofino.py are not run by `cclab run`"
)


@dataclass(frozen=True)
class Capability:
    """One thing this machine can or cannot do, with the reason and the fix."""

    key: str
    """Stable name, e.g. "delay.netem" (the --json key, and what tests look up)."""
    title: str
    """What it is, for the table."""
    ok: bool
    """Whether it works here."""
    reason: str
    """What was found (both when it works and when it does not)."""
    fix: str = ""
    """What to do when it does not work ("" when it does, or when nothing can be done here)."""
    layer: str = INSTALL
    """What it depends on: KERNEL, INSTALL or HOST."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def in_lab_vm() -> bool:
    """Whether this process runs inside cclab's lab VM (its init sets CCLAB_IN_VM)."""
    return os.environ.get("CCLAB_IN_VM") == "1"


# --- the kernel -----------------------------------------------------------------------------


@functools.cache
def btf_names() -> bytes:
    """The kernel's BTF (names of its types and functions are NUL-terminated strings in it); b"" if absent."""
    try:
        return VMLINUX_BTF.read_bytes()
    except OSError:
        return b""


def kernel_has_btf_name(name: str) -> bool:
    """Whether the kernel's BTF names `name` (a type or a function such as a kfunc)."""
    return b"\0" + name.encode() + b"\0" in btf_names()


def netem() -> Capability:
    ok = system.has_netem()
    if ok:
        return Capability("delay.netem", "netem (kernel delay qdisc)", True, "tc qdisc netem loads", layer=KERNEL)
    why = "tc qdisc add ... netem failed in a throwaway namespace: this kernel has no sch_netem"
    if os.geteuid() != 0:
        why = "not probed: needs root (a throwaway network namespace)"
    return Capability(
        "delay.netem",
        "netem (kernel delay qdisc)",
        False,
        why,
        "cclab-delay delays instead; or run in the lab VM (cclab run --vm)",
        KERNEL,
    )


def delay_line() -> Capability:
    why = delayline.missing()
    title = "cclab-delay (user-space delay line)"
    if why:
        return Capability("delay.cclab-delay", title, False, why, "make build", INSTALL)
    return Capability("delay.cclab-delay", title, True, f"{delayline.BINARY.name} and its steering program built")


def delay_choice() -> Capability:
    """What delays packets in a run with delay_element = "auto" (pick_element, as the runner calls it)."""
    try:
        element = delay.pick_element("auto")
    except DataPlaneError as exc:
        return Capability(
            "delay",
            "delay of a spec's delay_ms",
            False,
            str(exc),
            "make build (cclab-delay), or run in the lab VM (cclab run --vm)",
            KERNEL,
        )
    why = "netem, the kernel's qdisc" if element == delay.NETEM else "no netem here: cclab's own delay line"
    if element != delay.NETEM and os.geteuid() != 0:
        why = "netem not probed without root"
    return Capability("delay", "delay of a spec's delay_ms", True, f"{element} ({why})", layer=KERNEL)


def modules() -> Capability:
    title = "algorithms as kernel modules (.ko)"
    if not cc.takes_modules():
        return Capability(
            "cc.module",
            title,
            False,
            "this kernel takes no modules (CONFIG_MODULES off: no /proc/modules)",
            "eBPF struct_ops serves instead; for .ko modules run in the lab VM (cclab run --vm)",
            KERNEL,
        )
    built = [n for n in cc.CCLAB_ALGOS if cc.module_matches(n)]
    if not built:
        return Capability(
            "cc.module",
            title,
            False,
            f"the kernel takes modules, but no tcp_<algo>.ko is built for {system.kernel_release()}",
            "make -C hosts/cc kmod (needs this kernel's headers)",
            KERNEL,
        )
    return Capability("cc.module", title, True, f"modules load; {len(built)} .ko built for this kernel", layer=KERNEL)


def ebpf_cc() -> Capability:
    title = "algorithms as eBPF struct_ops"
    if not kernel_has_btf_name(CA_STRUCT_OPS):
        why = "no kernel BTF" if not btf_names() else f"the kernel's BTF has no {CA_STRUCT_OPS}"
        return Capability("cc.ebpf", title, False, why, "a kernel >= 5.6 with CONFIG_DEBUG_INFO_BTF", KERNEL)
    missing = [n for n in cc.CCLAB_ALGOS if not cc.bpf_object(n).exists()]
    if missing:
        return Capability(
            "cc.ebpf", title, False, f"the kernel takes them, but {', '.join(missing)} not built", "make build", KERNEL
        )
    return Capability("cc.ebpf", title, True, "struct_ops in the kernel's BTF; every algorithm built", layer=KERNEL)


def kfunc_rdonly_cast() -> Capability:
    title = f"BPF kfunc {RDONLY_CAST}"
    if kernel_has_btf_name(RDONLY_CAST):
        return Capability("kfunc.bpf_rdonly_cast", title, True, "in the kernel's BTF", layer=KERNEL)
    return Capability(
        "kfunc.bpf_rdonly_cast", title, False, "not in the kernel's BTF (it came in 6.2)", "a kernel >= 6.2", KERNEL
    )


#: cclab's algorithms whose eBPF form calls a kfunc the verifier must find in the kernel
EBPF_KFUNCS = {"mptcpw": RDONLY_CAST}


def algo_missing(name: str) -> str | None:
    """Why one of cclab's algorithms cannot load in the form this kernel would take, in one line; None if it can."""
    kfunc = EBPF_KFUNCS.get(name)
    # cc loads the eBPF form first and falls back to a module that matches this kernel
    if kfunc is None or name in cc.available() or cc.module_matches(name) or kernel_has_btf_name(kfunc):
        return None
    return (
        f"algorithm {name}: its eBPF form needs the {kfunc} kfunc (kernels >= 6.2), which this kernel lacks, and "
        "no module of it loads here; run it in the lab VM (cclab run --vm, modules from make -C hosts/cc kmod)"
    )


def mptcp() -> Capability:
    value = system.read_sysctl("net.mptcp.enabled")
    title = "MPTCP"
    if value == "1":
        return Capability("mptcp", title, True, "net.mptcp.enabled = 1", layer=KERNEL)
    if value == "absent":
        return Capability("mptcp", title, False, "no net.mptcp (CONFIG_MPTCP off)", "a kernel with MPTCP", KERNEL)
    return Capability("mptcp", title, False, f"net.mptcp.enabled = {value}", "sysctl -w net.mptcp.enabled=1", KERNEL)


def mptcpw_coupled(ebpf: Capability, kfunc: Capability, mp: Capability) -> Capability:
    title = "coupled mptcpw (eBPF, subflows coupled)"
    lacking = [c for c in (mp, ebpf, kfunc) if not c.ok]
    if not lacking:
        return Capability("cc.mptcpw_coupled", title, True, "MPTCP, eBPF struct_ops and bpf_rdonly_cast", layer=KERNEL)
    why = "; ".join(f"{c.title}: {c.reason}" for c in lacking)
    fix = "a kernel >= 6.2 with MPTCP (the .ko form runs, uncoupled)" if not kfunc.ok else lacking[0].fix
    return Capability("cc.mptcpw_coupled", title, False, why, fix, KERNEL)


# --- data planes ----------------------------------------------------------------------------


def mininet_missing() -> str | None:
    """Why Mininet cannot be used from this Python, or None."""
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable from this Python; run `make deps` and use .venv/bin/cclab"
    return None


def kernel_target() -> Capability:
    title = "data plane: kernel (tc + eBPF)"
    missing = [t for t in KERNEL_TOOLS if shutil.which(t) is None]
    if missing:
        return Capability("dataplane.kernel", title, False, f"missing {', '.join(missing)}", "make deps (as root)")
    obj = system.BUILD / "bottleneck.bpf.o"
    if not obj.exists():
        return Capability("dataplane.kernel", title, False, f"{obj.relative_to(system.REPO)} not built", "make build")
    why = mininet_missing()
    if why:
        return Capability("dataplane.kernel", title, False, why.split(";")[0], "make deps; use .venv/bin/cclab")
    return Capability("dataplane.kernel", title, True, "tc, bpftool, iperf3, Mininet; BPF programs built")


def p4c() -> Capability:
    title = "P4 compiler p4c-bm2-ss, compiled program"
    have = shutil.which(P4C)
    built = P4_JSON.exists() and P4_INFO.exists()
    if built:
        return Capability("p4.program", title, True, f"{P4_JSON.relative_to(system.REPO)} built")
    why = f"{P4C} not on PATH" if have is None else f"{P4_JSON.relative_to(system.REPO)} not built"
    fix = "install p4c (README: P4 targets), then make build" if have is None else "make build"
    return Capability("p4.program", title, False, why, fix)


def bmv2_switch() -> Capability:
    title = "BMv2 switch simple_switch_grpc"
    missing = [t for t in BMV2_TOOLS if shutil.which(t) is None]
    if missing:
        return Capability(
            "p4.bmv2",
            title,
            False,
            f"missing {', '.join(missing)}",
            "install BMv2 with PI (the p4lang packages, README: P4 targets) so it is on PATH",
        )
    return Capability("p4.bmv2", title, True, f"{', '.join(BMV2_TOOLS)} on PATH")


def finsy() -> Capability:
    title = "P4Runtime client finsy"
    try:
        import finsy.proto  # noqa: F401
    except ImportError:
        return Capability("p4.finsy", title, False, "the finsy package is not in this Python", "make venv")
    return Capability("p4.finsy", title, True, "finsy importable")


def bmv2_target(prog: Capability, switch: Capability, client: Capability) -> Capability:
    title = "data plane: bmv2 (P4, v1model)"
    lacking = [c for c in (switch, prog, client) if not c.ok]
    if not lacking:
        return Capability("dataplane.bmv2", title, True, "switch, compiled program and client present")
    return Capability("dataplane.bmv2", title, False, "; ".join(c.reason for c in lacking), lacking[0].fix)


def tofino_target() -> Capability:
    return Capability(
        "dataplane.tofino",
        "data plane: tofino (P4, TNA)",
        False,
        TOFINO_WHY,
        "none here: the TNA program and BfRt driver are code only (README: P4 targets)",
    )


def fpgasim_target() -> Capability:
    title = "data plane: fpga-sim (the FPGA element Verilated, in the loop)"
    why = fpgasim.missing()
    if why:
        return Capability("dataplane.fpga-sim", title, False, why.split(";")[0], "make deps build")
    return Capability("dataplane.fpga-sim", title, True, f"{fpgasim.BINARY.relative_to(system.REPO)} built")


def dataplane_missing(dataplane: str, own_program: bool = False) -> str | None:
    """What this machine lacks to run `dataplane`, in one line with the fix; None when nothing is missing.
    `own_program`: a bmv2 spec brings its own P4 program (p4_program), so p4c must be there, not build/p4/.

    The kernel target's tools and root are checked by the runner's preflight on their own.
    """
    if dataplane == "tofino":
        return TOFINO_WHY
    if dataplane == "fpga-sim":
        return fpgasim.missing()
    if dataplane != "bmv2":
        return None
    prog, client = p4c(), finsy()
    if not client.ok:
        return "the finsy package (P4Runtime) is not installed in this Python; run `make venv`"
    missing = [t for t in BMV2_TOOLS if shutil.which(t) is None]
    if own_program:
        missing += [f"{P4C} (to compile p4_program)"] if shutil.which(P4C) is None else []
    elif not prog.ok:
        why = f"{P4C} not on PATH" if shutil.which(P4C) is None else "not built"
        missing.append(f"{P4_JSON.relative_to(system.REPO)} ({why})")
    if not missing:
        return None
    return (
        f"missing {', '.join(missing)}; install p4c and BMv2 with PI (the p4lang packages, README: P4 targets) "
        "so they are on PATH, then `make build`"
    )


# --- the lab VM, the OVS fabric, the host ---------------------------------------------------


def lab_vm() -> tuple[Capability, Capability]:
    """(the image, how qemu would run it)."""
    from controller import vm
    from controller.vm.accel import kvm_verdict, qemu_version, tcg_race

    if in_lab_vm():
        why = "this is the lab VM (CCLAB_IN_VM=1)"
        return (
            Capability("vm.image", "lab VM image", False, why, layer=HOST),
            Capability("vm.accel", "lab VM acceleration", False, why, layer=HOST),
        )
    if shutil.which(vm.QEMU) is None:
        why = f"{vm.QEMU} is not installed"
        img_cap = Capability("vm.image", "lab VM image", False, why, "sudo make vm (installs qemu, builds it)", HOST)
        return img_cap, Capability("vm.accel", "lab VM acceleration", False, why, "sudo make vm", HOST)
    try:
        img = vm.image()
    except vm.VmError as exc:
        return (
            Capability("vm.image", "lab VM image", False, str(exc), "sudo make vm", HOST),
            Capability("vm.accel", "lab VM acceleration", False, "no image", "sudo make vm", HOST),
        )
    built = img.complete()
    where = f"kernel {img.kernel.abi} in {img.dir}" if built else str(img.dir)  # the kernel is read from the image
    image_cap = Capability(
        "vm.image",
        "lab VM image",
        built,
        f"built: {where}" if built else f"not built ({where})",
        "" if built else "sudo make vm (about 2 minutes)",
        HOST,
    )
    kvm_ok, why = kvm_verdict(img)
    if kvm_ok:
        return image_cap, Capability("vm.accel", "lab VM acceleration", True, "KVM works", layer=HOST)
    if kvm_ok is None:
        found = f"KVM untested ({why}): tried at the first boot, software emulation if it hangs"
    else:
        found = f"software emulation (TCG, slower): KVM unavailable: {why}"
    version = qemu_version()
    if tcg_race(version):
        # it still runs; a test boots once more after a panic in no cclab code
        found += f"; {version} has the TCG race fixed in QEMU 8.1: guest kernels oops at random"
        return image_cap, Capability(
            "vm.accel", "lab VM acceleration", False, found, "QEMU 8.1 or newer (Debian 12: sudo make vm)", HOST
        )
    return image_cap, Capability("vm.accel", "lab VM acceleration", True, found, layer=HOST)


def ovs_kernel() -> Capability:
    title = "OVS kernel datapath (openvswitch module)"
    if Path("/sys/module/openvswitch").exists():
        return Capability("ovs.kernel", title, True, "openvswitch module loaded", layer=KERNEL)
    if cc.takes_modules() and system.run(["modinfo", "-n", "openvswitch"], check=False).returncode == 0:
        return Capability("ovs.kernel", title, True, "openvswitch module available (modprobe)", layer=KERNEL)
    why = "no openvswitch module (kernel takes no modules)" if not cc.takes_modules() else "no openvswitch module"
    return Capability("ovs.kernel", title, False, why, "the userspace datapath (netdev) serves instead", KERNEL)


def ovs_userspace() -> Capability:
    title = "Open vSwitch (userspace datapath)"
    missing = [t for t in OVS_TOOLS if shutil.which(t) is None]
    if missing:
        return Capability(
            "ovs.userspace", title, False, f"missing {', '.join(missing)}", "apt install openvswitch-switch"
        )
    return Capability("ovs.userspace", title, True, f"{', '.join(OVS_TOOLS[:2])} on PATH")


def os_ken() -> Capability:
    title = "os-ken (OpenFlow controller apps)"
    if importlib.util.find_spec("os_ken") is None:
        return Capability("ovs.os-ken", title, False, "os_ken is not in this Python", "make venv (os-ken from PyPI)")
    return Capability("ovs.os-ken", title, True, "os_ken importable")


def root() -> Capability:
    if os.geteuid() == 0:
        return Capability("root", "root", True, "running as root", layer=HOST)
    return Capability(
        "root", "root", False, "not root: namespaces, tc and BPF need it (and most probes here)", "sudo", HOST
    )


def bridge_netfilter() -> Capability:
    value = system.read_sysctl("net.bridge.bridge-nf-call-iptables")
    title = "bridged packets through iptables"
    if value == "1":
        why = "bridge-nf-call-iptables = 1 (br_netfilter): runs turn it off while their network exists"
    elif value == "absent":
        why = "br_netfilter not loaded: bridges forward without iptables"
    else:
        why = f"bridge-nf-call-iptables = {value}"
    return Capability("sysctl.bridge-nf", title, True, why, layer=KERNEL)


def probe_all() -> list[Capability]:
    """Every capability, in the order `cclab doctor` shows them."""
    prog, switch, client = p4c(), bmv2_switch(), finsy()
    ebpf, kfunc, mp = ebpf_cc(), kfunc_rdonly_cast(), mptcp()
    image, accel = lab_vm()
    return [
        root(),
        kernel_target(),
        bmv2_target(prog, switch, client),
        prog,
        switch,
        client,
        tofino_target(),
        fpgasim_target(),
        delay_choice(),
        netem(),
        delay_line(),
        modules(),
        ebpf,
        kfunc,
        mp,
        mptcpw_coupled(ebpf, kfunc, mp),
        image,
        accel,
        ovs_kernel(),
        ovs_userspace(),
        os_ken(),
        bridge_netfilter(),
    ]


def record() -> dict[str, dict[str, Any]]:
    """key -> {ok, reason} for every capability: what the manifest records of the machine a run ran on."""
    return {c.key: {"ok": c.ok, "reason": c.reason} for c in probe_all()}
