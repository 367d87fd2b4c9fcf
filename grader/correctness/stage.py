"""Stage 3+4 driver: run every correctness case in the child and check each result in the parent.

For each case: fresh seeded input (parent) -> child runs it twice (poisoned allocator) -> parent checks output
tensor metadata, values against the float64 truth, determinism (run 1 == run 2) and that the input is unchanged.
A crash or hang in one case costs that case; the worker is restarted for the rest (up to MAX_RESTARTS).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.correctness import check, gpucompile, kernelcheck, patterns
from grader.problem import hints, inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Implementation, Problem
from grader.results import FAILED, PASSED, SKIPPED, VIOLATION, Code, Finding, Kind, Reason, TestResult
from grader.sandbox import ERROR_CATEGORIES, Sandbox, WorkerFailure

MAX_RESTARTS = 3
# A CUDA fault (an illegal or misaligned address) is one case's bug, cleanly reported, that poisons only its process:
# a fresh worker (~3 s on the H200) runs the next case. More of those are allowed than crashes, so that a kernel
# faulting on every misaligned shape still gets its other cases run, as on the CPU layer (same verdicts, issue 18).
MAX_FAULT_RESTARTS = 8
MAX_HANGS = 2  # cases that may hang (each costs its own limit) before the rest of the part is given up
CASE_FLOOR_S = 20.0  # a case's limit once others passed: this much (a worker's restart, a JIT) plus ...
CASE_FACTOR = 20.0  # ... this many times the slowest passed case so far


def _case_limit(limit_s: float, passed_s: list[float]) -> float:
    """The time limit of the next case: the spec's `case_s` until a case passed, then a multiple of the slowest
    passed case plus a floor, so that a hang costs seconds, not the spec's generous first-call allowance."""
    if not passed_s:
        return limit_s
    return min(limit_s, CASE_FLOOR_S + CASE_FACTOR * max(passed_s))


@dataclass
class Target:
    """What to load in the child: a Triton file or a built CUDA library."""

    impl: Implementation
    path: str  # the .py file (triton) or the built .so (cuda)
    display: str  # the file name as the student knows it
    cpu_layer: bool = False  # a CUDA part built for the CPU (grader/cuda/cudacpu.py): `path` is the harness executable
    sanitizer: tuple[
        str, ...
    ] = ()  # the compute-sanitizer pass (grader/cuda/sanitizer.py): its command; `path`: the harness

    def payload(self, problem: Problem) -> dict[str, Any]:
        return {
            "impl": self.impl.name,
            "kind": self.impl.kind,
            "path": self.path,
            "lib": self.path,
            "entry": self.impl.entry,
            "display": self.display,
            "out_cols": problem.out_cols,
            "inputs": [[i.name, i.cols] for i in problem.inputs],
            "handout": problem.handout,
            "section": self.impl.handout_section,
            "cpu_layer": self.cpu_layer,
            "sanitizer": list(self.sanitizer),
        }


def _test(
    impl: Implementation,
    case: Case,
    score: float,
    state: str,
    output: str,
    reason: Reason = Reason.OK,
    *,
    findings: list[Finding] | None = None,
    **extra: Any,
) -> TestResult:
    return TestResult(
        name=f"{impl.name} / correctness / {case.name}",
        part=impl.name,
        stage="correctness",
        score=score,
        max_score=case.points,
        state=state,
        output=output,
        extra={"case": case.name, "dtype": case.dtype, "dist": case.dist, "padded": bool(case.pad), **extra},
        kind=Kind.CORRECTNESS,
        reason=reason,
        findings=list(findings or []),
    )


def failure_reason(e: WorkerFailure) -> Reason:
    """What a worker's failure means for the case (or part) it cost."""
    if e.reason == "timeout":
        return Reason.TIMEOUT
    if e.reason == "protocol":
        return Reason.PROTOCOL
    if e.reason == "crash" or e.category == "cuda-fault":
        return Reason.CRASHED
    return {
        "load": Reason.LOAD_FAILED,
        "not-implemented": Reason.NOT_IMPLEMENTED,
        "out-of-bounds": Reason.OUT_OF_BOUNDS,
        "misaligned": Reason.MISALIGNED,
        "undefined-behavior": Reason.UNDEFINED,
        "race": Reason.RACE,
    }.get(e.category, Reason.RAISED)


def check_case(
    problem: Problem,
    case: Case,
    reply: dict[str, Any],
    base: torch.Tensor,
    ref: Reference,
    device: str,
    extra: Sequence[torch.Tensor] = (),
) -> check.Verdict:
    """Every check for one case, in order; the first failure is the verdict."""
    dtype = inputs.TORCH_DTYPES[case.dtype]
    meta = reply["meta"]
    if meta.get("type") != "Tensor":
        return check.Verdict(False, f"returned {meta.get('type')}, expected a torch.Tensor", reason=Reason.WRONG_TENSOR)
    if not meta.get("plain", False):
        why = (
            f"a {meta.get('subclass')} (a subclass of torch.Tensor)"
            if meta.get("subclass")
            else "a tensor while a torch function or dispatch mode was active"
            if meta.get("modes")
            else "a tensor that requires grad"
        )
        return check.Verdict(
            False,
            f"returned {why}: return a plain torch.Tensor, computed by your kernel before the function returns",
            reason=Reason.NOT_PLAIN,
        )
    v = check.check_meta(
        meta, shape=problem.out_shape(case.shape), dtype=case.dtype, device_type=torch.device(device).type
    )
    if not v.ok:
        return v
    if not check.same_values(reply["x_after"], base) or not operands.unchanged(reply, list(extra)):
        return check.Verdict(
            False, "the input was modified: a kernel must not write into x", reason=Reason.INPUT_MODIFIED
        )
    cols = case.shape[-1]
    x = base[..., :cols] if case.pad else base
    xd = [x.to(device), *(e.to(device) for e in extra)]  # the op's inputs in call order (spec `inputs:`)
    truth = ref.truth(*xd)
    baseline = problem.tolerance_baseline
    eager = ref.baselines[baseline](*xd) if baseline in ref.baselines else None
    out1, out2 = (o.to(device) for o in reply["outs"])
    v = check.check_output(out1, truth, tol=problem.tolerances[case.dtype], dtype=dtype, eager_out=eager)
    if not v.ok:
        if v.bad is not None:
            v.findings = patterns.detect(
                case.name,
                xd[0],  # the patterns read the first input's layout (x = [a | b] for GLU)
                truth,
                out1.to(torch.float64),
                v.bad,
                out_cols=problem.out_cols,
                dtype=dtype,
                poison=v.poison,
                mistakes=ref.mistakes(*xd) if ref.mistakes is not None else None,
                words=hints.load_file(problem.path.parent / "hints.yaml"),
                # What a kernel that reads row r at r * width (not r * row_stride) computes (one-input problems).
                unstrided=ref.truth(base.reshape(-1)[: x.numel()].view(x.shape).to(device))
                if case.pad and len(xd) == 1
                else None,
            )
            v.details += ["hint: " + f.text for f in v.findings]
        return v
    if not check.same_values(out1, out2):
        n = int((~((out1 == out2) | (out1.isnan() & out2.isnan()))).sum())
        return check.Verdict(
            False,
            f"not deterministic: two runs on the same input differ in {n} elements (a race, or "
            "reading unwritten memory?)",
            reason=Reason.NOT_DETERMINISTIC,
        )
    return v


STOPPED = "not run: --watch stops at the first failing case (grade --watch --all runs every case)"


def run_correctness(
    problem: Problem,
    target: Target,
    ref: Reference,
    *,
    device: str,
    secret: int,
    progress: Callable[[str], None] = lambda s: None,
    stop_at_failure: bool = False,
) -> list[TestResult]:
    """stop_at_failure (`grade --watch` without --all): after the part's first failing case the rest are not run
    (skipped, Reason.NOT_RUN, extra "stopped"): the student sees the first failure in seconds, not after every case."""
    cases = list(problem.cases)
    part = _PartRun(problem, target, ref, device, secret, progress, stop_at_failure)
    part.runnable = [c for c in cases if device != "cpu" or not c.gpu_only]
    part.skip_gpu_only([c for c in cases if c not in part.runnable])
    part.deadline = time.monotonic() + problem.limits.correctness_s
    try:
        for case in part.runnable:
            part.case(case)
        if part.load_error is None:
            part.checks()
    finally:
        part.close()
    return _finished(problem, target, cases, part.results)


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


@dataclass
class _PartRun:
    """One part's correctness cases in progress: what each case's step reads and adds to."""

    problem: Problem
    target: Target
    ref: Reference
    device: str
    secret: int
    progress: Callable[[str], None]
    stop_at_failure: bool
    runnable: list[Case] = field(default_factory=list)
    deadline: float = 0.0
    results: list[TestResult] = field(default_factory=list)
    restarts: int = 0
    hangs: int = 0
    faults: int = 0
    case_seconds: list[float] = field(default_factory=list)  # the passed cases' times: a later case's limit scales
    case_violations: list[Finding] = field(default_factory=list)  # from the profile of every correctness call
    box: Sandbox | None = None
    load_error: tuple[str, Reason] | None = None  # why the rest of the part cannot run

    def add(self, case: Case, state: str, output: str, reason: Reason = Reason.OK, **extra: Any) -> None:
        """A result of 0 points for the case (a passed case goes through `checked`)."""
        self.results.append(_test(self.target.impl, case, 0.0, state, output, reason, **extra))

    def skip_gpu_only(self, cases: list[Case]) -> None:
        where = "the CPU layer's sanitized run)" if self.target.cpu_layer else "the Triton interpreter)"
        for c in cases:
            self.add(c, SKIPPED, "skipped: this case runs only on a GPU (too slow for " + where, Reason.NEEDS_GPU)

    def start(self) -> Sandbox:
        b = Sandbox(self.device, max_reply=reply_limit(self.runnable))
        try:
            b.request(
                "load",
                self.target.payload(self.problem),
                timeout_s=max(1.0, self.deadline - time.monotonic()),
                what="loading the submission",
            )
        except WorkerFailure:
            b.close()  # a worker that could not load is ours to end, not a stray of the submission's
            raise
        return b

    def close(self) -> None:
        if self.box is not None:
            self.box.close()

    def not_run(self, case: Case) -> bool:
        """Record the case as not run when it cannot be (stopped, the part's load failed, past the stage's limit)."""
        if self.stop_at_failure and any(r.state == FAILED for r in self.results):
            self.add(case, SKIPPED, STOPPED, Reason.NOT_RUN, stopped=True)
            return True
        self.progress(f"{self.target.impl.name}: {case.name}")
        if self.load_error is not None:
            self.add(case, FAILED, *self.load_error)
            return True
        if time.monotonic() > self.deadline:
            limit = self.problem.limits.correctness_s
            self.add(case, FAILED, f"not run: the correctness stage ran past its {limit:.0f} s limit", Reason.NOT_RUN)
            return True
        return False

    def worker(self, case: Case) -> Sandbox | None:
        """The live worker for the case (a fresh one if the last is gone); None when none could load the part."""
        try:
            if self.box is None or not self.box.alive:
                self.box = self.start()
        except WorkerFailure as e:
            self.load_error = (f"not run: {e.line}" + (f"\n{e.detail}" if e.detail else ""), failure_reason(e))
            self.add(case, FAILED, *self.load_error, **_own(e.line, e.own))
            return None
        return self.box

    def case(self, case: Case) -> None:
        """Run one case in the worker and check its reply."""
        if self.not_run(case):
            return
        box = self.worker(case)
        if box is None:
            return
        base, extra, payload = _case_payload(self.problem, case, self.secret)
        t0 = time.monotonic()
        try:
            budget = min(_case_limit(self.problem.limits.case_s, self.case_seconds), self.deadline - time.monotonic())
            reply = box.request("run", payload, timeout_s=max(1.0, budget), what=f"case {case.name}")
        except WorkerFailure as e:
            self.worker_failed(case, box, e)
            return
        if isinstance(reply, dict) and "raised" in reply and not _malformed_raised(reply):
            self.raised(case, reply, payload["out_numel"])
            return
        bad = _malformed_run_reply(reply)
        if bad:
            self.malformed(case, box, bad)
            return
        self.checked(case, reply, base, extra, t0, payload["out_numel"])

    def worker_failed(self, case: Case, box: Sandbox, e: WorkerFailure) -> None:
        msg = e.line + (f"\n{e.detail}" if e.detail else "")
        self.add(case, FAILED, msg, failure_reason(e), **_own(e.line, e.own))
        fault = not e.fatal and e.category == "cuda-fault"
        if fault:
            # A kernel fault poisons the CUDA context for good: later cases in this process would all
            # fail with the same error. Start a fresh worker for them instead.
            box.close()
            e.fatal = True
        if not e.fatal:
            return
        # A hang or crash costs this case: a fresh worker takes the rest. Only a worker that keeps
        # dying, or one that hangs again, stops the part (the stage's own limit bounds the total).
        self.box = None
        self.faults += fault
        self.restarts += not fault
        hung = e.reason == "timeout"
        self.hangs += hung
        if self.restarts > MAX_RESTARTS or self.hangs > MAX_HANGS or self.faults > MAX_FAULT_RESTARTS:
            self.load_error = (
                f"not run: earlier cases {'hung' if hung else 'crashed the process'} repeatedly (last: {case.name})",
                Reason.NOT_RUN,
            )

    def raised(self, case: Case, reply: dict[str, Any], out_numel: int) -> None:
        """The call raised: the case fails, and the ATen ops it ran before raising still count."""
        line, detail = reply["raised"][:2]
        category = reply["raised"][2] if len(reply["raised"]) > 2 else "call"
        own = reply["raised"][3] if len(reply["raised"]) > 3 else ""
        why = failure_reason(WorkerFailure(line, detail, category=category))
        self.add(case, FAILED, line + (f"\n{detail}" if detail else ""), why, **_own(line, own))
        self.case_violations += _call_violations(self.target.impl.kind, case, reply, False, out_numel)

    def malformed(self, case: Case, box: Sandbox, bad: str) -> None:
        """Valid data, but not what a worker answers to `run`: forged on the pipe by code in the child."""
        self.add(
            case,
            FAILED,
            f"case {case.name}: the worker sent a malformed reply ({bad}); was the result pipe tampered with?",
            Reason.PROTOCOL,
        )
        box.close()
        self.box, self.restarts = None, self.restarts + 1
        if self.restarts > MAX_RESTARTS:
            self.load_error = (
                f"not run: an earlier case sent malformed replies repeatedly ({case.name})",
                Reason.NOT_RUN,
            )

    def checked(
        self,
        case: Case,
        reply: dict[str, Any],
        base: torch.Tensor,
        extra: list[torch.Tensor],
        t0: float,
        out_numel: int,
    ) -> None:
        verdict = check_case(self.problem, case, reply, base, self.ref, self.device, extra)
        self.case_violations += _call_violations(self.target.impl.kind, case, reply, verdict.ok, out_numel)
        if verdict.ok:
            self.case_seconds.append(time.monotonic() - t0)
        self.results.append(
            _test(
                self.target.impl,
                case,
                case.points if verdict.ok else 0.0,
                PASSED if verdict.ok else FAILED,
                verdict.text(),
                verdict.reason,
                findings=verdict.findings,
                max_abs_err=verdict.max_abs_err,
                max_rel_err=verdict.max_rel_err,
                seconds=round(time.monotonic() - t0, 3),
                later_rows_only=verdict.later_rows_only,
                **_first_wrong(verdict),
            )
        )

    def checks(self) -> None:
        """The part's checks after its cases: the kernel check, and on a CPU the Triton part's GPU compile check."""
        passed: set[str] = {r.extra["case"] for r in self.results if r.state == PASSED}
        restart_error = ""
        if self.box is None or not self.box.alive:  # the last case took its worker down: profile in a fresh one
            try:
                self.box = self.start()
            except WorkerFailure as e:
                self.box, restart_error = None, e.line
        self.results.append(
            _kernel_check(
                self.problem,
                self.target,
                self.box,
                self.runnable,
                self.secret,
                self.deadline,
                passed,
                self.case_violations,
                restart_error,
            )
        )
        if self.device == "cpu" and self.target.impl.kind == "triton":
            self.results.append(_gpu_compile_check(self.problem, self.target, self.box, self.deadline))


def _case_payload(problem: Problem, case: Case, secret: int) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, Any]]:
    """(the input as the parent keeps it, the other inputs, the `run` request's payload) for one case."""
    base = inputs.make_input(case, "cpu", secret)
    extra = operands.extra_inputs(problem, case, "cpu", secret)
    if case.pad:
        base = base._base if base._base is not None else base  # send the padded buffer, not a copy
    base = base.contiguous()
    # Send a copy (grader/wire.py sends tensors by value today; this keeps the parent's copy, used for the
    # truth and the input check, safe from a kernel that writes into x whatever the transport).
    payload: dict[str, Any] = {
        "base": base.clone(),
        "cols": case.shape[-1],
        "out_numel": _numel(problem.out_shape(case.shape)),
        **operands.extra_payload(extra),
    }
    return base, extra, payload


def _own(line: str, own: str) -> dict[str, Any]:
    """A result's extra for an error's short form: its line and only the submission's own frames (the output holds
    the whole traceback). What a terminal shows; absent when the error has no frames of the submission's."""
    return {"own_frames": f"{line}\n{own}"} if own else {}


def _first_wrong(v: check.Verdict) -> dict[str, Any]:
    if v.first_wrong is None:
        return {}
    at, expected, got = v.first_wrong
    return {"first_wrong": {"index": list(at), "expected": expected, "got": got}}


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


def _malformed_raised(r: dict[str, Any]) -> str:
    """'' when r is a well-formed "the call raised" reply (see Worker.run)."""
    raised = r.get("raised")
    if not (
        isinstance(raised, list)
        and len(raised) in (2, 3, 4)
        and all(isinstance(x, str) for x in raised)
        and (len(raised) == 2 or raised[2] in ERROR_CATEGORIES)
    ):
        return "'raised' is not [line, detail, category, full traceback]"
    if not (isinstance(r.get("ops", []), list) and all(isinstance(o, str) for o in r.get("ops", []))):
        return "'ops' is not a list of names"
    return _malformed_profile(r)


def _malformed_run_reply(r: object) -> str:
    """'' when r has the shape of Worker.run's reply, else what is wrong with it."""
    if not isinstance(r, dict):
        return f"a {type(r).__name__}, not a dict"
    outs, meta = r.get("outs"), r.get("meta")
    if not (isinstance(outs, list) and len(outs) == 2 and all(isinstance(o, torch.Tensor) for o in outs)):
        return "'outs' is not two tensors"
    if not isinstance(meta, dict) or not isinstance(r.get("x_after"), torch.Tensor):
        return "no 'meta' dict or no 'x_after' tensor"
    if not (isinstance(r.get("ops", []), list) and all(isinstance(o, str) for o in r.get("ops", []))):
        return "'ops' is not a list of names"
    if not (r.get("triton_launches") is None or type(r.get("triton_launches")) is int):
        return "'triton_launches' is not a count"
    return _malformed_profile(r)


def _malformed_profile(r: dict[str, Any]) -> str:
    """'' when the per-call device profile of a `run` reply (absent on a CPU) has its shape."""
    calls = r.get("call_kernels")
    if not (
        calls is None
        or (
            isinstance(calls, list)
            and len(calls) <= 2
            and all(isinstance(c, list) and all(isinstance(k, str) for k in c) for c in calls)
        )
    ):
        return "'call_kernels' is not a list of kernel names per call"
    if not (isinstance(r.get("runtime", []), list) and all(isinstance(v, str) for v in r.get("runtime", []))):
        return "'runtime' is not a list of names"
    return ""


def _call_violations(kind: str, case: Case, reply: dict[str, Any], correct: bool, out_numel: int) -> list[Finding]:
    """What the profile of one case's calls says: PyTorch math, work moved to the host, or (for a right answer) no
    kernel of the submission's own. On a GPU every call's device activity is checked on its own ("call_kernels"), so
    that doing the work differently in calls the kernel check does not profile gains nothing."""

    def at(f: Finding, where: str) -> Finding:
        return Finding(f.code, f"{f.text} ({where})", VIOLATION)

    rep = kernelcheck.classify(
        kind, reply.get("ops", []), [], ["?"], reply.get("triton_launches") if out_numel else None
    )
    out = [at(v, f"case {case.name}") for v in rep.violations if v.code == Code.TORCH_COMPUTE]
    if correct and kind == "triton" and out_numel and reply.get("triton_launches") == 0:
        out.append(
            Finding(
                Code.JIT_NOT_LAUNCHED,
                f"case {case.name} was answered correctly without launching any @triton.jit kernel of this file",
                VIOLATION,
            )
        )
    for k, kernels in enumerate(reply.get("call_kernels") or []):
        dev = kernelcheck.classify(
            kind, [], kernels, ["?"], runtime=list(reply.get("runtime", [])), device_profiled=bool(out_numel)
        )
        for v in dev.violations:
            if v.code in (Code.HOST_TRANSFER, Code.HOST_MEMORY) or (v.code == Code.NO_OWN_KERNEL and correct):
                out.append(at(v, f"case {case.name}, call {k + 1}"))
    return out


def _unique(fs: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(fs))


def _kernel_check(
    problem: Problem,
    target: Target,
    box: Sandbox | None,
    runnable: list[Case],
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

    ok = [c for c in runnable if c.name in passed and 0 not in c.shape]
    pick = [c for c in ok if c.pad and c.dist == "normal"] or ok
    if not pick:
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
    case = max(pick, key=lambda c: _numel(c.shape))

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
            {
                "base": base.contiguous(),
                "cols": case.shape[-1],
                **operands.extra_payload(operands.extra_inputs(problem, case, "cpu", secret)),
            },
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


def _gpu_compile_check(problem: Problem, target: Target, box: Sandbox | None, deadline: float) -> TestResult:
    """CPU grades only: compile what the interpreter ran for a GPU (grader/correctness/gpucompile.py)."""
    impl = target.impl
    try:
        if box is None or not box.alive:
            raise WorkerFailure("the correctness worker is gone, so its launch records are too")
        launches = box.request(
            "launch_records", None, timeout_s=max(1.0, deadline - time.monotonic()), what="the launch records"
        )
    except WorkerFailure as e:
        return TestResult(
            f"{impl.name} / GPU compile check",
            impl.name,
            "checks",
            0.0,
            0.0,
            SKIPPED,
            f"could not check: {e.line}",
            kind=Kind.COMPILE_CHECK,
        )
    budget = max(30.0, min(problem.limits.case_s, deadline - time.monotonic()))
    return gpucompile.check_part(target.payload(problem), impl.name, target.display, launches, budget)


def reply_limit(cases: list[Case]) -> int:
    """The most bytes a correctness worker's reply may have (grader/wire.py refuses a longer one unread): a `run`
    reply carries two outputs and the input back, so 4x the largest input buffer (padding included), plus 1 MiB
    for the rest (the other replies, tracebacks included, are far smaller)."""
    largest = max(
        (_numel((*c.shape[:-1], c.shape[-1] + c.pad)) * inputs.TORCH_DTYPES[c.dtype].itemsize for c in cases), default=0
    )
    return 4 * largest + (1 << 20)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
