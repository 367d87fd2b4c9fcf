"""The timing workers: started early, loaded once the correctness stage is done, replaced for a re-timing.

One trusted worker runs the baselines (manual, eager, torch.compile), one untrusted worker per implementation
runs the submission (grader/sandbox.py; what runs inside them: grader/child/worker.py, grader/child/timing.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Any

from grader.child.wire import PrepareReply, SetupRequest
from grader.correctness.target import Target
from grader.performance.baselinerecord import control_baseline
from grader.perfsummary import PerfJSON
from grader.problem.spec import Problem
from grader.sandbox import GraderFault, Sandbox, WorkerFailure

# Idle timing workers kept for the wall-clock check's re-timings (judgement.py: MAX_RETIMES; a fresh start is ~8 s
# on the H200: the interpreter, torch, CUDA). Two cover a grade's usual one or two re-timings; beyond that a
# worker is started when needed.
SPARE_WORKERS = 2
SPARE = "spare:"  # their keys among start_workers' boxes (no implementation name has a colon: grader/problem/spec.py)
# A re-timing also replaces the trusted baselines' worker: a process's offset is the baselines' as much as the
# submission's (docs/performance.md#the-wall-clock-check). One trusted spare, prepared like the first.
SPARE_BASELINES = SPARE + "baselines"
# While a case is timed, idle workers busy-wait for their next request (grader/child/worker.py: spin_wait) instead of
# sleeping, if the machine has a core for every worker plus the parent; otherwise spinning would steal them.
SPIN_S = 0.25


def spin_budget(n_workers: int, n_cpus: int) -> float:
    """Seconds an idle worker busy-waits for its next timing request: SPIN_S when cores allow, else 0."""
    return SPIN_S if n_cpus >= n_workers + 2 else 0.0


def cpus() -> int:
    """The CPU cores this process may run on (its affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def setup_request(common: SetupRequest, names: list[str] | None) -> SetupRequest:
    """A worker's `time_setup` request: the case's common fields, and the functions it is to warm up (None: every
    function it loaded)."""
    return common if names is None else {**common, "names": names}


def baseline_payload(problem: Problem) -> dict[str, Any]:
    return {"kind": "reference", "path": str(problem.reference), "baselines": problem.baselines, "display": "baselines"}


def start_workers(
    problem: Problem, targets: list[Target], device: str, *, recorded: bool = False
) -> dict[str, Sandbox]:
    """Spawn the timing workers (baselines, then one per implementation) without waiting for them.

    The pipeline calls this before the correctness stage, so that their start-up (imports, CUDA context:
    ~10 s of a grade on the H200) overlaps it, and so does the baselines' first calls: the trusted worker is
    told to `prepare` (import Dynamo, torch.compile every perf shape) as soon as it is up. A worker only binds
    its timer at start; it measures the GPU (calibration) when run_performance loads it, once the correctness
    stage has left the GPU idle, and a student's module is imported only after that.
    `recorded`: a batch's baseline record is there, so only its control baseline will be timed: only that one is
    prepared (a record refused later compiles the others in their warm-up, outside every timed call).
    """
    # The baselines are trusted (the staff's reference.py): the grader's uid and its own compile caches, which no
    # submission can write (grader/identity.py). Every implementation's worker is the submission's.
    boxes = {
        name: Sandbox(device, wait=False, timing=True, trusted=name == "baselines")
        for name in ["baselines"] + [t.impl.name for t in targets]
    }
    # Spares for re-timings, which each run in a new process (see restart_workers): started now, their start-up
    # overlaps the correctness stage instead of stalling a timed case. They never import code under test unless used.
    for i in range(SPARE_WORKERS if targets and device != "cpu" else 0):
        boxes[f"{SPARE}{i}"] = Sandbox(device, wait=False, timing=True, trusted=False)
    if targets and device != "cpu":
        boxes[SPARE_BASELINES] = Sandbox(device, wait=False, timing=True, trusted=True)
    if problem.performance is not None:
        prep = {**baseline_payload(problem), "cases": [asdict(c) for c in problem.performance.cases]}
        if recorded:
            # torch.compile's first calls cost ~6 s of CPU per worker (Dynamo's import, Inductor), two workers a
            # grade, beside up to three grades' correctness on one host; with a record they would never be timed.
            control = control_baseline(problem)
            prep["baselines"] = {control: problem.baselines[control]}
        for name in ("baselines", SPARE_BASELINES):
            if name in boxes:
                try:
                    boxes[name].send("prepare", prep, what="compiling the baselines")
                except WorkerFailure:
                    pass  # it died at once: run_performance (or a re-timing) reports that when it waits for it
    return boxes


def settle(started: dict[str, Sandbox], limit: float) -> None:
    """Wait until every started worker is up and the trusted ones' `prepare` (torch.compile's first calls, on the
    GPU) is over; the replies stay on the box (Sandbox.drained) for load_workers. The pipeline calls this before it
    lets another grade on this GPU time (grader/performance/gpulock.py): after it, none of this grade's workers uses
    the GPU
    until this grade's own timing stage. A worker that failed is left for load_workers (or a re-timing) to report."""
    for name, box in started.items():
        try:
            box.wait_ready(timeout_s=180)
            if name in ("baselines", SPARE_BASELINES):
                box.drain(timeout_s=limit)
        except (WorkerFailure, GraderFault):
            pass


def spares_of(started: dict[str, Sandbox]) -> tuple[list[Sandbox], list[Sandbox]]:
    """start_workers' spares: (untrusted ones for implementations, trusted ones for the baselines)."""
    untrusted = [b for k, b in started.items() if k.startswith(SPARE) and k != SPARE_BASELINES]
    return untrusted, [started[SPARE_BASELINES]] if SPARE_BASELINES in started else []


def load_workers(
    problem: Problem, targets: list[Target], started: dict[str, Sandbox], limit: float, info: PerfJSON
) -> tuple[dict[str, Sandbox | None], dict[str, str]]:
    """Wait for each started worker, then load its code: the baselines first, then one worker per implementation.
    Returns the loaded workers and why the others failed (by name); `info` gets the baselines' first calls (from
    `prepare`) and the load times. A failed baselines worker is the grader's fault (GraderFault), and closes all."""
    boxes: dict[str, Sandbox | None] = {}
    dead: dict[str, str] = {}
    pending = [("baselines", baseline_payload(problem))] + [(t.impl.name, t.payload(problem)) for t in targets]
    t_load = time.monotonic()
    load_s: dict[str, float] = {}
    for name, payload in pending:
        try:
            t0 = time.monotonic()
            started[name].wait_ready(timeout_s=180)
            started[name].drain(timeout_s=limit)  # the baselines' `prepare`, queued by start_workers
            early = started[name].drained  # (settle may have collected it already)
            if early and name == "baselines":
                first_calls: PrepareReply = early[0]
                info["baseline_first_calls_s"] = first_calls
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
    return boxes, dead


def restart_workers(
    problem: Problem,
    targets: list[Target],
    boxes: dict[str, Any],
    dead: dict[str, str],
    device: str,
    limit: float,
    setup_p: SetupRequest,
    case_name: str,
    spares: list[Sandbox],
    base_spares: list[Sandbox] | None = None,
    timed: dict[str, list[str]] | None = None,
) -> None:
    """Replace each target's timing worker with a new process (same identity and scratch: grader/identity.py),
    loaded and set up for the case. All start at once, so their start-up overlaps. The old worker is closed only
    once its successor is ready: one that fails to start (out of GPU memory beside the old one, say) leaves the
    old worker in place, and the re-timing runs there. With `base_spares` (not None) the trusted baselines' worker
    is replaced too, from those spares first. `timed`: each worker's functions to warm up (default: all of them)."""
    # A spare (started with the other timing workers, and idle since) skips the interpreter and CUDA start-up.
    fresh = {
        t.impl.name: (t.payload(problem), spares.pop() if spares else Sandbox(device, wait=False, timing=True))
        for t in targets
    }
    if base_spares is not None:
        trusted = base_spares.pop() if base_spares else Sandbox(device, wait=False, timing=True, trusted=True)
        fresh["baselines"] = (baseline_payload(problem), trusted)
    for name, (payload, box) in fresh.items():
        try:
            box.wait_ready(timeout_s=180)
            if name == "baselines":
                box.drain(timeout_s=limit)  # a trusted spare's `prepare`, queued by start_workers
            box.request("load", payload, timeout_s=limit, what="loading")
            req = setup_request(setup_p, timed.get(name) if timed else None)
            box.request("time_setup", req, timeout_s=limit, what=f"warm-up on {case_name}")
        except (WorkerFailure, GraderFault):  # GraderFault: it failed to start; the grade goes on without it
            box.close()
            continue
        old, boxes[name] = boxes.get(name), box
        if old is not None:
            old.close()
        dead.pop(name, None)
