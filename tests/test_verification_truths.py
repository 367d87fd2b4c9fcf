"""Timing verification computes the parent's float64 truth once per (set, scale) of a case, shared by every
timed function's sampled checks (issue 32 item 5), and the verdicts are what they were."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from grader.performance import verification
from grader.problem import operands
from grader.problem.reference import load_reference
from grader.problem.spec import Case, load_problem

ROOT = Path(__file__).resolve().parent.parent
SECRET = 0x5EC12E7


def test_one_truth_per_set_and_scale_for_all_functions():
    problem = load_problem(ROOT / "reference" / "glu_backward" / "spec.yaml")
    ref = load_reference(problem)
    case = Case(name="t", shape=(5, 12), dtype="float32", pad=3, dist="normal", seed=42, points=1.0)
    idx = torch.arange(5 * 12)
    pairs = ((0, 1.0), (1, -0.5), (0, 1.0), (1, -0.5))

    def out(k: int, scale: float) -> torch.Tensor:
        xs = [torch.mul(t, scale) for t in operands.timing_inputs(problem, case, "cpu", SECRET, k)]
        return ref.baselines["pytorch"](*xs).reshape(-1)[idx]

    checks = {n: [(k, s, idx, out(k, s)) for k, s in pairs] for n in ("eager", "triton", "cuda")}
    calls = []
    real = ref.truth

    def counting(*xs):
        calls.append(1)
        return real(*xs)

    ref = SimpleNamespace(truth=counting, baselines=ref.baselines)
    data = SimpleNamespace(event={n: [] for n in checks}, checks=checks, digests={n: [] for n in checks})
    verified = verification.verify_case(problem, case, data, ref, "cpu", SECRET, 5 * 12, 7)
    assert all(v[0] for v in verified.values()), verified
    assert len(calls) == 2  # two distinct (set, scale) pairs; 12 checks over 3 functions computed it 12 times before
