"""A class of graded submissions: every results.json under a folder, read (validated first, grader/report/validate.py)
into a Submission with its points per part and stage, its flags and (with the key) its signature; and grades.csv.

The student id is `extra_data.student_id` when the file has one, else the name of the directory holding the file
(its parent's name when that directory is called `results`, as in Gradescope's /autograder/results)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import signing
from .gsexport import gradescope_layout
from .output import advisory_line
from .records import STAGES, flags_of, num, tests_of
from .validate import MAX_FILE_BYTES, BadResults, Unreadable, parse_results, rel

SCORE_TOLERANCE = 0.01  # top-level score vs the sum of the tests' scores (each rounded to 4 decimals)


@dataclass
class Submission:
    student: str
    path: str  # relative to DIR
    data: dict[str, Any]
    points: dict[str, tuple[float, float]] = field(default_factory=dict)  # "part_stage" -> (score, max)
    total: float = 0.0
    max: float = 0.0
    flags: list[str] = field(default_factory=list)
    signature: str = signing.NOT_CHECKED  # see grader/signing.py
    key: str = ""  # the student id before collect() told duplicates apart (what a roster is matched against)
    submitters: list[dict[str, str]] = field(default_factory=list)  # Gradescope's: name, sid, email (one per member)
    report_href: str = ""  # relative link from class_summary.html to this student's report.html, when there is one

    @property
    def device(self) -> str:
        ex = self.data.get("extra_data") or {}
        dev = ((ex.get("performance") or {}).get("device") or {}).get("name")
        return str(dev or ex.get("device") or "")

    @property
    def device_label(self) -> str:
        """The GPU model the grade was made on; "CPU" for a grade without a GPU; "GPU (model not recorded)" for a
        GPU grade without timing (--no-perf); "unknown" for a file that does not say."""
        ex = self.data.get("extra_data") or {}
        dev = ((ex.get("performance") or {}).get("device") or {}).get("name")
        if isinstance(dev, str) and dev.strip():
            return dev.strip()
        return {"cpu": "CPU", "cuda": "GPU (model not recorded)"}.get(str(ex.get("device")), "unknown")

    @property
    def without_gpu(self) -> bool:
        """Graded without a GPU: GPU-only cases and performance points could not be earned (grader/pipeline.py)."""
        return (self.data.get("extra_data") or {}).get("device") == "cpu"


def _student_id(data: dict[str, Any], path: Path, root: Path) -> str:
    sid = (data.get("extra_data") or {}).get("student_id")
    if isinstance(sid, (str, int)) and str(sid).strip():
        return str(sid).strip()
    d = path.parent
    if d.name == "results" and d != root:
        d = d.parent
    return d.name or d.resolve().name


def _load_one(path: Path, root: Path, key: bytes | None = None) -> Submission | Unreadable:
    where = rel(path, root)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(MAX_FILE_BYTES + 1)  # a larger file is refused without reading it all
    except OSError as e:
        return Unreadable(where, f"cannot read: {e.strerror or e}")
    try:
        data = parse_results(raw, size)
    except BadResults as e:
        return Unreadable(where, str(e))
    sub = Submission(_student_id(data, path, root), where, data)
    tests = tests_of(data)
    for t in tests:
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        col = f"{t.part}_{t.stage}"
        s, m = sub.points.get(col, (0.0, 0.0))
        sub.points[col] = (s + t.score, m + t.max_score)
    tsum = sum(t.score for t in tests)
    sub.total = num(data.get("score"), tsum) if isinstance(data.get("score"), (int, float)) else tsum
    sub.max = num(data.get("max_score"), 0.0) or sum(t.max_score for t in tests)
    sub.flags = flags_of(data)
    if abs(sub.total - tsum) > SCORE_TOLERANCE:
        sub.flags.append(f"top-level score {sub.total:g} differs from the sum of the tests' scores {tsum:.4g}")
    extra = data.get("extra_data") or {}
    adv = advisory_line(extra.get("official"), extra.get("not_official_because"))
    if adv:
        sub.flags.insert(0, adv)
    if key is not None:
        sub.signature = signing.verify(data, key)
        if sub.signature != signing.VALID:
            why = (
                "has no signature"
                if sub.signature == signing.UNSIGNED
                else "has a signature that does not match its content"
            )
            sub.flags.insert(
                0, f"NOT WRITTEN BY THE GRADER: this results.json {why} (grader/signing.py); regrade this submission"
            )
    return sub


def collect(
    root: Path, progress: Callable[[str], None] = lambda s: None, exclude: Path | None = None, key: bytes | None = None
) -> tuple[list[Submission], list[Unreadable]]:
    """Every results.json under root, read; plus every directory directly under root that holds none (except
    `exclude`, the report's own output folder). In Gradescope's export layout (a submission_metadata.yml at root or
    one level down), each submission also gets its submitters' names, SIDs and emails."""
    root = Path(root)
    skip = exclude.resolve() if exclude is not None else None
    files = sorted(
        p for p in root.rglob("results.json") if p.is_file() and (skip is None or skip not in p.resolve().parents)
    )
    subs: list[Submission] = []
    bad: list[Unreadable] = []
    for i, p in enumerate(files, 1):
        progress(f"reading {i}/{len(files)}: {rel(p, root)}")
        r = _load_one(p, root, key)
        (subs if isinstance(r, Submission) else bad).append(r)  # type: ignore[arg-type]
    layout, meta_bad = gradescope_layout(root)
    bad += meta_bad
    for s in subs:
        s.key = s.student
        if layout:
            where = (root / s.path).resolve()
            s.submitters = next((layout[d] for d in where.parents if d in layout), [])
    has = {p.resolve() for f in files for p in f.parents}
    for d in sorted(x for x in root.iterdir() if x.is_dir() and not x.name.startswith(".")) if root.is_dir() else []:
        if d.resolve() not in has and d.resolve() != skip:
            bad.append(Unreadable(rel(d, root) + "/", "no results.json in this directory"))
    # The same id twice (two copies, or two `results` folders): tell them apart by their path.
    seen: dict[str, int] = {}
    for s in subs:
        seen[s.student] = seen.get(s.student, 0) + 1
    for s in subs:
        if seen[s.student] > 1:
            s.student = f"{s.student} ({Path(s.path).parent.as_posix()})"
    subs.sort(key=lambda s: s.student)
    return subs, bad


def columns(subs: list[Submission]) -> list[str]:
    """part_stage columns in the order the parts first appear; stages in STAGES order, then any others."""
    parts: list[str] = []
    cols_seen: set[str] = set()
    for s in subs:
        for t in tests_of(s.data):
            if t.part not in parts:
                parts.append(t.part)
        cols_seen |= set(s.points)
    order = []
    for p in parts:
        for st in STAGES:
            if f"{p}_{st}" in cols_seen:
                order.append(f"{p}_{st}")
        order += sorted(
            c for c in cols_seen if c.startswith(f"{p}_") and c not in order and c[len(p) + 1 :] not in STAGES
        )
    return order + sorted(cols_seen - set(order))


def safe_cell(s: str) -> str:
    """No spreadsheet formulas from a directory or kernel name."""
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


def who(s: Submission, what: str) -> str:
    """The submitters' names, SIDs or emails (Gradescope's export), joined with '; ' for a group."""
    return "; ".join(p[what] for p in s.submitters if p.get(what))


def render_csv(subs: list[Submission], signatures: bool = False) -> str:
    """student_id, then name/email/sid (Gradescope's export layout only), the part_stage columns, device (the GPU
    model, or CPU: such a grade holds no performance points), total, max, flags. Like the part columns, these
    come with the data: a report of no submission has only student_id, total, max and flags.
    signatures: add a `signature` column (valid / INVALID / unsigned), when the report checked them."""
    cols = columns(subs)
    people = any(s.submitters for s in subs)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "student_id",
            *(["name", "email", "sid"] if people else []),
            *cols,
            *(["device"] if subs else []),
            "total",
            "max",
            "flags",
            *(["signature"] if signatures else []),
        ]
    )
    for s in subs:
        w.writerow(
            [
                safe_cell(s.student),
                *([safe_cell(who(s, "name")), safe_cell(who(s, "email")), safe_cell(who(s, "sid"))] if people else []),
                *(f"{round(s.points[c][0], 4):g}" if c in s.points else "" for c in cols),
                safe_cell(s.device_label),
                f"{round(s.total, 4):g}",
                f"{round(s.max, 4):g}",
                safe_cell(" | ".join(s.flags)),
                *([s.signature] if signatures else []),
            ]
        )
    return buf.getvalue()
