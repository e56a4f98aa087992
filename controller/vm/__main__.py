"""The lab VM's command line: ``/usr/bin/python3 -m controller.vm build|info|run|bench``.

Stdlib only, so it runs without the venv (`make vm`, `make vm-bench` call it so).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from controller import system
from controller.vm.accel import kvm_verdict, qemu_version
from controller.vm.bench import bench
from controller.vm.image import build, image
from controller.vm.run import run_in_vm, write_stdout
from controller.vm.settings import SUITE, VmError


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _cmd_build(_args: argparse.Namespace) -> int:
    _err(f"vm: Debian {SUITE} image with {SUITE}'s stock kernel and its headers")
    img, took = build(progress=lambda line: _err(f"  {line}"))
    k = img.kernel
    if took is None:
        _err(f"vm: up to date: {img.dir} (kernel {k.abi} {k.version})")
    else:
        _err(f"vm: built {img.dir} (kernel {k.abi} {k.version}) in {took:.0f} s")
    return 0


def _cmd_info(_args: argparse.Namespace) -> int:
    img = image()
    ok, why = kvm_verdict(img)
    info: dict[str, object] = {"image": str(img.dir), "suite": img.suite, "built": img.complete()}
    if img.complete():
        info.update(kernel=img.kernel.abi, kernel_version=img.kernel.version)
    info.update(kvm={True: "works", False: f"unavailable: {why}", None: f"untested ({why})"}[ok], qemu=qemu_version())
    print(json.dumps(info, indent=1))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        _err("vm run: give a command, e.g. python3 -m controller.vm run -- uname -r")
        return 2
    res = run_in_vm(argv, timeout_s=args.timeout, echo=write_stdout)
    _err(
        f"vm: exit {res.returncode}; {res.accel}{f' ({res.accel_note})' if res.accel_note else ''}; "
        f"kernel {res.kernel}; ready after {res.boot_s or 0:.1f} s; {res.elapsed_s:.1f} s in all; "
        f"console {res.console_log_path}"
    )
    return res.returncode


def _cmd_bench(args: argparse.Namespace) -> int:
    return bench(args.duration, args.json)


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
