"""The qemu lab VM: a Debian stock kernel for what this host's kernel cannot do.

Some kernels (containers, microVMs, the CI machine) have no netem and take no
modules.  The lab VM boots Debian 13's stock kernel (6.12: netem, modules,
and bpf_rdonly_cast for the coupled eBPF mptcpw) under qemu with the host's
work tree shared in over 9p at the same path, runs one command there and
powers off; whatever the command writes in the work tree (results/, the
modules it builds against its own headers) is on the host when it returns.

One idea per file:

- settings.py  where the parts live, the VM's size, VmError (GuestPanic: its kernel panicked)
- image.py     the image: built by vm/build-image.sh, cached by its inputs
- accel.py     KVM where it works, else TCG; the verdict remembered
- share.py     the work tree and the control directory shared with the guest
- qemu.py      one boot: the qemu command line and the process
- run.py       one command in the VM (run_in_vm), one experiment (run_spec_in_vm)
- kmod.py      cclab's modules for the image's kernel, built natively in a chroot of it
- bench.py     throughput through the VM's emulated bottleneck
- baseline.py  a path's RTT by ping in the same run: what RTT checks bound the emulation's lift by
- __main__.py  ``/usr/bin/python3 -m controller.vm build|info|run|bench`` (stdlib
               only: `make vm`, `make vm-test` and `make vm-bench` call it so)
"""

from controller.vm.accel import kvm_verdict
from controller.vm.image import Image, Kernel, build, image, require_image
from controller.vm.run import VmResult, run_in_vm, run_spec_in_vm
from controller.vm.settings import QEMU, GuestPanic, VmError

__all__ = [
    "QEMU",
    "GuestPanic",
    "Image",
    "Kernel",
    "VmError",
    "VmResult",
    "build",
    "image",
    "kvm_verdict",
    "require_image",
    "run_in_vm",
    "run_spec_in_vm",
]
