"""Class statistics for the TA's summary: speedups over eager per perf case, pass rates per correctness case, the
score histogram, and their charts (matplotlib, optional: None without it)."""

from __future__ import annotations

import math

from grader.report.charts import matplotlib, png
from grader.report.classdata import Submission
from grader.results import PASSED, SKIPPED, Stage


def speedups(subs: list[Submission]) -> dict[str, dict[str, list[float]]]:
    """perf case -> implementation -> speedups over eager, one per submission that was timed."""
    out: dict[str, dict[str, list[float]]] = {}
    for s in subs:
        for case, c in s.grade.perf.cases.items():
            for impl, d in c.impls.items():
                v = d.speedup_vs_eager
                if v is not None and math.isfinite(v) and v > 0:
                    out.setdefault(case, {}).setdefault(impl, []).append(v)
    return out


def pass_rates(subs: list[Submission]) -> tuple[list[str], list[str], dict[tuple[str, str], tuple[int, int, int]]]:
    """(cases, parts, (case, part) -> (passed, run, skipped)); skipped cases are not counted as run."""
    cases: list[str] = []
    parts: list[str] = []
    cells: dict[tuple[str, str], tuple[int, int, int]] = {}
    for s in subs:
        parts += [p for p in s.grade.parts if p not in parts]
        for t in s.grade.tests:
            if t.stage != Stage.CORRECTNESS:
                continue
            if t.case not in cases:
                cases.append(t.case)
            ok, n, k = cells.get((t.case, t.part), (0, 0, 0))
            if t.state == SKIPPED:
                k += 1
            else:
                n += 1
                ok += t.state == PASSED
            cells[(t.case, t.part)] = (ok, n, k)
    return cases, [p for p in parts if any(key[1] == p for key in cells)], cells


def histogram(values: list[float], top: float, bins: int = 10) -> list[tuple[float, float, int]]:
    if not (math.isfinite(top) and top / bins > 0):  # no usable max (0, negative, or too small to divide)
        top = max([v for v in values if math.isfinite(v)] + [1.0])
    width = top / bins
    counts = [0] * bins
    for v in values:
        q = v / width
        counts[min(bins - 1, max(0, int(q))) if math.isfinite(q) else (bins - 1 if q > 0 else 0)] += 1
    return [(i * width, (i + 1) * width, n) for i, n in enumerate(counts)]


def charts(subs: list[Submission], top: float) -> dict[str, bytes] | None:
    mpl = matplotlib()
    if mpl is None:
        return None
    Figure, Canvas = mpl
    out: dict[str, bytes] = {}
    if subs:
        fig = Figure(figsize=(7, 3))
        ax = fig.add_subplot(1, 1, 1)
        ax.hist([s.total for s in subs], bins=20, range=(0, top or None), color="#1e88e5", edgecolor="white")
        ax.set_xlabel("total score")
        ax.set_ylabel("submissions")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"Scores ({len(subs)} submissions)", fontsize=10)
        out["scores"] = png(fig, Canvas)
    sp = speedups(subs)
    if sp:
        fig = Figure(figsize=(7.5, 3.5))
        ax = fig.add_subplot(1, 1, 1)
        labels, data = [], []
        for case, impls in sp.items():
            for impl, vs in impls.items():
                labels.append(f"{case}\n{impl}")
                data.append(vs)
        ax.boxplot(data, showfliers=False)
        for i, vs in enumerate(data, 1):
            ax.scatter(
                [i + 0.12 * ((j % 5) - 2) / 2 for j in range(len(vs))], vs, s=10, alpha=0.6, color="#8e24aa", zorder=3
            )
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, fontsize=7)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="eager (1x)")
        ax.set_ylabel("speedup over eager")
        ax.set_title("Speedup over eager per perf case", fontsize=10)
        ax.legend(fontsize=7)
        out["speedups"] = png(fig, Canvas)
    cases, parts, cells = pass_rates(subs)
    if cases:
        fig = Figure(figsize=(7.5, 1 + 0.22 * len(cases)))
        ax = fig.add_subplot(1, 1, 1)
        h = 0.8 / max(1, len(parts))
        for j, part in enumerate(parts):
            ys = [i + (j - (len(parts) - 1) / 2) * h for i in range(len(cases))]
            rates = [
                100.0 * cells[(c, part)][0] / cells[(c, part)][1] if cells.get((c, part), (0, 0, 0))[1] else 0.0
                for c in cases
            ]
            ax.barh(ys, rates, height=h, label=part)
        ax.set_yticks(range(len(cases)))
        ax.set_yticklabels(cases, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of submissions passing (of those where the case ran)")
        ax.set_title("Pass rate per correctness case", fontsize=10)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        out["pass_rates"] = png(fig, Canvas)
    return out
