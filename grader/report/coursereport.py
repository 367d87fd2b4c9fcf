"""A course's grade (`grade --course course.yaml`, grader/problem/course.py): each problem graded from its folder of
the submission into OUT/<problem>/, then OUT/course.json (every problem's score scaled to its course points, and the
total), OUT/report.md (the student report, one section per problem) and OUT/report.html (the total table, each
problem linked to its own report.html). The course file itself, its validation and the summary are
grader/problem/course.py's: the problem layer, which renders nothing."""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.problem.course import Course, grade_dir, load_course, partial_line, submission_dir, summarize
from grader.report import html
from grader.report.blocks import Block, Cell, Page, Row, Section, Table, Text


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def student_report(course: Course, summary: dict[str, Any], out: Path) -> str:
    """report.md with one section per problem: a total table, then each problem's own report.md, its headings
    pushed one level down."""
    lines = [f"# {course.name}", "", "| problem | score | course points |", "|---|---|---|"]
    for r in summary["problems"]:
        lines.append(f"| {r['problem']} | {r['score']:g} / {r['max_score']:g} | {r['earned']:.2f} / {r['points']:g} |")
    lines += [f"| **total** | | **{summary['earned']:.2f} / {summary['points']:g}** |", ""]
    if summary.get("partial"):
        lines += [f"> {partial_line(summary)}\n"]
    lines += [f"> {r['problem']}: {r['layout']}\n" for r in summary["problems"] if r.get("layout")]
    for r in summary["problems"]:
        try:  # each report starts with its own '# <problem> report' heading: it becomes this section's
            body = (out / grade_dir(r) / "report.md").read_text(encoding="utf-8")
        except OSError:
            body = f"# {r['problem']}\n\n" + (r["note"] or "no report was written for this problem")
        lines += [("#" + ln) if ln.startswith("#") else ln for ln in body.splitlines()] + [""]
    return "\n".join(lines)


def student_page(course: Course, summary: dict[str, Any], out: Path) -> str:
    """report.html: the same total table, as the report's own HTML page (grader/report's templates), each problem
    linked to its own report.html (OUT/<problem>/report.html, a relative link)."""
    rows = [
        Row(
            [
                Cell(
                    r["problem"],
                    href=f"{grade_dir(r)}/report.html" if (out / grade_dir(r) / "report.html").is_file() else "",
                ),
                Cell(f"{r['score']:g} / {r['max_score']:g}"),
                Cell(f"{r['earned']:.2f} / {r['points']:g}"),
            ]
        )
        for r in summary["problems"]
    ]
    rows.append(Row([Cell("total"), Cell(""), Cell(f"{summary['earned']:.2f} / {summary['points']:g}")]))
    notes = [Text(f"{r['problem']}: {r['note']}", "note") for r in summary["problems"] if r.get("note")]
    section = Section("Problems", [Table(["problem", "score", "course points"], rows), *notes])
    facts: list[Block] = [Text("each problem's own report is linked from its name", "facts")]
    if summary.get("partial"):
        facts.append(Text(partial_line(summary), "facts"))
    return html.render(Page(course.name, facts, [section]))


def run(args: argparse.Namespace, root: Path, grade_one: Callable[[argparse.Namespace], int]) -> int:
    """Grade every problem of the course with grade_one (the CLI's `grade` on one problem), then write course.json
    and the combined report.md. The exit code is the worst of the problems' (0 when all graded)."""
    course = load_course(args.course, root)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rc = 0
    notes: dict[str, str] = {}
    for p in course.problems:
        ns = copy.copy(args)
        ns.course = None
        ns.problem = str(p.spec)
        where = submission_dir(Path(args.submission), p)
        if where.note:
            notes[p.name] = where.note
            print(f"{p.name}: {where.note}")
        ns.submission = where.path
        ns.out = out / p.name
        rc = max(rc, grade_one(ns))
    # --case: each problem's grade was partial, written to OUT/<problem>/partial/ (grader/cli.py _out_dir).
    summary = summarize(course, out, notes, partial=tuple(getattr(args, "cases", None) or ()))
    _write(out / "course.json", json.dumps(summary, indent=2) + "\n")
    _write(out / "report.md", student_report(course, summary, out))
    _write(out / "report.html", student_page(course, summary, out))
    total = f"{summary['earned']:.2f} / {summary['points']:g} points"
    if summary.get("partial"):
        total += f" ({partial_line(summary)})"
    print(f"course {course.name}: {total}; {out / 'report.md'} and {out / 'report.html'}")
    return rc
