"""Executors of a sweep's runs: one after another here or in the lab VM, or on a Dask distributed cluster.

Either way each run is `cclab run POINT.toml` in a process of its own, so a
sweep depends only on the command line, never on the runner's internals.

Dask: every worker machine is started with ``--resources experiment=1`` and
each run asks for one ``experiment``, so the scheduler never puts two
experiments on one machine at a time (they would share its CPU and kernel).
A run executes in a scratch directory on the worker; its run directory comes
back to the sweep directory as a tar archive, so the lab needs no shared file
system.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from controller import system
from controller.experiment.sweep import Task, TaskResult

log = logging.getLogger(__name__)

EXECUTORS = ("local", "vm", "dask")
#: the worker resource each run asks for; workers offer one (`dask worker ... --resources experiment=1`)
RESOURCE = "experiment"


class ExecutorError(RuntimeError):
    """An executor that cannot start (no scheduler, no worker offering the resource); one line."""


def run_cclab(spec_file: Path, runs_dir: Path, plots: bool, in_vm: bool = False) -> tuple[int, str]:
    """`cclab run` one point into runs_dir (``--vm``: in a lab VM booted for it); (exit code, last line of stderr)."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    # A killed sweep must not leave its run going on unseen: the run gets SIGTERM when the sweep dies (util-linux
    # setpriv sets the parent-death signal, no code between fork and exec), stops, tears down and stays marked
    # incomplete, for the next sweep to redo.
    argv = ["setpriv", "--pdeathsig", "TERM", "--", sys.executable, "-m", "controller.cli", "run", str(spec_file)]
    argv += ["--results", str(runs_dir.resolve()), "--no-live", *(["--vm"] if in_vm else [])]
    if not plots:
        argv.append("--no-plots")
    proc = subprocess.Popen(
        argv,
        cwd=system.REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate()
    except BaseException:
        # Ctrl-C reached the run as well (same process group): let it tear down before we go
        proc.wait()
        raise
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return proc.returncode, lines[-1].removeprefix("cclab: ") if lines and proc.returncode else ""


def local(tasks: list[Task], started: Callable[[str], None], ended: Callable[[TaskResult], None]) -> None:
    """One run after another on this machine."""
    _one_by_one(tasks, started, ended, in_vm=False)


def vm(tasks: list[Task], started: Callable[[str], None], ended: Callable[[TaskResult], None]) -> None:
    """One run after another, each in a lab VM of its own (`cclab run --vm`: netem and .ko modules on its
    kernel); the sweep directory must be inside the work tree, which the VM shares."""
    _one_by_one(tasks, started, ended, in_vm=True)


def _one_by_one(
    tasks: list[Task], started: Callable[[str], None], ended: Callable[[TaskResult], None], *, in_vm: bool
) -> None:
    for t in tasks:
        started(t.key)
        rc, error = run_cclab(t.spec_file, t.runs_dir, t.plots, in_vm)
        ended(TaskResult(t.key, rc, error))
        if rc == 130:
            raise KeyboardInterrupt


# --- Dask distributed ---------------------------------------------------------------


@contextlib.contextmanager
def _one_at_a_time() -> Iterator[None]:
    """Wait for this machine's previous sweep run: a run whose sweep went away (Ctrl-C, a lost client) goes on to
    its end on the worker, while the scheduler may already hand the machine the next one."""
    system.RUN_STATE.mkdir(parents=True, exist_ok=True)
    with open(system.RUN_STATE / "sweep-worker.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def remote_run(key: str, spec_text: str, plots: bool) -> tuple[int, str, bytes]:
    """On a worker: run one point in a scratch directory; (exit code, error line, its run directories as tar)."""
    with _one_at_a_time(), tempfile.TemporaryDirectory(prefix=f"cclab-{key}-") as tmp:
        spec_file = Path(tmp) / f"{key}.toml"
        spec_file.write_text(spec_text)
        runs = Path(tmp) / "runs"
        rc, error = run_cclab(spec_file, runs, plots)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for d in sorted(runs.iterdir()):
                tar.add(d, arcname=d.name)
    return rc, error, buf.getvalue()


def unpack(archive: bytes, runs_dir: Path) -> None:
    """Put a worker's run directories under runs_dir; an existing directory is never overwritten."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
        clash = sorted(t for t in tops if (runs_dir / t).exists())
        if clash:
            raise ExecutorError(f"run directory {runs_dir / clash[0]} exists already; not overwriting it")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(runs_dir, filter="data")
        else:  # pragma: no cover - Python < 3.10.12 / 3.11.4
            for m in tar.getmembers():
                if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                    raise ExecutorError(f"unsafe path in a worker's archive: {m.name}")
            tar.extractall(runs_dir)


def dask_executor(scheduler: str) -> Callable[[list[Task], Callable[[str], None], Callable[[TaskResult], None]], None]:
    """Hand the runs to the Dask scheduler at ``scheduler`` (tcp://host:8786)."""

    def execute(tasks: list[Task], started: Callable[[str], None], ended: Callable[[TaskResult], None]) -> None:
        from distributed import Client, as_completed

        try:
            client = Client(scheduler, timeout=10)
        except OSError as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            offering = [
                w
                for w, info in client.scheduler_info()["workers"].items()
                if info.get("resources", {}).get(RESOURCE, 0) >= 1
            ]
            if tasks and not offering:
                raise ExecutorError(
                    f"no worker of {scheduler} offers the resource {RESOURCE!r}; "
                    f"start workers with: dask worker {scheduler} --resources {RESOURCE}=1"
                )
            log.info("dask: %d workers offer %s", len(offering), RESOURCE)
            futures = {}
            for t in tasks:
                fut = client.submit(
                    remote_run, t.key, t.spec_file.read_text(), t.plots, resources={RESOURCE: 1}, pure=False
                )
                futures[fut] = t
                started(t.key)
            for fut in as_completed(list(futures)):
                t = futures[fut]
                rc, error, archive = fut.result()
                unpack(archive, t.runs_dir)
                ended(TaskResult(t.key, rc, error))
        finally:
            client.close()

    return execute
