"""The bench's comparison with published figures (spec `performance.anchor`, e.g. lecture 6's H100 GeLU table):
for the anchor's case, each row's published ms beside the ms and % of the measured ceiling timed here.

Display only: nothing here is scored. Rows come in the anchor's order (the lecture's), then any other row timed."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from grader.problem.spec import Problem
from grader.results import PerfSummary


@dataclass(frozen=True)
class AnchorRow:
    name: str
    published_ms: float | None  # None: not in the published table
    measured_ms: float | None  # None: not timed in this run
    pct_ceiling: float | None


def anchor_rows(problem: Problem, perf: PerfSummary) -> list[AnchorRow]:
    """The rows for the anchor's case, from a grade's typed perf summary (Grade.perf); [] when there is no anchor
    or its case was not timed."""
    anchor = problem.performance.anchor if problem.performance else None
    case = perf.cases.get(anchor.case) if anchor else None
    if anchor is None or case is None:
        return []
    timed = {**case.baselines, **case.impls}
    names = list(anchor.ms) + [n for n in timed if n not in anchor.ms]
    rows = []
    for n in names:
        t = timed.get(n)
        rows.append(
            AnchorRow(
                name=n,
                published_ms=anchor.ms.get(n),
                measured_ms=None if t is None else t.effective_ms,
                pct_ceiling=None if t is None else t.pct_roofline,
            )
        )
    return rows


def print_anchor(problem: Problem, perf: PerfSummary, console: Console) -> None:
    rows = anchor_rows(problem, perf)
    if not rows:
        return
    assert problem.performance is not None and problem.performance.anchor is not None
    anchor = problem.performance.anchor
    dev = perf.device_name or "this GPU"
    t = Table(title=f"{anchor.case}: measured here ({dev}) beside {anchor.source}")
    for col in ("version", "ms here", "% of ceiling", f"ms ({anchor.source})"):
        t.add_column(col, justify="left" if col == "version" else "right")
    for r in rows:
        t.add_row(
            r.name,
            "-" if r.measured_ms is None else f"{r.measured_ms:.3f}",
            "-" if r.pct_ceiling is None else f"{r.pct_ceiling:.0f}%",
            "-" if r.published_ms is None else f"{r.published_ms:g}",
        )
    console.print(t)
