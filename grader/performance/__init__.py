"""The performance stage: time and score the performance cases, student kernels against baselines measured in the
same run.

The parent orchestrates; workers only execute. One trusted worker runs the baselines (manual, eager,
torch.compile), one untrusted worker per implementation runs the submission. Each perf case:
  1. setup: every worker makes the input sets and warms up (compile time reported, never timed);
  2. rounds, round-robin across workers (rotated each round), so drift and heat hit all alike, until the
     stop rule holds for every timed function (grader/performance/stats.py);
  3. the parent verifies sampled elements of timed outputs against its own float64 truth for that exact input;
  4. score (grader/performance/score.py) on the effective time: the event median; but when the worker's host clock
     (median, less the trusted eager baseline's host overhead) exceeds it by far more than host jitter, that
     host-derived time instead, and a flag (work hidden on another stream counts); and when the parent's own
     clock over the worker's requests exceeds the baselines' by more than jitter (times forged inside the
     untrusted worker), the implementation is re-timed in fresh rounds that alone count for it, and if the
     excess recurs it is scored on the event median plus that excess, with a flag.

One module per job:
- workers.py: start the timing workers (and the spares), load them, replace them for a re-timing, and how long
  idle ones spin;
- rounds.py: the per-round call plan, the timed rounds (step 2), the shape of the workers' replies;
- verification.py: the timed outputs against the parent's truth, sampled elements and every call's checksum (3);
- judgement.py: the wall-clock check and its re-timings, the host-clock cross-check, flags and credit (4), with
  the constants that set them; the bytes a case moves (for the floor and the rates); the result row's text;
- stage.py: the orchestration, run_performance over the cases and _time_case through the steps above;
- baselinerecord.py and calibrate.py: a batch's baselines measured once per GPU (batch --shared-baselines), the
  record a grade may use for every baseline but the control, and the drift bound that makes it time them itself.
The typed records they pass are in grader/performance/records.py. The names below are what the pipeline, the scripts and
the tests use.
"""

from grader.performance.judgement import (
    FLOOR_SLACK,
    HOST_FLAG_RATIO,
    HOST_FLAG_SLACK_MS,
    MAX_RETIMES,
    WALL_SLACK_MS,
    WALL_SLACK_RATIO,
    bytes_moved,
    wall_slack_ms,
)
from grader.performance.rounds import (
    CALLS_PER_ROUND,
    FIRST_SAMPLE,
    MAX_SETS,
    MIN_SETS,
    ROUND_SAMPLE,
    SCALES,
    SET_BYTES,
    n_sets,
)
from grader.performance.stage import run_performance, skipped_tests
from grader.performance.verification import DIGEST_TOL
from grader.performance.workers import SPARE, SPARE_WORKERS, SPIN_S, spin_budget, start_workers

__all__ = [
    "CALLS_PER_ROUND",
    "DIGEST_TOL",
    "FIRST_SAMPLE",
    "FLOOR_SLACK",
    "HOST_FLAG_RATIO",
    "HOST_FLAG_SLACK_MS",
    "MAX_RETIMES",
    "MAX_SETS",
    "MIN_SETS",
    "ROUND_SAMPLE",
    "SCALES",
    "SET_BYTES",
    "SPARE",
    "SPARE_WORKERS",
    "SPIN_S",
    "WALL_SLACK_MS",
    "WALL_SLACK_RATIO",
    "bytes_moved",
    "n_sets",
    "run_performance",
    "skipped_tests",
    "spin_budget",
    "start_workers",
    "wall_slack_ms",
]
