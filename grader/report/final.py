"""Whether a grade is final: the grade of the whole assignment, made where all of it can be graded.

Why: docs/architecture.md, "Modules: the why", grader/report/final.py.
"""

from __future__ import annotations

from grader.report.assignment import Assignment
from grader.report.records import STAGES
from grader.results import Grade, Reason

TOLERANCE = 0.01  # points: a column's graded points vs the spec's (each test's max rounded to 4 decimals)


def reasons(g: Grade, a: Assignment) -> list[str]:
    """Why `g` is not a final grade of `a` (empty: it is)."""
    why: list[str] = []
    if g.device == "cpu":
        why.append("graded without a GPU: no performance timing, no GPU-only cases")
    elif g.device != "cuda":
        why.append("the device it was graded on is not recorded")
    if g.partial:
        why.append("a partial grade: only some cases were run (--case, or --watch stopped at a failure)")
    pending = [t for t in g.tests if t.pending]
    if pending:
        pts = sum(t.max_score for t in pending)
        kinds = ", ".join(sorted({str(t.reason) for t in pending if t.reason != Reason.UNKNOWN}))
        why.append(f"{pts:g} point(s) not graded on that machine" + (f" ({kinds})" if kinds else ""))
    graded: dict[str, float] = {}
    for t in g.tests:
        if t.stage in STAGES:
            col = f"{t.part}_{t.stage}"
            graded[col] = graded.get(col, 0.0) + t.max_score
    parts_graded = {t.part for t in g.tests if t.stage in STAGES}
    for part in a.parts:
        if part not in parts_graded:
            why.append(f"part {part} not graded (--only)")
            continue
        for col, points in a.column_points:
            if not col.startswith(part + "_") or points <= 0:
                continue
            got = graded.get(col, 0.0)
            stage = col[len(part) + 1 :]
            if got <= 0:
                why.append(f"{part}: no {stage} results" + (" (--no-perf)" if stage == "performance" else ""))
            elif got < points - TOLERANCE:
                why.append(f"{part}: {stage} graded for {got:g} of its {points:g} points")
    return why
