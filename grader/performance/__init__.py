"""The performance stage: time and score the performance cases, student kernels against baselines measured in the
same run.

Why: docs/performance.md, "Modules: the why", grader/performance/__init__.py.
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
