"""A congestion control of one's own: a spec's algo = "<name>.bpf.c" is parsed into its name and source (or
refused in one line), built with the flags of cclab's own eBPF objects (a compiler error is one line naming the
command that shows all of it), and registered for a run under exactly that name, then unregistered (as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import cc, spec
from tests.conftest import CCLAB, REPO

SOLUTION = REPO / "labs" / "04-own-cc" / "solution" / "mycc.bpf.c"
SPEC = """name = "own"
duration_s = 5
[topology]
kind = "dumbbell"
pairs = 2
[bottleneck]
rate_mbps = 10
[[flows]]
algo = "{a1}"
src = "h1"
dst = "r1"
[[flows]]
algo = "{a2}"
src = "h2"
dst = "r2"
"""


def _why_no_build() -> str | None:
    if shutil.which("clang") is None or shutil.which("make") is None:
        return "clang or make is not installed (make deps)"
    if not (cc.CC_DIR / "build" / "vmlinux.h").exists():
        return "hosts/cc/build/vmlinux.h is missing (make build)"
    return None


needs_build = pytest.mark.skipif(_why_no_build() is not None, reason=_why_no_build() or "")


def _spec(tmp: Path, a1: str, a2: str = "reno") -> Path:
    path = tmp / "own.toml"
    path.write_text(SPEC.format(a1=a1, a2=a2))
    return path


def test_a_source_runs_under_its_files_name(tmp_path: Path) -> None:
    (tmp_path / "cc").mkdir()
    shutil.copyfile(SOLUTION, tmp_path / "cc" / "mycc.bpf.c")
    s = spec.load(_spec(tmp_path, "cc/mycc.bpf.c", "cc/mycc.bpf.c"))
    assert [f.algo for f in s.flows] == ["mycc", "mycc"]
    assert s.cc_sources == {"mycc": (tmp_path / "cc" / "mycc.bpf.c").resolve()}
    assert s.algos == ("mycc",)
    assert spec.load(_spec(tmp_path, "reno", "cubic")).cc_sources == {}


@pytest.mark.parametrize(
    "files, a1, a2, says",
    [
        ([], "mycc.bpf.c", "reno", "no such file"),
        (["My-CC.bpf.c"], "My-CC.bpf.c", "reno", "a-z, 0-9 and _"),
        (["reno.bpf.c"], "reno.bpf.c", "cubic", "reno is an algorithm cclab or the kernel has"),
        (["a/mycc.bpf.c", "b/mycc.bpf.c"], "a/mycc.bpf.c", "b/mycc.bpf.c", "another file of the spec is named mycc"),
        ([], "mycc.c", "reno", "unknown algorithm"),
    ],
    ids=["missing", "bad-name", "clash", "two-files-one-name", "not-bpf-c"],
)
def test_a_bad_source_is_refused_in_one_line(tmp_path: Path, files: list[str], a1: str, a2: str, says: str) -> None:
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOLUTION, tmp_path / f)
    with pytest.raises(spec.SpecError) as exc:
        spec.load(_spec(tmp_path, a1, a2))
    msg = str(exc.value)
    assert "\n" not in msg and "flows[" in msg and says in msg, msg


def test_runs_side_by_side_refuse_it(tmp_path: Path) -> None:
    """Each run builds and registers its own algorithm, so a sweep with --jobs N > 1 refuses the spec."""
    from controller.experiment import executors

    shutil.copyfile(SOLUTION, tmp_path / "mycc.bpf.c")
    with pytest.raises(executors.ExecutorError, match="runs mycc from mycc.bpf.c, .* use --jobs 1"):
        executors.shareable_together(executors.loaded([_spec(tmp_path, "mycc.bpf.c")]))
    executors.shareable_together(executors.loaded([_spec(tmp_path, "reno")]))


@needs_build
def test_the_lab_solution_builds_as_cclabs_own_objects_do(tmp_path: Path) -> None:
    out = tmp_path / "mycc.bpf.o"
    cc.build_own(SOLUTION, out)
    assert out.read_bytes()[:4] == b"\x7fELF"
    assert b"mycc" in out.read_bytes(), "the object holds no tcp_congestion_ops named mycc"


@needs_build
def test_a_compiler_error_is_one_line_and_the_cli_shows_all_of_it(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bpf.c"
    broken.write_text(SOLUTION.read_text().replace("return w > 2 ? w : 2;", "return w > 2 ? w : undeclared;"))
    with pytest.raises(cc.BuildError) as exc:
        cc.build_own(broken, tmp_path / "broken.bpf.o")
    msg = str(exc.value)
    assert "\n" not in msg and "undeclared" in msg and f"cclab cc build {broken}" in msg, msg
    assert len(exc.value.lines) > 1
    proc = subprocess.run([*CCLAB, "cc", "build", str(broken)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: use of undeclared identifier 'undeclared'" in proc.stdout, proc.stdout
    build = [*CCLAB, "cc", "build", str(SOLUTION), "-o", str(tmp_path / "ok.bpf.o")]
    proc = subprocess.run(build, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "registered as mycc" in proc.stdout, proc.stdout + proc.stderr


# --- registered for real (root) ----------------------------------------------------------------------------------


def _why_no_register() -> str | None:
    if os.geteuid() != 0:
        return "needs root (bpftool struct_ops register)"
    if shutil.which("bpftool") is None:
        return "bpftool is not installed"
    return _why_no_build()


@pytest.fixture
def unregistered() -> Iterator[None]:
    """No algorithm named mycc or othercc before the test, none after it whatever happens."""
    names = ["mycc", "othercc"]
    if set(names) & set(cc.available()):
        pytest.skip("an algorithm named mycc or othercc is registered already (cclab clean)")
    try:
        yield
    finally:
        for n in names:
            if n in cc.available():
                subprocess.run(["bpftool", "struct_ops", "unregister", "name", n], capture_output=True, check=False)
            (cc.OWN_STATE / n).unlink(missing_ok=True)


@pytest.mark.root
@pytest.mark.skipif(_why_no_register() is not None, reason=_why_no_register() or "")
def test_registered_under_its_name_then_unregistered(unregistered: None) -> None:
    assert cc.load(["mycc", "reno"], sources={"mycc": SOLUTION}) == ["mycc"]
    assert "mycc" in cc.available() and cc.loaded_form("mycc") == "ebpf"
    assert cc.own_recorded() == ["mycc"]
    with pytest.raises(cc.CcError, match="mycc is registered already"):
        cc.load(["mycc"], sources={"mycc": SOLUTION})
    cc.unload(["mycc"])
    assert "mycc" not in cc.available() and cc.own_recorded() == []


@pytest.mark.root
@pytest.mark.skipif(_why_no_register() is not None, reason=_why_no_register() or "")
def test_a_source_naming_another_algorithm_leaves_nothing_registered(unregistered: None, tmp_path: Path) -> None:
    other = tmp_path / "othercc.bpf.c"
    other.write_text(SOLUTION.read_text())  # its table still says .name = "mycc"
    with pytest.raises(cc.CcError, match='registers mycc, not othercc: its tcp_congestion_ops .name must be "othercc"'):
        cc.load(["othercc"], sources={"othercc": other})
    assert not {"mycc", "othercc"} & set(cc.available())
    assert cc.own_recorded() == []
