"""The end of a batch: the TA report over OUT (grader/report/tareport.py's write_ta_report: grades.csv and
class_summary.html), then the batch's own summary (OUT/batch_summary.json and batch_summary.html, printed too):
counts, the submissions not graded and why, the flagged ones, the GPU models the class was graded on with a
warning when there were several or when a GPU was hot or slowed its clocks during a grade (regrade those), and the
throughput in submissions per GPU-hour.

GPU-hours are the sum of the tasks' wall times (every attempt, faults included) on a GPU slot: a task holds its
GPU for its whole life, so this is what the class cost. The local engine also prints the figure over its elapsed
time times its slots (idle tails included).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.classfiles import state
from grader.classfiles.state import Entry, Status
from grader.report import write_json_atomic, write_text_atomic
from grader.report.devices import gpu_summary

SUMMARY_JSON, SUMMARY_HTML = "batch_summary.json", "batch_summary.html"


@dataclass
class Summary:
    entries: list[Entry]
    counts: dict[str, int]
    flagged: list[tuple[str, str]] = field(default_factory=list)  # (student, first flag)
    models: dict[str, int] = field(default_factory=dict)  # GPU model -> grades
    warnings: list[str] = field(default_factory=list)
    graded: int = 0
    gpu_seconds: float = 0.0
    resubmit: str = ""  # the command that resubmits the missing tasks (Slurm)
    report_paths: list[str] = field(default_factory=list)
    unusable: list[tuple[str, str]] = field(default_factory=list)  # the TA report's unreadable files (path, why)
    report_error: str = ""  # why the TA report was not written (the grades are in place all the same)
    notes: list[str] = field(default_factory=list)  # the same for every grade (classdata.class_notes): said once

    @property
    def per_gpu_hour(self) -> float | None:
        return self.graded / (self.gpu_seconds / 3600) if self.gpu_seconds > 0 and self.graded else None


def _results(out: Path, sid: str) -> dict[str, Any] | None:
    """A grade's results.json, read as the TA report reads one (validate.parse_results: capped, strict, bounded
    depth, the schema), or None: OUT is the grader's, but what a grade wrote came out of a process that ran near a
    submission, and one bad file must not stop the batch's summary."""
    from grader.report import validate

    try:
        with open(out / sid / state.RESULTS, "rb") as f:
            raw = f.read(validate.MAX_FILE_BYTES + 1)
        return validate.parse_results(raw)
    except (OSError, validate.BadResults):
        return None
    except ImportError:  # no jsonschema (the batch says so): the JSON alone, capped as above
        try:
            d = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        return d if isinstance(d, dict) and len(raw) <= validate.MAX_FILE_BYTES else None


def gpu_models(out: Path, entries: list[Entry]) -> tuple[dict[str, int], list[str]]:
    """gpu_summary over the batch's graded submissions."""
    docs = ((e.sid, _results(out, e.sid)) for e in entries if e.status == Status.DONE)
    return gpu_summary((sid, d) for sid, d in docs if d is not None)


def gpu_seconds(out: Path, manifest: dict[str, Any]) -> float:
    """Task wall time over every attempt of this batch's current keys (a GPU held is a GPU spent). Tasks that
    shared a GPU (batch --per-gpu: same host and CUDA_VISIBLE_DEVICES, their end time recorded) count the union of
    their intervals, so a GPU-second is counted once however many grades overlapped in it."""
    total = 0.0
    spans: dict[str, list[tuple[float, float]]] = {}
    for it in manifest["items"]:
        for a in state.attempts(out, it["sid"]):
            if a.get("event") is not None or a.get("key") != it["key"] or not isinstance(a.get("wall_s"), (int, float)):
                continue
            end, gpu = a.get("ended_at_s"), a.get("gpu_slot")
            if isinstance(end, (int, float)) and isinstance(gpu, str):
                spans.setdefault(gpu, []).append((float(end) - float(a["wall_s"]), float(end)))
            else:
                total += float(a["wall_s"])
    for intervals in spans.values():
        reach = float("-inf")
        for start, end in sorted(intervals):
            if end > reach:
                total += end - max(start, reach)
                reach = end
    return total


def summarize(out: Path, manifest: dict[str, Any], live: set[int] | None = None, *, report: bool = True) -> Summary:
    entries = state.status_of(out, manifest, live)
    counts = Counter(str(e.status) for e in entries)
    s = Summary(entries, {str(st): counts.get(str(st), 0) for st in Status})
    if report:
        from grader.report import tareport

        state.clean_staging(out)  # what killed tasks left: never read as a student's grade
        try:
            done = tareport.write_class_report(out)
            csv_path, html_path, subs, bad = done.csv_path, done.html_path, done.cls.subs, done.cls.bad
            s.notes = done.cls.notes
        except ImportError:  # the report judges every results.json by its schema: that needs jsonschema
            s.report_error = (
                f"the TA report was not written: {tareport.NEEDS_JSONSCHEMA}; the grades are in place: make it "
                f"here once installed, or anywhere jsonschema is, with `python -m grader report {out}`"
            )
        else:
            s.report_paths = [str(csv_path), str(html_path), *([str(done.notes_path)] if done.notes_path else [])]
            s.unusable = [(b.path, b.reason) for b in bad]
            s.flagged = [(x.student, x.flags[0]) for x in subs if x.flags]
    s.models, s.warnings = gpu_models(out, entries)
    uses_gpu = manifest["options"].get("device") != "cpu"
    s.graded = counts.get(str(Status.DONE), 0)
    s.gpu_seconds = gpu_seconds(out, manifest) if uses_gpu else 0.0
    return s


def write_summary(out: Path, s: Summary) -> tuple[Path, Path]:
    data = {
        "counts": s.counts,
        "submissions": [
            {"index": e.index, "sid": e.sid, "status": str(e.status), "why": e.why, "attempts": e.attempts}
            for e in s.entries
        ],
        "flagged": [{"student": a, "flag": b} for a, b in s.flagged],
        "gpu_models": s.models,
        "warnings": s.warnings,
        "graded": s.graded,
        "gpu_hours": round(s.gpu_seconds / 3600, 4),
        "submissions_per_gpu_hour": round(s.per_gpu_hour, 1) if s.per_gpu_hour else None,
        "resubmit": s.resubmit or None,
        "unusable_in_report": [{"path": p, "why": w} for p, w in s.unusable],
        "report_error": s.report_error or None,
        "class_notes": s.notes,
    }
    jp = out / SUMMARY_JSON
    write_json_atomic(jp, data)
    e = html.escape

    def table(head: list[str], rows: list[list[Any]]) -> str:
        if not rows:
            return "<p>none</p>"
        h = "".join(f"<th>{e(c)}</th>" for c in head)
        b = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{h}</tr>{b}</table>"

    not_done = [[x.sid, str(x.status), x.why, x.attempts] for x in s.entries if x.status != Status.DONE]
    parts = [
        "<!doctype html><meta charset='utf-8'><title>batch summary</title>",
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 8px}"
        "table{border-collapse:collapse}.warn{color:#a60}</style>",
        "<h1>Batch summary</h1><p>The class report: <a href='class_summary.html'>class_summary.html</a>, "
        "<a href='grades.csv'>grades.csv</a>.</p>",
        table(["status", "submissions"], [[k, v] for k, v in s.counts.items()]),
        f"<p>throughput: {e(_throughput(s))}</p>",
        *[f"<p class='warn'>the whole class: {e(n)}</p>" for n in s.notes],
        *[f"<p class='warn'>warning: {e(w)}</p>" for w in s.warnings],
        "<h2>GPU models</h2>",
        table(["model", "grades"], [[m, n] for m, n in s.models.items()]),
        "<h2>Not graded</h2>",
        table(["submission", "status", "why", "attempts"], not_done),
        *([f"<p>resubmit the missing ones: <code>{e(s.resubmit)}</code></p>"] if s.resubmit else []),
        "<h2>Flagged</h2>",
        table(["student", "first flag"], [list(x) for x in s.flagged]),
    ]
    hp = out / SUMMARY_HTML
    write_text_atomic(hp, "\n".join(parts) + "\n")
    return jp, hp


def _throughput(s: Summary) -> str:
    if s.per_gpu_hour is None:
        return f"{s.graded} graded" + ("" if s.gpu_seconds else " (no GPU time: CPU grading)")
    return f"{s.graded} graded in {s.gpu_seconds / 3600:.3f} GPU-hours: {s.per_gpu_hour:.1f} submissions per GPU-hour"


def print_summary(s: Summary) -> None:
    c = s.counts
    print(
        f"batch: {c[Status.DONE]} graded, {c[Status.INFRA]} not graded: infrastructure, {c[Status.REFUSED]} not "
        f"gradable, {c[Status.MISSING]} missing, {c[Status.RUNNING]} running"
    )
    for x in s.entries:
        if x.status not in (Status.DONE, Status.RUNNING):
            print(f"  {x.sid}: {x.status}{' (' + x.why + ')' if x.why else ''}")
    for note in s.notes:
        print(f"the whole class: {note}")
    if s.flagged:
        print(f"flagged ({len(s.flagged)}):")
        for who, flag in s.flagged[:50]:
            print(f"  {who}: {flag}")
    if s.unusable:
        print(f"the TA report could not use {len(s.unusable)} file(s) or folder(s) (listed in class_summary.html):")
        for path, why in s.unusable[:50]:
            print(f"  {path}: {why}")
    for w in s.warnings:
        print(f"warning: {w}")
    if s.models:
        print("graded on: " + ", ".join(f"{m} ({n})" for m, n in s.models.items()))
    print(f"throughput: {_throughput(s)}")
    if s.resubmit:
        print(f"resubmit only the missing tasks:\n  {s.resubmit}")
    if s.report_paths:
        print(f"written: {', '.join(s.report_paths)}")
    if s.report_error:
        print(f"warning: {s.report_error}")
