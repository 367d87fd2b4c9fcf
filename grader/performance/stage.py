"""The performance stage's orchestration: every case timed in turn, from the workers' rounds to the result rows.

For each case (grader/performance/__init__.py says what each step does): the workers set up (`time_setup`),
timed rounds (rounds.py) until the stop rule holds, the wall-clock check's re-timings (judgement.py), verification
of the timed outputs (verification.py), then each implementation's Timing judged into a result row.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from grader.correctness.stage import Target
from grader.performance import judgement, rounds, score, stats, verification, workers
from grader.performance.records import Timing
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
    confirmed: dict[str, str] = {}  # implementation -> the case on which its wall-clock excess was confirmed

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
                base_spares=base_spares,
                confirmed=confirmed,
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
    base_spares: list[Sandbox] | None = None,
    confirmed: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Time one case. `restart(names)` replaces those implementations' workers with fresh processes, set up for
    the case, before a re-timing (default: workers.restart_workers; the tests give fake workers). `confirmed`
    (implementation -> case), shared by a grade's cases: what stayed over the wall-clock slack in every re-timing
    of an earlier case is not re-timed again; this case adds what it confirms."""
    first_calls = first_calls or {}
    confirmed = confirmed if confirmed is not None else {}
    spares = spares if spares is not None else []
    perf = problem.performance
    limit = problem.limits.timing_s
    shape_out = problem.out_shape(case.shape)
    n_out = 1
    for d in shape_out:
        n_out *= d
    # Every input of the op (spec `inputs:`) in each set, each from its own seed (grader/problem/operands.py).
    n_sets = rounds.n_sets(operands.input_bytes(problem, case))
    timing_seeds = operands.timing_seeds(problem, case, secret, n_sets)
    live_boxes = [w for w, b in boxes.items() if b is not None and w not in dead]
    digest_seed = inputs.mix_seed(case.seed, secret, "digest")
    setup_p = {
        "inputs": timing_seeds,
        "warmup_ms": 200,
        "spin_s": workers.spin_budget(len(live_boxes), workers.cpus()),
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
                rounds.expect_reply(
                    isinstance(cs, dict) and all(isinstance(v, (int, float)) for v in cs.values()),
                    f"warm-up on {case.name}",
                )
                setup_info.setdefault(w, got)
            except WorkerFailure as e:
                dead[w] = e.line
        setup_s += time.monotonic() - t0
        if "baselines" in dead:
            raise RuntimeError(f"the baseline worker failed on {case.name}: {dead['baselines']}")

    # One request times one function: every request has the same shape (rounds.CALLS_PER_ROUND calls of one function),
    # so the parent's clock over it, less the times reported, is the same fixed overhead for all of them.
    units = [(w, n) for w in names for n in names[w]]
    last_k: dict[str, int] = {}

    def hopeless(n: str, data: rounds.Rounds) -> bool:
        """An implementation (never a baseline) whose median after its first round is more than HOPELESS_FACTOR
        times the zero-credit time of the baselines' medians so far: it earns nothing, however long it is timed."""
        if n in problem.baselines or len(data.event.get(n, ())) < rounds.CALLS_PER_ROUND or not data.checks.get(n):
            return False
        try:
            th_now = score.thresholds(
                perf.curve,
                perf.margin,
                {b: rounds.median(data.event[b]) for b in problem.baselines if data.event.get(b)},
            )
        except ValueError:  # a baseline not timed yet
            return False
        return rounds.median(data.event[n]) > judgement.HOPELESS_FACTOR * th_now.zero_ms

    def timed_rounds(units: list[tuple[str, str]]) -> rounds.Rounds:
        return rounds.timed_rounds(
            units, boxes, dead, names, rule, rng, n_out, last_k, limit, case.name, n_sets, hopeless
        )

    # case.setups > 1 (spec): that many independent setups, each timed to the stop rule, rounds pooled. A short
    # kernel's median depends a little on where a setup's buffers landed; pooling setups averages that out.
    setup_workers()
    data = timed_rounds(units)
    for _ in range(1, case.setups):
        setup_workers()
        data = data.pooled(timed_rounds(units))

    # The wall-clock check, confirmed before it costs anything (see judgement.retime).
    base_overhead = rounds.median([o for n in problem.baselines for o in data.overhead_ms[n]])
    impl_names = [t.impl.name for t in targets if t.impl.name not in problem.baselines]
    # Re-timing a kernel that earns nothing (stopped early as hopeless) could only add to its time: not worth a
    # fresh worker and the GPU's time.
    first_pass = {
        n: fp for n, fp in judgement.over_slack(impl_names, data, base_overhead).items() if n not in data.stopped_early
    }
    # Re-timing gives an unlucky process a new draw. An implementation whose excess recurred in MAX_RETIMES fresh
    # processes on an earlier case has had its draws: its excess is the code's (a forged timer, work outside the
    # events), and more fresh workers would cost the GPU ~10 s each to find it again.
    for n in first_pass:
        first_pass[n].confirmed_on = confirmed.get(n)
    to_retime = {n: fp for n, fp in first_pass.items() if n not in confirmed}
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
        workers.restart_workers(
            problem,
            [by_name[n] for n in names],
            boxes,
            dead,
            device,
            limit,
            setup_p,
            case.name,
            spares,
            base_spares if base_spares is not None else [],
        )

    retime_base, retime_rounds, now_confirmed = judgement.retime(
        to_retime,
        data,
        list(problem.baselines),
        dead,
        fresh_workers,
        lambda names: timed_rounds([u for u in units if u[0] == "baselines" or u[1] in names]),
    )
    confirmed.update({n: case.name for n in now_confirmed})

    # Verification happens after the rounds, so the parent's own GPU work never overlaps a timed call.
    t_verify = time.monotonic()
    verified = verification.verify_case(problem, case, data, ref, device, secret, n_out, digest_seed)

    base_ms = {n: stats.summarize(data.event[n]).median for n in problem.baselines if data.event[n]}
    if "baselines" in dead or not base_ms:
        raise RuntimeError(f"the baseline worker failed on {case.name}: {dead.get('baselines', 'no time measured')}")
    th = score.thresholds(perf.curve, perf.margin, base_ms)
    nbytes = judgement.bytes_moved(problem, case)
    floor = score.physical_floor_ms(nbytes, ceiling_bps, slack=judgement.FLOOR_SLACK)
    # The reference baseline (the spec's tolerance_baseline: eager for GLU) sets the host clock's own overhead
    # and the "x eager" speed-up in the report.
    refname = problem.tolerance_baseline
    ref_ev, ref_host = data.event.get(refname, []), data.host.get(refname, [])
    gap_ref = rounds.median([h - e for h, e in zip(ref_host, ref_ev, strict=False)]) if ref_ev else 0.0

    def describe(n: str) -> Timing:
        # A baseline's first call was made in `prepare` (during the correctness stage) when that ran.
        compile_s = first_calls.get(n, setup_info.get(rounds.owner(names, n), {}).get("compile_s", {}).get(n))
        return judgement.describe(
            data,
            n,
            gap_ref,
            nbytes,
            copy_bps,
            base_ms.get(refname),
            compile_s,
            verified.get(n, verification.UNCHECKED)[1],
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
        "stopped_early": list(data.stopped_early),
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
        ok, vmsg = verified.get(n, verification.UNCHECKED)
        judgement.judge(
            timing, ok, vmsg, retime_base.get(n, base_overhead), floor, th, nbytes, copy_bps, base_ms.get(refname)
        )
        case_info["impls"][n] = timing.as_dict(retime_rounds)
        c = timing.credit or 0.0
        reason = Reason.FLAGGED if timing.findings else (Reason.OK if c >= 1.0 else Reason.SLOW)
        tests.append(
            _perf_test(
                n,
                case,
                c * case.points,
                PASSED if c > 0 else FAILED,
                judgement.perf_text(timing, th, ok, refname)
                + (
                    f"\nnote: timed on {timing.event.n} calls only: more than {judgement.HOPELESS_FACTOR:g}x the "
                    "zero-credit time after the first round, so more calls could not change its credit"
                    if n in data.stopped_early
                    else ""
                ),
                reason,
                timing.findings,
                credit=c,
                flags=[f.text for f in timing.findings],
                effective_ms=timing.rates.effective_ms,
                impl_kind=t.impl.kind,
            )
        )
    return {"tests": tests, "info": case_info}
