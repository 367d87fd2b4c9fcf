"""The report stage: results.json and everything a person reads, from one model.

Why: docs/architecture.md, "Modules: the why", grader/report/__init__.py.
"""

from grader.report.output import (
    advisory_line,
    finite,
    leaderboard,
    results_json,
    write_json_atomic,
    write_results,
    write_text_atomic,
)
from grader.report.terminal import make_console, print_bench, print_summary, progress

__all__ = [
    "advisory_line",
    "finite",
    "leaderboard",
    "make_console",
    "print_bench",
    "print_summary",
    "progress",
    "results_json",
    "write_json_atomic",
    "write_results",
    "write_text_atomic",
]
