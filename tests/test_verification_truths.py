"""Timing verification computes the parent's float64 truth once per (set, scale) of a case, shared by every
timed function's sampled checks and by the checksums of every timed call (issue 32), one pair at a time: keeping
every pair's truth held ~36 GiB of the GPU on GLU's largest case. The verdicts are what they were."""

from __future__ import annotations

import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.child.timing import digest
from grader.performance import verification
from grader.problem import inputs, operands
from grader.problem.reference import load_reference
from grader.problem.spec import Case, load_problem

ROOT = Path(__file__).resolve().parent.parent
SECRET = 0x5EC12E7
SHAPE = (5, 12)
N_OUT = 5 * 12  # glu_backward: dx has x's shape
DIGEST_SEED = 7


@pytest.fixture(scope="module")
def backward():
    problem = load_problem(ROOT / "reference" / "glu_backward" / "spec.yaml")
    return problem, load_reference(problem)


def _case() -> Case:
    return Case(name="t", shape=SHAPE, dtype="float32", pad=3, dist="normal", seed=42, points=1.0)


def _out(problem, ref, case, k: int, scale: float, wrong: bool = False) -> torch.Tensor:
    xs = [torch.mul(t, scale) for t in operands.timing_inputs(problem, case, "cpu", SECRET, k)]
    y = ref.baselines["pytorch"](*xs).reshape(-1)
    return y.flip(0) if wrong else y


class _Counting:
    """ref.truth that counts its calls and the most of its outputs alive at once."""

    def __init__(self, real) -> None:
        self.real, self.calls, self.alive, self.most = real, 0, 0, 0

    def __call__(self, *xs):
        y = self.real(*xs)
        self.calls += 1
        self.alive += 1
        self.most = max(self.most, self.alive)
        weakref.finalize(y, self._freed)
        return y

    def _freed(self) -> None:
        self.alive -= 1


def _data(problem, ref, case, fns, check_pairs, digest_pairs, wrong=()):
    idx = torch.arange(N_OUT)
    weights = inputs.digest_weights(N_OUT, DIGEST_SEED, "cpu")
    checks = {n: [(k, s, idx, _out(problem, ref, case, k, s, n in wrong)) for k, s in check_pairs] for n in fns}
    digests = {
        n: [
            (k, s, float(digest(_out(problem, ref, case, k, s, n in wrong).reshape(SHAPE), weights)))
            for k, s in digest_pairs
        ]
        for n in fns
    }
    return SimpleNamespace(event={n: [] for n in fns}, checks=checks, digests=digests)


def test_one_truth_per_set_and_scale_for_all_functions_and_checksums(backward):
    problem, real = backward
    case = _case()
    # The checks use two pairs; the checksums (every timed call) those two and two more.
    data = _data(
        problem,
        real,
        case,
        ("eager", "triton", "cuda"),
        ((0, 1.0), (1, -0.5), (0, 1.0), (1, -0.5)),
        ((0, 1.0), (1, -0.5), (2, 4.0), (0, 0.25), (2, 4.0)),
    )
    counting = _Counting(real.truth)
    ref = SimpleNamespace(truth=counting, baselines=real.baselines)
    verified = verification.verify_case(problem, case, data, ref, "cpu", SECRET, N_OUT, DIGEST_SEED)
    assert all(v[0] for v in verified.values()), verified
    assert all(
        v[1].startswith("4 timed outputs checked") and "5 timed outputs checksummed" in v[1] for v in verified.values()
    )
    # Four distinct (set, scale) pairs: four truths, each used by every function's checks and its checksum (before:
    # one per check, and again per checksum pair), and never two alive at once.
    assert counting.calls == 4
    assert counting.most == 1


def test_a_wrong_function_fails_and_the_right_ones_pass_in_the_same_pass(backward):
    problem, real = backward
    case = _case()
    data = _data(problem, real, case, ("eager", "bad"), ((0, 1.0), (1, -2.0)), ((0, 1.0), (1, -2.0)), wrong=("bad",))
    verified = verification.verify_case(problem, case, data, real, "cpu", SECRET, N_OUT, DIGEST_SEED)
    assert verified["eager"][0] and not verified["bad"][0], verified


def test_a_workers_error_in_place_of_an_output_is_the_verdict(backward):
    problem, real = backward
    case = _case()
    data = _data(problem, real, case, ("eager", "bad"), ((0, 1.0), (1, -2.0)), ((0, 1.0),))
    k, s, idx, _ = data.checks["bad"][1]
    data.checks["bad"][1] = (k, s, idx, "the worker lost the output")
    verified = verification.verify_case(problem, case, data, real, "cpu", SECRET, N_OUT, DIGEST_SEED)
    assert verified["bad"] == (False, "the worker lost the output") and verified["eager"][0]


def test_only_the_checksum_catches_a_call_whose_values_came_later(backward):
    problem, real = backward
    case = _case()
    data = _data(problem, real, case, ("late",), ((0, 1.0),), ((0, 1.0), (1, 2.0)))
    data.digests["late"][1] = (1, 2.0, 0.0)  # its output held nothing when the call returned
    verified = verification.verify_case(problem, case, data, real, "cpu", SECRET, N_OUT, DIGEST_SEED)
    assert not verified["late"][0] and "checksum" in verified["late"][1]
