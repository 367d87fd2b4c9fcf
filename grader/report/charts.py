"""The student report's charts (matplotlib, optional): per perf case the times against the credit thresholds, and the
achieved bandwidth against the measured copy ceiling. PNG bytes, made without pyplot (no global state); the TA
report draws its own with the same matplotlib() and png()."""

from __future__ import annotations

import io
from collections.abc import Set as AbstractSet
from typing import Any

from grader.report.perf import case_title
from grader.results import Grade, PerfCase, PerfSummary, number


def matplotlib() -> Any:
    """(Figure, FigureCanvasAgg), or None when matplotlib is missing or broken. No pyplot: no global state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except Exception:
        return None
    return Figure, FigureCanvasAgg


def preload() -> None:
    """Import matplotlib and draw one small figure with text (its font cache): 1-2 s that the student report would
    otherwise add after results.json. The CLI has a GPU grade run this during its correctness stage."""
    mpl = matplotlib()
    if mpl is not None:
        figure, canvas = mpl
        fig = figure(figsize=(1, 1))
        fig.add_subplot(1, 1, 1).set_title("0.1 ms")
        png(fig, canvas)


def png(fig: Any, canvas_cls: Any) -> bytes:
    canvas_cls(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


CREDIT_COLORS = {"full": "#2e7d32", "partial": "#ef6c00", "none": "#c62828", "baseline": "#90a4ae"}


def _credit_color(kind: str, credit: float | None) -> str:
    if kind == "baseline":
        return CREDIT_COLORS["baseline"]
    c = number(credit)
    return CREDIT_COLORS["full"] if c >= 0.999 else CREDIT_COLORS["partial"] if c > 0 else CREDIT_COLORS["none"]


def chart_case(mpl: Any, name: str, c: PerfCase, forfeit: AbstractSet[str] = frozenset()) -> bytes:
    """Bar chart of one perf case's times, baselines grey, with the credit thresholds as horizontal lines."""
    Figure, Canvas = mpl
    items = [(n, "baseline", d) for n, d in c.baselines.items()] + [(n, "impl", d) for n, d in c.impls.items()]
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(items)))
    ms = [number(d.effective_ms) for _, _, d in items]
    bars = ax.bar(xs, ms, color=[_credit_color(k, 0.0 if n in forfeit else d.credit) for n, k, d in items], width=0.6)
    for b, v in zip(bars, ms, strict=False):
        ax.annotate(f"{v:.3g}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    th = c.thresholds
    lines = (
        (
            (th.zero_ms, "no credit at or above", CREDIT_COLORS["none"]),
            (th.partial_ms, f"{th.partial_credit:g} credit", CREDIT_COLORS["partial"]),
            (th.full_ms, "full credit at or below", CREDIT_COLORS["full"]),
        )
        if th is not None
        else ()
    )
    for at, label, color in lines:
        if at:
            ax.axhline(at, color=color, linestyle="--", linewidth=1.2, label=f"{label} ({at:.3g} ms)")
    if c.floor_ms:
        ax.axhline(
            c.floor_ms,
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"physical floor ({c.floor_ms:.3g} ms)",
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([n for n, _, _ in items])
    ax.set_ylabel("time per call (ms, lower is better)")
    ax.set_title(case_title(name, c), fontsize=10)
    ax.set_ylim(0, max(ms + [th.zero_ms if th is not None else 0.0]) * 1.15 or 1.0)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return png(fig, Canvas)


def chart_bandwidth(mpl: Any, perf: PerfSummary) -> bytes:
    """Achieved bandwidth per case and implementation against the measured copy ceiling."""
    Figure, Canvas = mpl
    cases = perf.cases
    names: list[str] = []
    for c in cases.values():
        for n in list(c.baselines) + list(c.impls):
            if n not in names:
                names.append(n)
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(names))
    palette = ["#b0bec5", "#78909c", "#546e7a", "#1e88e5", "#8e24aa", "#00897b", "#f4511e"]
    for j, n in enumerate(names):
        vals = []
        for c in cases.values():
            d = c.baselines.get(n) or c.impls.get(n)
            vals.append(number(d.gbps if d is not None else None))
        ax.bar(
            [i + (j - (len(names) - 1) / 2) * width for i in range(len(cases))],
            vals,
            width=width,
            label=n,
            color=palette[j % len(palette)],
        )
    ceiling = perf.copy_bytes_per_s / 1e9
    if ceiling:
        ax.axhline(
            ceiling, color="black", linestyle="--", linewidth=1.2, label=f"measured copy ceiling ({ceiling:.0f} GB/s)"
        )
    ax.set_xticks(list(range(len(cases))))
    ax.set_xticklabels(list(cases))
    ax.set_ylabel("achieved GB/s (read + write)")
    dev = perf.device_name or ""
    ax.set_title(f"Bandwidth against the copy roofline{' on ' + dev if dev else ''}", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return png(fig, Canvas)


def charts(g: Grade) -> dict[str, bytes] | None:
    """name -> PNG bytes; {} when there is no perf data; None when matplotlib is missing."""
    perf = g.perf
    if not perf.cases:
        return {}  # nothing to draw: no need for matplotlib at all
    mpl = matplotlib()
    if mpl is None:
        return None
    out: dict[str, bytes] = {}
    forfeit = g.forfeits.keys()
    for name, c in perf.cases.items():
        out[f"time_{name}"] = chart_case(mpl, name, c, forfeit)
    out["bandwidth"] = chart_bandwidth(mpl, perf)
    return out
