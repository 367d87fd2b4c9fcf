"""The student report's charts (matplotlib, optional): per perf case the times against the credit thresholds, and the
achieved bandwidth against the measured copy ceiling. PNG bytes, made without pyplot (no global state); the TA
report draws its own with the same matplotlib() and png()."""

from __future__ import annotations

import io
from collections.abc import Set as AbstractSet
from typing import Any

from grader.report.perf import case_title
from grader.report.records import forfeit_parts, num, perf_of


def matplotlib() -> Any:
    """(Figure, FigureCanvasAgg), or None when matplotlib is missing or broken. No pyplot: no global state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except Exception:
        return None
    return Figure, FigureCanvasAgg


def png(fig: Any, canvas_cls: Any) -> bytes:
    canvas_cls(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


CREDIT_COLORS = {"full": "#2e7d32", "partial": "#ef6c00", "none": "#c62828", "baseline": "#90a4ae"}


def _credit_color(kind: str, credit: Any) -> str:
    if kind == "baseline":
        return CREDIT_COLORS["baseline"]
    c = num(credit)
    return CREDIT_COLORS["full"] if c >= 0.999 else CREDIT_COLORS["partial"] if c > 0 else CREDIT_COLORS["none"]


def chart_case(mpl: Any, name: str, c: dict[str, Any], forfeit: AbstractSet[str] = frozenset()) -> bytes:
    """Bar chart of one perf case's times, baselines grey, with the credit thresholds as horizontal lines."""
    Figure, Canvas = mpl
    items = [(n, "baseline", d) for n, d in (c.get("baselines") or {}).items()] + [
        (n, "impl", d) for n, d in (c.get("impls") or {}).items()
    ]
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(items)))
    ms = [num(d.get("effective_ms")) for _, _, d in items]
    bars = ax.bar(
        xs, ms, color=[_credit_color(k, 0.0 if n in forfeit else d.get("credit")) for n, k, d in items], width=0.6
    )
    for b, v in zip(bars, ms, strict=False):
        ax.annotate(f"{v:.3g}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    th = c.get("thresholds") or {}
    for key, label, color, style in (
        ("zero_ms", "no credit at or above", CREDIT_COLORS["none"], "--"),
        ("partial_ms", f"{num(th.get('partial_credit'), 0.5):g} credit", CREDIT_COLORS["partial"], "--"),
        ("full_ms", "full credit at or below", CREDIT_COLORS["full"], "--"),
    ):
        if th.get(key):
            ax.axhline(
                num(th[key]), color=color, linestyle=style, linewidth=1.2, label=f"{label} ({num(th[key]):.3g} ms)"
            )
    if c.get("floor_ms"):
        ax.axhline(
            num(c["floor_ms"]),
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"physical floor ({num(c['floor_ms']):.3g} ms)",
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([n for n, _, _ in items])
    ax.set_ylabel("time per call (ms, lower is better)")
    ax.set_title(case_title(name, c), fontsize=10)
    ax.set_ylim(0, max(ms + [num(th.get("zero_ms"))]) * 1.15 or 1.0)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return png(fig, Canvas)


def chart_bandwidth(mpl: Any, perf: dict[str, Any]) -> bytes:
    """Achieved bandwidth per case and implementation against the measured copy ceiling."""
    Figure, Canvas = mpl
    cases = perf.get("cases") or {}
    names: list[str] = []
    for c in cases.values():
        for n in list(c.get("baselines") or {}) + list(c.get("impls") or {}):
            if n not in names:
                names.append(n)
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(names))
    palette = ["#b0bec5", "#78909c", "#546e7a", "#1e88e5", "#8e24aa", "#00897b", "#f4511e"]
    for j, n in enumerate(names):
        vals = []
        for c in cases.values():
            d = (c.get("baselines") or {}).get(n) or (c.get("impls") or {}).get(n) or {}
            vals.append(num(d.get("gbps")))
        ax.bar(
            [i + (j - (len(names) - 1) / 2) * width for i in range(len(cases))],
            vals,
            width=width,
            label=n,
            color=palette[j % len(palette)],
        )
    ceiling = num(perf.get("copy_bytes_per_s")) / 1e9
    if ceiling:
        ax.axhline(
            ceiling, color="black", linestyle="--", linewidth=1.2, label=f"measured copy ceiling ({ceiling:.0f} GB/s)"
        )
    ax.set_xticks(list(range(len(cases))))
    ax.set_xticklabels(list(cases))
    ax.set_ylabel("achieved GB/s (read + write)")
    dev = (perf.get("device") or {}).get("name", "")
    ax.set_title(f"Bandwidth against the copy roofline{' on ' + dev if dev else ''}", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return png(fig, Canvas)


def charts(data: dict[str, Any]) -> dict[str, bytes] | None:
    """name -> PNG bytes; {} when there is no perf data; None when matplotlib is missing."""
    perf = perf_of(data)
    if not perf.get("cases"):
        return {}  # nothing to draw: no need for matplotlib at all
    mpl = matplotlib()
    if mpl is None:
        return None
    out: dict[str, bytes] = {}
    for name, c in (perf.get("cases") or {}).items():
        out[f"time_{name}"] = chart_case(mpl, name, c, forfeit_parts(data))
    if perf.get("cases"):
        out["bandwidth"] = chart_bandwidth(mpl, perf)
    return out
