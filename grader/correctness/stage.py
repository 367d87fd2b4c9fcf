"""Stage 3+4 driver: run every correctness case of a part in the child and check each result in the parent.

Each case: a fresh seeded input, run twice in a worker, its reply checked against the float64 truth
(correctness/verdict.py); a crash or hang costs that case, a fresh worker takes the rest (correctness/tally.py).
The cases run in one or two lanes (correctness/partrun.py), then the part's checks (correctness/partchecks.py).
More: docs/architecture.md, "The correctness stage".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from grader.correctness import patterns
from grader.correctness.partchecks import run_checks
from grader.correctness.partrun import WORKERS_ENV, PartInputs, PartRun
from grader.correctness.tally import Tally
from grader.correctness.target import Target
from grader.problem import hints
from grader.problem.reference import Reference
from grader.problem.spec import Case, Problem
from grader.results import PASSED, Kind, Reason, TestResult


def run_correctness(
    problem: Problem,
    target: Target,
    ref: Reference,
    *,
    device: str,
    secret: int,
    progress: Callable[[str], None] = lambda s: None,
    stop_at_failure: bool = False,
    workers: int | None = None,
) -> list[TestResult]:
    """stop_at_failure (`grade --watch` without --all): after the part's first failing case the rest are not run
    (skipped, Reason.NOT_RUN, extra "stopped"): the student sees the first failure in seconds, not after every case.
    workers: 1 keeps every case in one worker process; None lets `_workers` decide.

    On a CPU a Triton part's cases may run in two workers at once (`_workers`): each takes the next case in order
    from one queue, so each worker's cases are in spec order, and every result, the kernel check's profile of all
    calls and the GPU compile check's launch records are merged in spec order, and the restart limits are counted
    again in spec order: the same results as one worker for a submission whose answers do not depend on what its
    process ran before (one that crashes on its process's third call, say, crashes on other cases)."""
    cases = list(problem.cases)
    runnable = tuple(c for c in cases if device != "cpu" or not c.gpu_only)
    tally = Tally(target.impl)
    tally.skip_gpu_only([c for c in cases if c not in runnable], target.cpu_layer)
    part = PartInputs(
        problem,
        target,
        ref,
        device,
        secret,
        progress,
        stop_at_failure,
        runnable,
        deadline=time.monotonic() + problem.limits.correctness_s,
        workers=workers if workers is not None else _workers(device, target, stop_at_failure),
    )
    run = PartRun(part, tally)
    try:
        run.run_cases()
        if tally.load_error is None:
            run_checks(run)
    finally:
        run.close()
    return _finished(problem, target, cases, tally.results)


def _workers(device: str, target: Target, stop_at_failure: bool) -> int:
    """How many correctness workers the part may use: 2 for a Triton part on a CPU with two cores for it (not
    in a --watch grade, which stops at its first failure), else 1; for such a part WORKERS_ENV forces it."""
    if device != "cpu" or target.impl.kind != "triton" or target.cpu_layer or stop_at_failure:
        return 1
    forced = os.environ.get(WORKERS_ENV, "")
    if forced in ("1", "2"):
        return int(forced)
    return 2 if len(os.sched_getaffinity(0)) >= 2 else 1


def _finished(problem: Problem, target: Target, cases: list[Case], results: list[TestResult]) -> list[TestResult]:
    """The part's results in spec order, with the CPU layer's note and the cross-case hints."""
    if target.cpu_layer:
        from grader.cuda.cudacpu import CPU_NOTE

        for r in results:
            if r.kind == Kind.CORRECTNESS and r.reason != Reason.NEEDS_GPU:
                r.output = f"{r.output}\n({CPU_NOTE})"
                r.extra["cpu_layer"] = True
    order = {c.name: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order.get(r.extra.get("case", ""), len(order)))
    _low_precision_hints(problem, cases, results)
    return results


def _low_precision_hints(problem: Problem, cases: Sequence[Case], results: list[TestResult]) -> None:
    """The cross-case pattern: a 16-bit case with wrong values whose float32 twin (same shape, padding and input
    distribution) passed. Added to the 16-bit case's findings and output."""
    by_case = {r.extra.get("case"): r for r in results if r.kind == Kind.CORRECTNESS}
    fp32 = {(c.shape, c.pad, c.dist): c.name for c in cases if c.dtype == "float32"}
    words = hints.load_file(problem.path.parent / "hints.yaml")
    for c in cases:
        r, twin = by_case.get(c.name), fp32.get((c.shape, c.pad, c.dist))
        if c.dtype == "float32" or r is None or twin is None or r.reason != Reason.WRONG_VALUES:
            continue
        first = r.extra.get("first_wrong")
        if by_case.get(twin) is None or by_case[twin].state != PASSED or not isinstance(first, dict):
            continue
        f = patterns.low_precision(c.name, tuple(first["index"]), first["expected"], first["got"], twin, words)
        r.findings.append(f)
        r.output += "\n  hint: " + f.text
