"""One part's correctness results as its cases finish, and the restart limits they count against. With two lanes
every field is read and written under the tally's lock. Why the limits are what they are: docs/architecture.md,
"The correctness stage"."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.child.launches import MAX_LAUNCHES
from grader.correctness.verdict import call_violations, case_row, failure_reason, own_frames
from grader.problem.spec import Case, Implementation
from grader.results import FAILED, PASSED, SKIPPED, Finding, Reason, TestResult
from grader.sandbox import WorkerFailure

MAX_RESTARTS = 3
# A CUDA fault (an illegal or misaligned address) is one case's bug, cleanly reported, that poisons only its process:
# a fresh worker (~3 s on the H200) runs the next case. More of those are allowed than crashes, so that a kernel
# faulting on every misaligned shape still gets its other cases run, as on the CPU layer (the same verdicts on
# either machine).
MAX_FAULT_RESTARTS = 8
MAX_HANGS = 2  # cases that may hang (each costs its own limit) before the rest of the part is given up
RESTARTED = ("crash", "hang", "fault", "malformed")  # a case's outcomes that end its worker (Tally.outcome)


@dataclass
class Restarts:
    """What took workers down so far, counted against the limits."""

    restarts: int = 0  # crashes, hangs and malformed replies
    hangs: int = 0
    faults: int = 0

    def reached(self) -> bool:
        return self.restarts > MAX_RESTARTS or self.hangs > MAX_HANGS or self.faults > MAX_FAULT_RESTARTS


@dataclass
class Tally:
    """The part's results and what its cases did to their workers. The lanes' queue (partrun.PartRun.pending) is
    guarded by the same lock."""

    impl: Implementation
    lock: threading.Lock = field(default_factory=threading.Lock)
    results: list[TestResult] = field(default_factory=list)
    case_seconds: list[float] = field(default_factory=list)  # the passed cases' times: a later case's limit scales
    violations: dict[str, list[Finding]] = field(default_factory=dict)  # per case, from the profile of its calls
    records: dict[str, list[Any]] = field(default_factory=dict)  # per case, its worker's new launch records (lanes)
    # per case: what its worker did that counts against the restart limits ("crash", "hang", "fault", "malformed"),
    # or "not run" (the part's load failed, or a limit was reached, before it ran)
    outcome: dict[str, str] = field(default_factory=dict)
    restarts: Restarts = field(default_factory=Restarts)
    load_error: tuple[str, Reason] | None = None  # why the rest of the part cannot run

    def add(self, case: Case, state: str, output: str, reason: Reason = Reason.OK, **extra: Any) -> None:
        """A result of 0 points for the case (a passed case goes through `checked`)."""
        self.results.append(case_row(self.impl, case, 0.0, state, output, reason, **extra))

    def skip_gpu_only(self, cases: list[Case], cpu_layer: bool) -> None:
        where = "the CPU layer's sanitized run)" if cpu_layer else "the Triton interpreter)"
        for c in cases:
            self.add(c, SKIPPED, "skipped: this case runs only on a GPU (too slow for " + where, Reason.NEEDS_GPU)

    def passed(self) -> set[str]:
        return {r.extra["case"] for r in self.results if r.state == PASSED}

    def load_failed(self, case: Case, e: WorkerFailure) -> None:
        """No worker could load the part: the first such failure is every later case's too."""
        if self.load_error is None:
            self.load_error = (f"not run: {e.line}" + (f"\n{e.detail}" if e.detail else ""), failure_reason(e))
            self.add(case, FAILED, *self.load_error, **own_frames(e.line, e.own))
        else:
            self.add(case, FAILED, *self.load_error)

    def failed(self, case: Case, e: WorkerFailure) -> None:
        msg = e.line + (f"\n{e.detail}" if e.detail else "")
        self.add(case, FAILED, msg, failure_reason(e), **own_frames(e.line, e.own))

    def lost_worker(self, case: Case, fault: bool, hung: bool) -> None:
        """The case took its worker down. A hang or crash costs this case: a fresh worker takes the rest. Only a
        worker that keeps dying, or one that hangs again, stops the part (the stage's own limit bounds the total)."""
        n = self.restarts
        n.faults += fault
        n.restarts += not fault
        self.outcome[case.name] = "fault" if fault else "hang" if hung else "crash"
        n.hangs += hung
        if n.reached():
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
        self.add(case, FAILED, line + (f"\n{detail}" if detail else ""), why, **own_frames(line, own))
        self.violations[case.name] = call_violations(self.impl.kind, case, reply, False, out_numel)

    def malformed(self, case: Case, bad: str) -> None:
        """Valid data, but not what a worker answers to `run`: forged on the pipe by code in the child."""
        self.add(
            case,
            FAILED,
            f"case {case.name}: the worker sent a malformed reply ({bad}); was the result pipe tampered with?",
            Reason.PROTOCOL,
        )
        self.restarts.restarts += 1
        self.outcome[case.name] = "malformed"
        if self.restarts.restarts > MAX_RESTARTS:
            self.load_error = (
                f"not run: an earlier case sent malformed replies repeatedly ({case.name})",
                Reason.NOT_RUN,
            )

    def replay_limits(self, runnable: Sequence[Case]) -> None:
        """Two lanes crash, hang or forge replies side by side, so the restart limits were reached in the order the
        failures came, not in spec order. Count them again in spec order, as one worker meets them: the case that
        reaches a limit names it, and every later case is 'not run' (some ran in the other lane meanwhile)."""
        n = Restarts()
        error: tuple[str, Reason] | None = None
        for c in runnable:
            if error is not None:
                self.results = [r for r in self.results if r.extra.get("case") != c.name]
                self.violations.pop(c.name, None)
                self.records.pop(c.name, None)
                self.add(c, FAILED, *error)
                continue
            o = self.outcome.get(c.name, "")
            n.restarts += o in RESTARTED and o != "fault"
            n.hangs += o == "hang"
            n.faults += o == "fault"
            if o == "malformed" and n.restarts > MAX_RESTARTS:
                error = (f"not run: an earlier case sent malformed replies repeatedly ({c.name})", Reason.NOT_RUN)
            elif o in ("crash", "hang", "fault") and n.reached():
                why = "hung" if o == "hang" else "crashed the process"
                error = (f"not run: earlier cases {why} repeatedly (last: {c.name})", Reason.NOT_RUN)
        if error is not None or (self.load_error is not None and self.load_error[1] == Reason.NOT_RUN):
            self.load_error = error

    def merged_records(self, runnable: Sequence[Case], last: list[Any]) -> list[Any]:
        """The launch records one worker would have had at the end: each case's records in spec order from the
        case after the last one that took its worker down (a restarted worker starts with none), then the kernel
        check's (`last`); distinct, at most MAX_LAUNCHES, as one worker keeps them."""
        down = [i for i, c in enumerate(runnable) if self.outcome.get(c.name, "") in RESTARTED]
        merged: dict[str, Any] = {}
        for c in runnable[max(down, default=-1) + 1 :]:
            for r in self.records.get(c.name, []):
                merged.setdefault(repr(r), r)
        for r in last:
            merged.setdefault(repr(r), r)
        return list(merged.values())[:MAX_LAUNCHES]
