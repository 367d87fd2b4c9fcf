"""A second problem is data, not grader code (issue 17, item 4): tests/data/problems/scale (y = 2 x, one Triton
part, no timing) is graded end to end on CPU by the same grader: its staff solution gets every point, a wrong
kernel loses them, and PyTorch math is forfeit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.pipeline import Options, grade
from grader.problem.spec import load_problem
from grader.results import FAILED, PASSED, SKIPPED, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "data" / "problems" / "scale" / "spec.yaml"
KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, cols, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // cols
    x = tl.load(x_ptr + row * stride + (offs - row * cols), mask=mask)
    tl.store(y_ptr + offs, (x.to(tl.float32) * FACTOR).to(y_ptr.dtype.element_ty), mask=mask)


def scale_triton(x):
    cols = x.shape[-1]
    x2 = x.reshape(-1, cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        k[(triton.cdiv(y.numel(), 256),)](x2, y, y.numel(), cols, x2.stride(0) if x2.shape[0] > 1 else cols, BLOCK=256)
    return y
'''


@pytest.fixture(scope="module")
def problem():
    return load_problem(SPEC)


def _grade(problem, tmp_path: Path, source: str | None):
    sub = tmp_path / "sub"
    sub.mkdir()
    if source is not None:
        (sub / "scale_triton.py").write_text(source)
    return grade(problem, Options(submission=sub, out=tmp_path / "out", device="cpu", staff=source is None))


def test_the_staff_solution_of_a_second_problem_gets_every_point(problem, tmp_path):
    g = _grade(problem, tmp_path, None)
    corr = [t for t in g.tests if t.kind == Kind.CORRECTNESS]
    assert len(corr) == 6 and all(t.state == PASSED for t in corr), [(t.name, t.output) for t in corr]
    assert g.score == g.max_score == 6
    check = next(t for t in g.tests if t.kind == Kind.KERNEL_CHECK)
    assert check.state == PASSED and not check.findings, check.output
    assert not [t for t in g.tests if t.kind == Kind.PERFORMANCE]  # the spec has no performance section


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_a_wrong_kernel_for_the_second_problem_loses_its_points(problem, tmp_path):
    g = _grade(problem, tmp_path, KERNEL.replace("FACTOR", "3"))
    corr = [t for t in g.tests if t.kind == Kind.CORRECTNESS]
    failed = [t for t in corr if t.state == FAILED]
    assert failed and all(t.reason == Reason.WRONG_VALUES for t in failed), [(t.name, t.reason) for t in failed]
    assert {t.extra["case"] for t in corr if t.state == PASSED} == {"empty/float32"}  # nothing to get wrong there


def test_torch_math_in_the_second_problem_is_forfeit(problem, tmp_path):
    g = _grade(problem, tmp_path, "def scale_triton(x):\n    return x * 2\n")
    check = next(t for t in g.tests if t.kind == Kind.KERNEL_CHECK)
    assert check.reason == Reason.VIOLATION, check.output
    assert g.score == 0


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_the_cli_grades_a_problem_given_by_its_spec_path(tmp_path):
    r = subprocess.run([sys.executable, "-m", "grader", "grade", "--problem", str(SPEC), "--staff", "--device", "cpu",
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["score"] == doc["max_score"] == 6 and doc["extra_data"]["problem"] == "scale"
    assert not any(t["extra_data"]["state"] == SKIPPED for t in doc["tests"])
