"""The staff Triton kernel's two paths, each on every correctness case the CPU can run.

The grader's own staff grade (test_correctness.py) sends small shapes down the generic kernel only: the
shape-specialized kernel is for tensors of >= SPECIALIZE_MIN outputs, too big for the interpreter. Here the
threshold is lowered so that the specialized kernel meets the same odd widths, padded rows, 3-D inputs,
saturating gates and inf/NaN that every submission is graded on, against the float64 truth and the spec's
tolerances.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from grader.correctness.check import check_output
from grader.problem.inputs import make_input
from grader.problem.reference import load_reference
from grader.problem.spec import load_problem

SPEC = Path(__file__).resolve().parent.parent / "reference" / "glu" / "spec.yaml"
PROBLEM = load_problem(SPEC)
CPU_CASES = [c for c in PROBLEM.cases if not c.gpu_only]


@pytest.fixture(scope="module")
def staff_triton():
    spec = importlib.util.spec_from_file_location("_staff_triton_under_test", PROBLEM.implementations["triton"].staff)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ref():
    return load_reference(PROBLEM)


@pytest.mark.parametrize("path", ["fixed", "generic"])
@pytest.mark.parametrize("case", CPU_CASES, ids=[c.name for c in CPU_CASES])
def test_staff_triton_path_is_correct(staff_triton, ref, case, path, monkeypatch):
    monkeypatch.setattr(staff_triton, "SPECIALIZE_MIN", 0 if path == "fixed" else 2**62)
    calls = []
    for name in ("glu_kernel", "glu_kernel_fixed"):  # record which kernel ran, so the test cannot pass vacuously
        kernel = getattr(staff_triton, name)
        monkeypatch.setattr(staff_triton, name, _Spy(kernel, name, calls))
    x = make_input(case, "cpu")
    out = staff_triton.glu_triton(x)
    truth = ref.truth(x)
    dtype = x.dtype
    eager = ref.baselines["eager"](x) if dtype != torch.float32 else None
    verdict = check_output(out, truth, tol=PROBLEM.tolerances[case.dtype], dtype=dtype, eager_out=eager)
    assert verdict.ok, verdict.text()
    if out.numel():
        assert calls == ["glu_kernel_fixed" if path == "fixed" else "glu_kernel"]


class _Spy:
    """Stands in for a @triton.jit kernel: `kernel[grid](...)` records the name, then launches the real one."""

    def __init__(self, kernel, name: str, calls: list[str]):
        self.kernel, self.name, self.calls = kernel, name, calls

    def __getitem__(self, grid):
        self.calls.append(self.name)
        return self.kernel[grid]
