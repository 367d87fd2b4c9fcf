"""The performance stage's orchestration: every case timed in turn, from the workers' rounds to the result rows.

For each case (grader/performance/__init__.py says what each step does): the workers set up (`time_setup`),
timed rounds (rounds.py) until the stop rule holds, the wall-clock check's re-timings (judgement.py), verification
of the timed outputs (verification.py), then each implementation's Timing judged into a result row.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from grader import sandbox
from grader.child.wire import CopyBandwidthReply, CopyBandwidthRequest, SetupReply, SetupRequest
from grader.correctness.target import Target
from grader.performance import baselinerecord, judgement, rounds, score, stats, verification, workers
from grader.performance.records import FirstPass, Timing
from grader.perfsummary import CaseJSON, PerfJSON
from grader.problem import inputs, operands
from grader.problem.reference import Reference
from grader.problem.spec import Case, Problem
from grader.results import FAILED, PASSED, SKIPPED, Finding, Kind, Reason, TestResult
from grader.sandbox import Sandbox, WorkerFailure


def _perf_test(
    impl: str,
    case: Case,
    pts: float,
    state: str,
    out: str,
    reason: Reason,
    findings: list[Finding] | None = None,
    **extra: Any,
) -> TestResult:
    return TestResult(
        f"{impl} / performance / {case.name}",
        impl,
        "performance",
        pts,
        case.points,
        state,
        out,
        {"case": case.name, **extra},
        kind=Kind.PERFORMANCE,
        reason=reason,
        findings=findings or [],
    )


def skipped_tests(problem: Problem, targets: list[Target], why: str, reason: Reason) -> list[TestResult]:
    if problem.performance is None:
        return []
    return [
        _perf_test(
            t.impl.name,
            c,
            0.0,
            SKIPPED if reason in (Reason.NEEDS_GPU, Reason.NEEDS_TRITON) else FAILED,
            why,
            reason,
            impl_kind=t.impl.kind,
        )
        for t in targets
        for c in problem.performance.cases
    ]


def run_performance(
    problem: Problem,
    targets: list[Target],
    ref: Reference,
    *,
    device: str,
    secret: int,
    rule: stats.StopRule | None = None,
    progress: Callable[[str], None] = lambda s: None,
    started: dict[str, Sandbox] | None = None,
    record_path: Path | None = None,
) -> tuple[list[TestResult], PerfJSON]:
    """Time every target against the baselines. `started`: workers from start_workers (closed here, always).
    `record_path`: a batch's baseline record for this GPU (grader/performance/baselinerecord.py): if it is usable,
    only the control baseline is timed beside the targets; a case whose control drifted past the bound times every
    baseline, and the file is removed so that the batch re-calibrates the GPU."""
    perf = problem.performance
    if perf is None:
        for b in (started or {}).values():
            b.close()
        return [], PerfJSON()
    rule = rule or stats.StopRule()
    rng = random.Random(secret ^ 0x5EED)
    limit = problem.limits.timing_s
    info: PerfJSON = {"cases": {}}
    tests: list[TestResult] = []

    # Every worker starts at once, so that CUDA start-up and imports overlap (and, started by the pipeline,
    # overlap the correctness stage too).
    progress("performance: starting workers" if started is None else "performance: loading workers")
    if started is None:
        started = workers.start_workers(problem, targets, device)
    spares, base_spares = workers.spares_of(started)
    boxes, dead = workers.load_workers(problem, targets, started, limit, info)
    try:
        if "baselines" in dead:
            raise RuntimeError(f"the baseline worker failed: {dead['baselines']}")
        bw = boxes["baselines"]
        assert bw is not None
        progress("performance: measuring copy bandwidth")
        defaults: CopyBandwidthRequest = {}  # the worker's nbytes and reps
        copy: CopyBandwidthReply = bw.request("copy_bandwidth", defaults, timeout_s=limit, what="copy bandwidth")
        info["device"] = {k: v for k, v in copy.items() if k not in ("median_ms",)}
        info["copy_bytes_per_s"] = copy["bytes_per_s"]
        info["read2_write1_bytes_per_s"] = copy["read2_write1_bytes_per_s"]
        ceiling = max(copy["bytes_per_s"], copy["read2_write1_bytes_per_s"])
        record = _load_record(problem, record_path, info)

        grade = GradeTiming(
            problem,
            targets,
            ref,
            boxes,
            dead,
            device=device,
            secret=secret,
            rule=rule,
            rng=rng,
            copy_bps=copy["bytes_per_s"],
            ceiling_bps=ceiling,
            progress=progress,
            spares=spares,
            base_spares=base_spares,
            record=record,
        )
        for case in perf.cases:
            progress(f"performance: {case.name}")
            first_calls = info.get("baseline_first_calls_s", {}).get(case.name, {})
            res = _time_case(CaseTiming(grade, case, first_calls))
            info["cases"][case.name] = res.info
            tests += res.tests
        _refuse_record(record_path, info)
    finally:
        # boxes: also the workers a re-timing started in place of the first ones. Killed at once, all together:
        # nothing a timing worker does on exit is read, and its teardown (CUDA context, Python) would hold up the
        # grade (and, in a batch, the GPU's exclusive hold) for a second or two per worker.
        sandbox.close_all([*started.values(), *boxes.values()], grace_s=0)
    return tests, info


def _load_record(problem: Problem, path: Path | None, info: PerfJSON) -> baselinerecord.BaselineRecord | None:
    """The batch's record for this GPU if there is one and it is usable here (info["baseline_record"] says)."""
    if path is None:
        return None
    try:
        rec = baselinerecord.load(path, baselinerecord.record_key(problem, info.get("device", {})))
    except baselinerecord.RecordError as e:
        info["baseline_record"] = {"used": False, "why": str(e)}
        return None
    if set(rec.cases) != {c.name for c in (problem.performance.cases if problem.performance else ())}:
        info["baseline_record"] = {"used": False, "why": "its cases are not this problem's"}
        return None
    info["baseline_record"] = {"used": True, "control": rec.control, "made_at": rec.made_at}
    return rec


def _refuse_record(path: Path | None, info: PerfJSON) -> None:
    """A case's control drifted past the bound: the record no longer stands for this GPU. Removing it makes the
    next grades time every baseline until the batch re-calibrates (a grade never writes a record)."""
    drifted = [n for n, c in info["cases"].items() if c.get("baseline_record", {}).get("refused")]
    if path is None or not drifted:
        return
    info["baseline_record"]["refused_on"] = drifted
    try:
        os.unlink(path)
    except OSError:
        pass  # already gone: another grade on this GPU refused it too


@dataclass(frozen=True)
class GradeTiming:
    """What every case of one grade is timed with. Frozen: no field is replaced while the cases run; the
    containers are the grade's shared state, which the cases update in place: `boxes` and `dead` (a worker that
    fails, one a re-timing replaces), `spares` and `base_spares` (taken by re-timings), `confirmed`, and `rng`."""

    problem: Problem
    targets: list[Target]
    ref: Reference
    boxes: dict[str, Sandbox | None]
    dead: dict[str, str]  # worker name -> why it failed
    device: str
    secret: int
    rule: stats.StopRule
    rng: random.Random
    copy_bps: float
    ceiling_bps: float
    progress: Callable[[str], None]
    # restart(names) replaces those implementations' workers with fresh processes, set up for the case, before a
    # re-timing. None: workers.restart_workers (the tests give fake workers).
    restart: Callable[[list[str]], None] | None = None
    spares: list[Sandbox] = field(default_factory=list)
    base_spares: list[Sandbox] = field(default_factory=list)
    # Implementation -> the case on which its wall-clock excess was confirmed: what stayed over the wall-clock
    # slack in every re-timing of an earlier case is not re-timed again; each case adds what it confirms.
    confirmed: dict[str, str] = field(default_factory=dict)
    # A batch's baseline record for this GPU (grader/performance/baselinerecord.py), already checked: usable here.
    record: baselinerecord.BaselineRecord | None = None


@dataclass(frozen=True)
class CaseTiming:
    """One case of a grade to time."""

    grade: GradeTiming
    case: Case
    # The baselines' first calls on this case (seconds per function), made in `prepare` during the correctness
    # stage when that ran: reported instead of the first setup's compile times.
    first_calls: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _WallCheck:
    """The wall-clock check's outcome (judgement.over_slack, then judgement.retime)."""

    base_overhead: float  # the baselines' overhead per call in the pooled rounds
    first_pass: dict[str, FirstPass]  # what went over the slack in those rounds
    retime_base: dict[str, float]  # the baselines' overhead in the pass each implementation was last timed in
    retime_rounds: int


@dataclass(frozen=True)
class _Scale:
    """What each function's times are judged against."""

    verified: dict[str, tuple[bool, str]]
    base_ms: dict[str, float]  # each timed baseline's event median
    th: score.Thresholds
    nbytes: int
    floor: float
    refname: str | None  # the spec's tolerance_baseline: the host clock's own overhead, the report's "x eager"
    ref_ms: float | None  # its event median
    gap_ref: float


class CaseOutcome(NamedTuple):
    """One timed case: its result rows (one per implementation) and its part of the performance record."""

    tests: list[TestResult]
    info: CaseJSON


def _time_case(t: CaseTiming) -> CaseOutcome:
    """Time one case: the setups' timed rounds, the wall-clock check's re-timings, verification of the timed
    outputs, then each implementation's Timing judged into a result row."""
    run = _CaseRun(t)
    data = run.time_setups()
    check = run.wall_clock_check(data)
    # Verification happens after the rounds, so the parent's own GPU work never overlaps a timed call.
    t_verify = time.monotonic()
    verified = verification.verify_case(
        run.problem, t.case, data, t.grade.ref, t.grade.device, t.grade.secret, run.n_out, run.digest_seed
    )
    scale = run.scale(data, verified)
    case_info = run.case_info(data, scale, check, t_verify)
    tests = [run.result(target, data, scale, check, case_info) for target in t.grade.targets]
    return CaseOutcome(tests, case_info)


class _CaseRun:
    """One case being timed: what its steps share."""

    def __init__(self, t: CaseTiming) -> None:
        self.grade, self.case, self.first_calls = t.grade, t.case, t.first_calls
        self.problem = problem = t.grade.problem
        perf = problem.performance
        assert perf is not None  # run_performance times only a problem with a performance section
        self.perf = perf
        self.limit = problem.limits.timing_s
        # Each timing request's own limit (rounds.RequestLimits): a hang in a round costs seconds, not timing_s.
        self.request_limits = rounds.RequestLimits(problem.limits.timing_s, problem.limits.case_s)
        self.n_out = 1
        for d in problem.out_shape(t.case.shape):
            self.n_out *= d
        # Every input of the op (spec `inputs:`) in each set, each from its own seed (grader/problem/operands.py).
        self.n_sets = rounds.n_sets(operands.input_bytes(problem, t.case))
        timing_seeds = operands.timing_seeds(problem, t.case, t.grade.secret, self.n_sets)
        boxes, dead = t.grade.boxes, t.grade.dead
        live_boxes = [w for w, b in boxes.items() if b is not None and w not in dead]
        self.digest_seed = inputs.mix_seed(t.case.seed, t.grade.secret, "digest")
        self.setup_p: SetupRequest = {
            "inputs": timing_seeds,
            "warmup_ms": 200,
            "spin_s": workers.spin_budget(len(live_boxes), workers.cpus()),
            "n_out": self.n_out,
            "digest_seed": self.digest_seed,
        }
        # With a usable record, the baselines' worker times the control only; the others' medians are recorded.
        self.recorded = _recorded(t.grade.record, t.case, problem)
        self.record_info: dict[str, Any] = {}
        timed = [b for b in problem.baselines if b not in self.recorded]
        self.names = {"baselines": timed} | {g.impl.name: [g.impl.name] for g in t.grade.targets}
        self.compile_s: dict[str, float] = {}  # each function's first-call seconds, from its first warm-up
        self.t_case = time.monotonic()
        self.setup_s = 0.0
        # One request times one function: every request has the same shape (rounds.CALLS_PER_ROUND calls of one
        # function), so the parent's clock over it, less the times reported, is the same fixed overhead for all.
        self.units = [(w, n) for w in self.names for n in self.names[w]]
        self.last_k: dict[str, int] = {}

    def setup_workers(self, only: str | None = None) -> None:
        """Every live worker makes the case's input sets (fresh buffers) and warms up. The first setup's
        compile times are the ones reported (later first calls hit the compiled code)."""
        dead, name = self.grade.dead, self.case.name
        t0 = time.monotonic()
        for w, box in self.grade.boxes.items():
            if w in dead or (only is not None and w != only):
                continue
            assert box is not None  # a worker that failed to load is in `dead`
            try:
                req = workers.setup_request(self.setup_p, self.names.get(w, []))
                got: SetupReply = box.request("time_setup", req, timeout_s=self.limit, what=f"warm-up on {name}")
                cs = got.get("compile_s") if isinstance(got, dict) else None
                rounds.expect_reply(
                    isinstance(cs, dict) and all(isinstance(v, (int, float)) for v in cs.values()),
                    f"warm-up on {name}",
                )
                for fn, secs in got["compile_s"].items():
                    self.compile_s.setdefault(fn, secs)
            except WorkerFailure as e:
                dead[w] = e.line
        self.setup_s += time.monotonic() - t0
        if "baselines" in dead:
            raise RuntimeError(f"the baseline worker failed on {name}: {dead['baselines']}")

    def hopeless(self, n: str, data: rounds.Rounds) -> bool:
        """An implementation (never a baseline) whose median after its first round is more than HOPELESS_FACTOR
        times the zero-credit time of the baselines' medians so far: it earns nothing, however long it is timed."""
        baselines = self.problem.baselines
        if n in baselines or len(data.event.get(n, ())) < rounds.CALLS_PER_ROUND or not data.checks.get(n):
            return False
        try:
            th_now = score.thresholds(
                self.perf.curve,
                self.perf.margin,
                {b: rounds.median(data.event[b]) for b in baselines if data.event.get(b)} | self.recorded,
            )
        except ValueError:  # a baseline not timed yet
            return False
        return rounds.median(data.event[n]) > judgement.HOPELESS_FACTOR * th_now.zero_ms

    def timed_rounds(self, units: list[tuple[str, str]]) -> rounds.Rounds:
        g = self.grade
        return rounds.timed_rounds(
            units,
            g.boxes,
            g.dead,
            self.names,
            g.rule,
            g.rng,
            self.n_out,
            self.last_k,
            self.request_limits,
            self.case.name,
            self.n_sets,
            self.hopeless,
        )

    def time_setups(self) -> rounds.Rounds:
        """case.setups > 1 (spec): that many independent setups, each timed to the stop rule, rounds pooled. A
        short kernel's median depends a little on where a setup's buffers landed; pooling setups averages that."""
        self.setup_workers()
        data = self.timed_rounds(self.units)
        for _ in range(1, self.case.setups):
            self.setup_workers()
            data = data.pooled(self.timed_rounds(self.units))
        return self.check_record(data)

    def check_record(self, data: rounds.Rounds) -> rounds.Rounds:
        """With a record: the control timed now against the recorded one. Within the drift bound, the record's
        medians stand for the other baselines; past it, they are timed now, as in a single grade."""
        rec = self.grade.record
        if rec is None or not self.recorded:
            return data
        recorded_control = rec.cases[self.case.name].medians_ms[rec.control]
        now = rounds.median(data.event.get(rec.control, [])) if data.event.get(rec.control) else float("nan")
        d = baselinerecord.drift(recorded_control, now) if now == now else float("inf")
        self.record_info = {"control": rec.control, "recorded_ms": recorded_control, "now_ms": now, "drift": d}
        if d <= baselinerecord.DRIFT_BOUND:
            self.record_info["used"] = True
            return data
        self.record_info |= {"used": False, "refused": True}
        self.grade.progress(
            f"performance: {self.case.name}: {rec.control} moved {100 * d:.1f}% from the GPU's baseline record "
            f"(bound {100 * baselinerecord.DRIFT_BOUND:g}%): timing every baseline"
        )
        self.recorded = {}
        self.names["baselines"] = list(self.problem.baselines)
        self.units = [("baselines", b) for b in self.problem.baselines] + [u for u in self.units if u[0] != "baselines"]
        self.setup_workers(only="baselines")  # the others were not warmed up: their first calls (compiles) now
        return data.pooled(self.timed_rounds([("baselines", b) for b in self.problem.baselines]))

    def fresh_workers(self, names: list[str]) -> None:
        """A fresh process for each: the offset that a worker process carries (where its buffers and threads
        landed) is drawn again, so a correct kernel is not judged three times on one unlucky process."""
        g = self.grade
        g.progress(
            f"performance: {self.case.name}: re-timing {', '.join(names)} in a fresh worker (the grader's clock "
            "disagreed with its reported times)"
        )
        if g.restart is not None:
            g.restart(names)
            return
        by_name = {t.impl.name: t for t in g.targets}
        workers.restart_workers(
            self.problem,
            [by_name[n] for n in names],
            g.boxes,
            g.dead,
            g.device,
            self.limit,
            self.setup_p,
            self.case.name,
            g.spares,
            g.base_spares,
            timed=self.names,
        )

    def wall_clock_check(self, data: rounds.Rounds) -> _WallCheck:
        """The wall-clock check, confirmed before it costs anything (see judgement.retime)."""
        baselines, confirmed = self.problem.baselines, self.grade.confirmed
        base_overhead = rounds.median([o for n in baselines for o in data.overhead_ms.get(n, [])])
        impl_names = [t.impl.name for t in self.grade.targets if t.impl.name not in baselines]
        # Re-timing a kernel that earns nothing (stopped early as hopeless) could only add to its time: not worth
        # a fresh worker and the GPU's time.
        first_pass = {
            n: fp
            for n, fp in judgement.over_slack(impl_names, data, base_overhead).items()
            if n not in data.stopped_early
        }
        # Re-timing gives an unlucky process a new draw. An implementation whose excess recurred in MAX_RETIMES
        # fresh processes on an earlier case has had its draws: its excess is the code's (a forged timer, work
        # outside the events), and more fresh workers would cost the GPU ~10 s each to find it again.
        for n in first_pass:
            first_pass[n].confirmed_on = confirmed.get(n)
        to_retime = {n: fp for n, fp in first_pass.items() if n not in confirmed}
        retime_base, retime_rounds, now_confirmed = judgement.retime(
            to_retime,
            data,
            list(self.names["baselines"]),
            self.grade.dead,
            self.fresh_workers,
            lambda names: self.timed_rounds([u for u in self.units if u[0] == "baselines" or u[1] in names]),
        )
        confirmed.update({n: self.case.name for n in now_confirmed})
        return _WallCheck(base_overhead, first_pass, retime_base, retime_rounds)

    def scale(self, data: rounds.Rounds, verified: dict[str, tuple[bool, str]]) -> _Scale:
        """The thresholds from the baselines' medians, the bytes moved and the physical floor."""
        problem, dead = self.problem, self.grade.dead
        base_ms = {n: stats.summarize(data.event[n]).median for n in problem.baselines if data.event.get(n)}
        if "baselines" in dead or not base_ms:
            raise RuntimeError(
                f"the baseline worker failed on {self.case.name}: {dead.get('baselines', 'no time measured')}"
            )
        base_ms |= {n: ms for n, ms in self.recorded.items() if n not in base_ms}  # a record's, when used
        th = score.thresholds(self.perf.curve, self.perf.margin, base_ms)
        nbytes = judgement.bytes_moved(problem, self.case)
        floor = score.physical_floor_ms(nbytes, self.grade.ceiling_bps, slack=judgement.FLOOR_SLACK)
        # The reference baseline (the spec's tolerance_baseline: eager for GLU) sets the host clock's own overhead
        # and the "x eager" speed-up in the report.
        refname = problem.tolerance_baseline
        ref_ms: float | None = None
        gap_ref = 0.0
        if refname is not None:
            ref_ms = base_ms.get(refname)
            ref_ev, ref_host = data.event.get(refname, []), data.host.get(refname, [])
            gap_ref = rounds.median([h - e for h, e in zip(ref_host, ref_ev, strict=False)]) if ref_ev else 0.0
        return _Scale(verified, base_ms, th, nbytes, floor, refname, ref_ms, gap_ref)

    def describe(self, n: str, data: rounds.Rounds, s: _Scale) -> Timing:
        # A baseline's first call was made in `prepare` (during the correctness stage) when that ran.
        compile_s = self.first_calls.get(n, self.compile_s.get(n))
        return judgement.describe(
            data,
            n,
            s.gap_ref,
            s.nbytes,
            self.grade.copy_bps,
            s.ref_ms,
            compile_s,
            s.verified.get(n, verification.UNCHECKED)[1],
        )

    def record_note(self) -> str:
        """Where the thresholds' baselines came from when a batch's record gave some of them."""
        r = self.record_info
        if not r.get("used"):
            return ""
        return (
            f"\nnote: {', '.join(sorted(self.recorded))} from this GPU's baseline record (measured without any "
            f"submission running); {r['control']}, timed now, is within {100 * r['drift']:.2f}% of its record "
            f"(bound {100 * baselinerecord.DRIFT_BOUND:g}%)"
        )

    def case_info(self, data: rounds.Rounds, s: _Scale, check: _WallCheck, t_verify: float) -> CaseJSON:
        """The case's part of the grade's performance info; each implementation's entry is added to "impls"."""
        case = self.case
        info: CaseJSON = {
            "shape": list(case.shape),
            "dtype": case.dtype,
            "bytes": s.nbytes,
            "floor_ms": s.floor,
            "thresholds": s.th.as_dict(),
            "stop": data.why,
            "rounds": data.rounds,
            "baselines": {
                n: self.describe(n, data, s).as_dict()
                if data.event.get(n)
                else {"event": {"median": self.recorded[n]}, "recorded": True}
                for n in self.problem.baselines
                if data.event.get(n) or n in self.recorded
            },
            "impls": {},
            "worker_spin_s": self.setup_p["spin_s"],
            "setups": case.setups,
            "wall_s": {
                "setup": round(self.setup_s, 2),
                "rounds": round(t_verify - self.t_case - self.setup_s, 2),
                "verify": round(time.monotonic() - t_verify, 2),
            },
            "baseline_overhead_ms": check.base_overhead,
            "stopped_early": list(data.stopped_early),
        }
        if self.record_info:
            info["baseline_record"] = self.record_info
        return info

    def result(
        self, target: Target, data: rounds.Rounds, s: _Scale, check: _WallCheck, case_info: CaseJSON
    ) -> TestResult:
        """One implementation's result row on the case; its timing goes into case_info["impls"]."""
        n, case, dead = target.impl.name, self.case, self.grade.dead
        if n in dead and not data.event.get(n):
            return _perf_test(
                n, case, 0.0, FAILED, f"not timed: {dead[n]}", Reason.NOT_TIMED, impl_kind=target.impl.kind
            )
        timing = self.describe(n, data, s)
        timing.first_pass = check.first_pass.get(n)
        ok, vmsg = s.verified.get(n, verification.UNCHECKED)
        base_overhead = check.retime_base.get(n, check.base_overhead)
        judgement.judge(timing, ok, vmsg, base_overhead, s.floor, s.th, s.nbytes, self.grade.copy_bps, s.ref_ms)
        # The speed credit has one source: timing.credit, which judgement.judge computed from the scored time and
        # the thresholds. The rest is derived from it here, once: the row's score (credit x the case's points: what
        # the grade sums, zeroed later by a forfeit, results.Forfeit.charge), its state and reason, and two copies
        # written as they always were, the row's extra_data "credit" and the case's JSON "credit" (as_dict), which
        # the reports read (results.TimingView.credit). Nothing reads a copy back to score with it.
        case_info["impls"][n] = timing.as_dict(check.retime_rounds)
        c = timing.credit or 0.0
        reason = Reason.FLAGGED if timing.findings else (Reason.OK if c >= 1.0 else Reason.SLOW)
        text = judgement.perf_text(timing, s.th, ok, str(s.refname))  # "None" where the spec names none, as before
        return _perf_test(
            n,
            case,
            c * case.points,
            PASSED if c > 0 else FAILED,
            text + _stopped_early_note(n, data, timing) + self.record_note(),
            reason,
            timing.findings,
            credit=c,
            flags=[f.text for f in timing.findings],
            effective_ms=timing.rates.effective_ms,
            impl_kind=target.impl.kind,
        )


def _recorded(rec: baselinerecord.BaselineRecord | None, case: Case, problem: Problem) -> dict[str, float]:
    """The record's medians of the baselines other than its control, on CASE ({} without a usable record)."""
    if rec is None or case.name not in rec.cases or rec.control not in problem.baselines:
        return {}
    medians = rec.cases[case.name].medians_ms
    if set(medians) != set(problem.baselines):
        return {}
    return {b: ms for b, ms in medians.items() if b != rec.control}


def _stopped_early_note(n: str, data: rounds.Rounds, timing: Timing) -> str:
    if n not in data.stopped_early:
        return ""
    return (
        f"\nnote: timed on {timing.event.n} calls only: more than {judgement.HOPELESS_FACTOR:g}x the "
        "zero-credit time after the first round, so more calls could not change its credit"
    )
