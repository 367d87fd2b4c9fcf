"""The lecture-style performance table of one perf case (manual / eager / compiled / triton / cuda: ms, GB/s, % of
the measured copy roofline, speedup over eager, credit), its title and its credit thresholds, from results.json's
extra_data.performance."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from grader.report.advice import pct_at
from grader.report.blocks import Row, Table
from grader.report.records import num

PERF_COLS = ("implementation", "ms", "GB/s", "% of copy roofline", "speedup vs eager", "credit")


def case_title(name: str, c: dict[str, Any]) -> str:
    shape = "x".join(str(d) for d in c.get("shape") or [])
    return f"{name}: {shape} {c.get('dtype', '')}, {num(c.get('bytes')) / 1e9:.2f} GB moved"


def perf_table(c: dict[str, Any], forfeit: AbstractSet[str] = frozenset()) -> Table:
    """One row per baseline (kind 'baseline') and implementation (kind 'impl')."""
    rows = []
    for kind, group in (("baseline", c.get("baselines") or {}), ("impl", c.get("impls") or {})):
        for name, d in group.items():
            cr = d.get("credit")
            if kind == "baseline":
                credit = "baseline"
            elif name in forfeit:
                credit = "0% (forfeit)"
            else:
                credit = f"{100 * num(cr):.0f}%" if cr is not None else "-"
            cells = [
                name,
                f"{num(d.get('effective_ms')):.4f}",
                f"{num(d.get('gbps')):.0f}",
                f"{num(d.get('pct_roofline')):.1f}%",
                f"{num(d.get('speedup_vs_eager')):.2f}x",
                credit,
            ]
            rows.append(Row.of(cells, kind))
    return Table(list(PERF_COLS), rows)


def thresholds_line(c: dict[str, Any], copy_bps: float) -> str:
    th = c.get("thresholds") or {}
    if not th:
        return ""
    full, part, zero = num(th.get("full_ms")), num(th.get("partial_ms")), num(th.get("zero_ms"))
    return (
        f"Credit: full at <= {full:.4g} ms ({pct_at(c, full, copy_bps):.0f}% of the roofline), "
        f"{num(th.get('partial_credit'), 0.5):g} at {part:.4g} ms, none at >= {zero:.4g} ms "
        f"(margin {100 * num(th.get('margin')):g}% in your favour). Physical floor: {num(c.get('floor_ms')):.4g} ms."
    )
