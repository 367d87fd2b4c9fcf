"""The TA's reports over a folder of graded submissions: grades.csv, class_summary.html and, with a roster,
grades_canvas.csv (`python -m grader report DIR`; grader/report/tareport.py is the entry the CLI imports).

class_summary.html is a Page of the same blocks as the student's report (grader/report/blocks.py), rendered by the
same templates: a banner when any grade was made without a GPU, every file that could not be used, the flagged
submissions with why, the score histogram, the speedup over eager per perf case, the pass rate per correctness
case, the roster's join, and every submission with a link to its own report.html where there is one."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from grader import signing
from grader.report import classstats, html
from grader.report.assignment import UNKNOWN, Assignment
from grader.report.blocks import Block, Cell, Chart, Page, Row, Section, Table, Text
from grader.report.classdata import ClassData, Submission, read_class, render_csv, who
from grader.report.devices import gpu_summary
from grader.report.output import write_text_atomic
from grader.report.roster import (
    CANVAS_CSV,
    CANVAS_HEADER,
    Join,
    Roster,
    join_roster,
    points_text,
    refusal,
    render_canvas_csv,
    why_withheld,
)
from grader.report.validate import Unreadable, validator

CLASS_NOTES = "class_notes.txt"  # what is the same for every grade of the class (classdata.class_notes), once

NO_PLOTS = "Note: plots need matplotlib (pip install matplotlib); this summary has tables only."


def _student(s: Submission) -> Cell:
    """The student's id (and Gradescope names), linked to their report.html when there is one (a relative link)."""
    return Cell(s.student + (f" ({who(s, 'name')})" if who(s, "name") else ""), href=s.report_href)


def _names(subs: list[Submission], limit: int = 30) -> str:
    names = [s.student for s in subs]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _table(head: list[str], rows: Sequence[Sequence[object]]) -> Table:
    return Table(head, [Row.of(list(r)) for r in rows])


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _none_or(table: Table) -> Table | Text:
    return table if table.rows else Text("None.")


def _roster(roster: Roster, j: Join) -> Section:
    def person(i: int) -> list[str]:
        r = roster.rows[i]
        return [r["Student"], r["ID"], r["SIS User ID"], r["SIS Login ID"], r["Section"]]

    facts = (
        f'roster {roster.path.name}; assignment column "{j.column}", points possible '
        f"{points_text(j.points_possible)}. Import it in Canvas (Grades, Import); an empty score leaves the "
        "gradebook's as it is."
    )
    empty = [[*person(i), "no results"] for i in j.missing]
    empty += [
        [*person(i), "several results: " + ", ".join(s.student for s in subs) + " (choose one by hand)"]
        for i, subs in j.conflicts.items()
    ]
    empty += [[*person(i), why_withheld(s)] for i, s in j.withheld.items()]
    left = [[s.student, s.path, f"{s.total:.4g}", "matches no roster student"] for s in j.unmatched]
    left += [
        [s.student, s.path, f"{s.total:.4g}", f"beside {j.matched[i].student}, imported instead: {why_withheld(s)}"]
        for i, s in j.beside
    ]
    left += [
        [
            s.student,
            s.path,
            f"{s.total:.4g}",
            "matches several roster students: "
            + ", ".join(roster.rows[i]["Student"] or roster.rows[i]["ID"] for i in rows),
        ]
        for s, rows in j.ambiguous
    ]
    title = f"Roster: grades_canvas.csv ({len(j.matched)} of {len(roster.rows)} students with a score)"
    partial = [[*person(i), f"{s.total:.4g}", "; ".join(s.not_final)] for i, s in j.not_final.items()]
    head: list[Block] = [Text(facts, "facts")]
    if partial and not j.written:
        title = f"Roster: grades_canvas.csv NOT WRITTEN ({len(partial)} score(s) not final)"
        head.insert(0, Text(refusal(j), "note", "Not written:"))
    elif partial:
        head.insert(
            0,
            Text(
                f"{len(partial)} imported score(s) are not final grades, written with --allow-partial (listed below).",
                "note",
                "Partial scores:",
            ),
        )
    return Section(
        title,
        head,
        [
            Section(
                f"Scores that are not final ({len(partial)})",
                [_none_or(_table([*CANVAS_HEADER, "total", "why not final"], partial))],
            ),
            Section(
                f"Roster students without a score ({len(empty)})", [_none_or(_table([*CANVAS_HEADER, "why"], empty))]
            ),
            Section(
                f"Results not in grades_canvas.csv ({len(left)})",
                [_none_or(_table(["student", "file", "total", "why"], left))],
            ),
        ],
    )


def _not_final(subs: list[Submission]) -> Section:
    """The grades that are not final (grader/report/final.py): their scores are not the assignment's."""
    rows = [Row([_student(s), Cell(f"{s.total:.4g}"), Cell("", items=tuple(s.not_final))]) for s in subs if s.not_final]
    return Section(
        f"Grades that are not final ({len(rows)})",
        [
            Text(
                "A CPU grade, a grade of some parts or stages only (--only, --no-perf), or of some cases (--case): "
                "its score is not out of the assignment's points. grades_canvas.csv is not written while it would "
                "import one, unless `report --allow-partial`.",
                "facts",
            ),
            _none_or(Table(["student", "total", "why not final"], rows)),
        ],
    )


def _speedups(subs: list[Submission], imgs: dict[str, bytes] | None) -> Section:
    s = Section("Speedup over eager per perf case")
    if imgs and "speedups" in imgs:
        s.blocks.append(Chart("speedup over eager per perf case", imgs["speedups"]))
    rows = []
    for case, impls in classstats.speedups(subs).items():
        for impl, vs in impls.items():
            faster = f"{100 * sum(v >= 1 for v in vs) / len(vs):.0f}%"
            rows.append(
                [case, impl, len(vs), f"{min(vs):.2f}x", f"{statistics.median(vs):.2f}x", f"{max(vs):.2f}x", faster]
            )
    head = ["case", "implementation", "timed", "min", "median", "max", "faster than eager"]
    s.blocks.append(_table(head, rows) if rows else Text("No performance data (no submission was timed on a GPU)."))
    return s


def _pass_rates(subs: list[Submission], imgs: dict[str, bytes] | None) -> Section:
    s = Section("Pass rate per correctness case")
    if imgs and "pass_rates" in imgs:
        s.blocks.append(Chart("pass rate per correctness case", imgs["pass_rates"]))
    cases, parts, cells = classstats.pass_rates(subs)

    def cell(c: str, p: str) -> str:
        ok, n, k = cells.get((c, p), (0, 0, 0))
        return (f"{100 * ok / n:.0f}% ({ok}/{n})" if n else "-") + (f", {k} skipped" if k else "")

    rows = [[c, *(cell(c, p) for p in parts)] for c in cases]
    s.blocks.append(_table(["case", *parts], rows) if cases else Text("No correctness results."))
    return s


def _standing(subs: list[Submission]) -> Section:
    """The files whose grade does not count although the grader may have written them: replayed (another row's
    signed grade), identity not signed, not fitting the assignment; and identical graded files (a note)."""
    replayed = [s for s in subs if s.signature == signing.REPLAYED]
    no_id = [s for s in subs if s.signature == signing.NO_IDENTITY]
    misfit = [s for s in subs if s.misfit]
    same = [s for s in subs if any(f.startswith("same files:") for f in s.flags)]

    def rows(group: list[Submission], why: Callable[[Submission], str]) -> Table | Text:
        return _none_or(
            Table(["student", "file", "why"], [Row([_student(s), Cell(s.path), Cell(why(s))]) for s in group])
        )

    def first(prefix: str) -> Callable[[Submission], str]:
        return lambda s: next((f for f in s.flags if f.startswith(prefix)), "")

    return Section(
        f"Grades that do not count ({len(replayed) + len(no_id) + len(misfit)})",
        [Text("Not in grades_canvas.csv, nor in the statistics and charts below; each stays in its own row.", "facts")],
        [
            Section(f"Replayed ({len(replayed)})", [rows(replayed, first("REPLAYED"))]),
            Section(f"Identity not signed ({len(no_id)})", [rows(no_id, first("IDENTITY NOT SIGNED"))]),
            Section(f"Not this assignment ({len(misfit)})", [rows(misfit, lambda s: s.misfit)]),
            Section(f"Same graded files as another student ({len(same)}, counted)", [rows(same, first("same files:"))]),
        ],
    )


def build(
    subs: list[Submission],
    bad: list[Unreadable],
    imgs: dict[str, bytes] | None,
    source: str,
    roster: Roster | None = None,
    join: Join | None = None,
    assignment: Assignment = UNKNOWN,
) -> Page:
    """The class summary. Class-wide values (the columns, "out of", points possible) are the assignment's (its
    spec's); the statistics, histogram, charts and device table are over the counted files only
    (Submission.counted): a file that does not count has its row and its flags, nothing else."""
    counted = [s for s in subs if s.counted]
    top = assignment.points or 0.0
    totals = [s.total for s in counted]
    page = Page(
        f"Class summary: {len(subs)} graded submission(s)",
        [
            Text(f"from {source}", "facts"),
            Text(
                f"problem {assignment.problem or 'unknown'}, {points_text(assignment.points) or 'unknown'} points, "
                f"columns {', '.join(assignment.columns) or 'none'}: from {assignment.source}; "
                f"{len(counted)} of {len(subs)} grade(s) count",
                "facts",
            ),
        ],
    )
    cpu = [s for s in subs if s.without_gpu]
    if cpu:
        lead = f"{len(cpu)} of {len(subs)} grade(s) were made without a GPU"
        page.head.append(
            Text(
                ' (device "CPU"): they cannot hold the performance points nor the GPU-only cases, so their totals are '
                f"not final. Regrade them on a GPU: {_names(cpu)}.",
                "note",
                lead,
            )
        )
    # Speed points are judged against baselines of the same run, so they hold on any GPU, but a leaderboard, or a
    # grade made on a hot or throttled GPU, needs to know: grouped by GPU model, with the batch's warnings.
    models, device_warnings = gpu_summary((s.student, s.grade) for s in counted)
    for w in device_warnings:
        page.head.append(Text(w, "note", "Devices:"))
    if imgs is None:
        page.head.append(Text(NO_PLOTS, "note"))
    if totals:
        stats = [
            len(totals),
            f"{statistics.mean(totals):.2f}",
            f"{statistics.median(totals):.2f}",
            f"{min(totals):.4g}",
            f"{max(totals):.4g}",
            points_text(assignment.points) or "unknown",
        ]
        page.head.append(_table(["submissions", "mean", "median", "min", "max", "out of"], [stats]))
    flagged = [s for s in subs if s.flags]
    flag_rows = [
        Row([_student(s), Cell(f"{s.total:.4g}"), Cell("", items=tuple(s.flags)), Cell(s.path)]) for s in flagged
    ]
    hist = Section("Score histogram")
    if imgs and "scores" in imgs:
        hist.blocks.append(Chart("score histogram", imgs["scores"]))
    if totals:
        bins = [[f"{a:.3g}", f"{b:.3g}", n] for a, b, n in classstats.histogram(totals, top)]
        hist.blocks.append(_table(["score from", "to", "submissions"], bins))
    page.sections = [
        Section(
            f"Files that could not be used ({len(bad)})",
            [_none_or(_table(["path", "why"], [[b.path, b.reason] for b in bad]))],
        ),
        Section(
            f"Flagged submissions ({len(flagged)})", [_none_or(Table(["student", "total", "why", "file"], flag_rows))]
        ),
        _not_final(subs),
        hist,
        Section(
            "Graded on",
            [_none_or(_table(["device", "grades"], [[m, n] for m, n in sorted(models.items(), key=_by_count)]))],
        ),
        _speedups(counted, imgs),
        _pass_rates(counted, imgs),
    ]
    if any(not s.counted or s.signature != signing.NOT_CHECKED for s in subs) or any(
        f.startswith("same files:") for s in subs for f in s.flags
    ):
        page.sections.insert(1, _standing(subs))
    if roster is not None and join is not None:
        page.sections.append(_roster(roster, join))
    cols = assignment.columns if subs else []
    checked = any(s.signature != signing.NOT_CHECKED for s in subs)
    everyone = Section("All submissions")
    if any(s.report_href for s in subs):
        everyone.blocks.append(
            Text("A student's name links to their own report (report.html beside their results.json).")
        )
    rows = []
    for s in subs:
        points = [f"{s.points[c][0]:.4g}" if c in s.points else "" for c in cols]
        rows.append(
            Row(
                [
                    _student(s),
                    *(Cell(str(v)) for v in [*points, f"{s.total:.4g}", f"{s.max:g}", s.device_label, len(s.flags)]),
                    *([Cell(s.signature)] if checked else []),
                ]
            )
        )
    head = ["student", *cols, "total", "max", "device", "flags", *(["signature"] if checked else [])]
    everyone.blocks.append(Table(head, rows))
    page.sections.append(everyone)
    return page.fix_levels()


def report_href(s: Submission, root: Path, out: Path) -> str:
    """The relative link from out/class_summary.html to the report.html beside s's results.json ("" if none)."""
    page = (root / s.path).parent / "report.html"
    try:
        if not page.is_file():
            return ""
        rel = os.path.relpath(page.resolve(), out.resolve())
    except (OSError, ValueError):  # another drive (Windows), an unreadable folder
        return ""
    return quote(Path(rel).as_posix(), safe="/")


@dataclass
class ClassReport:
    csv_path: Path
    html_path: Path
    cls: ClassData  # the submissions, the unusable files, the assignment
    join: Join | None  # the roster's join (grades_canvas.csv), when there was a roster
    notes_path: Path | None = None  # class_notes.txt, when the class has a note


def write_ta_report(
    root: Path,
    out: Path | None = None,
    progress: Callable[[str], None] = lambda s: None,
    key: bytes | None = None,
    roster: Roster | None = None,
    canvas_column_name: str | None = None,
    assignment: Assignment | None = None,
    allow_partial: bool = False,
) -> tuple[Path, Path, list[Submission], list[Unreadable]]:
    """write_class_report, returning (grades.csv, class_summary.html, submissions, unusable files)."""
    r = write_class_report(root, out, progress, key, roster, canvas_column_name, assignment, allow_partial)
    return r.csv_path, r.html_path, r.cls.subs, r.cls.bad


def write_class_report(
    root: Path,
    out: Path | None = None,
    progress: Callable[[str], None] = lambda s: None,
    key: bytes | None = None,
    roster: Roster | None = None,
    canvas_column_name: str | None = None,
    assignment: Assignment | None = None,
    allow_partial: bool = False,
) -> ClassReport:
    """Write grades.csv and class_summary.html into out (default: root). Never raises for a bad results file.
    key: the signing key of the key file the grades were made with (keyfile.Key.signing); every file's signature
    and signed identity are then checked (grader/signing.py, classdata.check_identities). roster (read_roster):
    also write grades_canvas.csv, one row per roster student (join_roster), with the assignment column
    canvas_column_name (default: canvas_column's). assignment: `report --problem` (grader/report/assignment.py);
    default: the problem the counted files name, when it is a known spec. allow_partial: write grades_canvas.csv even
    where a score it imports is not final (grader/report/final.py); without it such a file is not written (and an
    older one in out is removed), join.written is False, and the summary says which rows and why."""
    root = Path(root)
    out = Path(out) if out is not None else root
    validator()  # the schema and the jsonschema package are there before any file is judged by them
    cls = read_class(
        root, progress, exclude=out if out.resolve() != root.resolve() else None, key=key, assignment=assignment
    )
    subs, bad, a = cls.subs, cls.bad, cls.assignment
    for s in subs:
        s.report_href = report_href(s, root, out)
    join = join_roster(subs, roster, canvas_column_name, key is not None, a) if roster is not None else None
    progress("drawing charts")
    try:
        imgs = classstats.charts(cls.counted, a.points or 0.0)
    except Exception:  # a chart must never cost the CSV: fall back to tables only
        imgs = None
    csv_path, html_path = out / "grades.csv", out / "class_summary.html"
    write_text_atomic(csv_path, render_csv(subs, signatures=key is not None, assignment=a))
    notes_path = out / CLASS_NOTES
    if cls.notes:  # beside grades.csv, whose rows are submissions only; the HTML page says them at its top too
        write_text_atomic(notes_path, "".join(f"the whole class: {n}\n" for n in cls.notes))
    else:
        notes_path.unlink(missing_ok=True)  # last run's notes must not outlive the grades they were about
    if roster is not None and join is not None:
        if join.not_final and not allow_partial:
            # Refused: and an older grades_canvas.csv here goes too, so that nobody imports last run's by mistake.
            join.written = False
            (out / CANVAS_CSV).unlink(missing_ok=True)
        else:
            write_text_atomic(out / CANVAS_CSV, render_canvas_csv(roster, join))
    page = build(subs, bad, imgs, root.name or str(root), roster, join, a)
    for note in reversed(cls.notes):  # said once for the class, first: no row is flagged for it
        page.head.insert(2, Text(note, "note", "The whole class:"))
    if (
        out / "similarity.html"
    ).is_file():  # `python -m grader similarity` wrote one here (grader/report/similarity.py)
        link = Cell("similarity.html: pairs of submissions with similar code", href="similarity.html")
        page.head.append(Table(["class integrity (evidence to read, never a penalty)"], [Row([link])]))
    write_text_atomic(html_path, html.render(page))
    return ClassReport(csv_path, html_path, cls, join, notes_path if cls.notes else None)
