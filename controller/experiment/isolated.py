"""Run a command in network, mount and PID namespaces of its own: a run beside other runs on one machine.

    python -m controller.experiment.isolated -- COMMAND [ARG...]

The command (a `cclab run`) gets its own network stack (switch names, links,
the hosts' namespaces), its own /run (so /run/cclab, the run lock, /run/netns
are its own), a sysfs of its own namespace (without it /sys/class/net shows
the host's interfaces, and the run fails at once: "device s1-eth1 does not
exist"), its own bpffs for pins and a /proc of its PID namespace.  What it
shares with the host is the CPU and what the kernel keeps globally: the
congestion-control registry and module parameters such as htb_hysteresis,
which executors.shared_kernel_state() holds for all runs side by side.

Two processes: this one stays in the caller's PID namespace and passes
SIGTERM and PARENT_GONE on; its child is PID 1 of the new one, mounts, brings
lo up, starts the command and passes both on to it (PID 1 gets only signals
it handles).
When PID 1 exits the kernel kills whatever is left in its PID namespace
(host shells, iperf3, the delay element), and the network namespace goes with
them: a killed run leaves nothing on the host.  SIGINT is ignored here: a
Ctrl-C reaches the command itself, through the terminal's process group.

Standard library only, no shell: the argument vector is passed on as it is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
#: (type, mount point) mounted fresh inside, in this order
MOUNTS = (("tmpfs", "/run"), ("sysfs", "/sys"), ("bpf", "/sys/fs/bpf"), ("proc", "/proc"))

#: What a run gets when the process that started it dies: SIGHUP, also what a closed terminal sends.  The kernel
#: sends it again each time it hands the orphan on to another thread of the dying process (a sweep with threads
#: of its own: two to four times in a row, measured), so a run takes it as one request to stop however often it
#: comes (runner.StopSignals); it is not SIGTERM, whose second arrival abandons a teardown.
PARENT_GONE = signal.SIGHUP


def tied_to_parent(argv: Sequence[str]) -> list[str]:
    """argv run so that it gets PARENT_GONE when the process (the thread) starting it dies: util-linux setpriv
    sets the parent-death signal, no code between fork and exec."""
    return ["setpriv", "--pdeathsig", PARENT_GONE.name.removeprefix("SIG"), "--", *argv]


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def _forward(child: subprocess.Popen[bytes] | int) -> None:
    """Pass SIGTERM and PARENT_GONE on to the child; ignore SIGINT (the terminal sends it to the child too)."""

    def handler(signum: int, _frame: object) -> None:
        pid = child if isinstance(child, int) else child.pid
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, PARENT_GONE):
        signal.signal(signum, handler)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_code(status: int) -> int:
    """A shell's convention: the exit code, or 128 + the signal that ended it."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _init(argv: list[str]) -> int:
    """PID 1 of the new namespaces: mounts, lo up, the command, its exit code."""
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for fstype, where in MOUNTS:
        subprocess.run(["mount", "-t", fstype, f"cclab-{fstype}", where], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # the command dies with this process: PID 1's exit kills the namespace's processes anyway, PARENT_GONE
    # comes first, so a run that can still tear down does
    proc = subprocess.Popen(tied_to_parent(argv))
    _forward(proc)
    rc = proc.wait()
    return rc if rc >= 0 else 128 - rc


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m controller.experiment.isolated -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    _unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            code = _init(argv)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"cclab: cannot isolate the run: {exc}", file=sys.stderr)
            code = 2
        os._exit(code)
    _forward(pid)
    _, status = os.waitpid(pid, 0)
    return _exit_code(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
