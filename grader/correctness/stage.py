"""Stage 3+4 driver: run every correctness case in the child and check each result in the parent.

For each case: fresh seeded input (parent) -> child runs it twice (poisoned allocator) -> parent checks output
tensor metadata, values against the float64 truth, determinism (run 1 == run 2) and that the input is unchanged.
A crash or hang in one case costs that case; the worker is restarted for the rest (up to MAX_RESTARTS).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader import sandbox
from grader.child.launches import MAX_LAUNCHES
from grader.child.wire import ERROR_CATEGORIES, CaseRequest, case_request
from grader.correctness import check, gpucompile, kernelcheck, patterns
from grader.problem import hints, inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Implementation, Problem
from grader.results import FAILED, PASSED, SKIPPED, VIOLATION, Code, Finding, Kind, Reason, TestResult
from grader.sandbox import Sandbox, WorkerFailure

MAX_RESTARTS = 3
# A CUDA fault (an illegal or misaligned address) is one case's bug, cleanly reported, that poisons only its process:
# a fresh worker (~3 s on the H200) runs the next case. More of those are allowed than crashes, so that a kernel
# faulting on every misaligned shape still gets its other cases run, as on the CPU layer (the same verdicts on
# either machine).
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
    ] = ()  # the compute-sanitizer pass (grader/correctness/sanitizer.py): its command; `path`: the harness

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


STOPPED = "not run: --watch stops at the first failing case (grade --watch --all runs every case)"
COMPILE_STOPPED = "not run: --watch stopped at the first failing case (a grade that runs every case checks this)"
# Correctness cases in two worker processes (CPU grades of a Triton part): "1" or "2" forces the number (tests,
# measurements); unset, a second worker starts only when the cases left would take longer than LANE_AFTER_S and the
# machine has a core to spare (docs/performance.md, "The student's loop on a 2-core CPU").
WORKERS_ENV = "GRADER_CORRECTNESS_WORKERS"
RESTARTED = ("crash", "hang", "fault", "malformed")  # a case's outcomes that end its worker (_PartRun.outcome)
LANE_AFTER_S = 2.0


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
    part = _PartRun(problem, target, ref, device, secret, progress, stop_at_failure)
    part.runnable = [c for c in cases if device != "cpu" or not c.gpu_only]
    part.skip_gpu_only([c for c in cases if c not in part.runnable])
    part.deadline = time.monotonic() + problem.limits.correctness_s
    part.workers = workers if workers is not None else _workers(device, target, stop_at_failure)
    try:
        part.run_cases()
        if part.load_error is None:
            part.checks()
    finally:
        part.close()
    return _finished(problem, target, cases, part.results)


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


@dataclass
class _Lane:
    """One correctness worker and the cases it takes, one at a time, from the part's queue."""

    box: Sandbox | None = None
    spare: Sandbox | None = None  # started ahead (imports under way), not loaded yet: the next `start` uses it
    error: BaseException | None = None  # what ended its thread (re-raised by the part)

    def close(self, grace_s: float) -> None:
        sandbox.close_all([self.box, self.spare], grace_s)
        self.box = self.spare = None


@dataclass
class _PartRun:
    """One part's correctness cases in progress: what each case's step reads and adds to. With two lanes, every
    field below the lock is read and written under it."""

    problem: Problem
    target: Target
    ref: Reference
    device: str
    secret: int
    progress: Callable[[str], None]
    stop_at_failure: bool
    runnable: list[Case] = field(default_factory=list)
    deadline: float = 0.0
    workers: int = 1
    lanes: list[_Lane] = field(default_factory=lambda: [_Lane()])
    compile_box: Sandbox | None = None  # the GPU compile check's worker, started once the part loaded
    loaded: threading.Event = field(default_factory=threading.Event)  # the first load succeeded, or failed
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: list[Case] = field(default_factory=list)
    results: list[TestResult] = field(default_factory=list)
    restarts: int = 0
    hangs: int = 0
    faults: int = 0
    case_seconds: list[float] = field(default_factory=list)  # the passed cases' times: a later case's limit scales
    violations: dict[str, list[Finding]] = field(default_factory=dict)  # per case, from the profile of its calls
    records: dict[str, list[Any]] = field(default_factory=dict)  # per case, its worker's new launch records (lanes)
    ran_in: dict[str, _Lane] = field(default_factory=dict)  # per case, the lane whose worker answered it
    # per case: what its worker did that counts against the restart limits ("crash", "hang", "fault", "malformed"),
    # or "not run" (the part's load failed, or a limit was reached, before it ran)
    outcome: dict[str, str] = field(default_factory=dict)
    load_error: tuple[str, Reason] | None = None  # why the rest of the part cannot run

    @property
    def grace_s(self) -> float:
        """How long a closing worker may take to exit: none on a CPU (nothing it does on exit is read)."""
        return 0.0 if self.device == "cpu" else 2.0

    def add(self, case: Case, state: str, output: str, reason: Reason = Reason.OK, **extra: Any) -> None:
        """A result of 0 points for the case (a passed case goes through `checked`)."""
        self.results.append(_test(self.target.impl, case, 0.0, state, output, reason, **extra))

    def skip_gpu_only(self, cases: list[Case]) -> None:
        where = "the CPU layer's sanitized run)" if self.target.cpu_layer else "the Triton interpreter)"
        for c in cases:
            self.add(c, SKIPPED, "skipped: this case runs only on a GPU (too slow for " + where, Reason.NEEDS_GPU)

    def start(self, lane: _Lane) -> Sandbox:
        """A worker with the part loaded: the lane's spare if it has one, else a new one."""
        b, lane.spare = lane.spare, None
        if b is None:
            b = Sandbox(self.device, max_reply=reply_limit(self.runnable))
        try:
            b.wait_ready(max(1.0, self.deadline - time.monotonic()))
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
        # Every lane's workers exit together (one grace period, not one per worker); the compile check's worker
        # writes nothing on exit, so it is killed at once.
        sandbox.close_all([b for lane in self.lanes for b in (lane.box, lane.spare)], self.grace_s)
        for lane in self.lanes:
            lane.box = lane.spare = None
        sandbox.close_all([self.compile_box], grace_s=0)

    # -- the cases ------------------------------------------------------------------------------------------

    def run_cases(self) -> None:
        """Every runnable case, in one lane, or two once a second one pays (`_second_lane_pays`)."""
        self.pending = list(self.runnable)
        threads: list[threading.Thread] = []
        try:
            while (case := self.next_case()) is not None:
                if self.workers > 1 and not threads and (self.forced_lanes() or self._second_lane_pays()):
                    threads.append(self.second_lane())
                self.case(case, self.lanes[0])
        except BaseException:
            with self.lock:
                self.pending.clear()  # (the other lane stops after its case in progress)
            raise
        finally:
            self.loaded.set()  # (a second lane waits for the first load)
            for t in threads:
                t.join()
        for lane in self.lanes[1:]:
            if lane.error is not None:
                raise lane.error
        if len(self.lanes) > 1:
            self.replay_limits()

    def replay_limits(self) -> None:
        """Two lanes crash, hang or forge replies side by side, so the restart limits were reached in the order the
        failures came, not in spec order. Count them again in spec order, as one worker meets them: the case that
        reaches a limit names it, and every later case is 'not run' (some ran in the other lane meanwhile)."""
        restarts = hangs = faults = 0
        error: tuple[str, Reason] | None = None
        for c in self.runnable:
            if error is not None:
                self.results = [r for r in self.results if r.extra.get("case") != c.name]
                self.violations.pop(c.name, None)
                self.records.pop(c.name, None)
                self.add(c, FAILED, *error)
                continue
            o = self.outcome.get(c.name, "")
            restarts += o in RESTARTED and o != "fault"
            hangs += o == "hang"
            faults += o == "fault"
            if o == "malformed" and restarts > MAX_RESTARTS:
                error = (f"not run: an earlier case sent malformed replies repeatedly ({c.name})", Reason.NOT_RUN)
            elif o in ("crash", "hang", "fault") and (
                restarts > MAX_RESTARTS or hangs > MAX_HANGS or faults > MAX_FAULT_RESTARTS
            ):
                why = "hung" if o == "hang" else "crashed the process"
                error = (f"not run: earlier cases {why} repeatedly (last: {c.name})", Reason.NOT_RUN)
        if error is not None or (self.load_error is not None and self.load_error[1] == Reason.NOT_RUN):
            self.load_error = error

    def forced_lanes(self) -> bool:
        return os.environ.get(WORKERS_ENV, "") == "2"

    def _second_lane_pays(self) -> bool:
        """Would a second worker finish sooner: the cases left take more than LANE_AFTER_S at the pace of the
        cases so far (after the first, which pays one-time costs), and a core is idle (load average)."""
        with self.lock:
            paced = self.case_seconds[1:]
            left = len(self.pending)
        if not paced or left < 2:
            return False
        cores = len(os.sched_getaffinity(0))
        return sum(paced) / len(paced) * left > LANE_AFTER_S and os.getloadavg()[0] < cores - 0.5

    def second_lane(self) -> threading.Thread:
        """Start a second worker now (its imports overlap the first lane's cases) and a thread that feeds it."""
        lane = _Lane(spare=Sandbox(self.device, max_reply=reply_limit(self.runnable), wait=False))
        self.lanes.append(lane)

        def feed() -> None:
            try:
                self.loaded.wait()  # the first worker loaded the part (a load error is then every case's)
                while (case := self.next_case()) is not None:
                    self.case(case, lane)
            except BaseException as e:  # a grader fault: the part re-raises it
                lane.error = e

        t = threading.Thread(target=feed, name="correctness-lane-2", daemon=True)
        t.start()
        return t

    def next_case(self) -> Case | None:
        with self.lock:
            return self.pending.pop(0) if self.pending else None

    def not_run(self, case: Case) -> bool:
        """Record the case as not run when it cannot be (stopped, the part's load failed, past the stage's limit)."""
        if self.stop_at_failure and any(r.state == FAILED for r in self.results):
            self.add(case, SKIPPED, STOPPED, Reason.NOT_RUN, stopped=True)
            return True
        self.progress(f"{self.target.impl.name}: {case.name}")
        if self.load_error is not None:
            self.add(case, FAILED, *self.load_error)
            self.outcome[case.name] = "not run"
            return True
        if time.monotonic() > self.deadline:
            limit = self.problem.limits.correctness_s
            self.add(case, FAILED, f"not run: the correctness stage ran past its {limit:.0f} s limit", Reason.NOT_RUN)
            return True
        return False

    def worker(self, case: Case, lane: _Lane) -> Sandbox | None:
        """The lane's live worker for the case (a fresh one if the last is gone); None when none could load."""
        if lane.box is not None and lane.box.alive:
            return lane.box
        try:
            lane.box = self.start(lane)
        except WorkerFailure as e:
            lane.box = None
            with self.lock:
                if self.load_error is None:
                    self.load_error = (f"not run: {e.line}" + (f"\n{e.detail}" if e.detail else ""), failure_reason(e))
                    self.add(case, FAILED, *self.load_error, **_own(e.line, e.own))
                else:
                    self.add(case, FAILED, *self.load_error)
            return None
        finally:
            self.loaded.set()
        if self.stop_at_failure or self.device != "cpu" or self.target.impl.kind != "triton":
            return lane.box
        with self.lock:  # (one for the part, whichever lane loads first)
            if self.compile_box is None:
                # The GPU compile check's worker, started now so that its imports overlap the cases (not in a
                # --watch grade, whose first failure comes first: its check starts a worker if it runs at all).
                self.compile_box = Sandbox("cpu", compile_only=True, wait=False)
        return lane.box

    def case(self, case: Case, lane: _Lane) -> None:
        """Run one case in the lane's worker and check its reply."""
        with self.lock:
            if self.not_run(case):
                return
        box = self.worker(case, lane)
        if box is None:
            return
        base, extra, payload = _case_payload(self.problem, case, self.secret)
        t0 = time.monotonic()
        with self.lock:
            self.ran_in[case.name] = lane
        try:
            with self.lock:
                limit = _case_limit(self.problem.limits.case_s, self.case_seconds)
            budget = min(limit, self.deadline - time.monotonic())
            reply = box.request("run", payload, timeout_s=max(1.0, budget), what=f"case {case.name}")
        except WorkerFailure as e:
            with self.lock:
                self.worker_failed(case, lane, box, e)
            return
        if isinstance(reply, dict) and "raised" in reply and not _malformed_raised(reply):
            with self.lock:
                self.raised(case, reply, payload["out_numel"])
            self.collect_records(case, lane, box)
            return
        bad = _malformed_run_reply(reply)
        if bad:
            with self.lock:
                self.malformed(case, lane, box, bad)
            return
        self.checked(case, reply, base, extra, t0, payload["out_numel"])
        self.collect_records(case, lane, box)

    def worker_failed(self, case: Case, lane: _Lane, box: Sandbox, e: WorkerFailure) -> None:
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
        lane.box = None
        self.faults += fault
        self.restarts += not fault
        hung = e.reason == "timeout"
        self.outcome[case.name] = "fault" if fault else "hang" if hung else "crash"
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
        self.violations[case.name] = _call_violations(self.target.impl.kind, case, reply, False, out_numel)

    def malformed(self, case: Case, lane: _Lane, box: Sandbox, bad: str) -> None:
        """Valid data, but not what a worker answers to `run`: forged on the pipe by code in the child."""
        self.add(
            case,
            FAILED,
            f"case {case.name}: the worker sent a malformed reply ({bad}); was the result pipe tampered with?",
            Reason.PROTOCOL,
        )
        box.close()
        lane.box = None
        self.restarts += 1
        self.outcome[case.name] = "malformed"
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
        calls = _calls(self.target.path) if self.target.impl.kind == "triton" else None
        verdict = check_case(self.problem, case, reply, base, self.ref, self.device, extra, calls)
        violations = _call_violations(self.target.impl.kind, case, reply, verdict.ok, out_numel)
        result = _test(
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
        with self.lock:
            self.violations[case.name] = violations
            if verdict.ok:
                self.case_seconds.append(time.monotonic() - t0)
            self.results.append(result)

    def collect_records(self, case: Case, lane: _Lane, box: Sandbox) -> None:
        """With two lanes: the launch records the case added in its worker (the GPU compile check merges them in
        spec order, as one worker would have recorded them). One worker keeps them all; nothing to do."""
        if self.workers < 2 or self.device != "cpu" or self.target.impl.kind != "triton":
            return
        try:
            got = box.request("launch_records", "take", timeout_s=10.0, what="the launch records")
        except WorkerFailure:
            return  # (a worker gone: its records are lost, as one worker's are when it is restarted)
        with self.lock:
            self.records[case.name] = got if isinstance(got, list) else []

    # -- after the cases ------------------------------------------------------------------------------------

    def checks(self) -> None:
        """The part's checks after its cases: the kernel check, and on a CPU the Triton part's GPU compile check."""
        passed: set[str] = {r.extra["case"] for r in self.results if r.state == PASSED}
        restart_error = ""
        # The profiled call runs in the worker that ran its case, as with one worker: a submission whose answer
        # depends on what its process saw before (how often this input came) answers as it would there.
        profiled = _profiled_case(self.runnable, passed)
        lane = self.ran_in.get(profiled.name, self.lanes[0]) if profiled is not None else self.lanes[0]
        for other in self.lanes:
            if other is not lane:
                other.close(self.grace_s)  # its records are collected; the checks use one worker
        if lane.box is None or not lane.box.alive:  # the last case took its worker down: profile in a fresh one
            try:
                lane.box = self.start(lane)
            except WorkerFailure as e:
                lane.box, restart_error = None, e.line
        seen = [f for c in self.runnable for f in self.violations.get(c.name, [])]  # in spec order
        self.results.append(
            _kernel_check(
                self.problem,
                self.target,
                lane.box,
                self.runnable,
                self.secret,
                self.deadline,
                passed,
                seen,
                restart_error,
            )
        )
        if self.device == "cpu" and self.target.impl.kind == "triton":
            self.results.append(self.compile_check(lane.box))

    def compile_check(self, box: Sandbox | None) -> TestResult:
        """The GPU compile check of the launches recorded (on a CPU, a Triton part)."""
        impl = self.target.impl
        compile_box, self.compile_box = self.compile_box, None
        if self.stop_at_failure and any(r.extra.get("stopped") for r in self.results):
            if compile_box is not None:
                compile_box.close(grace_s=0)
            return _compile_row(impl.name, SKIPPED, COMPILE_STOPPED, Reason.NOT_RUN)
        try:
            if box is None or not box.alive:
                raise WorkerFailure("the correctness worker is gone, so its launch records are too")
            launches = box.request(
                "launch_records",
                "take" if self.workers > 1 else None,
                timeout_s=max(1.0, self.deadline - time.monotonic()),
                what="the launch records",
            )
        except WorkerFailure as e:
            if compile_box is not None:
                compile_box.close(grace_s=0)
            return _compile_row(impl.name, SKIPPED, f"could not check: {e.line}")
        if self.workers > 1 and isinstance(launches, list):
            launches = self.merged_records(launches)
        budget = max(30.0, min(self.problem.limits.case_s, self.deadline - time.monotonic()))
        return gpucompile.check_part(
            self.target.payload(self.problem), impl.name, self.target.display, launches, budget, box=compile_box
        )

    def merged_records(self, last: list[Any]) -> list[Any]:
        """The launch records one worker would have had at the end: each case's records in spec order from the
        case after the last one that took its worker down (a restarted worker starts with none), then the kernel
        check's (`last`); distinct, at most MAX_LAUNCHES, as one worker keeps them."""
        down = [i for i, c in enumerate(self.runnable) if self.outcome.get(c.name, "") in RESTARTED]
        merged: dict[str, Any] = {}
        for c in self.runnable[max(down, default=-1) + 1 :]:
            for r in self.records.get(c.name, []):
                merged.setdefault(repr(r), r)
        for r in last:
            merged.setdefault(repr(r), r)
        return list(merged.values())[:MAX_LAUNCHES]


def _compile_row(part: str, state: str, output: str, reason: Reason = Reason.OK) -> TestResult:
    return TestResult(
        f"{part} / GPU compile check", part, "checks", 0.0, 0.0, state, output, kind=Kind.COMPILE_CHECK, reason=reason
    )


def _case_payload(problem: Problem, case: Case, secret: int) -> tuple[torch.Tensor, list[torch.Tensor], CaseRequest]:
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
        out_numel=_numel(problem.out_shape(case.shape)),
    )
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


@functools.lru_cache(maxsize=8)
def _calls(path: str) -> frozenset[str] | None:
    """patterns.source_calls, once per submission file (every wrong case of a part asks)."""
    return patterns.source_calls(path)


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


def _profiled_case(runnable: list[Case], passed: set[str]) -> Case | None:
    """The case whose call the kernel check profiles: the largest strided passed case, else the largest passed one
    (None when only cases with no elements passed)."""
    ok = [c for c in runnable if c.name in passed and 0 not in c.shape]
    pick = [c for c in ok if c.pad and c.dist == "normal"] or ok
    return max(pick, key=lambda c: _numel(c.shape)) if pick else None


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
