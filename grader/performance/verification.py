"""Verification of timed outputs: sampled elements, and every timed call's checksum, against the parent's truth.

After the rounds (so the parent's own GPU work never overlaps a timed call), each function's sampled timed
outputs are checked against the parent's float64 truth for that exact (set, scale) input, then every timed call's
checksum, taken by the worker right after the call (`verify_case`). The truth of a (set, scale) is computed once
for all of its uses and dropped before the next one's: the parent's GPU memory stays at one pair's truth.
"""

from __future__ import annotations

import torch

from grader.correctness import check
from grader.performance.rounds import Rounds
from grader.problem import inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Problem

UNCHECKED = (False, "no timed output was checked")  # a function with no sampled output to check


Pair = tuple[int, float]  # (input set, scale): what a timed call's input was


def _truth(
    problem: Problem,
    case: Case,
    ref: Reference,
    device: str,
    secret: int,
    pair: Pair,
    xs: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(flat float64 truth, flat tolerance-baseline output or None) for one (set, scale): both are pure
    functions of the input, so one computation serves every function's checks and the checksum. `xs`: the set's
    inputs where the caller has them already."""
    k, scale = pair
    if xs is None:
        xs = operands.timing_inputs(problem, case, device, secret, k)
    scaled = [torch.mul(t, scale) for t in xs]
    base = problem.tolerance_baseline
    eager = ref.baselines[base](*scaled).reshape(-1) if base in ref.baselines else None
    return ref.truth(*scaled).reshape(-1), eager


def _expected_digest(truth: torch.Tensor, weights: torch.Tensor) -> tuple[float, float]:
    """The truth's weighted checksum and its natural scale (see DIGEST_TOL)."""
    tw = truth.to(torch.float64) * weights
    finite = torch.isfinite(tw)
    return float(tw[finite].sum()), float(tw[finite].norm()) or 1.0


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
    """Check every function's sampled timed outputs against the truth, then every timed call's checksum.

    One pass over the (set, scale) pairs the calls used: each pair's truth is computed once, serves every
    function's sampled checks and the pair's checksum, and is dropped before the next pair's. Keeping every
    pair's full truth instead (a float64 output and the baseline's, 1.5 GiB a pair on GLU's 16384 x 16384 float32
    case, up to 3 sets x 8 scales) held ~36 GiB of the GPU at once: beside other grades' workers on one GPU
    (`batch --per-gpu 3` on an 80 GB H100) that ran out of memory."""
    checks = {n: data.checks[n] for n in data.event if data.checks.get(n)}
    weights = inputs.digest_weights(n_out, digest_seed, device) if any(data.digests.values()) else None
    digests = {n: data.digests.get(n, []) for n in checks} if weights is not None else {}
    sampled = _sample_verdicts(problem, case, checks, ref, device, secret, weights, digests)
    verified: dict[str, tuple[bool, str]] = {}
    for n, found in sampled.items():
        verified[n], expect = found
        if verified[n][0] and weights is not None:
            verified[n] = _judge_digests(case, digests[n], expect, verified[n][1])
    return verified


def _sample_verdicts(
    problem: Problem,
    case: Case,
    checks: dict[str, list[tuple[int, float, torch.Tensor, torch.Tensor | str]]],
    ref: Reference,
    device: str,
    secret: int,
    weights: torch.Tensor | None = None,
    digests: dict[str, list[tuple[int, float, float]]] | None = None,
) -> dict[str, tuple[tuple[bool, str], dict[Pair, tuple[float, float]]]]:
    """Per function: its first failing sampled check in call order (or its pass text), and the truth's checksum
    for every pair its calls used (where `weights` is given). Pair-major: one truth alive at a time."""
    dtype = inputs.TORCH_DTYPES[case.dtype]
    uses: dict[Pair, list[tuple[str, int]]] = {}
    for n, cs in checks.items():
        for i, (k, scale, _, got) in enumerate(cs):
            if not isinstance(got, str):  # the worker's own error: failed without a truth
                uses.setdefault((k, scale), []).append((n, i))
    summed: set[Pair] = set()
    if weights is not None:
        summed = {(k, scale) for sums in (digests or {}).values() for k, scale, _ in sums}
    verdicts: dict[tuple[str, int], tuple[bool, str]] = {}
    expect: dict[Pair, tuple[float, float]] = {}
    set_inputs: tuple[int, list[torch.Tensor]] | None = None  # one set's inputs at a time, made once
    for pair in sorted(uses.keys() | summed):  # by set, then scale
        if set_inputs is None or set_inputs[0] != pair[0]:
            set_inputs = None  # the last set's inputs go before the next set's are made
            set_inputs = (pair[0], operands.timing_inputs(problem, case, device, secret, pair[0]))
        truth, eager = _truth(problem, case, ref, device, secret, pair, set_inputs[1])
        for n, i in uses.get(pair, []):
            _, _, idx, got = checks[n][i]
            assert not isinstance(got, str)
            at = idx.to(device)
            v = check.check_output(
                got.to(device),
                truth[at],
                tol=problem.tolerances[case.dtype],
                dtype=dtype,
                eager_out=eager[at] if eager is not None else None,
            )
            verdicts[(n, i)] = (
                (True, "") if v.ok else (False, v.summary + ("; " + v.details[1] if len(v.details) > 1 else ""))
            )
        if weights is not None and pair in summed:
            expect[pair] = _expected_digest(truth, weights)
        del truth, eager  # before the next pair's: the point of going pair by pair
    out: dict[str, tuple[tuple[bool, str], dict[Pair, tuple[float, float]]]] = {}
    for n, cs in checks.items():
        found = (True, f"{len(cs)} timed outputs checked ({sum(int(c[2].numel()) for c in cs)} elements)")
        for i, (_, _, _, got) in enumerate(cs):
            verdict = (False, got) if isinstance(got, str) else verdicts[(n, i)]
            if not verdict[0]:
                found = verdict
                break
        out[n] = (found, expect)
    return out


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
    expect: dict[Pair, tuple[float, float]],
) -> tuple[bool, str]:
    """Every timed call's checksum against the truth's for that call's exact input (`expect` caches the truth's
    checksum per (set, scale) and is filled here where it lacks one)."""
    for pair in dict.fromkeys((k, scale) for k, scale, _ in sums):
        if pair not in expect:
            truth, _ = _truth(problem, case, ref, device, secret, pair)
            expect[pair] = _expected_digest(truth, weights)
            del truth
    return _judge_digests(case, sums, expect, ok_text)


def _judge_digests(
    case: Case, sums: list[tuple[int, float, float]], expect: dict[Pair, tuple[float, float]], ok_text: str
) -> tuple[bool, str]:
    """Every timed call's checksum, taken by the worker right after the call, against the parent's truth for
    that call's exact input. A kernel that only spins, with the answers produced later (when the samples are
    asked for), fails here: what its output held when the call ended was not the answer."""
    tol = DIGEST_TOL.get(case.dtype, 2e-2)
    worst = 0.0
    for k, scale, got in sums:
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
) -> tuple[bool, str]:
    """Check one function's sampled timed outputs against the parent's own truth for that exact (set, scale)
    input: the first that fails, in call order, or how many passed."""
    if not checks:
        return True, "0 timed outputs checked (0 elements)"
    return _sample_verdicts(problem, case, {"f": checks}, ref, device, secret)["f"][0]
