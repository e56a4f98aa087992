"""Executors of a sweep's runs: here (one after another, or N side by side), in the lab VM, or on a Dask cluster.

Either way each run is `cclab run POINT.toml` in a process of its own, so a
sweep depends only on the command line, never on the runner's internals.

Side by side (``--jobs N``): each run in network, mount and PID namespaces of
its own (controller.experiment.isolated), so runs of one spec, same switch
and host names, share nothing but the CPU and what the kernel keeps globally:
the congestion-control registry and htb_hysteresis, a module parameter.  Those
shared_kernel_state() sets once, in the host's namespace, for as long as any
run is going, so no run puts them back under another.  The per-namespace
sysctls (bridge-nf-call-iptables, tcp_child_ehash_entries) each run sets in
its own namespace as it would alone.

Dask: every worker machine is started with ``--resources experiment=1`` and
each run asks for one ``experiment``, so the scheduler never puts two
experiments on one machine at a time (they would share its CPU and kernel).
A worker started with ``experiment=N``, N > 1, takes N runs at a time, each
isolated as above; the fidelity check in each run's summary.json says whether
the machine holds N (`cclab bench sweep` measures it).
A run executes in a scratch directory on the worker; its run directory comes
back to the sweep directory as a tar archive, so the lab needs no shared file
system.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from controller import cc, spec, system
from controller.dataplane import sysctls
from controller.dataplane.kernel import htb_hysteresis_wanted
from controller.experiment.isolated import tied_to_parent
from controller.experiment.sweep import Executor, Task, TaskResult
from controller.spec import algos

log = logging.getLogger(__name__)

EXECUTORS = ("local", "vm", "dask")
#: the worker resource each run asks for; workers offer one (`dask worker ... --resources experiment=1`)
RESOURCE = "experiment"


class ExecutorError(RuntimeError):
    """An executor that cannot start (no scheduler, no worker offering the resource); one line."""


#: the wrapper that puts a run in namespaces of its own
ISOLATED = (sys.executable, "-m", "controller.experiment.isolated", "--")


def run_cclab(
    spec_file: Path, runs_dir: Path, plots: bool, in_vm: bool = False, isolated: bool = False
) -> tuple[int, str]:
    """`cclab run` one point into runs_dir (``--vm``: in a lab VM booted for it; isolated: in namespaces of its
    own, see controller.experiment.isolated); (exit code, last line of stderr)."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    # A killed sweep must not leave its run going on unseen: the run gets isolated.PARENT_GONE when the sweep dies,
    # stops, tears down and stays marked incomplete, for the next sweep to redo.  Isolated, the wrapper passes
    # the signal on.
    argv = [*(ISOLATED if isolated else ()), sys.executable, "-m", "controller.cli", "run", str(spec_file)]
    argv += ["--results", str(runs_dir.resolve()), "--no-live", *(["--vm"] if in_vm else [])]
    if not plots:
        argv.append("--no-plots")
    proc = subprocess.Popen(
        tied_to_parent(argv),
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


def _never() -> bool:
    return False


def side_by_side(jobs: int, stop: Callable[[], bool] = _never) -> Executor:
    """Up to ``jobs`` runs at a time on this machine, each isolated (jobs 1: as `local`, not isolated); none
    starts once ``stop()`` says so (a campaign's stop: the runs going finish)."""

    def execute(tasks: list[Task], started: Callable[[str], None], ended: Callable[[TaskResult], None]) -> None:
        if jobs == 1:
            _one_by_one(tasks, started, ended, in_vm=False, stop=stop)
            return
        for name, s in loaded(t.spec_file for t in tasks):  # refused here, before any run, not once per run
            shareable(name, s)
        run_side_by_side(tasks, started, ended, jobs, stop)

    return execute


def _isolated_run(t: Task) -> tuple[int, str]:
    with shared_kernel_state(t.spec_file):
        return run_cclab(t.spec_file, t.runs_dir, t.plots, isolated=True)


def run_side_by_side(
    tasks: list[Task],
    started: Callable[[str], None],
    ended: Callable[[TaskResult], None],
    jobs: int,
    stop: Callable[[], bool] = _never,
) -> None:
    """Up to ``jobs`` isolated runs at a time (also at jobs 1), in the tasks' order as far as the kernel's algorithm
    registry allows: a run goes only beside runs that set its algorithms' tunables alike (it holds one setting per
    name), so the next task to go is the first that agrees with every run going, and a sweep whose points set
    them apart goes point by point (next_task).  None starts once ``stop()`` says so.  The callbacks run on this
    thread; each run waits on a thread of its own (its parent, for pdeathsig)."""
    todo = list(tasks)
    tunables = {t.key: settings(spec.load(t.spec_file)) for t in tasks}
    going: dict[Future[tuple[int, str]], Task] = {}
    interrupted = False
    # on Ctrl-C or an error the pool's exit waits for the runs going: they tear down and end on their own
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="cclab-run") as pool:
        while going or (todo and not interrupted):
            while todo and not interrupted and len(going) < jobs:
                if stop():
                    todo.clear()
                    break
                i = next_task([tunables[t.key] for t in todo], [tunables[t.key] for t in going.values()])
                if i is None:
                    break  # the next ones wait for the runs going to end and unregister their setting
                t = todo.pop(i)
                started(t.key)
                going[pool.submit(_isolated_run, t)] = t
            done, _ = wait(going, return_when=FIRST_COMPLETED)
            for fut in done:
                t = going.pop(fut)
                try:
                    rc, error = fut.result()
                except (ExecutorError, system.SystemError_, cc.CcError) as exc:
                    rc, error = 2, str(exc)
                ended(TaskResult(t.key, rc, error))
                interrupted |= rc == 130
    if interrupted:
        raise KeyboardInterrupt


# --- what the kernel keeps globally, held for all runs side by side ----------------------

HOLD = system.RUN_STATE / "shared-kernel.json"
HOLD_LOCK = system.RUN_STATE / "shared-kernel.lock"


def shareable(name: str, s: spec.Spec) -> None:
    """Refuse a point (``name``: its file's) whose run cannot share the kernel's algorithm registry with others:
    one that builds and registers an algorithm of one's own (algo = "<name>.bpf.c") for itself alone."""
    if s.cc_sources:
        own = sorted(s.cc_sources)[0]
        raise ExecutorError(
            f"{name}: runs {own} from {s.cc_sources[own].name}, which each run builds and registers "
            "for itself: use --jobs 1"
        )


#: each of a run's cclab algorithms -> its tunables, as the kernel's registry holds them
Settings = dict[str, tuple[tuple[str, int], ...]]


def settings(s: spec.Spec) -> Settings:
    """The setting of each of the spec's cclab algorithms (their defaults where it sets none)."""
    return {
        name: tuple(sorted(algos.with_defaults(name, s.algo_params.get(name, {})).items()))
        for name in s.algos
        if name in spec.CCLAB_ALGOS
    }


def next_task(todo: list[Settings], going: list[Settings]) -> int | None:
    """The index of the first of ``todo`` whose every algorithm is set as in each run going (the kernel's
    registry holds one setting per name), or None: it waits for the runs going to end."""
    for i, mine in enumerate(todo):
        if all(mine[n] == theirs[n] for theirs in going for n in mine.keys() & theirs.keys()):
            return i
    return None


def shareable_together(points: Iterable[tuple[str, spec.Spec]]) -> None:
    """Refuse, before any run, points (each its file's name and its spec) that cannot all go side by side at
    once, as `cclab bench sweep` runs them: each must be shareable(), and all must set an algorithm's tunables
    alike, since the kernel's registry holds one setting per name (the first run in registers it with them, and
    the others find it so).  A sweep's runs go by next_task() instead."""
    first: dict[str, dict[tuple[tuple[str, int], ...], str]] = {}  # algorithm -> each setting -> its first point
    for where, s in points:
        shareable(where, s)
        for name, setting in settings(s).items():
            first.setdefault(name, {}).setdefault(setting, where)
    for name, files in sorted(first.items()):
        if len(files) > 1:
            (sa, a), (sb, b) = list(files.items())[:2]
            raise ExecutorError(
                f"{a} and {b} set algorithms.{name} differently ({cc.show_params(dict(sa))}; "
                f"{cc.show_params(dict(sb))}): runs side by side share the kernel's algorithm registry, which holds "
                "one setting per name: use --jobs 1"
            )


def loaded(spec_files: Iterable[Path]) -> list[tuple[str, spec.Spec]]:
    """Each spec file's name and its spec, as shareable_together() takes them."""
    return [(f.name, spec.load(f)) for f in spec_files]


@contextlib.contextmanager
def _hold_state() -> Iterator[dict[str, Any]]:
    """HOLD's content under an exclusive lock, written back on exit; holders whose process is gone are dropped."""
    system.RUN_STATE.mkdir(parents=True, exist_ok=True)
    with open(HOLD_LOCK, "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        try:
            state = json.loads(HOLD.read_text())
        except (OSError, ValueError):
            state = {}
        state.setdefault("holders", [])
        state.setdefault("algorithms", [])
        state.setdefault("sysctls", {})
        state["holders"] = [h for h in state["holders"] if system.alive(int(h.split("-")[0]))]
        yield state
        if state["holders"] or state["algorithms"] or state["sysctls"]:
            tmp = HOLD.with_suffix(".tmp")
            tmp.write_text(json.dumps(state, indent=2) + "\n")
            os.replace(tmp, HOLD)
        else:
            HOLD.unlink(missing_ok=True)


@contextlib.contextmanager
def shared_kernel_state(spec_file: Path) -> Iterator[None]:
    """While an isolated run of spec_file goes on: its algorithms registered and htb_hysteresis set, in the host's
    namespace; the last run out unregisters and puts back (HOLD records what, so a killed sweep's are undone by
    the next one's last run or by `cclab clean`)."""
    s = spec.load(spec_file)
    shareable(spec_file.name, s)
    me = f"{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
    with _hold_state() as state:
        if not state["holders"] and htb_hysteresis_wanted():  # first in (a killed sweep's record is stale)
            state["sysctls"] = sysctls.HostSysctls(sysctls.HTB_HYSTERESIS).apply()
        state["algorithms"] += [n for n in cc.load(s.algos, s.algo_params) if n not in state["algorithms"]]
        state["holders"].append(me)
    try:
        yield
    finally:
        with _hold_state() as state:
            state["holders"] = [h for h in state["holders"] if h != me]
            if not state["holders"]:
                cc.unload(state["algorithms"])
                held = sysctls.HostSysctls(sysctls.HTB_HYSTERESIS)
                held.changed = state["sysctls"]
                held.restore()
                state["algorithms"], state["sysctls"] = [], {}


def _one_by_one(
    tasks: list[Task],
    started: Callable[[str], None],
    ended: Callable[[TaskResult], None],
    *,
    in_vm: bool,
    stop: Callable[[], bool] = _never,
) -> None:
    for t in tasks:
        if stop():
            return
        started(t.key)
        rc, error = run_cclab(t.spec_file, t.runs_dir, t.plots, in_vm)
        ended(TaskResult(t.key, rc, error))
        if rc == 130:
            raise KeyboardInterrupt


# --- Dask distributed ---------------------------------------------------------------


@contextlib.contextmanager
def _a_slot(slots: int) -> Iterator[None]:
    """Wait for one of this machine's ``slots`` run slots: a run whose sweep went away (Ctrl-C, a lost client)
    goes on to its end on the worker, while the scheduler may already hand the machine the next one."""
    system.RUN_STATE.mkdir(parents=True, exist_ok=True)
    files = [open(system.RUN_STATE / f"sweep-worker-{i}.lock", "w") for i in range(slots)]  # noqa: SIM115
    try:
        while True:
            for f in files:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield
                return
            time.sleep(0.5)
    finally:
        for f in files:
            f.close()


def _worker_slots() -> int:
    """How many `experiment`s this Dask worker offers (``--resources experiment=N``): its runs at a time."""
    from distributed import get_worker

    return max(1, int(get_worker().state.total_resources.get(RESOURCE, 1)))


def remote_run(key: str, spec_text: str, plots: bool) -> tuple[int, str, bytes]:
    """On a worker: run one point in a scratch directory; (exit code, error line, its run directories as tar).
    A worker offering more than one ``experiment`` runs each isolated, as side_by_side() does."""
    slots = _worker_slots()
    with _a_slot(slots), tempfile.TemporaryDirectory(prefix=f"cclab-{key}-") as tmp:
        spec_file = Path(tmp) / f"{key}.toml"
        spec_file.write_text(spec_text)
        runs = Path(tmp) / "runs"
        if slots == 1:
            rc, error = run_cclab(spec_file, runs, plots)
        else:
            with shared_kernel_state(spec_file):
                rc, error = run_cclab(spec_file, runs, plots, isolated=True)
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
