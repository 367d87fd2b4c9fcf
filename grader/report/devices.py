"""Which devices a class was graded on, read from the results.json files: the GPU model of each grade (from
extra_data.graded_on, which grader/batch/where.py writes, else the performance stage's device), and the grades whose
GPU was hot or slowing its clocks. batch_summary (grader/batch/collect.py) and class_summary.html both show it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from grader.results import Grade

HOT_C = 85  # at or above this the H100/H200 class starts to slow its clocks


def suspect(gpu: dict[str, Any] | None) -> list[str]:
    """Why a snapshot makes the grade's timings suspect (empty: it does not)."""
    if not gpu:
        return []
    why = [f"clocks slowed: {', '.join(gpu.get('throttled') or [])}"] if gpu.get("throttled") else []
    t = gpu.get("temperature_c")
    if isinstance(t, (int, float)) and t >= HOT_C:
        why.append(f"{t:g} C")
    return why


def gpu_summary(docs: Iterable[tuple[str, Grade | Mapping[str, Any]]]) -> tuple[dict[str, int], list[str]]:
    """(student, Grade or results.json data) pairs -> GPU model -> how many grades were made on it ("CPU" without a
    GPU), and the warnings: several models in one class (times, so speed points, are not comparable across models), a
    hot or slowed GPU during a grade. Reads extra_data.graded_on (grader/batch/where.py), else the grade's own
    device fields. The batch's summary and the TA report's class_summary.html both call it."""
    models: Counter[str] = Counter()
    hot: list[str] = []
    for student, doc in docs:
        grade = doc if isinstance(doc, Grade) else Grade.from_json(doc)
        on = grade.extra.get("graded_on")
        g: dict[str, Any] = on if isinstance(on, dict) else {}
        gpu = g.get("gpu") if isinstance(g.get("gpu"), dict) else None
        snap = (gpu or {}).get("start") or (gpu or {}).get("end") or {}
        perf_dev = grade.perf.device_name
        if snap.get("name") or perf_dev:
            model = str(snap.get("name") or perf_dev)
        else:
            model = "CPU" if grade.device == "cpu" else "GPU (model not recorded)"
        models[model] += 1
        why = sorted({w for s in ("start", "end") for w in suspect((gpu or {}).get(s))})
        if why:
            hot.append(f"{student} ({'; '.join(why)})")
    warns = []
    if len(models) > 1:
        warns.append(
            "this class was graded on more than one kind of device ("
            + ", ".join(f"{m}: {n}" for m, n in models.most_common())
            + "): speed points compare kernels against baselines of the same run, but regrade on one model for a "
            "class leaderboard"
        )
    if hot:
        warns.append(
            f"{len(hot)} grade(s) ran on a GPU that was hot or slowing its clocks (regrade them): "
            + ", ".join(hot[:20])
        )
    return dict(models), warns
