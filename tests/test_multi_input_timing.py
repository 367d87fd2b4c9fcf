"""Timing an op with more than one input (GLU backward's x and dy, spec `inputs:`), on CPU, without a worker.

The timing worker makes every input of each set from seeds (grader/child/timing.py, Timer.setup); the parent makes
the same tensors to check the timed outputs (grader/operands.timing_inputs). These tests check that both sides make
the same inputs, that a one-input problem keeps the inputs it always had, that the verification of timed outputs
calls the truth with every input (a right dx passes, a wrong one fails, on samples and on checksums), and that the
traffic counts every input."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.child.inputs import digest, make_input_seeded
from grader.performance import judgement, verification
from grader.problem import inputs, operands
from grader.problem.reference import load_reference
from grader.problem.spec import Case, load_problem

ROOT = Path(__file__).resolve().parent.parent
SECRET = 0x5EC12E7


@pytest.fixture(scope="module")
def backward():
    problem = load_problem(ROOT / "reference" / "glu_backward" / "spec.yaml")
    return problem, load_reference(problem)


def _case(shape=(5, 12), dtype="float32", pad=3) -> Case:
    return Case(name="t", shape=shape, dtype=dtype, pad=pad, dist="normal", seed=42, points=1.0)


def test_the_worker_makes_from_the_seeds_what_the_parent_checks_against(backward):
    problem, _ = backward
    case = _case()
    specs = operands.timing_seeds(problem, case, SECRET, sets=3)
    assert [tuple(d["case"]["shape"]) for d in specs] == [(5, 12), (5, 6)]  # x, then dy with half the columns
    for k in range(3):
        parent = operands.timing_inputs(problem, case, "cpu", SECRET, k)
        worker = [make_input_seeded(SimpleNamespace(**d["case"]), "cpu", d["seeds"][k]) for d in specs]
        assert [tuple(t.shape) for t in parent] == [(5, 12), (5, 6)]
        for p, w in zip(parent, worker, strict=True):
            assert torch.equal(p, w) and p.stride() == w.stride()  # the pad too: row stride 15 and 9
    # dy is drawn from its own seed, not a slice of x, and every set differs from the others.
    x0, dy0 = operands.timing_inputs(problem, case, "cpu", SECRET, 0)
    assert not torch.equal(dy0, x0[..., :6])
    assert not torch.equal(x0, operands.timing_inputs(problem, case, "cpu", SECRET, 1)[0])


def test_a_one_input_problem_keeps_its_timing_inputs(problem):
    case = _case(shape=(4, 8), pad=0)
    specs = operands.timing_seeds(problem, case, SECRET, sets=2)
    assert len(specs) == 1
    for k in range(2):
        (x,) = operands.timing_inputs(problem, case, "cpu", SECRET, k)
        assert torch.equal(x, inputs.make_input(case, "cpu", SECRET, salt=f"perf{k}"))
        assert specs[0]["seeds"][k] == inputs.mix_seed(case.seed, SECRET, f"perf{k}")


def _timed_output(problem, ref, case, k, scale, wrong=False) -> torch.Tensor:
    xs = [torch.mul(t, scale) for t in operands.timing_inputs(problem, case, "cpu", SECRET, k)]
    y = ref.baselines["pytorch"](*xs)
    if wrong:  # da and db swapped: the classic slip of writing the halves in the wrong order
        h = y.shape[-1] // 2
        y = torch.cat([y[..., h:], y[..., :h]], dim=-1)
    return y


@pytest.mark.parametrize("wrong", [False, True])
def test_timed_outputs_of_a_two_input_op_are_checked_against_its_truth(backward, wrong):
    problem, ref = backward
    case = _case()
    n_out = 5 * 12
    idx = torch.arange(n_out)
    checks = [
        (k, scale, idx, _timed_output(problem, ref, case, k, scale, wrong).reshape(-1)[idx])
        for k, scale in ((0, 1.0), (1, -0.5), (2, 4.0))
    ]
    ok, text = verification.verify_samples(problem, case, checks, ref, "cpu", SECRET)
    assert ok is not wrong, text

    weights = inputs.digest_weights(n_out, 7, "cpu")
    sums = [
        (k, scale, float(digest(_timed_output(problem, ref, case, k, scale, wrong), weights)))
        for k, scale in ((0, 1.0), (2, -2.0))
    ]
    ok, text = verification.verify_digests(problem, case, sums, weights, ref, "cpu", SECRET, "sampled", {})
    assert ok is not wrong, text


def test_the_traffic_counts_every_input(backward, problem):
    bwd, _ = backward
    case = _case(shape=(8192, 28672), dtype="bfloat16", pad=0)
    # x (8192 x 28672) and dy (8192 x 14336) read, dx (8192 x 28672) written, 2 bytes each
    assert judgement.bytes_moved(bwd, case) == 2 * 8192 * (28672 + 14336 + 28672)
    # GLU: x read, y (half as wide) written
    assert judgement.bytes_moved(problem, case) == 2 * 8192 * (28672 + 14336)
