"""`report DIR`: the TA's grades.csv and class_summary.html from every results.json under DIR (and grades_canvas.csv
with a roster)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader import keyfile, report, signing
from grader.app import EXIT_OK, EXIT_USAGE, ROOT, _check_writable, _key
from grader.errors import UsageError

if TYPE_CHECKING:  # the TA report's modules are imported only by `report`
    from grader.report.tareport import Assignment, ClassReport, Join, Roster, Submission


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("report", help="TA reports: grades.csv and class_summary.html from every results.json under DIR")
    r.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="folder searched recursively for results.json files (one folder per student)",
    )
    r.add_argument("--out", type=Path, default=None, help="where grades.csv and class_summary.html go (default: DIR)")
    r.add_argument(
        "--secret-file",
        type=Path,
        default=None,
        metavar="KEY",
        help="the key file the grades were made with: check every file's signature",
    )
    r.add_argument(
        "--problem",
        default=None,
        metavar="NAME",
        help="the problem the class was graded on (a name under reference/, or a spec.yaml): its spec gives the "
        "columns and the points possible; default: the problem the valid (or, without --secret-file, all) files "
        "name, when it is a known spec",
    )
    r.add_argument(
        "--roster",
        type=Path,
        default=None,
        metavar="CSV",
        help="the class roster (Canvas's gradebook export, or a CSV with an id column): also write "
        "grades_canvas.csv, one row per roster student, for Canvas's grade import",
    )
    r.add_argument(
        "--canvas-column",
        default=None,
        metavar="NAME",
        help="the assignment column's header in grades_canvas.csv (default: '<PROBLEM> kernels', or that "
        "assignment's own column in a Canvas export; 'Name (12345)' names Canvas assignment 12345)",
    )
    r.add_argument(
        "--allow-partial",
        action="store_true",
        help="with --roster: write grades_canvas.csv even where a score it imports is not final (a CPU grade, a "
        "part or stage left out by --only or --no-perf, a --case grade); without it such a file is not written "
        "and the report names the rows (exit 2)",
    )
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return _ta_report(
        args.dir, args.out, args.secret_file, args.roster, args.canvas_column, args.problem, args.allow_partial
    )


def _ta_report(
    root: Path,
    out: Path | None,
    secret_file: Path | None = None,
    roster_path: Path | None = None,
    canvas_column: str | None = None,
    problem: str | None = None,
    allow_partial: bool = False,
) -> int:
    """grades.csv + class_summary.html over every results.json under root (+ grades_canvas.csv with a roster).
    Bad results files are listed, never fatal; a roster that cannot be used is (exit 2, before anything is written).
    A Canvas import that would hold a score that is not final is not written (exit 2 after the rest is), unless
    allow_partial."""
    from grader.report import tareport

    if allow_partial and roster_path is None:
        raise UsageError("--allow-partial needs --roster (it is about grades_canvas.csv, Canvas's import)")
    assignment, roster, key = _ta_inputs(root, out, secret_file, roster_path, canvas_column, problem)
    with report.progress("report", min_interval_s=1.0) as update:
        done = tareport.write_class_report(
            root,
            out,
            progress=update,
            key=key.signing if key is not None else None,
            roster=roster,
            canvas_column_name=canvas_column,
            assignment=assignment,
            allow_partial=allow_partial,
        )
    _say_class_read(done)
    if roster is not None and done.join is not None:
        _say_canvas(done.join, roster)
    _say_signatures(done.cls.subs, key)
    canvas = roster is not None and done.join is not None and done.join.written
    print(
        f"written: {done.csv_path}{f', {done.csv_path.parent / tareport.CANVAS_CSV}' if canvas else ''} "
        f"and {done.html_path}{f' (the class note: {done.notes_path})' if done.notes_path else ''}"
    )
    if done.join is not None and not done.join.written:
        print(f"grader error: {tareport.refusal(done.join)}", file=sys.stderr)  # one line, as _usage_caught's
        return EXIT_USAGE
    return EXIT_OK


def _ta_inputs(
    root: Path,
    out: Path | None,
    secret_file: Path | None,
    roster_path: Path | None,
    canvas_column: str | None,
    problem: str | None,
) -> tuple[Assignment | None, Roster | None, keyfile.Key | None]:
    """What `report` reads besides the results: the assignment (--problem), the roster and the key, each checked
    before anything is written, in this order; a usage error names the first that cannot be used."""
    from grader.report import tareport

    if canvas_column is not None and roster_path is None:
        raise UsageError("--canvas-column needs --roster (grades_canvas.csv has one row per roster student)")
    if canvas_column is not None and not canvas_column.strip():
        raise UsageError("--canvas-column: empty (give the assignment's name)")
    assignment = tareport.from_argument(problem, ROOT) if problem is not None else None
    roster = tareport.read_roster(roster_path) if roster_path is not None else None
    if secret_file is not None and not secret_file.is_file():
        raise UsageError(f"--secret-file {secret_file}: no such file (pass the key file the grades were made with)")
    key = _key(secret_file)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory (pass the folder that holds the students' results)")
    _check_writable(out or root)
    try:
        tareport.validator()
    except ImportError:
        raise UsageError(tareport.NEEDS_JSONSCHEMA) from None
    return assignment, roster, key


def _say_class_read(done: ClassReport) -> None:
    """How many results were read, flagged and unusable; grades made without a GPU; the problem and its points."""
    from grader.report import tareport

    subs, bad, a = done.cls.subs, done.cls.bad, done.cls.assignment
    flagged = sum(1 for x in subs if x.flags)
    print(
        f"{len(subs)} submission(s) read, {flagged} flagged, {len(bad)} file(s) or folder(s) unusable "
        "(listed in the summary)"
    )
    cpu = sum(1 for x in subs if x.without_gpu)
    if cpu:
        print(
            f"warning: {cpu} grade(s) made without a GPU (device CPU in grades.csv): no performance points "
            "in them; regrade on a GPU"
        )
    partial = sum(1 for x in subs if x.not_final)
    if partial:
        print(f"warning: {partial} grade(s) not final (column final in grades.csv, and listed in the summary)")
    print(f"problem {a.problem or 'unknown'} ({tareport.points_text(a.points) or 'unknown'} points), from {a.source}")
    for note in done.cls.notes:
        print(f"the whole class: {note}")


def _say_canvas(j: Join, roster: Roster) -> None:
    """The roster join behind grades_canvas.csv: who has a score, who has none, and results matched to no one."""
    from grader.report import tareport

    empty = len(roster.rows) - len(j.matched)
    print(
        f"{tareport.CANVAS_CSV}: {len(j.matched)} of {len(roster.rows)} roster student(s) with a score in column "
        f"'{j.column}' (points possible {tareport.points_text(j.points_possible)}); {empty} without one, "
        f"{len(j.unmatched) + len(j.ambiguous)} result(s) matched to no one (listed in the summary)"
    )
    m = tareport.CANVAS_ID_RE.match(j.column)
    if m and j.points_possible and float(m.group(2)) == j.points_possible:
        print(f"note: Canvas reads '({m.group(2)})' in '{j.column}' as the id of a Canvas assignment, not its points")


def _say_signatures(subs: list[Submission], key: keyfile.Key | None) -> None:
    """With a key: how many files verify, and who is forged, replayed or signed for no one (none is imported)."""
    if key is None:
        print("signatures: not checked (pass --secret-file KEY, the key file the grades were made with, to check them)")
        return

    def names(xs: list[str]) -> str:
        return (": " + ", ".join(xs[:10]) + (" ..." if len(xs) > 10 else "")) if xs else ""

    forged = [x.student for x in subs if x.signature in (signing.INVALID, signing.UNSIGNED)]
    valid = sum(1 for x in subs if x.signature == signing.VALID)
    line = f"signatures: {valid} valid, {len(forged)} not written by the grader with this key{names(forged)}"
    for what in (signing.REPLAYED, signing.NO_IDENTITY):
        these = [x.student for x in subs if x.signature == what]
        if these:
            line += f"; {len(these)} {what}{names(these)}"
    print(line + (" (not imported; listed in the summary)" if valid < len(subs) else ""))
