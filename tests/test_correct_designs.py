"""Correct submissions of other designs (tests/data/problems/glu/correct/<name>/) earn every correctness point the
machine allows.

The grader is only fair if it grades the function, not the shape of the staff kernel: a 2-D grid, 2-D tiles, a
persistent loop, autotune, exp2 or a where-based stable sigmoid, a wrapper that reshapes or views differently,
CUDA with a 2-D grid or 2-element vectors. Each must pass every correctness case and the kernel check, and draw
no static warning. The Triton designs run on CPU (the interpreter); the CUDA ones are built on CPU (nvcc) and run
there by the CUDA-on-CPU layer (grader/cuda/cudacpu.py), and graded on a GPU (marked `gpu`), where the Triton ones are
graded again with the GPU-only cases and the device kernel check.
On CPU they must also pass the GPU compile check: the interpreter accepts code that Triton's compiler does not.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from grader.cuda.build import find_nvcc
from grader.pipeline import Options, grade
from grader.results import PASSED, SKIPPED

CORRECT = Path(__file__).resolve().parent / "data" / "problems" / "glu" / "correct"
TRITON_DESIGNS = sorted(p.name for p in CORRECT.iterdir() if (p / "glu_triton.py").is_file())
CUDA_DESIGNS = sorted(p.name for p in CORRECT.iterdir() if (p / "glu_cuda.cu").is_file())


def test_the_design_suite_is_there():
    # A glob that silently finds nothing would make every test below vacuous.
    assert len(TRITON_DESIGNS) >= 5 and len(CUDA_DESIGNS) >= 2, (TRITON_DESIGNS, CUDA_DESIGNS)


def _rows(g, part: str) -> dict[str, object]:
    return {t.name: t for t in g.tests if t.part == part}


def _assert_full_marks(g, problem, part: str, device: str) -> None:
    rows = _rows(g, part)
    static = rows[f"{part} / static warnings"]
    assert static.output == "no static warnings", static.output
    corr = {t.extra["case"]: t for t in g.tests if t.part == part and t.stage == "correctness"}
    assert set(corr) == {c.name for c in problem.cases}
    for c in problem.cases:
        t = corr[c.name]
        if c.gpu_only and device == "cpu":
            assert t.state == SKIPPED, f"{t.name}: {t.output}"
        else:
            assert t.state == PASSED and t.score == t.max_score == c.points, f"{t.name} [{t.state}]:\n{t.output}"
    check = rows[f"{part} / kernel check"]
    assert check.state == PASSED, check.output
    assert "warning" not in check.output, check.output  # the input is read in place: no copy kernels
    assert not [n for n in g.notes if "forfeit" in n], g.notes
    if device == "cpu" and part == "triton":  # what the interpreter ran also compiles for a GPU (grader/correctness/gpucompile.py)
        compiled = rows[f"{part} / GPU compile check"]
        assert compiled.state == PASSED and compiled.extra["compiled"] >= 3, compiled.output  # one per dtype at least


@pytest.mark.slow  # a CPU grade per design, 7-11 s each on 2 cores (the fast tier grades the staff kernel)
@pytest.mark.parametrize("name", TRITON_DESIGNS)
def test_a_correct_triton_design_earns_every_cpu_point(name, problem, grade_dir):
    g = grade_dir(CORRECT / name)
    _assert_full_marks(g, problem, "triton", "cpu")


@pytest.mark.slow  # an nvcc build and a sanitized CPU build and run per design, ~20 s each on 2 cores
@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (CUDA toolkit not installed)")
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no C++ compiler")
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path; the GPU test below grades these fully")
@pytest.mark.parametrize("name", CUDA_DESIGNS)
def test_a_correct_cuda_design_earns_every_cpu_point_through_the_cpu_layer(name, problem, grade_dir):
    g = grade_dir(CORRECT / name, only=("cuda",))
    rows = _rows(g, "cuda")
    assert rows["cuda / build"].state == PASSED, rows["cuda / build"].output
    assert rows["cuda / static warnings"].output == "no static warnings", rows["cuda / static warnings"].output
    report = rows["cuda / compiler report"]  # without a GPU, what nvcc says is what the student gets for speed
    assert report.state == PASSED and report.extra["kernels"], report.output
    assert rows["cuda / CPU build"].state == PASSED, rows["cuda / CPU build"].output
    corr = [t for t in g.tests if t.part == "cuda" and t.stage == "correctness"]
    gpu_only = {c.name for c in problem.cases if c.gpu_only}
    assert corr and all(
        (t.state == SKIPPED) == (t.extra["case"] in gpu_only) and t.score == (0 if t.state == SKIPPED else t.max_score)
        for t in corr
    ), [(t.name, t.state, t.output) for t in corr]


@pytest.mark.gpu
@pytest.mark.parametrize("name", TRITON_DESIGNS + CUDA_DESIGNS)
def test_gpu_a_correct_design_earns_every_correctness_point(name, problem, tmp_path):
    part = "cuda" if name in CUDA_DESIGNS else "triton"
    g = grade(problem, Options(submission=CORRECT / name, out=tmp_path, only=(part,), device="cuda", perf=False))
    _assert_full_marks(g, problem, part, "cuda")
