"""The CUDA build step (grader/cuda/part.py) and its one runner of untrusted processes (grader/cuda/runner.py).

Issue 31: nvcc for the GPU, g++ for the CUDA-on-CPU layer and nvcc for the compute-sanitizer harness are one build
step returning one record, and every compiler, ptxas, c++filt and probe they start goes through one runner that keeps
every defence (the grade's uid, its own process group killed whole at the timeout, the write cap, a capped output).
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from grader import identity, textscan
from grader.cuda import build, cudacpu, runner
from grader.cuda.part import BuildFor, BuildRequest, State, build_part

ROOT = Path(__file__).resolve().parent.parent
CORRECT = ROOT / "tests" / "data" / "problems" / "glu" / "correct" / "cuda_row_blocks" / "glu_cuda.cu"


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, killed but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc") or os.name != "posix", reason="reads /proc")
def test_a_timeout_kills_the_whole_process_group_not_only_the_compiler():
    """nvcc runs cicc, ptxas and gcc as children: a timeout must kill them too (a grandchild here), and the parent
    must not wait on the pipe the grandchild holds."""
    t0 = time.monotonic()
    ran = runner.run(["sh", "-c", "sleep 300 & echo $!; wait"], cwd=None, timeout_s=1.0)
    assert ran.timed_out and ran.returncode is None
    grandchild = int(ran.output.split()[0])
    deadline = time.monotonic() + 3.0
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the compiler's child outlived the timeout"
    assert time.monotonic() - t0 < 4.0, "the parent waited on a pipe a killed process's child still held"


def test_output_is_kept_to_its_cap_and_input_is_fed():
    ran = runner.run([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read() * 3)"],
                     cwd=None, timeout_s=60, limit=10, input=b"abcdef")  # fmt: skip
    assert ran.returncode == 0 and ran.truncated
    assert ran.output == "abcdefabcd\n" + textscan.cut_note(10)
    whole = runner.run(["cat"], cwd=None, timeout_s=60, input=b"x\ny\n")
    assert (whole.returncode, whole.output, whole.truncated) == (0, "x\ny\n", False)


def test_a_compiler_runs_as_the_grade_s_uid_with_its_environment(separated, tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_SEED", "not for the student")
    ident = identity.pick_identity()
    try:
        with identity.Scratch(ident, tmp_path / "trusted") as s:
            ran = runner.run(["sh", "-c", 'id -u; echo "seed=$GRADER_SECRET_SEED"'], cwd=s.home, timeout_s=60,
                             scratch=s)  # fmt: skip
    finally:
        ident.release()
    assert ran.returncode == 0, ran.output
    assert ran.output.split() == [str(ident.uid), "seed="], ran.output
    assert ident.uid != os.getuid()


_RUNS_A_PROCESS = {("subprocess", "Popen"), ("subprocess", "run"), ("subprocess", "call"),
                   ("subprocess", "check_call"), ("subprocess", "check_output"), ("os", "system"), ("os", "popen"),
                   ("os", "execv"), ("os", "execvp"), ("os", "spawnv"), ("os", "posix_spawn")}  # fmt: skip
# Not a submission's process: `nvcc --version` (part of the library cache's key), the trusted compiler's own answer.
_ALLOWED = {("grader/cuda/build.py", "nvcc_version"), ("grader/cuda/runner.py", "run")}


def test_every_process_the_cuda_build_starts_goes_through_the_one_runner():
    """grader/cuda/ and textscan start no process but through runner.run (one place for every defence)."""
    found = []
    for path in [*sorted((ROOT / "grader" / "cuda").glob("*.py")), ROOT / "grader" / "textscan.py"]:
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and (node.func.value.id, node.func.attr) in _RUNS_A_PROCESS
                    and isinstance(fn, ast.FunctionDef)
                    and (rel, fn.name) not in _ALLOWED
                ):
                    found.append(f"{rel}:{node.lineno} {fn.name}: {node.func.value.id}.{node.func.attr}")
    assert not found, found


def test_the_build_step_s_record_when_no_compiler_is_there(monkeypatch, tmp_path):
    monkeypatch.setattr(build, "find_nvcc", lambda: None)
    monkeypatch.setattr(cudacpu, "find_compiler", lambda: None)
    req = BuildRequest(CORRECT, "cuda", "glu_cuda_forward", cache_dir=tmp_path / "cache", build_dir=tmp_path / "b")
    lib = build_part(req, BuildFor.LIBRARY)
    assert (lib.built, lib.state, lib.artifact, lib.text, lib.ok) == (
        BuildFor.LIBRARY, State.NO_COMPILER, None, build.NVCC_MISSING, False)  # fmt: skip
    assert lib.errors() == build.NVCC_MISSING  # what the pipeline shows under "nvcc failed:"
    san = build_part(req, BuildFor.SANITIZER)
    assert (san.built, san.state, san.errors()) == (BuildFor.SANITIZER, State.NO_COMPILER, build.NVCC_MISSING)
    cpu = build_part(req, BuildFor.CPU_LAYER)
    assert (cpu.built, cpu.state, cpu.text) == (BuildFor.CPU_LAYER, State.NO_COMPILER, cudacpu.how_to_get_a_compiler())


@pytest.mark.skipif(cudacpu.find_compiler() is None, reason="no C++ compiler")
def test_the_build_step_builds_the_cpu_layer_s_harness_named_for_the_part(tmp_path):
    req = BuildRequest(CORRECT, "cuda", "glu_cuda_forward", build_dir=tmp_path, timeout_s=300)
    b = build_part(req, BuildFor.CPU_LAYER)
    assert b.ok and b.built == BuildFor.CPU_LAYER, b.text
    assert b.artifact == tmp_path / ("cuda.cpu" + cudacpu.EXE) and os.access(b.artifact, os.X_OK)
    assert b.text.startswith(f"built for the CPU with {b.compiler} ")
    old = cudacpu.build_cpu(CORRECT, entry="glu_cuda_forward", scratch=None, build_dir=tmp_path / "old")
    assert (old.state, old.text, old.harness) == (b.state, b.text, tmp_path / "old" / (cudacpu.HARNESS + cudacpu.EXE))


@pytest.mark.nvcc
@pytest.mark.skipif(build.find_nvcc() is None, reason="nvcc not found")
def test_the_build_step_builds_the_library_and_reports_a_failed_one(tmp_path):
    req = BuildRequest(CORRECT, "cuda", "glu_cuda_forward", cache_dir=tmp_path / "cache", timeout_s=300)
    b = build_part(req, BuildFor.LIBRARY)
    assert b.ok and b.artifact is not None and b.artifact.parent == (tmp_path / "cache").resolve(), b.text
    assert b.compiler == "nvcc" and not b.cached and b.command[0] == "nvcc"
    assert build_part(req, BuildFor.LIBRARY).cached
    broken = tmp_path / "src" / "glu_cuda.cu"
    broken.parent.mkdir()
    shutil.copy(CORRECT, broken)
    broken.write_text(broken.read_text() + "\nthis is not cuda;\n")
    bad = build_part(BuildRequest(broken, "cuda", "glu_cuda_forward", cache_dir=tmp_path / "cache"), BuildFor.LIBRARY)
    assert bad.state == State.FAILED and bad.artifact is None
    assert "glu_cuda.cu(" in bad.errors() and "error" in bad.errors() and str(tmp_path) not in bad.text
    assert bad.text.endswith("nvcc failed with exit status 2"), bad.text
