"""The lecture-style performance table of one perf case (manual / eager / compiled / triton / cuda: ms, GB/s, % of
the measured copy roofline, speedup over eager, credit), its title and its credit thresholds, from the grade's typed
performance summary (Grade.perf, grader/results.py PerfSummary): the renderers read that typed record only."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from grader.report.advice import pct_at
from grader.report.blocks import Row, Table
from grader.results import PerfCase, number

PERF_COLS = ("implementation", "ms", "GB/s", "% of copy roofline", "speedup vs eager", "credit")


def case_title(name: str, c: PerfCase) -> str:
    shape = "x".join(str(d) for d in c.shape)
    return f"{name}: {shape} {c.dtype}, {c.bytes / 1e9:.2f} GB moved"


def perf_table(c: PerfCase, forfeit: AbstractSet[str] = frozenset()) -> Table:
    """One row per baseline (kind 'baseline') and implementation (kind 'impl')."""
    rows = []
    for kind, group in (("baseline", c.baselines), ("impl", c.impls)):
        for name, d in group.items():
            if kind == "baseline":
                credit = "baseline"
            elif name in forfeit:
                credit = "0% (forfeit)"
            else:
                credit = f"{100 * d.credit:.0f}%" if d.credit is not None else "-"
            cells = [
                name,
                f"{number(d.effective_ms):.4f}",
                f"{number(d.gbps):.0f}",
                f"{number(d.pct_roofline):.1f}%",
                f"{number(d.speedup_vs_eager):.2f}x",
                credit,
            ]
            rows.append(Row.of(cells, kind))
    return Table(list(PERF_COLS), rows)


def thresholds_line(c: PerfCase, copy_bps: float) -> str:
    th = c.thresholds
    if th is None:
        return ""
    full, part, zero = th.full_ms, th.partial_ms, th.zero_ms
    return (
        f"Credit: full at <= {full:.4g} ms ({pct_at(c, full, copy_bps):.0f}% of the roofline), "
        f"{th.partial_credit:g} at {part:.4g} ms, none at >= {zero:.4g} ms "
        f"(margin {100 * th.margin:g}% in your favour). Physical floor: {c.floor_ms:.4g} ms."
    )
