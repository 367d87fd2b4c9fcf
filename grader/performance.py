"""Time and score the performance cases: student kernels against baselines measured in the same run.

The parent orchestrates; workers only execute. One trusted worker runs the baselines (manual, eager,
torch.compile), one untrusted worker per implementation runs the submission. Each perf case:
  1. setup: every worker makes the input sets and warms up (compile time reported, never timed);
  2. rounds, round-robin across workers (rotated each round), so drift and heat hit all alike, until the
     stop rule holds for every timed function (grader/stats.py);
  3. the parent verifies sampled elements of timed outputs against its own float64 truth for that exact input;
  4. score (grader/score.py) on the effective time: the event median; but when the worker's host clock
     (median, less the trusted eager baseline's host overhead) exceeds it by far more than host jitter, that
     host-derived time instead, and a flag (work hidden on another stream counts); and when the parent's own
     clock over the worker's requests exceeds the baselines' by more than jitter (times forged inside the
     untrusted worker), the implementation is re-timed in fresh rounds that alone count for it, and if the
     excess recurs it is scored on the event median plus that excess, with a flag.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from . import check, inputs, score, stats, wire
from .correctness import Target
from .perfrecords import FirstPass, Rates, Timing
from .reference import Reference
from .results import FAILED, FLAG, PASSED, SKIPPED, Code, Finding, Kind, Reason, TestResult
from .sandbox import GraderFault, Sandbox, WorkerFailure
from .spec import Case, Problem

# Input sets rotated per worker: consecutive calls never see the same buffers. More sets where they are small:
# a short kernel's time depends a little on where its buffers landed (a per-setup state: a 4096x8192 fp16
# case's medians moved ~1% between grades with 3 sets: docs/performance.md#input-sets-and-setups), and more
# placements average that out. At most
# SET_BYTES of input per worker (twice that with each set's pristine copy), so the large cases keep 3.
MIN_SETS, MAX_SETS = 3, 8
SET_BYTES = 512 * 2**20
CALLS_PER_ROUND = 5
SCALES = (0.25, 0.5, 1.0, 2.0, 4.0, -0.5, -1.0, -2.0)  # powers of two: scaling is exact in every dtype
FIRST_SAMPLE = 1 << 20  # elements checked on the first timed output of each function
ROUND_SAMPLE = 1 << 14  # elements checked on one random timed call per round
# The host clock is a guard, not the measurement: its sync latency jitters by ~5-10 us, which is 10-30% of
# a 30 us kernel (stability runs on the H200 showed exactly that). It takes over only when it exceeds the
# event time by far more than that jitter, i.e. when real work ran outside the timed stream.
HOST_FLAG_RATIO = 1.5
HOST_FLAG_SLACK_MS = 0.02
# The wall-clock check: an implementation whose requests take longer, per call, than the baselines' requests by
# more than WALL_SLACK_MS + WALL_SLACK_RATIO x its event median is re-timed in a fresh worker process; if that
# happens every time, it is scored on event median + that excess. 0.08 ms: a worker process carries an offset of
# its own (+-0.1 ms per call seen on the H200 for the same F.glu in two processes), docs/performance.md
# #the-wall-clock-check.
WALL_SLACK_MS = 0.08
WALL_SLACK_RATIO = 0.25
# How many times an implementation over the slack is re-timed, each time in a new worker process (a new draw of
# that process's offset), before the excess counts. A forged timer exceeds it in every process, so each
# re-timing costs it nothing but the grader a worker start (~10 s on the H200).
MAX_RETIMES = 2
# Idle timing workers kept for those re-timings (a fresh start is ~8 s on the H200: the interpreter, torch, CUDA).
# Two cover a grade's usual one or two re-timings; beyond that a worker is started when needed.
SPARE_WORKERS = 2
SPARE = "spare:"  # their keys among start_workers' boxes (no implementation name has a colon: grader/spec.py)
# While a case is timed, idle workers busy-wait for their next request (grader/child/worker.py: spin_wait) instead of
# sleeping, if the machine has a core for every worker plus the parent; otherwise spinning would steal them.
SPIN_S = 0.25
FLOOR_SLACK = 0.10  # a time 10% under bytes / (fastest measured bandwidth) is called impossible


def bytes_moved(problem: Problem, case: Case) -> int:
    """Each input element read once, each output element written once."""
    es = torch.tensor([], dtype=inputs.TORCH_DTYPES[case.dtype]).element_size()
    n_in = 1
    for d in case.shape:
        n_in *= d
    n_out = n_in // case.shape[-1] * problem.out_shape(case.shape)[-1]
    return (n_in + n_out) * es


def wall_slack_ms(event_median_ms: float) -> float:
    """How much more per call the parent's clock may see than the baselines' before the wall-clock check acts."""
    return WALL_SLACK_MS + WALL_SLACK_RATIO * event_median_ms


def spin_budget(n_workers: int, n_cpus: int) -> float:
    """Seconds an idle worker busy-waits for its next timing request: SPIN_S when cores allow, else 0."""
    return SPIN_S if n_cpus >= n_workers + 2 else 0.0


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


class _Sample:
    """The verification plan for one timed call: which set, which scale, which flat indices."""

    def __init__(self, name: str, k: int, scale: float, idx: torch.Tensor):
        self.name, self.k, self.scale, self.idx = name, k, scale, idx


def n_sets(input_bytes: int) -> int:
    """How many input sets a case rotates through (see MIN_SETS)."""
    return max(MIN_SETS, min(MAX_SETS, SET_BYTES // max(1, input_bytes)))


def _plan(
    rng: random.Random, n_out: int, first: bool, prev_k: int | None = None, sets: int = MIN_SETS
) -> tuple[list[tuple[int, float]], list[tuple[int, int, float, torch.Tensor]]]:
    """One round's calls [(set, scale)], and the parent's private choice of which call to verify:
    [(call index, set, scale, flat output indices)]. prev_k: the set the previous round ended on, so rounds
    don't repeat it either. Only the plan goes to the worker; the choice is sent after the round."""
    plan: list[tuple[int, float]] = []
    checks: list[tuple[int, int, float, torch.Tensor]] = []
    vcall = 0 if first else rng.randrange(CALLS_PER_ROUND)
    for j in range(CALLS_PER_ROUND):
        # A different set from the previous call (never the same buffers twice in a row), chosen at random.
        last = plan[-1][0] if plan else prev_k
        k = (last + rng.randrange(1, sets)) % sets if last is not None else rng.randrange(sets)
        scale = rng.choice(SCALES)
        if j == vcall and n_out:
            m = min(n_out, FIRST_SAMPLE if first else ROUND_SAMPLE)
            g = torch.Generator().manual_seed(rng.randrange(1 << 62))
            idx = torch.randint(0, n_out, (m,), generator=g)
            idx = torch.cat([idx, torch.arange(max(0, n_out - 1024), n_out)])  # the tail, where masks go wrong
            checks.append((j, k, scale, idx))
        plan.append((k, scale))
    return plan, checks


def _baseline_payload(problem: Problem) -> dict[str, Any]:
    return {"kind": "reference", "path": str(problem.reference), "baselines": problem.baselines, "display": "baselines"}


def start_workers(problem: Problem, targets: list[Target], device: str) -> dict[str, Sandbox]:
    """Spawn the timing workers (baselines, then one per implementation) without waiting for them.

    The pipeline calls this before the correctness stage, so that their start-up (imports, CUDA context:
    ~10 s of a grade on the H200) overlaps it, and so does the baselines' first calls: the trusted worker is
    told to `prepare` (import Dynamo, torch.compile every perf shape) as soon as it is up. A worker only binds
    its timer at start; it measures the GPU (calibration) when run_performance loads it, once the correctness
    stage has left the GPU idle, and a student's module is imported only after that.
    """
    # The baselines are trusted (the staff's reference.py): the grader's uid and its own compile caches, which no
    # submission can write (grader/identity.py). Every implementation's worker is the submission's.
    boxes = {
        name: Sandbox(device, wait=False, timing=True, trusted=name == "baselines")
        for name in ["baselines"] + [t.impl.name for t in targets]
    }
    # Spares for re-timings, which each run in a new process (see _restart_workers): started now, their start-up
    # overlaps the correctness stage instead of stalling a timed case. They never import code under test unless used.
    for i in range(SPARE_WORKERS if targets and device != "cpu" else 0):
        boxes[f"{SPARE}{i}"] = Sandbox(device, wait=False, timing=True, trusted=False)
    if problem.performance is not None:
        prep = {**_baseline_payload(problem), "cases": [asdict(c) for c in problem.performance.cases]}
        try:
            boxes["baselines"].send("prepare", prep, what="compiling the baselines")
        except WorkerFailure:
            pass  # it died at once: run_performance reports that when it waits for it
    return boxes


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
) -> tuple[list[TestResult], dict[str, Any]]:
    """Time every target against the baselines. `started`: workers from start_workers (closed here, always)."""
    perf = problem.performance
    if perf is None:
        for b in (started or {}).values():
            b.close()
        return [], {}
    rule = rule or stats.StopRule()
    rng = random.Random(secret ^ 0x5EED)
    limit = problem.limits.timing_s
    info: dict[str, Any] = {"cases": {}}
    tests: list[TestResult] = []

    # Every worker starts at once, so that CUDA start-up and imports overlap (and, started by the pipeline,
    # overlap the correctness stage too).
    progress("performance: starting workers" if started is None else "performance: loading workers")
    if started is None:
        started = start_workers(problem, targets, device)
    spares = [started[k] for k in list(started) if k.startswith(SPARE)]
    boxes: dict[str, Sandbox | None] = {}
    dead: dict[str, str] = {}
    pending = [("baselines", _baseline_payload(problem))] + [(t.impl.name, t.payload(problem)) for t in targets]
    t_load = time.monotonic()
    load_s: dict[str, float] = {}
    for name, payload in pending:
        try:
            t0 = time.monotonic()
            started[name].wait_ready(timeout_s=180)
            early = started[name].drain(timeout_s=limit)  # the baselines' `prepare`, queued by start_workers
            if early and name == "baselines":
                info["baseline_first_calls_s"] = early[0]
            started[name].request("load", payload, timeout_s=limit, what="loading")
            boxes[name] = started[name]
            load_s[name] = round(time.monotonic() - t0, 2)
        except WorkerFailure as e:
            dead[name] = e.line
            started[name].close()
            if name == "baselines":
                # Trusted code failed before any timing worker imported the submission: the grader's fault. No
                # grade that would cost the student the speed points (docs/SECURITY.md, grader faults).
                for b in started.values():
                    b.close()
                raise GraderFault(
                    f"the trusted baselines' timing worker failed before the submission was timed: {e.line}", e.detail
                ) from None
    info["load_wall_s"] = {"total": round(time.monotonic() - t_load, 2), **load_s}
    try:
        if "baselines" in dead:
            raise RuntimeError(f"the baseline worker failed: {dead['baselines']}")
        bw = boxes["baselines"]
        assert bw is not None
        progress("performance: measuring copy bandwidth")
        copy = bw.request("copy_bandwidth", {}, timeout_s=limit, what="copy bandwidth")
        info["device"] = {k: v for k, v in copy.items() if k not in ("median_ms",)}
        info["copy_bytes_per_s"] = copy["bytes_per_s"]
        info["read2_write1_bytes_per_s"] = copy["read2_write1_bytes_per_s"]
        ceiling = max(copy["bytes_per_s"], copy["read2_write1_bytes_per_s"])

        for case in perf.cases:
            progress(f"performance: {case.name}")
            res = _time_case(
                problem,
                case,
                targets,
                boxes,
                dead,
                ref,
                device=device,
                secret=secret,
                rule=rule,
                rng=rng,
                copy_bps=copy["bytes_per_s"],
                ceiling_bps=ceiling,
                progress=progress,
                first_calls=info.get("baseline_first_calls_s", {}).get(case.name, {}),
                spares=spares,
            )
            info["cases"][case.name] = res["info"]
            tests += res["tests"]
    finally:
        # boxes: also the workers a re-timing started in place of the first ones
        for box in [*started.values(), *(b for b in boxes.values() if b is not None)]:
            box.close()
    return tests, info


def _time_case(
    problem,
    case,
    targets,
    boxes,
    dead,
    ref,
    *,
    device,
    secret,
    rule,
    rng,
    copy_bps,
    ceiling_bps,
    progress,
    first_calls=None,
    restart: Callable[[list[str]], None] | None = None,
    spares: list[Sandbox] | None = None,
) -> dict[str, Any]:
    """Time one case. `restart(names)` replaces those implementations' workers with fresh processes, set up for
    the case, before a re-timing (default: _restart_workers; the tests give fake workers)."""
    first_calls = first_calls or {}
    spares = spares if spares is not None else []
    perf = problem.performance
    limit = problem.limits.timing_s
    shape_out = problem.out_shape(case.shape)
    n_out = 1
    for d in shape_out:
        n_out *= d
    in_bytes = math.prod(case.shape) * torch.tensor([], dtype=inputs.TORCH_DTYPES[case.dtype]).element_size()
    seeds = [inputs.mix_seed(case.seed, secret, f"perf{k}") for k in range(n_sets(in_bytes))]
    live_boxes = [w for w, b in boxes.items() if b is not None and w not in dead]
    digest_seed = inputs.mix_seed(case.seed, secret, "digest")
    setup_p = {
        "case": asdict(case),
        "seeds": seeds,
        "warmup_ms": 200,
        "spin_s": spin_budget(len(live_boxes), _cpus()),
        "n_out": n_out,
        "digest_seed": digest_seed,
    }
    names = {"baselines": list(problem.baselines)} | {t.impl.name: [t.impl.name] for t in targets}
    setup_info: dict[str, Any] = {}
    t_case = time.monotonic()
    setup_s = 0.0

    def setup_workers() -> None:
        """Every live worker makes the case's input sets (fresh buffers) and warms up. The first setup's
        compile times are the ones reported (later first calls hit the compiled code)."""
        nonlocal setup_s
        t0 = time.monotonic()
        for w, box in boxes.items():
            if w in dead:
                continue
            try:
                got = box.request("time_setup", setup_p, timeout_s=limit, what=f"warm-up on {case.name}")
                cs = got.get("compile_s") if isinstance(got, dict) else None
                _expect(
                    isinstance(cs, dict) and all(isinstance(v, (int, float)) for v in cs.values()),
                    f"warm-up on {case.name}",
                )
                setup_info.setdefault(w, got)
            except WorkerFailure as e:
                dead[w] = e.line
        setup_s += time.monotonic() - t0
        if "baselines" in dead:
            raise RuntimeError(f"the baseline worker failed on {case.name}: {dead['baselines']}")

    # One request times one function: every request has the same shape (CALLS_PER_ROUND calls of one function),
    # so the parent's clock over it, less the times reported, is the same fixed overhead for all of them.
    units = [(w, n) for w in names for n in names[w]]
    last_k: dict[str, int] = {}

    def timed_rounds(units: list[tuple[str, str]]) -> _Rounds:
        return _timed_rounds(units, boxes, dead, names, rule, rng, n_out, last_k, limit, case.name, len(seeds))

    # case.setups > 1 (spec): that many independent setups, each timed to the stop rule, rounds pooled. A short
    # kernel's median depends a little on where a setup's buffers landed; pooling setups averages that out.
    setup_workers()
    data = timed_rounds(units)
    for _ in range(1, case.setups):
        setup_workers()
        data = data.pooled(timed_rounds(units))

    # The wall-clock check, confirmed before it costs anything (see _retime).
    base_overhead = _median([o for n in problem.baselines for o in data.overhead_ms[n]])
    impl_names = [t.impl.name for t in targets if t.impl.name not in problem.baselines]
    first_pass = _over_slack(impl_names, data, base_overhead)
    by_name = {t.impl.name: t for t in targets}

    def fresh_workers(names: list[str]) -> None:
        # A fresh process for each: the offset that a worker process carries (where its buffers and threads
        # landed) is drawn again, so a correct kernel is not judged three times on one unlucky process.
        progress(
            f"performance: {case.name}: re-timing {', '.join(names)} in a fresh worker (the grader's clock "
            "disagreed with its reported times)"
        )
        if restart is not None:
            restart(names)
            return
        _restart_workers(problem, [by_name[n] for n in names], boxes, dead, device, limit, setup_p, case.name, spares)

    retime_base, retime_rounds = _retime(
        first_pass,
        data,
        list(problem.baselines),
        dead,
        fresh_workers,
        lambda names: timed_rounds([u for u in units if u[0] == "baselines" or u[1] in names]),
    )

    # Verification happens after the rounds, so the parent's own GPU work never overlaps a timed call.
    t_verify = time.monotonic()
    verified = _verify_case(problem, case, data, ref, device, secret, n_out, digest_seed)

    base_ms = {n: stats.summarize(data.event[n]).median for n in problem.baselines if data.event[n]}
    if "baselines" in dead or not base_ms:
        raise RuntimeError(f"the baseline worker failed on {case.name}: {dead.get('baselines', 'no time measured')}")
    th = score.thresholds(perf.curve, perf.margin, base_ms)
    nbytes = bytes_moved(problem, case)
    floor = score.physical_floor_ms(nbytes, ceiling_bps, slack=FLOOR_SLACK)
    # The reference baseline (the spec's tolerance_baseline: eager for GLU) sets the host clock's own overhead
    # and the "x eager" speed-up in the report.
    refname = problem.tolerance_baseline
    ref_ev, ref_host = data.event.get(refname, []), data.host.get(refname, [])
    gap_ref = _median([h - e for h, e in zip(ref_host, ref_ev, strict=False)]) if ref_ev else 0.0

    def describe(n: str) -> Timing:
        # A baseline's first call was made in `prepare` (during the correctness stage) when that ran.
        compile_s = first_calls.get(n, setup_info.get(_owner(names, n), {}).get("compile_s", {}).get(n))
        return _describe(
            data, n, gap_ref, nbytes, copy_bps, base_ms.get(refname), compile_s, verified.get(n, _UNCHECKED)[1]
        )

    case_info: dict[str, Any] = {
        "shape": list(case.shape),
        "dtype": case.dtype,
        "bytes": nbytes,
        "floor_ms": floor,
        "thresholds": th.as_dict(),
        "stop": data.why,
        "rounds": data.rounds,
        "baselines": {n: describe(n).as_dict() for n in problem.baselines if data.event[n]},
        "impls": {},
        "worker_spin_s": setup_p["spin_s"],
        "setups": case.setups,
        "wall_s": {
            "setup": round(setup_s, 2),
            "rounds": round(t_verify - t_case - setup_s, 2),
            "verify": round(time.monotonic() - t_verify, 2),
        },
        "baseline_overhead_ms": base_overhead,
    }
    tests: list[TestResult] = []
    for t in targets:
        n = t.impl.name
        if n in dead and not data.event.get(n):
            tests.append(
                _perf_test(n, case, 0.0, FAILED, f"not timed: {dead[n]}", Reason.NOT_TIMED, impl_kind=t.impl.kind)
            )
            continue
        timing = describe(n)
        timing.first_pass = first_pass.get(n)
        ok, vmsg = verified.get(n, _UNCHECKED)
        _judge(timing, ok, vmsg, retime_base.get(n, base_overhead), floor, th, nbytes, copy_bps, base_ms.get(refname))
        case_info["impls"][n] = timing.as_dict(retime_rounds)
        c = timing.credit or 0.0
        reason = Reason.FLAGGED if timing.findings else (Reason.OK if c >= 1.0 else Reason.SLOW)
        tests.append(
            _perf_test(
                n,
                case,
                c * case.points,
                PASSED if c > 0 else FAILED,
                _perf_text(timing, th, ok, refname),
                reason,
                timing.findings,
                credit=c,
                flags=[f.text for f in timing.findings],
                effective_ms=timing.rates.effective_ms,
                impl_kind=t.impl.kind,
            )
        )
    return {"tests": tests, "info": case_info}


_UNCHECKED = (False, "no timed output was checked")


def _over_slack(names: list[str], data: _Rounds, base_overhead: float) -> dict[str, FirstPass]:
    """The implementations whose first pass took longer per call, on the parent's clock, than the baselines'
    requests by more than the slack."""
    out = {}
    for n in names:
        if data.event.get(n):
            med = stats.summarize(data.event[n]).median
            excess = _median(data.overhead_ms[n]) - base_overhead
            if excess > wall_slack_ms(med):
                out[n] = FirstPass(med, excess)
    return out


def _retime(
    first_pass: dict[str, FirstPass],
    data: _Rounds,
    baselines: list[str],
    dead: dict[str, str],
    fresh_workers: Callable[[list[str]], None],
    rounds_for: Callable[[list[str]], _Rounds],
) -> tuple[dict[str, float], int]:
    """Re-time what went over the slack, up to MAX_RETIMES passes, each in fresh workers (`fresh_workers`) beside
    the baselines (`rounds_for`), and each only for what was still over in the pass before. The last pass an
    implementation was timed in is the one that counts for it: its times replace the earlier ones in `data` (its
    checked outputs add up). A hiccup or an unlucky process does not recur every time; a forged timer must forge
    again, and is caught again; a worker that behaves only when re-timed is scored on that behaviour. Returns the
    baselines' overhead in the pass each implementation was last timed in, and the rounds the re-timings took."""
    retime_base: dict[str, float] = {}
    rounds = 0
    pending = list(first_pass)
    for attempt in range(MAX_RETIMES):
        if not pending or "baselines" in dead:
            break
        fresh_workers(pending)
        again = rounds_for(pending)
        rounds += again.rounds
        base_ohs = [o for n in baselines for o in again.overhead_ms[n]]
        if not base_ohs:  # the baselines died in it: nothing to compare with, the pass before stands
            break
        base_now = _median(base_ohs)
        still = []
        for n in pending:
            data.checks[n] += again.checks.get(n, [])
            data.digests[n] += again.digests.get(n, [])
            if not again.event.get(n):  # it died while re-timed: the pass before stands, flag and all
                continue
            data.event[n], data.host[n], data.overhead_ms[n] = again.event[n], again.host[n], again.overhead_ms[n]
            first_pass[n].retimed, first_pass[n].retimes = True, attempt + 1
            retime_base[n] = base_now
            if _median(data.overhead_ms[n]) - base_now > wall_slack_ms(stats.summarize(data.event[n]).median):
                still.append(n)
        pending = still
    return retime_base, rounds


def _verify_case(
    problem: Problem,
    case: Case,
    data: _Rounds,
    ref: Reference,
    device: str,
    secret: int,
    n_out: int,
    digest_seed: int,
) -> dict[str, tuple[bool, str]]:
    """Check every function's sampled timed outputs against the truth, then every timed call's checksum."""
    verified = {n: _verify(problem, case, data.checks[n], ref, device, secret) for n in data.event if data.checks[n]}
    weights = inputs.digest_weights(n_out, digest_seed, device) if any(data.digests.values()) else None
    expect: dict[tuple[int, float], tuple[float, float]] = {}  # the truth's checksum per (set, scale), shared
    for n in data.event:
        if verified.get(n, (False,))[0] and weights is not None:
            verified[n] = _verify_digests(case, data.digests[n], weights, ref, device, secret, verified[n][1], expect)
    return verified


def _describe(
    data: _Rounds,
    n: str,
    gap_ref: float,
    nbytes: int,
    copy_bps: float,
    ref_ms: float | None,
    compile_s: float | None,
    verified: str,
) -> Timing:
    """One function's times, before judgement: the host-clock cross-check decides which time is scored."""
    se, sh = stats.summarize(data.event[n]), stats.summarize(data.host[n])
    host_derived = sh.median - gap_ref
    hidden = host_derived > HOST_FLAG_RATIO * se.median + HOST_FLAG_SLACK_MS
    rates = Rates.of(host_derived if hidden else se.median, nbytes, copy_bps, ref_ms)
    return Timing(se, sh, host_derived, hidden, rates, compile_s, verified, list(data.overhead_ms.get(n, [])))


def _judge(
    t: Timing,
    ok: bool,
    vmsg: str,
    base_overhead: float,
    floor: float,
    th: score.Thresholds,
    nbytes: int,
    copy_bps: float,
    ref_ms: float | None,
) -> None:
    """Flags and credit for an implementation's timing: wrong timed outputs, the wall-clock excess over the
    baselines' overhead (`base_overhead`, from the pass it was last timed in), hidden work, below the floor."""

    def flag(code: Code, text: str) -> None:
        t.findings.append(Finding(code, text, FLAG))

    if not ok:
        flag(Code.TIMED_WRONG, f"timed outputs are wrong: {vmsg}")
    excess = t.overhead_ms - base_overhead
    t.wall_excess_ms = excess
    wall_ms = t.event.median + excess
    if excess > wall_slack_ms(t.event.median):
        fp = t.first_pass
        recurred = (
            f"; {fp.wall_excess_ms:.3g} ms in the first pass, and it recurred when "
            f"re-timed ({fp.retimes} time{'s' if fp.retimes > 1 else ''})"
            if fp is not None and fp.retimed
            else ""
        )
        flag(
            Code.WALL_EXCESS,
            f"the grader's own clock saw {excess:.3g} ms per call more than in the baselines' requests "
            f"(the same calls, flush and sleep{recurred}): the reported times are not the real ones, or the call "
            f"does work the CUDA events do not see (scored on at least {wall_ms:.4g} ms, the event median "
            "plus that excess)",
        )
        if wall_ms > t.rates.effective_ms:
            t.rates = Rates.of(wall_ms, nbytes, copy_bps, ref_ms)
    if t.hidden_work:
        flag(
            Code.HIDDEN_WORK,
            f"the host clock (less the reference baseline's overhead) shows {t.host_derived_ms:.4g} ms "
            f"against {t.event.median:.4g} ms of CUDA events: work outside the timed stream? "
            "(scored on the host-derived time)",
        )
    eff = t.rates.effective_ms
    if score.below_floor(eff, floor):
        flag(
            Code.BELOW_FLOOR,
            f"{eff:.4g} ms is below the physical floor {floor:.4g} ms (bytes / copy "
            "bandwidth): impossible, so not real work",
        )
    impossible = (not ok) or score.below_floor(eff, floor)
    t.credit = 0.0 if impossible else score.credit(eff, th)


def _perf_text(t: Timing, th: score.Thresholds, ok: bool, refname: str) -> str:
    """The performance row's output: the scored time and what it means, the thresholds, the credit, the flags."""
    r, c = t.rates, t.credit or 0.0
    lines = [
        f"{r.effective_ms:.4g} ms (median of {t.event.n}, IQR {t.event.iqr:.3g}, min {t.event.min:.4g}); "
        f"{r.gbps:.0f} GB/s = {r.pct_roofline:.0f}% of the measured copy bandwidth; "
        f"{r.speedup_vs_eager:.2f}x {refname}",
        "thresholds: " + th.describe(),
        f"credit {100 * c:.0f}%" + ("" if ok else " (timed outputs failed verification)"),
        *("FLAG: " + f.text for f in t.findings),
    ]
    fp = t.first_pass
    if fp is not None and fp.retimed and not t.has(Code.WALL_EXCESS):
        lines.append(
            f"note: re-timed; the first pass showed {fp.wall_excess_ms:.3g} ms per call of wall-clock excess "
            "over the baselines, the re-timing did not, and only the re-timing is scored"
        )
    return "\n".join(lines)


def _restart_workers(
    problem: Problem,
    targets: list[Target],
    boxes: dict[str, Any],
    dead: dict[str, str],
    device: str,
    limit: float,
    setup_p: dict[str, Any],
    case_name: str,
    spares: list[Sandbox],
) -> None:
    """Replace each target's timing worker with a new process (same identity and scratch: grader/identity.py),
    loaded and set up for the case. All start at once, so their start-up overlaps. The old worker is closed only
    once its successor is ready: one that fails to start (out of GPU memory beside the old one, say) leaves the
    old worker in place, and the re-timing runs there."""
    # A spare (started with the other timing workers, and idle since) skips the interpreter and CUDA start-up.
    fresh = {
        t.impl.name: (t, spares.pop() if spares else Sandbox(device, wait=False, timing=True, trusted=False))
        for t in targets
    }
    for name, (t, box) in fresh.items():
        try:
            box.wait_ready(timeout_s=180)
            box.request("load", t.payload(problem), timeout_s=limit, what="loading")
            box.request("time_setup", setup_p, timeout_s=limit, what=f"warm-up on {case_name}")
        except (WorkerFailure, GraderFault):  # GraderFault: it failed to start; the grade goes on without it
            box.close()
            continue
        old, boxes[name] = boxes.get(name), box
        if old is not None:
            old.close()
        dead.pop(name, None)


@dataclass
class _Rounds:
    """What timed rounds collected, per function name."""

    event: dict[str, list[float]]
    host: dict[str, list[float]]
    # The parent's own clock over each request, less the event times the worker reported, per call: the input
    # refresh, flush, 1 ms sleep, sync and IPC, the same for every function unless the reported times are not
    # the real ones (a worker that rewrote its own timer) or the call does work the events do not see.
    overhead_ms: dict[str, list[float]]
    checks: dict[str, list[tuple[int, float, torch.Tensor, Any]]]
    rounds: int
    why: str
    digests: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)  # (set, scale, checksum) per call

    def pooled(self, other: _Rounds) -> _Rounds:
        """Both passes' samples together (another setup's rounds of the same functions)."""

        def cat(a: dict[str, list], b: dict[str, list]) -> dict[str, list]:
            return {n: a.get(n, []) + b.get(n, []) for n in {**a, **b}}

        return _Rounds(
            cat(self.event, other.event),
            cat(self.host, other.host),
            cat(self.overhead_ms, other.overhead_ms),
            cat(self.checks, other.checks),
            self.rounds + other.rounds,
            f"{self.why}; then {other.why}",
            cat(self.digests, other.digests),
        )


def _timed_rounds(
    units: list[tuple[str, str]],
    boxes: dict[str, Any],
    dead: dict[str, str],
    names: dict[str, list[str]],
    rule: stats.StopRule,
    rng: random.Random,
    n_out: int,
    last_k: dict[str, int],
    limit: float,
    case_name: str,
    sets: int = MIN_SETS,
) -> _Rounds:
    """Round-robin over (worker, function) units, rotated each round, until the stop rule holds."""
    fns = [n for _, n in units]
    out = _Rounds(
        {n: [] for n in fns},
        {n: [] for n in fns},
        {n: [] for n in fns},
        {n: [] for n in fns},
        0,
        "",
        {n: [] for n in fns},
    )
    t_start = time.monotonic()
    rnd = 0
    while True:
        live = [u for u in units if u[0] not in dead]
        if not live:
            out.rounds = rnd
            return out
        for w, n in live[rnd % len(live) :] + live[: rnd % len(live)]:
            if w in dead:  # died earlier in this round
                continue
            plan, want = _plan(rng, n_out, first=n not in last_k, prev_k=last_k.get(n), sets=sets)
            last_k[n] = plan[-1][0]
            try:
                t_req = time.monotonic()
                r = boxes[w].request(
                    "time_round", {"names": [n], "plan": plan}, timeout_s=limit, what=f"timing {case_name}"
                )
                wall = (time.monotonic() - t_req) * 1e3
                _expect(_is_round_reply(r, n, len(plan)), f"timing {case_name}")
                out.overhead_ms[n].append((wall - sum(r[n]["event_ms"])) / len(plan))
                got = boxes[w].request(
                    "time_samples",
                    {n: [(j, idx) for j, _, _, idx in want]},
                    timeout_s=limit,
                    what=f"checking {case_name}",
                )
                _expect(
                    isinstance(got, dict)
                    and isinstance(got.get(n), list)
                    and len(got[n]) == len(want)
                    and all(isinstance(v, (torch.Tensor, str)) for v in got[n]),
                    f"checking {case_name}",
                )
            except WorkerFailure as e:
                dead[w] = e.line
                continue
            out.event[n] += r[n]["event_ms"]
            out.host[n] += r[n]["host_ms"]
            out.digests[n] += [(k, s, _checksum(d)) for (k, s), d in zip(plan, r[n]["digest"], strict=False)]
            for (_j, k, s, idx), sample in zip(want, got[n], strict=False):
                out.checks[n].append((k, s, idx, sample))
        rnd += 1
        timed = [stats.summarize(out.event[n]) for n in fns if out.event[n] and _owner(names, n) not in dead]
        stop, out.why = rule.done(timed, time.monotonic() - t_start)
        if stop or "baselines" in dead:
            out.rounds = rnd
            return out


def _is_round_reply(r: Any, name: str, calls: int) -> bool:
    """The shape of Timer.round's reply for one function: a finite time per call on both clocks."""
    d = r.get(name) if isinstance(r, dict) else None
    if not isinstance(d, dict):
        return False
    return (
        all(
            isinstance(d.get(k), list)
            and len(d[k]) == calls
            and all(type(v) in (int, float) and v == v and abs(v) != float("inf") for v in d[k])
            for k in ("event_ms", "host_ms")
        )
        and isinstance(d.get("digest"), list)
        and len(d["digest"]) == calls
        and all(wire.tagged_float(v) is not None for v in d["digest"])
    )


def _checksum(v: Any) -> float:
    """A timed output's checksum from a checked reply: NaN (a non-tensor or wrong-size output) is an answer, and
    fails the checksum check as a wrong one."""
    f = wire.tagged_float(v)
    return float("nan") if f is None else f


def _expect(ok: bool, what: str) -> None:
    """A reply of the wrong shape was forged on the pipe by code in the worker: treat it as a failed worker."""
    if not ok:
        raise WorkerFailure(f"{what}: the worker sent a malformed reply (was the result pipe tampered with?)")


def _owner(names: dict[str, list[str]], fn_name: str) -> str:
    return next(w for w, ns in names.items() if fn_name in ns)


def _median(xs: list[float]) -> float:
    return stats.summarize(xs).median if xs else 0.0


# How far a timed output's checksum may be from the truth's, as a share of the checksum's natural scale
# sqrt(sum((truth * w)^2)): rounding to the dtype moves it by about the dtype's relative precision (float32 2^-24,
# float16 2^-11, bfloat16 2^-8) times that scale; an output that is wrong in 1% of its elements moves it by ~0.1.
DIGEST_TOL = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}


def _verify_digests(
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
            x = torch.mul(inputs.make_input(case, device, secret, salt=f"perf{k}"), scale)
            tw = ref.truth(x).reshape(-1).to(torch.float64) * weights
            finite = torch.isfinite(tw)
            expect[(k, scale)] = (float(tw[finite].sum()), float(tw[finite].norm()) or 1.0)
            del x, tw, finite
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


def _verify(problem: Problem, case: Case, checks: list, ref: Reference, device: str, secret: int) -> tuple[bool, str]:
    """Check sampled timed outputs against the parent's own truth for that exact (set, scale) input."""
    dtype = inputs.TORCH_DTYPES[case.dtype]
    cache: dict[int, torch.Tensor] = {}
    for k, scale, idx, got in checks:
        if isinstance(got, str):
            return False, got
        if k not in cache:
            cache[k] = inputs.make_input(case, device, secret, salt=f"perf{k}")
        x = torch.mul(cache[k], scale)
        truth = ref.truth(x).reshape(-1)[idx.to(device)]
        base = problem.tolerance_baseline
        eager = ref.baselines[base](x).reshape(-1)[idx.to(device)] if base in ref.baselines else None
        v = check.check_output(got.to(device), truth, tol=problem.tolerances[case.dtype], dtype=dtype, eager_out=eager)
        if not v.ok:
            return False, v.summary + ("; " + v.details[1] if len(v.details) > 1 else "")
    return True, f"{len(checks)} timed outputs checked ({sum(int(c[2].numel()) for c in checks)} elements)"
