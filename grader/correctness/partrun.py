"""Running one part's correctness cases: its fixed inputs (PartInputs), its workers (lanes) and the queue they take
cases from (PartRun). Each case's checks are correctness/verdict.py's, its results the part's Tally's. Why a second
lane and how it stays equal to one: docs/architecture.md, "The correctness stage"."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader import sandbox
from grader.correctness.tally import Tally
from grader.correctness.target import Target
from grader.correctness.verdict import (
    call_violations,
    calls_of,
    case_limit,
    case_payload,
    case_row,
    check_case,
    first_wrong,
    malformed_raised,
    malformed_run_reply,
    reply_limit,
)
from grader.problem.reference import Reference
from grader.problem.spec import Case, Problem
from grader.results import FAILED, PASSED, SKIPPED, Reason
from grader.sandbox import Sandbox, WorkerFailure

STOPPED = "not run: --watch stops at the first failing case (grade --watch --all runs every case)"
COMPILE_STOPPED = "not run: --watch stopped at the first failing case (a grade that runs every case checks this)"
# Correctness cases in two worker processes (CPU grades of a Triton part): "1" or "2" forces the number (tests,
# measurements); unset, a second worker starts only when the cases left would take longer than LANE_AFTER_S and the
# machine has a core to spare (docs/performance.md, "The student's loop on a 2-core CPU").
WORKERS_ENV = "GRADER_CORRECTNESS_WORKERS"
LANE_AFTER_S = 2.0


@dataclass(frozen=True)
class PartInputs:
    """What the part's run is given, fixed before its first case: every lane reads it without the lock."""

    problem: Problem
    target: Target
    ref: Reference
    device: str
    secret: int
    progress: Callable[[str], None]
    stop_at_failure: bool
    runnable: tuple[Case, ...]  # the cases this machine runs (on a CPU, not the GPU-only ones), in run order
    deadline: float  # time.monotonic() past which no case starts
    workers: int  # the most lanes (1 or 2)

    @property
    def grace_s(self) -> float:
        """How long a closing worker may take to exit: none on a CPU (nothing it does on exit is read)."""
        return 0.0 if self.device == "cpu" else 2.0

    @property
    def records_launches(self) -> bool:
        """Whether the part's workers record launches for the GPU compile check (on a CPU, a Triton part)."""
        return self.device == "cpu" and self.target.impl.kind == "triton"


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
class PartRun:
    """The part's workers and the cases they take: `pending` and `ran_in` are read and written under the tally's
    lock; the lanes each touch only their own `_Lane`."""

    part: PartInputs
    tally: Tally
    lanes: list[_Lane] = field(default_factory=lambda: [_Lane()])
    compile_box: Sandbox | None = None  # the GPU compile check's worker, started once the part loaded
    loaded: threading.Event = field(default_factory=threading.Event)  # the first load succeeded, or failed
    pending: list[Case] = field(default_factory=list)
    ran_in: dict[str, _Lane] = field(default_factory=dict)  # per case, the lane whose worker answered it

    def start(self, lane: _Lane) -> Sandbox:
        """A worker with the part loaded: the lane's spare if it has one, else a new one."""
        p = self.part
        b, lane.spare = lane.spare, None
        if b is None:
            b = Sandbox(p.device, max_reply=reply_limit(p.runnable))
        try:
            b.wait_ready(max(1.0, p.deadline - time.monotonic()))
            b.request(
                "load",
                p.target.payload(p.problem),
                timeout_s=max(1.0, p.deadline - time.monotonic()),
                what="loading the submission",
            )
        except WorkerFailure:
            b.close()  # a worker that could not load is ours to end, not a stray of the submission's
            raise
        return b

    def close(self) -> None:
        # Every lane's workers exit together (one grace period, not one per worker); the compile check's worker
        # writes nothing on exit, so it is killed at once.
        sandbox.close_all([b for lane in self.lanes for b in (lane.box, lane.spare)], self.part.grace_s)
        for lane in self.lanes:
            lane.box = lane.spare = None
        sandbox.close_all([self.compile_box], grace_s=0)

    # -- the lanes ------------------------------------------------------------------------------------------

    def run_cases(self) -> None:
        """Every runnable case, in one lane, or two once a second one pays (`_second_lane_pays`)."""
        self.pending = list(self.part.runnable)
        threads: list[threading.Thread] = []
        try:
            while (case := self.next_case()) is not None:
                if self.part.workers > 1 and not threads and (self.forced_lanes() or self._second_lane_pays()):
                    threads.append(self.second_lane())
                self.case(case, self.lanes[0])
        except BaseException:
            with self.tally.lock:
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
            self.tally.replay_limits(self.part.runnable)

    def forced_lanes(self) -> bool:
        return os.environ.get(WORKERS_ENV, "") == "2"

    def _second_lane_pays(self) -> bool:
        """Would a second worker finish sooner: the cases left take more than LANE_AFTER_S at the pace of the
        cases so far (after the first, which pays one-time costs), and a core is idle (load average)."""
        with self.tally.lock:
            paced = self.tally.case_seconds[1:]
            left = len(self.pending)
        if not paced or left < 2:
            return False
        cores = len(os.sched_getaffinity(0))
        return sum(paced) / len(paced) * left > LANE_AFTER_S and os.getloadavg()[0] < cores - 0.5

    def second_lane(self) -> threading.Thread:
        """Start a second worker now (its imports overlap the first lane's cases) and a thread that feeds it."""
        lane = _Lane(spare=Sandbox(self.part.device, max_reply=reply_limit(self.part.runnable), wait=False))
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
        with self.tally.lock:
            return self.pending.pop(0) if self.pending else None

    def worker(self, case: Case, lane: _Lane) -> Sandbox | None:
        """The lane's live worker for the case (a fresh one if the last is gone); None when none could load."""
        p = self.part
        if lane.box is not None and lane.box.alive:
            return lane.box
        try:
            lane.box = self.start(lane)
        except WorkerFailure as e:
            lane.box = None
            with self.tally.lock:
                self.tally.load_failed(case, e)
            return None
        finally:
            self.loaded.set()
        if p.stop_at_failure or not p.records_launches:
            return lane.box
        with self.tally.lock:  # (one for the part, whichever lane loads first)
            if self.compile_box is None:
                # The GPU compile check's worker, started now so that its imports overlap the cases (not in a
                # --watch grade, whose first failure comes first: its check starts a worker if it runs at all).
                self.compile_box = Sandbox("cpu", compile_only=True, wait=False)
        return lane.box

    # -- one case -------------------------------------------------------------------------------------------

    def not_run(self, case: Case) -> bool:
        """Record the case as not run when it cannot be (stopped, the part's load failed, past the stage's limit)."""
        p, tally = self.part, self.tally
        if p.stop_at_failure and any(r.state == FAILED for r in tally.results):
            tally.add(case, SKIPPED, STOPPED, Reason.NOT_RUN, stopped=True)
            return True
        p.progress(f"{p.target.impl.name}: {case.name}")
        if tally.load_error is not None:
            tally.add(case, FAILED, *tally.load_error)
            tally.outcome[case.name] = "not run"
            return True
        if time.monotonic() > p.deadline:
            limit = p.problem.limits.correctness_s
            tally.add(case, FAILED, f"not run: the correctness stage ran past its {limit:.0f} s limit", Reason.NOT_RUN)
            return True
        return False

    def case(self, case: Case, lane: _Lane) -> None:
        """Run one case in the lane's worker and check its reply."""
        p, tally = self.part, self.tally
        with tally.lock:
            if self.not_run(case):
                return
        box = self.worker(case, lane)
        if box is None:
            return
        base, extra, payload = case_payload(p.problem, case, p.secret)
        t0 = time.monotonic()
        with tally.lock:
            self.ran_in[case.name] = lane
        try:
            with tally.lock:
                limit = case_limit(p.problem.limits.case_s, tally.case_seconds)
            budget = min(limit, p.deadline - time.monotonic())
            reply = box.request("run", payload, timeout_s=max(1.0, budget), what=f"case {case.name}")
        except WorkerFailure as e:
            with tally.lock:
                self.worker_failed(case, lane, box, e)
            return
        if isinstance(reply, dict) and "raised" in reply and not malformed_raised(reply):
            with tally.lock:
                tally.raised(case, reply, payload["out_numel"])
            self.collect_records(case, box)
            return
        bad = malformed_run_reply(reply)
        if bad:
            with tally.lock:
                tally.malformed(case, bad)
                box.close()
                lane.box = None
            return
        self.checked(case, reply, base, extra, t0, payload["out_numel"])
        self.collect_records(case, box)

    def worker_failed(self, case: Case, lane: _Lane, box: Sandbox, e: WorkerFailure) -> None:
        self.tally.failed(case, e)
        fault = not e.fatal and e.category == "cuda-fault"
        if fault:
            # A kernel fault poisons the CUDA context for good: later cases in this process would all
            # fail with the same error. Start a fresh worker for them instead.
            box.close()
            e.fatal = True
        if not e.fatal:
            return
        lane.box = None
        self.tally.lost_worker(case, fault, e.reason == "timeout")

    def checked(
        self,
        case: Case,
        reply: dict[str, Any],
        base: torch.Tensor,
        extra: list[torch.Tensor],
        t0: float,
        out_numel: int,
    ) -> None:
        p = self.part
        kind = p.target.impl.kind
        calls = calls_of(p.target.path) if kind == "triton" else None
        verdict = check_case(p.problem, case, reply, base, p.ref, p.device, extra, calls)
        violations = call_violations(kind, case, reply, verdict.ok, out_numel)
        result = case_row(
            p.target.impl,
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
            **first_wrong(verdict),
        )
        with self.tally.lock:
            self.tally.violations[case.name] = violations
            if verdict.ok:
                self.tally.case_seconds.append(time.monotonic() - t0)
            self.tally.results.append(result)

    def collect_records(self, case: Case, box: Sandbox) -> None:
        """With two lanes: the launch records the case added in its worker (the GPU compile check merges them in
        spec order, as one worker would have recorded them). One worker keeps them all; nothing to do."""
        if self.part.workers < 2 or not self.part.records_launches:
            return
        try:
            got = box.request("launch_records", "take", timeout_s=10.0, what="the launch records")
        except WorkerFailure:
            return  # (a worker gone: its records are lost, as one worker's are when it is restarted)
        with self.tally.lock:
            self.tally.records[case.name] = got if isinstance(got, list) else []
