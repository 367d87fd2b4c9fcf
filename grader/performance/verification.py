"""Verification of timed outputs: sampled elements, and every timed call's checksum, against the parent's truth.

After the rounds (so the parent's own GPU work never overlaps a timed call), each function's sampled timed
outputs are checked against the parent's float64 truth for that exact (set, scale) input (`verify_samples`), then every
timed call's checksum, taken by the worker right after the call (`verify_digests`).
"""

from __future__ import annotations

import torch

from grader.correctness import check
from grader.performance.rounds import Rounds
from grader.problem import inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Problem

UNCHECKED = (False, "no timed output was checked")  # a function with no sampled output to check


class Truths:
    """The parent's float64 truth (and the tolerance baseline's output) per (set, scale) of one case, computed once
    and shared by every function's checks: both are pure functions of the input
    (issue 32: ~100 truths a case -> at most one per (set, scale))."""

    def __init__(self, problem: Problem, case: Case, ref: Reference, device: str, secret: int) -> None:
        self.problem, self.case, self.ref, self.device, self.secret = problem, case, ref, device, secret
        self._inputs: dict[int, list[torch.Tensor]] = {}
        self._out: dict[tuple[int, float], tuple[torch.Tensor, torch.Tensor | None]] = {}

    def get(self, k: int, scale: float) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(flat truth, flat tolerance-baseline output or None) for set k at this scale."""
        if (k, scale) not in self._out:
            if k not in self._inputs:
                self._inputs[k] = operands.timing_inputs(self.problem, self.case, self.device, self.secret, k)
            xs = [torch.mul(t, scale) for t in self._inputs[k]]
            base = self.problem.tolerance_baseline
            eager = self.ref.baselines[base](*xs).reshape(-1) if base in self.ref.baselines else None
            self._out[(k, scale)] = (self.ref.truth(*xs).reshape(-1), eager)
        return self._out[(k, scale)]


def verify_case(
    problem: Problem,
    case: Case,
    data: Rounds,
    ref: Reference,
    device: str,
    secret: int,
    n_out: int,
    digest_seed: int,
) -> dict[str, tuple[bool, str]]:
    """Check every function's sampled timed outputs against the truth, then every timed call's checksum."""
    truths = Truths(problem, case, ref, device, secret)
    verified = {
        n: verify_samples(problem, case, data.checks[n], ref, device, secret, truths)
        for n in data.event
        if data.checks[n]
    }
    weights = inputs.digest_weights(n_out, digest_seed, device) if any(data.digests.values()) else None
    expect: dict[tuple[int, float], tuple[float, float]] = {}  # the truth's checksum per (set, scale), shared
    for n in data.event:
        if verified.get(n, (False,))[0] and weights is not None:
            verified[n] = verify_digests(
                problem, case, data.digests[n], weights, ref, device, secret, verified[n][1], expect
            )
    return verified


# How far a timed output's checksum may be from the truth's, as a share of the checksum's natural scale
# sqrt(sum((truth * w)^2)): rounding to the dtype moves it by about the dtype's relative precision (float32 2^-24,
# float16 2^-11, bfloat16 2^-8) times that scale; an output that is wrong in 1% of its elements moves it by ~0.1.
DIGEST_TOL = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}


def verify_digests(
    problem: Problem,
    case: Case,
    sums: list[tuple[int, float, float]],
    weights: torch.Tensor,
    ref: Reference,
    device: str,
    secret: int,
    ok_text: str,
    expect: dict[tuple[int, float], tuple[float, float]],
) -> tuple[bool, str]:
    """Every timed call's checksum, taken by the worker right after the call, against the parent's truth for
    that call's exact input. A kernel that only spins, with the answers produced later (when the samples are
    asked for), fails here: what its output held when the call ended was not the answer."""
    tol = DIGEST_TOL.get(case.dtype, 2e-2)
    worst = 0.0
    for k, scale, got in sums:
        if (k, scale) not in expect:
            xs = [torch.mul(t, scale) for t in operands.timing_inputs(problem, case, device, secret, k)]
            tw = ref.truth(*xs).reshape(-1).to(torch.float64) * weights
            finite = torch.isfinite(tw)
            expect[(k, scale)] = (float(tw[finite].sum()), float(tw[finite].norm()) or 1.0)
            del xs, tw, finite
        want, norm = expect[(k, scale)]
        off = abs(got - want) / norm if got == got else float("inf")
        worst = max(worst, off)
        if off > tol:
            return False, (
                f"a timed call's output, checked right after the call, was not the answer (its weighted "
                f"checksum is off by {off:.3g} of its scale, allowed {tol:g}): the values were not there "
                f"when the call returned"
            )
    return (
        True,
        f"{ok_text}; {len(sums)} timed outputs checksummed right after their call (worst {worst:.2g} of {tol:g})",
    )


def verify_samples(
    problem: Problem,
    case: Case,
    checks: list[tuple[int, float, torch.Tensor, torch.Tensor | str]],
    ref: Reference,
    device: str,
    secret: int,
    truths: Truths | None = None,
) -> tuple[bool, str]:
    """Check sampled timed outputs against the parent's own truth for that exact (set, scale) input."""
    dtype = inputs.TORCH_DTYPES[case.dtype]
    truths = truths or Truths(problem, case, ref, device, secret)
    for k, scale, idx, got in checks:
        if isinstance(got, str):
            return False, got
        full, full_eager = truths.get(k, scale)
        at = idx.to(device)
        truth = full[at]
        eager = full_eager[at] if full_eager is not None else None
        v = check.check_output(got.to(device), truth, tol=problem.tolerances[case.dtype], dtype=dtype, eager_out=eager)
        if not v.ok:
            return False, v.summary + ("; " + v.details[1] if len(v.details) > 1 else "")
    return True, f"{len(checks)} timed outputs checked ({sum(int(c[2].numel()) for c in checks)} elements)"
