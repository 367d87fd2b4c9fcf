"""Measure a GPU's baseline record (grader/performance/baselinerecord.py says what it is and who may write one).

`python -m grader calibrate --problem P --record FILE` runs the performance stage with no submission: only the
trusted baselines' worker times the problem's baselines on every performance case, as a grade would, and the
medians become the record. The batch engine runs it on a GPU before that GPU's first task and again whenever a
grade refused the record, with the GPU's slots drained, so no submission process is alive on it meanwhile.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path

import torch

from grader.performance.baselinerecord import BaselineRecord, CaseRecord, control_baseline, record_key, save
from grader.performance.gpulock import phase
from grader.perfsummary import PerfJSON
from grader.problem.reference import load_reference
from grader.problem.spec import Problem


def record_from_info(problem: Problem, info: PerfJSON) -> BaselineRecord:
    """The record of a performance stage's info (run_performance's second value) that timed every baseline."""
    cases: dict[str, CaseRecord] = {}
    for name, c in info.get("cases", {}).items():
        medians = {b: float(d["event"]["median"]) for b, d in c.get("baselines", {}).items()}
        if set(medians) != set(problem.baselines):
            raise RuntimeError(f"calibration: case {name} lacks a baseline's time ({sorted(medians)})")
        cases[name] = CaseRecord(medians, float(c["baseline_overhead_ms"]))
    copy = {k: float(info[k]) for k in ("copy_bytes_per_s", "read2_write1_bytes_per_s")}
    return BaselineRecord(
        key=record_key(problem, info.get("device", {})),
        control=control_baseline(problem),
        made_at=time.time(),
        copy=copy,
        cases=cases,
    )


def calibrate(problem: Problem, out: Path, *, progress: Callable[[str], None] = print) -> BaselineRecord:
    """Time the problem's baselines alone on this GPU (holding its lock exclusively) and write the record."""
    from grader.performance.stage import run_performance

    if problem.performance is None:
        raise RuntimeError(f"problem {problem.name} has no performance cases: nothing to calibrate")
    if not torch.cuda.is_available():
        raise RuntimeError("calibration needs a CUDA GPU")
    with phase(True, progress):
        _tests, info = run_performance(
            problem, [], load_reference(problem), device="cuda", secret=secrets.randbits(62), progress=progress
        )
        rec = record_from_info(problem, info)
        save(out, rec)  # before the lock is given up: a grade waiting for it (batch) finds the record there
    return rec


def main(argv: list[str] | None = None) -> int:
    """`python -m grader.performance.calibrate --problem NAME --out FILE`: what the batch engine runs per GPU (with
    that GPU's CUDA_VISIBLE_DEVICES and lock). Exit 0 with the record written; 1 with one line saying why not."""
    import argparse
    import sys

    from grader.errors import UsageError
    from grader.problem.spec import find_problem, load_problem

    ap = argparse.ArgumentParser(prog="python -m grader.performance.calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default=None, help="a problem under reference/ (default: the course's default)")
    ap.add_argument("--out", type=Path, required=True, metavar="FILE", help="the record to write (mode 0600)")
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    try:
        problem = load_problem(find_problem(a.problem, root))
        rec = calibrate(problem, a.out, progress=lambda s: print(s, file=sys.stderr))
    except (UsageError, RuntimeError, OSError) as e:
        print(f"calibration failed: {e}", file=sys.stderr)
        return 1
    print(f"baseline record for {problem.name} on {rec.key.gpu_uuid}: {len(rec.cases)} cases -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
