#!/usr/bin/python3
"""PID 1 of the cclab lab VM: mount, run one job from the host, power off.

The host (controller/vm.py) boots the VM with two 9p shares: ``cclabctl``, a
control directory holding ``job.json`` (argv, cwd, env, where to mount the
work tree), and ``cclab``, the host's work tree, mounted at the same path as
on the host so results land there directly.  This init mounts what a cclab run
needs, runs the job, copies its output to the serial console and to
``output.log`` on the control share, writes the exit status to ``rc``, and
powers the VM off.  It reaps every orphan while the job runs (it is PID 1).

Console markers the host waits for: ``cclab-init: started`` (the kernel is up;
the KVM probe), ``cclab-init: exit <status>``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

CTL_TAG = "cclabctl"
REPO_TAG = "cclab"
CTL = Path("/run/cclab-ctl")
NINEP_OPTS = "trans=virtio,version=9p2000.L,msize=262144,cache=none,access=client"
RB_POWER_OFF = 0x4321FEDC
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "TERM": "dumb",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "CCLAB_IN_VM": "1",
}
#: (type, source, target, options) mounted unless something is mounted there already
MOUNTS = (
    ("proc", "proc", "/proc", "nosuid,nodev,noexec"),
    ("sysfs", "sysfs", "/sys", "nosuid,nodev,noexec"),
    ("devtmpfs", "udev", "/dev", "mode=0755,nosuid"),
    ("devpts", "devpts", "/dev/pts", "gid=5,mode=620,ptmxmode=666"),
    ("tmpfs", "tmpfs", "/dev/shm", "nosuid,nodev"),
    ("tmpfs", "tmpfs", "/run", "nosuid,nodev,mode=0755"),
    ("tmpfs", "tmpfs", "/tmp", "nosuid,nodev"),
    ("bpf", "bpf", "/sys/fs/bpf", "mode=0700"),
    ("cgroup2", "cgroup2", "/sys/fs/cgroup", "nosuid,nodev,noexec"),
    ("debugfs", "debugfs", "/sys/kernel/debug", ""),
)


def say(msg: str) -> None:
    os.write(1, f"cclab-init: {msg}\n".encode())


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)


def mount(fstype: str, source: str, target: str, options: str) -> None:
    os.makedirs(target, exist_ok=True)
    if os.path.ismount(target):
        return
    sh("mount", "-t", fstype, *(["-o", options] if options else []), source, target)


def copy_output(pipe: IO[bytes], log: IO[bytes]) -> None:
    """Job output to the console and to output.log, as it comes."""
    for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
        os.write(1, chunk)
        log.write(chunk)
        log.flush()


def wait_reaping(pid: int) -> int:
    """Wait for the job, reaping every other child (orphans re-parent to PID 1)."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 255
        except InterruptedError:
            continue
        if done == pid:
            return os.waitstatus_to_exitcode(status)


def set_clock_from_host() -> None:
    """The guest's clock from the host's: a file written through the 9p share gets the host's time.

    The RTC counts whole seconds and the emulated clock drifts, so without this
    the files the job writes in the shared tree (stamped by the host) are in
    the guest's future, and make warns of clock skew on every module build."""
    probe = CTL / "clock"
    probe.write_bytes(b"")
    time.clock_settime_ns(time.CLOCK_REALTIME, probe.stat().st_mtime_ns)
    probe.unlink()


def run_job(job: dict[str, Any]) -> int:
    env = {**BASE_ENV, "PYTHONPATH": job["repo"], **job.get("env", {})}
    say(f"running {json.dumps(job['argv'])} in {job['cwd']}")
    with open(CTL / "output.log", "wb") as log:
        proc = subprocess.Popen(
            job["argv"],
            cwd=job["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        copier = threading.Thread(target=copy_output, args=(proc.stdout, log), daemon=True)
        copier.start()
        rc = wait_reaping(proc.pid)
        proc.returncode = rc
        # whatever the job left running (its session) goes with it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        copier.join(timeout=5)
    return rc


def main() -> int:
    say("started")
    for m in MOUNTS:
        mount(*m)
    sh("modprobe", "-a", "9pnet_virtio", "9p")
    mount("9p", CTL_TAG, str(CTL), NINEP_OPTS)
    set_clock_from_host()
    job = json.loads((CTL / "job.json").read_text())
    mount("9p", REPO_TAG, job["repo"], NINEP_OPTS)
    sh("ip", "link", "set", "lo", "up")
    sh("hostname", "cclab-vm")
    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    facts = {"kernel": os.uname().release, "uptime_at_job_s": uptime_s}
    (CTL / "guest.json").write_text(json.dumps(facts))
    say(f"ready after {uptime_s:.1f} s of uptime")
    return run_job(job)


def finish(rc: int) -> None:
    try:
        tmp = CTL / "rc.tmp"
        tmp.write_text(f"{rc}\n")
        tmp.rename(CTL / "rc")
    except OSError as exc:
        say(f"cannot write the exit status: {exc}")
    say(f"exit {rc}")
    os.sync()
    subprocess.run(["umount", "-a", "-l", "-t", "9p"], stdin=subprocess.DEVNULL)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.reboot(RB_POWER_OFF)
    while True:  # PID 1 must not exit: the kernel would panic
        time.sleep(3600)


if __name__ == "__main__":
    status = 255
    try:
        status = main()
    except BaseException:
        say("failed:\n" + traceback.format_exc())
    finish(status)
