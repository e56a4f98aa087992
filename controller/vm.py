"""The qemu lab VM: Debian's stock kernel for what this host's kernel cannot do.

Some kernels (containers, microVMs, the CI machine) have no netem and take no
modules.  The lab VM boots Debian 12's stock kernel under qemu with the host's
work tree shared in over 9p at the same path, runs one command there and
powers off; whatever the command writes in the work tree (results/) is on the
host when it returns.

- The image (vm/build-image.sh: debootstrap, vm/provision.sh --guest, the
  kernel of the host's linux-headers-*-amd64 version) is cached under
  /var/cache/cclab/vm/<id>, where <id> hashes its inputs; `make vm` builds it
  when they change.
- Every boot starts from the pristine image (its writes go to a throwaway
  overlay); the guest's PID 1 is vm/guest/init.py, which reads the job from a
  second 9p share (the control directory, which also keeps the console log).
- KVM where it works, else software emulation (TCG).  A stock kernel can hang
  early under KVM on some hosts: the first boot under KVM must reach the init
  within PROBE_TIMEOUT_S, else it is killed, retried under TCG, and the verdict
  is remembered until the host reboots (/run/cclab/vm-accel.json).

Usable without the venv: ``/usr/bin/python3 -m controller.vm build|run|bench|info``
(stdlib only; `make vm`, `make vm-test` and `make vm-bench` call it so).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from controller import system

log = logging.getLogger(__name__)

VM_DIR = system.REPO / "vm"
#: files whose content is baked into the image (a change rebuilds it)
IMAGE_INPUTS = ("build-image.sh", "provision.sh", "guest/init.py", "guest/initrd-init")
CACHE_ROOT = Path(os.environ.get("CCLAB_VM_CACHE", "/var/cache/cclab/vm"))
LOG_ROOT = system.RUN_STATE / "vm"
ACCEL_STATE = system.RUN_STATE / "vm-accel.json"
MIRROR = os.environ.get("CCLAB_VM_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("CCLAB_VM_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
QEMU = os.environ.get("QEMU", "qemu-system-x86_64")
HEADERS_GLOB = "linux-headers-*-amd64"

CPUS = 2
MEMORY_MIB = 2048
#: a stock kernel under KVM reaches the init in ~2 s; one that hangs never does
PROBE_TIMEOUT_S = 30.0
#: software emulation boots in ~10 s; allow for a loaded machine
BOOT_TIMEOUT_S = 120.0
KEEP_LOGS = 20
KERNEL_ARGS = (
    "console=ttyS0",
    "root=/dev/vda",
    "rootfstype=ext4",
    "rw",
    "init=/usr/local/sbin/cclab-init",
    "panic=-1",
    "mitigations=off",
    "tsc=reliable",
    "no_timer_check",
    "quiet",
    "loglevel=4",
)
STARTED = b"cclab-init: started"
REPO_TAG = "cclab"
CTL_TAG = "cclabctl"
PR_SET_PDEATHSIG = 1


class VmError(RuntimeError):
    """The lab VM cannot be built or run; the message says the fix."""


@dataclass(frozen=True)
class Kernel:
    abi: str
    """Kernel ABI name, e.g. 6.1.0-56-amd64 (uname -r in the VM, the .ko's vermagic)."""
    version: str
    """Debian package version of linux-image-<abi> / linux-headers-<abi>, e.g. 6.1.192-2."""


@dataclass(frozen=True)
class Image:
    dir: Path
    """Cache directory of one built image: root.img, vmlinuz, initrd.img, image.json."""
    kernel: Kernel

    @property
    def root_img(self) -> Path:
        return self.dir / "root.img"

    @property
    def vmlinuz(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.root_img, self.vmlinuz, self.initrd, self.dir / "image.json"))


@dataclass(frozen=True)
class VmResult:
    returncode: int
    """Exit status of the command in the guest."""
    console_log_path: Path
    """The serial console (kernel and init messages, the command's output)."""
    output: str
    """The command's stdout and stderr, merged."""
    elapsed_s: float
    """Wall time from starting qemu to its exit (including a failed KVM probe)."""
    accel: str
    """kvm or tcg: what the command ran under."""
    boot_s: float | None
    """Guest uptime when the command started (boot to ready)."""
    kernel: str
    """uname -r in the guest."""
    accel_note: str = ""
    """Why KVM was not used, when it was not."""


# --- the image ------------------------------------------------------------------------


def host_kernel() -> Kernel:
    """The Debian kernel the host builds modules for: newest linux-headers-*-amd64 (as hosts/cc/Makefile)."""
    heads = sorted(Path("/usr/src").glob(HEADERS_GLOB))
    if not heads:
        raise VmError("no /usr/src/linux-headers-*-amd64 here; run `make deps` (apt-get install linux-headers-amd64)")
    abi = heads[-1].name.removeprefix("linux-headers-")
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", f"linux-headers-{abi}"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise VmError(f"/usr/src/linux-headers-{abi} is not from a Debian package; apt-get install linux-headers-amd64")
    return Kernel(abi, proc.stdout.strip())


def image_id(kernel: Kernel) -> str:
    h = hashlib.sha256()
    for name in IMAGE_INPUTS:
        h.update(name.encode() + b"\0" + (VM_DIR / name).read_bytes() + b"\0")
    h.update(f"{kernel.abi}\0{kernel.version}\0{MIRROR}\0{SECURITY_MIRROR}".encode())
    return f"bookworm-{kernel.abi}-{h.hexdigest()[:12]}"


def image(kernel: Kernel | None = None) -> Image:
    """The image for these inputs (built or not)."""
    kernel = kernel or host_kernel()
    return Image(CACHE_ROOT / image_id(kernel), kernel)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build(progress: Callable[[str], None] | None = None) -> tuple[Image, float | None]:
    """Build the image unless the cache has it; return it and the build time (None if cached)."""
    img = image()
    if img.complete():
        return img, None
    _require_root()
    for tool in ("debootstrap", "mkfs.ext4", "chroot"):
        if shutil.which(tool) is None:
            raise VmError(f"{tool} is not installed; run `make vm` (it installs the VM tools)")
    with _locked(CACHE_ROOT / ".build.lock"):
        if img.complete():  # another build finished while we waited
            return img, None
        t0 = time.monotonic()
        env = {**os.environ, "MIRROR": MIRROR, "SECURITY_MIRROR": SECURITY_MIRROR, "DEBS": str(CACHE_ROOT / "debs")}
        argv = [str(VM_DIR / "build-image.sh"), str(img.dir), img.kernel.abi, img.kernel.version]
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line.rstrip())
                if progress is not None:
                    progress(line.rstrip())
            rc = proc.wait()
        if rc != 0 or not img.complete():
            last = next((ln for ln in reversed(lines) if ln.strip()), f"exit status {rc}")
            raise VmError(f"building the lab VM image failed: {last}")
        _prune_images(keep=img.dir)
        return img, time.monotonic() - t0


def _prune_images(keep: Path) -> None:
    """Images of older inputs are dead weight (~1.5 GB each); the .deb cache stays."""
    for d in CACHE_ROOT.glob("bookworm-*"):
        if d != keep and d.is_dir():
            log.info("removing stale image %s", d)
            shutil.rmtree(d, ignore_errors=True)


def _require_root() -> None:
    if os.geteuid() != 0:
        raise VmError("the lab VM needs root (qemu, its image cache, the work tree shared read-write); use sudo")


def require_image() -> Image:
    img = image()
    if not img.complete():
        raise VmError(f"the lab VM image for kernel {img.kernel.abi} {img.kernel.version} is not built; run `make vm`")
    return img


# --- acceleration ---------------------------------------------------------------------


def _qemu_version() -> str:
    return system.tool_version([QEMU, "--version"])


def _accel_key(img: Image) -> str:
    return f"{os.uname().release} {_qemu_version()} {img.dir.name}"


def kvm_verdict(img: Image) -> tuple[bool | None, str]:
    """(True/False/None = untested, reason) for KVM with this host, qemu and image."""
    if os.environ.get("CCLAB_VM_ACCEL", "auto") == "tcg":
        return False, "CCLAB_VM_ACCEL=tcg"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is absent or not accessible"
    try:
        state = json.loads(ACCEL_STATE.read_text())
    except (OSError, ValueError):
        return None, "not probed yet"
    if state.get("key") != _accel_key(img):
        return None, "not probed yet"
    return bool(state.get("kvm")), str(state.get("reason", ""))


def _record_kvm(img: Image, ok: bool, reason: str) -> None:
    ACCEL_STATE.parent.mkdir(parents=True, exist_ok=True)
    ACCEL_STATE.write_text(json.dumps({"key": _accel_key(img), "kvm": ok, "reason": reason}))


def _virtfs(path: Path, tag: str) -> str:
    # qemu option values escape ',' by doubling it
    return f"local,path={str(path).replace(',', ',,')},mount_tag={tag},security_model=none,multidevs=remap"


def qemu_argv(img: Image, accel: str, ctl: Path, repo: Path) -> list[str]:
    cpu = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    console = str(ctl / "console.log").replace(",", ",,")
    return [
        QEMU,
        "-name",
        "cclab-lab-vm",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
        *cpu,
        "-smp",
        str(CPUS),
        "-m",
        str(MEMORY_MIB),
        "-kernel",
        str(img.vmlinuz),
        "-initrd",
        str(img.initrd),
        "-append",
        " ".join(KERNEL_ARGS),
        "-drive",
        f"file={str(img.root_img).replace(',', ',,')},format=raw,if=virtio,snapshot=on,cache=unsafe",
        "-virtfs",
        _virtfs(repo, REPO_TAG),
        "-virtfs",
        _virtfs(ctl, CTL_TAG),
        "-chardev",
        f"file,id=console,path={console}",
        "-serial",
        "chardev:console",
        "-nic",
        "none",
    ]


# --- running a command -----------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child before exec: qemu gets SIGKILL if cclab dies (no orphaned VM)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the wait like Ctrl-C, so the VM is always killed on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Tail:
    """Read what a file gained since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return b""
        self.offset += len(data)
        return data


def _new_log_dir() -> Path:
    LOG_ROOT.mkdir(parents=True, exist_ok=True)
    old = sorted(p for p in LOG_ROOT.iterdir() if p.is_dir())
    for p in old[: max(0, len(old) - KEEP_LOGS + 1)]:
        shutil.rmtree(p, ignore_errors=True)
    d = LOG_ROOT / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    d.mkdir()
    return d


def _console_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def _boot(
    img: Image,
    accel: str,
    ctl: Path,
    repo: Path,
    started_within_s: float,
    deadline: float,
    echo: Callable[[bytes], None] | None,
) -> tuple[int | None, str]:
    """Boot once; return (qemu exit status, "") or (None, why it did not reach the init)."""
    console = ctl / "console.log"
    console.unlink(missing_ok=True)
    (ctl / "rc").unlink(missing_ok=True)
    (ctl / "output.log").unlink(missing_ok=True)
    argv = qemu_argv(img, accel, ctl, repo)
    log.info("boot (%s): %s", accel, argv)
    env = {**os.environ, "TMPDIR": str(ctl)}  # the disk's throwaway overlay goes there
    with open(ctl / f"qemu-{accel}.log", "wb") as qlog:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
        )
    try:
        t0 = time.monotonic()
        started = False
        out = _Tail(ctl / "output.log")
        while True:
            rc = proc.poll()
            if not started:
                started = STARTED in (console.read_bytes() if console.exists() else b"")
                if not started and rc is None and time.monotonic() - t0 > started_within_s:
                    return None, f"no sign of the guest's init within {started_within_s:g} s under {accel}"
            if echo is not None:
                data = out.read()
                if data:
                    echo(data)
            if rc is not None:
                if not started:
                    qerr = " ".join((ctl / f"qemu-{accel}.log").read_text(errors="replace").split())
                    return None, f"qemu exited ({rc}) before the guest's init under {accel}: {qerr or '-'}"
                if echo is not None and (data := out.read()):
                    echo(data)
                return rc, ""
            if time.monotonic() > deadline:
                raise VmError(
                    f"the command in the lab VM did not finish in time; killed it (console: {console}: "
                    f"{_console_tail(console)})"
                )
            time.sleep(0.1)
    finally:
        _stop(proc)
        for p in ctl.glob("vl.*"):  # qemu's snapshot overlay, if it left one
            p.unlink(missing_ok=True)


def run_in_vm(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    echo: Callable[[bytes], None] | None = None,
    repo: Path = system.REPO,
    accel: str | None = None,
) -> VmResult:
    """Boot the lab VM, run argv in the guest (cwd: the shared work tree), power off.

    The work tree ``repo`` is mounted in the guest at the same path; the guest's
    PYTHONPATH is it, its interpreter Debian's /usr/bin/python3 (with Mininet,
    rich, matplotlib and pytest from Debian).  ``echo`` gets the command's
    output as it comes; ``accel`` ("kvm", "tcg") insists on one (default: KVM
    where it works, else TCG; CCLAB_VM_ACCEL=tcg forces TCG).  Raises VmError when the VM cannot boot, the command
    outlives ``timeout_s`` (the VM is killed) or the guest ends without an exit
    status; a command that fails is a VmResult with its returncode.
    """
    _require_root()
    if shutil.which(QEMU) is None:
        raise VmError(f"{QEMU} is not installed; run `make vm` (it installs qemu-system-x86)")
    img = require_image()
    repo = repo.resolve()
    cwd = (cwd or repo).resolve()
    if not cwd.is_relative_to(repo):
        raise VmError(f"{cwd} is not inside the shared work tree {repo}")
    ctl = _new_log_dir()
    job = {"argv": list(argv), "cwd": str(cwd), "repo": str(repo), "env": dict(env or {})}
    (ctl / "job.json").write_text(json.dumps(job))
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    if accel not in (None, "kvm", "tcg"):
        raise VmError(f"accel must be kvm or tcg, not {accel!r}")
    kvm_ok, note = kvm_verdict(img)
    if accel == "tcg":
        kvm_ok, note = False, "TCG requested"
    elif accel == "kvm" and kvm_ok is False:
        raise VmError(f"KVM was requested but does not work here: {note}")
    with _sigterm_interrupts():
        rc, used = None, "tcg"
        if kvm_ok is not False:
            rc, why = _boot(img, "kvm", ctl, repo, PROBE_TIMEOUT_S, deadline, echo)
            if kvm_ok is None:
                _record_kvm(img, rc is not None, why or "boots")
            if rc is None:
                if accel == "kvm":
                    raise VmError(f"KVM was requested but does not work here: {why}")
                log.warning("KVM unusable, falling back to software emulation: %s", why)
                note = why
            else:
                used = "kvm"
        if rc is None:
            rc, why = _boot(img, "tcg", ctl, repo, min(BOOT_TIMEOUT_S, timeout_s), deadline, echo)
            if rc is None:
                raise VmError(f"the lab VM did not boot: {why} (console: {ctl / 'console.log'})")
    elapsed = time.monotonic() - t0
    try:
        status = int((ctl / "rc").read_text())
    except (OSError, ValueError):
        raise VmError(
            f"the lab VM stopped (qemu {rc}) without the command's exit status; see {ctl / 'console.log'}: "
            f"{_console_tail(ctl / 'console.log')}"
        ) from None
    try:
        facts = json.loads((ctl / "guest.json").read_text())
    except (OSError, ValueError):
        facts = {}
    return VmResult(
        returncode=status,
        console_log_path=ctl / "console.log",
        output=(ctl / "output.log").read_text(errors="replace") if (ctl / "output.log").exists() else "",
        elapsed_s=elapsed,
        accel=used,
        boot_s=facts.get("uptime_at_job_s"),
        kernel=str(facts.get("kernel", "?")),
        accel_note="" if used == "kvm" else note,
    )


def _write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


#: a whole experiment under software emulation: boot, set-up, the run, plots
RUN_MARGIN_S = 180.0


def run_spec_in_vm(
    spec_path: Path,
    extra_args: list[str],
    *,
    echo: Callable[[bytes], None] | None = _write_stdout,
    timeout_s: float | None = None,
) -> int:
    """`cclab run SPEC --no-live EXTRA...` in the lab VM; return its exit status.

    The spec must be inside the work tree (it is shared, not copied), and so
    must a --results directory; the run directory appears in the host's
    results/ as the guest writes it.  ``echo`` relays the guest's output
    (default: this process's stdout).
    """
    repo = system.REPO.resolve()
    spec_abs = spec_path.resolve()
    if not spec_abs.is_relative_to(repo):
        raise VmError(f"{spec_path} is outside the work tree {repo}, which is all the lab VM sees; copy it in")
    for i, a in enumerate(extra_args):
        if (a == "--results" and i + 1 < len(extra_args)) or a.startswith("--results="):
            val = a.split("=", 1)[1] if "=" in a else extra_args[i + 1]
            if not Path(val).resolve().is_relative_to(repo):
                raise VmError(f"--results {val} is outside the work tree {repo}, which is all the lab VM sees")
    if timeout_s is None:
        timeout_s = _spec_duration_s(spec_abs) + RUN_MARGIN_S
    argv = ["python3", "-m", "controller.cli", "run", str(spec_abs), "--no-live", *extra_args]
    here = Path.cwd().resolve()
    res = run_in_vm(argv, timeout_s=timeout_s, echo=echo, cwd=here if here.is_relative_to(repo) else repo)
    log.info("lab VM (%s, kernel %s): exit %d after %.1f s", res.accel, res.kernel, res.returncode, res.elapsed_s)
    return res.returncode


def _spec_duration_s(path: Path) -> float:
    """The spec's own end time (its last flow), for the timeout; 60 s if it cannot tell."""
    try:
        from controller import spec

        s = spec.load(path)
        return max([s.duration_s] + [f.start_s + f.duration_s for f in s.flows])
    except Exception:  # the guest validates the spec and says what is wrong
        return 60.0


# --- the command line (make vm, make vm-test, make vm-bench) ---------------------------


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _cmd_build(_args: argparse.Namespace) -> int:
    k = host_kernel()
    _err(f"vm: Debian 12 image with kernel {k.abi} {k.version} (the host's linux-headers)")
    img, took = build(progress=lambda line: _err(f"  {line}"))
    if took is None:
        _err(f"vm: up to date: {img.dir}")
    else:
        _err(f"vm: built {img.dir} in {took:.0f} s")
    return 0


def _cmd_info(_args: argparse.Namespace) -> int:
    img = image()
    ok, why = kvm_verdict(img)
    info = {
        "image": str(img.dir),
        "built": img.complete(),
        "kernel": img.kernel.abi,
        "kernel_version": img.kernel.version,
        "kvm": {True: "works", False: f"unavailable: {why}", None: f"untested ({why})"}[ok],
        "qemu": _qemu_version(),
    }
    print(json.dumps(info, indent=1))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        _err("vm run: give a command, e.g. python3 -m controller.vm run -- uname -r")
        return 2
    res = run_in_vm(argv, timeout_s=args.timeout, echo=_write_stdout)
    _err(
        f"vm: exit {res.returncode}; {res.accel}{f' ({res.accel_note})' if res.accel_note else ''}; "
        f"kernel {res.kernel}; ready after {res.boot_s or 0:.1f} s; {res.elapsed_s:.1f} s in all; "
        f"console {res.console_log_path}"
    )
    return res.returncode


BENCH_POINTS = ((1000, 0), (1000, 20))


def _bench_once(accel: str, duration_s: float) -> dict[str, object]:
    points = [f"{r}:{d}" for r, d in BENCH_POINTS]
    argv = ["python3", str(VM_DIR / "guest" / "bench.py"), "--duration", str(duration_s), *points]
    res = run_in_vm(argv, timeout_s=BOOT_TIMEOUT_S + len(BENCH_POINTS) * (duration_s + 60) + 60, accel=accel)
    if res.returncode != 0:
        raise VmError(f"the benchmark failed in the lab VM (exit {res.returncode}): {res.output.strip()[-400:]}")
    last = [ln for ln in res.output.splitlines() if ln.startswith("{")]
    data: dict[str, object] = json.loads(last[-1])
    data.update(accel=res.accel, boot_s=res.boot_s, kernel=res.kernel)
    return data


def _cmd_bench(args: argparse.Namespace) -> int:
    img = require_image()
    rows = []
    ok, why = kvm_verdict(img)
    if ok is None:  # probe it now: a one-command boot
        try:
            res = run_in_vm(["true"], timeout_s=BOOT_TIMEOUT_S + PROBE_TIMEOUT_S)
            ok, why = res.accel == "kvm", res.accel_note
        except VmError as exc:
            ok, why = False, str(exc)
    for accel in ("kvm", "tcg"):
        if accel == "kvm" and not ok:
            print(f"kvm: unavailable ({why})")
            continue
        data = _bench_once(accel, args.duration)
        rows.append(data)
        print(f"{accel}: kernel {data['kernel']}, ready after {data['boot_s']:.1f} s")
        ceiling = data.get("ceiling_bps")
        print(f"  unshaped path (shaper above any rate), {data['flows']} cubic flows: {_mbps(ceiling)} Mbit/s")
        for p in data["points"]:  # type: ignore[attr-defined]
            print(
                f"  bottleneck {p['rate_mbps']:g} Mbit/s, delay {p['delay_ms']:g} ms (RTT {2 * p['delay_ms']:g} ms): "
                f"{_mbps(p['achieved_bps'])} Mbit/s in the network, iperf3 goodput {_mbps(p['goodput_bps'])} Mbit/s, "
                f"base RTT {p['base_rtt_ms'] if p['base_rtt_ms'] is not None else '-'} ms"
            )
    if args.json:
        print(json.dumps(rows))
    return 0


def _mbps(bps: object) -> str:
    return "-" if not isinstance(bps, (int, float)) else f"{bps / 1e6:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m controller.vm", description="the cclab lab VM (qemu)")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build the image unless cached").set_defaults(func=_cmd_build)
    sub.add_parser("info", help="image, kernel, KVM verdict").set_defaults(func=_cmd_info)
    r = sub.add_parser("run", help="run a command in the VM (in the shared work tree)")
    r.add_argument("--timeout", type=float, default=600.0, help="seconds before the VM is killed (default 600)")
    r.add_argument("argv", nargs=argparse.REMAINDER)
    r.set_defaults(func=_cmd_run)
    b = sub.add_parser("bench", help="TCP throughput through the VM's emulated bottleneck, KVM and TCG")
    b.add_argument("--duration", type=float, default=10.0, help="seconds per point (default 10)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_cmd_bench)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args.func(args))
    except (VmError, system.SystemError_) as exc:
        _err(f"vm: {exc}")
        return 2
    except KeyboardInterrupt:
        _err("vm: interrupted (the VM was stopped)")
        return 130


if __name__ == "__main__":
    sys.exit(main())
