"""One correctness case's request and reply: the payload sent to the worker, the checks of its reply (check_case),
the reply's shape, what the profile of its calls says, and the result row. Pure functions: no worker, no lock.
How a case runs: docs/architecture.md, "The correctness stage".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from grader.child.wire import ERROR_CATEGORIES, CaseRequest, case_request
from grader.correctness import check, kernelcheck, patterns
from grader.problem import hints, inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Implementation, Problem
from grader.results import VIOLATION, Code, Finding, Kind, Reason, TestResult
from grader.sandbox import WorkerFailure

CASE_FLOOR_S = 20.0  # a case's limit once others passed: this much (a worker's restart, a JIT) plus ...
CASE_FACTOR = 20.0  # ... this many times the slowest passed case so far


def case_limit(limit_s: float, passed_s: list[float]) -> float:
    """The time limit of the next case: the spec's `case_s` until a case passed, then a multiple of the slowest
    passed case plus a floor, so that a hang costs seconds, not the spec's generous first-call allowance."""
    if not passed_s:
        return limit_s
    return min(limit_s, CASE_FLOOR_S + CASE_FACTOR * max(passed_s))


def case_row(
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
    calls: frozenset[str] | None = None,
) -> check.Verdict:
    """Every check for one case, in order; the first failure is the verdict. calls: what the submission's source
    calls (patterns.source_calls), for the failure patterns' premises; None when unknown (a CUDA part)."""
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
    if not check.same_values(reply["x_after"], base) or not check.extra_unchanged(reply, list(extra)):
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
                calls=calls,
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


def case_payload(problem: Problem, case: Case, secret: int) -> tuple[torch.Tensor, list[torch.Tensor], CaseRequest]:
    """(the input as the parent keeps it, the other inputs, the `run` request's payload) for one case."""
    base = inputs.make_input(case, "cpu", secret)
    extra = operands.extra_inputs(problem, case, "cpu", secret)
    if case.pad:
        base = base._base if base._base is not None else base  # send the padded buffer, not a copy
    base = base.contiguous()
    # Send a copy (grader/wire.py sends tensors by value today; this keeps the parent's copy, used for the
    # truth and the input check, safe from a kernel that writes into x whatever the transport).
    payload = case_request(
        base.clone(),
        case.shape[-1],
        operands.extra_payload(extra).get("extra"),
        out_numel=numel(problem.out_shape(case.shape)),
    )
    return base, extra, payload


def own_frames(line: str, own: str) -> dict[str, Any]:
    """A result's extra for an error's short form: its line and only the submission's own frames (the output holds
    the whole traceback). What a terminal shows; absent when the error has no frames of the submission's."""
    return {"own_frames": f"{line}\n{own}"} if own else {}


def first_wrong(v: check.Verdict) -> dict[str, Any]:
    if v.first_wrong is None:
        return {}
    at, expected, got = v.first_wrong
    return {"first_wrong": {"index": list(at), "expected": expected, "got": got}}


@functools.lru_cache(maxsize=8)
def calls_of(path: str) -> frozenset[str] | None:
    """patterns.source_calls, once per submission file (every wrong case of a part asks)."""
    return patterns.source_calls(path)


def malformed_raised(r: dict[str, Any]) -> str:
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


def malformed_run_reply(r: object) -> str:
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


def call_violations(kind: str, case: Case, reply: dict[str, Any], correct: bool, out_numel: int) -> list[Finding]:
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


def reply_limit(cases: Sequence[Case]) -> int:
    """The most bytes a correctness worker's reply may have (grader/wire.py refuses a longer one unread): a `run`
    reply carries two outputs and the input back, so 4x the largest input buffer (padding included), plus 1 MiB
    for the rest (the other replies, tracebacks included, are far smaller)."""
    largest = max(
        (numel((*c.shape[:-1], c.shape[-1] + c.pad)) * inputs.TORCH_DTYPES[c.dtype].itemsize for c in cases), default=0
    )
    return 4 * largest + (1 << 20)


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
