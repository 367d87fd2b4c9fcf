"""A part's checks after its correctness cases: the kernel check (one passed case's call profiled, what ran
classified: grader/correctness/kernelcheck.py) and, on a CPU, a Triton part's GPU compile check of its recorded
launches (grader/correctness/gpucompile.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from grader.child.wire import case_request
from grader.correctness import gpucompile, kernelcheck
from grader.correctness.partrun import COMPILE_STOPPED, PartRun
from grader.correctness.target import Target
from grader.correctness.verdict import numel
from grader.problem import inputs, operands
from grader.problem.spec import Case, Problem
from grader.results import FAILED, PASSED, SKIPPED, VIOLATION, Code, Finding, Kind, Reason, TestResult
from grader.sandbox import Sandbox, WorkerFailure


def run_checks(run: PartRun) -> None:
    """The part's checks after its cases: the kernel check, and on a CPU the Triton part's GPU compile check."""
    p, tally = run.part, run.tally
    passed = tally.passed()
    restart_error = ""
    # The profiled call runs in the worker that ran its case, as with one worker: a submission whose answer
    # depends on what its process saw before (how often this input came) answers as it would there.
    profiled = _profiled_case(p.runnable, passed)
    lane = run.ran_in.get(profiled.name, run.lanes[0]) if profiled is not None else run.lanes[0]
    for other in run.lanes:
        if other is not lane:
            other.close(p.grace_s)  # its records are collected; the checks use one worker
    if lane.box is None or not lane.box.alive:  # the last case took its worker down: profile in a fresh one
        try:
            lane.box = run.start(lane)
        except WorkerFailure as e:
            lane.box, restart_error = None, e.line
    seen = [f for c in p.runnable for f in tally.violations.get(c.name, [])]  # in spec order
    tally.results.append(
        _kernel_check(p.problem, p.target, lane.box, p.runnable, p.secret, p.deadline, passed, seen, restart_error)
    )
    if p.records_launches:
        tally.results.append(_compile_check(run, lane.box))


def _compile_check(run: PartRun, box: Sandbox | None) -> TestResult:
    """The GPU compile check of the launches recorded (on a CPU, a Triton part)."""
    p = run.part
    impl = p.target.impl
    compile_box, run.compile_box = run.compile_box, None
    if p.stop_at_failure and any(r.extra.get("stopped") for r in run.tally.results):
        if compile_box is not None:
            compile_box.close(grace_s=0)
        return _compile_row(impl.name, SKIPPED, COMPILE_STOPPED, Reason.NOT_RUN)
    try:
        if box is None or not box.alive:
            raise WorkerFailure("the correctness worker is gone, so its launch records are too")
        launches = box.request(
            "launch_records",
            "take" if p.workers > 1 else None,
            timeout_s=max(1.0, p.deadline - time.monotonic()),
            what="the launch records",
        )
    except WorkerFailure as e:
        if compile_box is not None:
            compile_box.close(grace_s=0)
        return _compile_row(impl.name, SKIPPED, f"could not check: {e.line}")
    if p.workers > 1 and isinstance(launches, list):
        launches = run.tally.merged_records(p.runnable, launches)
    budget = max(30.0, min(p.problem.limits.case_s, p.deadline - time.monotonic()))
    return gpucompile.check_part(
        p.target.payload(p.problem), impl.name, p.target.display, launches, budget, box=compile_box
    )


def _compile_row(part: str, state: str, output: str, reason: Reason = Reason.OK) -> TestResult:
    return TestResult(
        f"{part} / GPU compile check", part, "checks", 0.0, 0.0, state, output, kind=Kind.COMPILE_CHECK, reason=reason
    )


def _unique(fs: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(fs))


def _kernel_check(
    problem: Problem,
    target: Target,
    box: Sandbox | None,
    runnable: Sequence[Case],
    secret: int,
    deadline: float,
    passed: set[str],
    case_violations: Sequence[Finding] = (),
    restart_error: str = "",
) -> TestResult:
    """Profile one call on a case the part passed, and classify what ran (grader/correctness/kernelcheck.py).

    A passed case is used (the largest strided one, else the largest passed one), so the profiled call is one the
    submission answered right. The check fails closed: if that call raises, hangs, crashes the worker or answers
    with a malformed reply, the part is forfeit, as when PyTorch did the work: an honest kernel that passed a case
    runs it again without trouble."""
    impl = target.impl
    name = f"{impl.name} / kernel check"
    seen = _unique(list(case_violations))

    def result(state: str, text: str, findings: list[Finding], **extra: object) -> TestResult:
        violations = [f for f in findings if f.severity == VIOLATION]
        return TestResult(
            name,
            impl.name,
            "checks",
            0.0,
            0.0,
            state,
            text,
            {
                "forfeit": bool(violations),
                "violations": [f.text for f in violations],
                "warnings": [f.text for f in findings if f.severity != VIOLATION],
                **extra,
            },
            kind=Kind.KERNEL_CHECK,
            reason=Reason.VIOLATION if violations else Reason.OK,
            findings=findings,
        )

    case = _profiled_case(runnable, passed)
    if case is None:
        # Say which: a case with no elements can pass with no kernel at all, so it is no call to profile either.
        empty = [c.name for c in runnable if c.name in passed]
        text = (
            f"only cases with no elements passed ({', '.join(empty[:4])}{', ...' if len(empty) > 4 else ''}), so "
            "there is no call with work in it to profile (nothing to forfeit)"
            if empty
            else "no case passed, so there is no call to profile (nothing to forfeit)"
        )
        if seen:
            text = "\n".join("VIOLATION: " + v.text for v in seen) + "\n" + text
        return result(FAILED if seen else SKIPPED, text, seen)

    def closed(why: str) -> TestResult:
        f = Finding(Code.CHECK_FAILED_CLOSED, why, VIOLATION)
        return result(
            FAILED,
            f"VIOLATION: {why}\nthe kernel check fails closed: a call the part had answered right must "
            f"run again under the profiler (profiled {case.name})",
            [f, *seen],
        )

    if box is None:
        return closed(f"the worker could not be started again for it: {restart_error}")
    try:
        x = inputs.make_input(case, "cpu", secret)
        base = x._base if x._base is not None else x
        r = box.request(
            "kernels",
            case_request(
                base.contiguous(),
                case.shape[-1],
                operands.extra_payload(operands.extra_inputs(problem, case, "cpu", secret)).get("extra"),
            ),
            timeout_s=max(1.0, deadline - time.monotonic()),
            what="the kernel check",
        )
    except WorkerFailure as e:
        return closed(f"the profiled call failed: {e.line}")
    names = ("ops", "kernels", "jit_names")
    if not (
        isinstance(r, dict)
        and all(isinstance(r.get(k), list) and all(isinstance(v, str) for v in r[k]) for k in names)
        and (r.get("triton_launches") is None or type(r.get("triton_launches")) is int)
        and all(isinstance(v, str) for v in r.get("runtime", []))
    ):
        return closed("the worker sent a malformed reply (was the result pipe tampered with?)")
    rep = kernelcheck.classify(
        impl.kind,
        r["ops"],
        r["kernels"],
        r["jit_names"],
        r.get("triton_launches"),
        runtime=list(r.get("runtime", [])),
        device_profiled=box.device == "cuda",
    )
    if "raised" in r:
        raised = r["raised"]
        line = raised[0] if isinstance(raised, list) and raised and isinstance(raised[0], str) else "an error"
        rep.violation(Code.CHECK_FAILED_CLOSED, f"the profiled call raised: {line}")
    rep.violations += seen[:5]  # every correctness call was profiled too
    return result(
        PASSED if rep.ok else FAILED,
        rep.text() + f"\n(profiled one call on {case.name})",
        [*rep.violations, *rep.warnings],
        kernels=rep.kernels,
        launches=len(rep.kernels),
    )


def _profiled_case(runnable: Sequence[Case], passed: set[str]) -> Case | None:
    """The case whose call the kernel check profiles: the largest strided passed case, else the largest passed one
    (None when only cases with no elements passed)."""
    ok = [c for c in runnable if c.name in passed and 0 not in c.shape]
    pick = [c for c in ok if c.pad and c.dist == "normal"] or ok
    return max(pick, key=lambda c: numel(c.shape)) if pick else None
