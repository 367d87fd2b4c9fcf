"""The roster and the LMS: grades_canvas.csv, Canvas's gradebook import, one row per roster student (read_roster,
join_roster, render_canvas_csv)."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader import signing
from grader.errors import UsageError
from grader.report.assignment import UNKNOWN, Assignment
from grader.report.cells import csv_text
from grader.report.classdata import Submission

CANVAS_CSV = "grades_canvas.csv"
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_KEYS = ("ID", "SIS User ID", "SIS Login ID")  # what a results folder is matched against
# Header spellings accepted for each Canvas column (compared casefolded, with _ and - read as spaces). Canvas's own
# export matches the first of each; a plain roster needs only one id column.
ROSTER_ALIASES = {
    "Student": ("student", "name", "student name", "full name"),
    "ID": ("id", "canvas id", "canvas user id", "user id"),
    "SIS User ID": ("sis user id", "sis id", "sid", "student id", "student number"),
    "SIS Login ID": ("sis login id", "login id", "login", "username", "user name", "email", "e mail", "email address"),
    "Section": ("section",),
}
EXTRA_KEYS = ("email", "e mail", "email address", "login", "login id", "username")  # matched too, when present
MAX_ROSTER_BYTES = 32 * 1024 * 1024
CANVAS_ID_RE = re.compile(
    r"\A(.*)\s\((\d+)\)\Z"
)  # Canvas reads "Title (123)" as assignment 123 (Assignment.title_and_id)


def _muted(cell: str) -> bool:
    """A cell of Canvas's rows under the header: empty, "Muted" or "Manual Posting ..." (no regex: linear)."""
    c = cell.strip().casefold()
    return c in ("", "muted") or c.startswith("manual posting")


class RosterError(UsageError, ValueError):
    """The roster cannot be used; str(err) is one line saying why."""


@dataclass
class Roster:
    path: Path
    header: list[str]  # the file's own header (a Canvas export's assignment columns included)
    columns: dict[str, str]  # Canvas column -> the roster's header it comes from
    rows: list[dict[str, str]]  # Canvas column -> value, one per student, in the roster's order
    keys: list[set[str]]  # per row: its id values, casefolded
    skipped: int = 0  # rows with no id value (Canvas's "Points Possible" and muted rows are not counted)


def _norm_header(h: str) -> str:
    return " ".join(h.replace("_", " ").replace("-", " ").split()).casefold()


def read_roster(path: Path) -> Roster:
    """A roster CSV: Canvas's gradebook export (Student, ID, SIS User ID, SIS Login ID, Section, ...) or any CSV
    with an id column (id, student_id, sid, login, username or email; see ROSTER_ALIASES). Raises RosterError."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_ROSTER_BYTES + 1)  # a larger file is refused without reading it all
    except OSError as e:
        raise RosterError(f"--roster {path}: cannot read ({e.strerror or e})") from None
    if len(raw) > MAX_ROSTER_BYTES:
        raise RosterError(
            f"--roster {path}: {len(raw) / 2**20:.1f} MiB, over the {MAX_ROSTER_BYTES // 2**20} MiB a roster may be"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RosterError(f"--roster {path}: not UTF-8 text (save it as 'CSV UTF-8')") from None
    first = text.split("\n", 1)[0]
    delim = ";" if first.count(";") > first.count(",") else ("\t" if first.count("\t") > first.count(",") else ",")
    try:
        table = list(csv.reader(io.StringIO(text), delimiter=delim))
    except csv.Error as e:
        raise RosterError(f"--roster {path}: not a CSV file ({e})") from None
    if not table or not any(c.strip() for c in table[0]):
        raise RosterError(f"--roster {path}: empty (want a header row with an id column)")
    header = [c.strip() for c in table[0]]
    norm = [_norm_header(h) for h in header]
    columns: dict[str, int] = {}
    for field_, aliases in ROSTER_ALIASES.items():
        for a in aliases:
            if a in norm and norm.index(a) not in columns.values():
                columns[field_] = norm.index(a)
                break
    if not any(k in columns for k in CANVAS_KEYS):
        want = "ID, SIS User ID or SIS Login ID (Canvas), or id, student_id, sid, login, username or email"
        raise RosterError(f"--roster {path}: no id column (want {want}; found {', '.join(header)[:200]})")
    extra = [i for i, n in enumerate(norm) if n in EXTRA_KEYS and i not in columns.values()]
    rows: list[dict[str, str]] = []
    keys: list[set[str]] = []
    skipped = 0
    for cells in table[1:]:
        cells = [c.strip() for c in cells]
        if not any(cells) or all(_muted(c) for c in cells):
            continue
        if "Points Possible" in (cells[0] if cells else ""):
            continue
        row = {f: (cells[i] if i < len(cells) else "") for f, i in columns.items()}
        ks = {row[f].casefold() for f in CANVAS_KEYS if row.get(f)} | {
            cells[i].casefold() for i in extra if i < len(cells) and cells[i]
        }
        if not ks:
            skipped += 1
            continue
        rows.append({f: row.get(f, "") for f in CANVAS_HEADER})
        keys.append(ks)
    return Roster(path, header, {f: header[i] for f, i in columns.items()}, rows, keys, skipped)


@dataclass
class Join:
    """Results joined to a roster: one score (or none) per roster student."""

    column: str  # the assignment column's header
    points_possible: float | None  # the assignment's (its spec's); None: unknown (no --problem, no known problem)
    scores: list[str]  # per roster row: the score as written, or "" (none)
    matched: dict[int, Submission] = field(default_factory=dict)  # roster row -> its results
    missing: list[int] = field(default_factory=list)  # roster rows with no results at all
    conflicts: dict[int, list[Submission]] = field(default_factory=dict)  # roster rows with several results: no score
    withheld: dict[int, Submission] = field(default_factory=dict)  # not counted (see Submission.counted): no score
    unmatched: list[Submission] = field(default_factory=list)  # results that match no roster student
    ambiguous: list[tuple[Submission, list[int]]] = field(default_factory=list)  # results that match several
    # results of a roster student who has one result that counts, besides them: that one is imported, these not
    beside: list[tuple[int, Submission]] = field(default_factory=list)
    # Whether grades_canvas.csv was written (write_class_report): not when a score it would import is not final
    # (Submission.not_final) and --allow-partial was not given.
    written: bool = True

    @property
    def not_final(self) -> dict[int, Submission]:
        """Roster rows whose imported score is not a final grade (a CPU grade, a part or stage left out, a partial
        grade): grades_canvas.csv is refused while there is one, unless --allow-partial."""
        return {i: s for i, s in self.matched.items() if s.not_final}


def _identities(s: Submission) -> list[set[str]]:
    """Who a result is for, as a set of keys (casefolded) per person: Gradescope's submitters (SID, email) where
    the export names them, else the row's student id (classdata._student_id)."""
    people = [{p.get("sid", ""), p.get("email", "")} for p in s.submitters] if s.submitters else [{s.key or s.student}]
    return [ks for ks in ({k.casefold() for k in keys if k} for keys in people) if ks]


def _local(k: str) -> str:
    return k.split("@", 1)[0] if "@" in k else ""


def points_text(v: float | None) -> str:
    return f"{round(v, 2):.2f}".rstrip("0").rstrip(".") if v is not None and math.isfinite(v) else ""


def why_withheld(s: Submission) -> str:
    """Why a matched result gets no score in grades_canvas.csv (s.counted is False)."""
    if s.misfit:
        return f"does not fit the assignment ({s.misfit}): {s.student}"
    if s.signature == signing.REPLAYED:
        return f"replayed: another row's signed grade, or in several rows (see its flags): {s.student}"
    if s.signature == signing.NO_IDENTITY:
        return f"identity not signed (regrade with --student-id): {s.student}"
    return f"results not signed by the grader ({s.signature}): {s.student}"


def canvas_column(a: Assignment, roster: Roster, name: str | None = None) -> str:
    """The assignment column's header. A Canvas export's own column of that assignment ("Title (12345)", its
    Canvas id) is reused, so the import updates it; otherwise the plain title, and Canvas makes a new assignment
    of that name with the "Points Possible" row's points. Default title: "<PROBLEM> kernels", the problem from the
    assignment (its spec), never from a results.json. Not "Title (76)": Canvas reads a number in parentheses as the
    assignment's id, not its points."""
    if not name:
        name = a.canvas_title
    m = CANVAS_ID_RE.match(name)
    if m:
        return name  # an explicit Canvas id: as given
    for h in roster.header[len(CANVAS_HEADER) :]:
        hm = CANVAS_ID_RE.match(h)
        if hm and hm.group(1).strip().casefold() == name.strip().casefold():
            return h
    return name


def _matcher(roster: Roster) -> Callable[[set[str]], set[int]]:
    """keys -> the roster rows they match: in full (ID, SIS User ID, SIS Login ID, an email or login column), else
    by an email's local part."""
    index: dict[str, set[int]] = {}
    local: dict[str, set[int]] = {}  # an email's local part -> rows: tried when no key matches in full
    for i, ks in enumerate(roster.keys):
        for k in ks:
            index.setdefault(k, set()).add(i)
            if _local(k):
                local.setdefault(_local(k), set()).add(i)

    def rows_of(keys: set[str]) -> set[int]:
        full: set[int] = set().union(*(index.get(k, set()) for k in keys))
        if full:
            return full
        short = keys | {_local(k) for k in keys if _local(k)}
        return set().union(*(index.get(k, set()) | local.get(k, set()) for k in short))

    return rows_of


def join_roster(
    subs: list[Submission],
    roster: Roster,
    column: str | None = None,
    signatures: bool = False,
    assignment: Assignment = UNKNOWN,
) -> Join:
    """Match every result to the roster (its keys: ID, SIS User ID, SIS Login ID and any email/login column) and
    give each roster student a score: empty when there are no results, several results that count, or results that
    do not count (Submission.counted: with the key, anything but valid; and any file that does not fit the
    assignment). Of several results, the one that counts when only one does is imported, the others listed.
    The column's name and its points possible are the assignment's (its spec's), never a file's. `signatures` is
    kept for callers; what counts is decided by the submissions' own standing."""
    rows_of = _matcher(roster)
    found: dict[int, list[Submission]] = {}
    j = Join(canvas_column(assignment, roster, column), assignment.points, [""] * len(roster.rows))
    for s in subs:
        hits: set[int] = set()
        for keys in _identities(s):
            rows = rows_of(keys)
            if len(rows) > 1:
                j.ambiguous.append((s, sorted(rows)))
            elif rows:
                hits |= rows
        if not hits and not any(a is s for a, _ in j.ambiguous):
            j.unmatched.append(s)
        for i in hits:
            found.setdefault(i, []).append(s)
    for i in range(len(roster.rows)):
        got = found.get(i, [])
        if not got:
            j.missing.append(i)
        elif len(got) > 1:
            counted = [s for s in got if s.counted]
            if len(counted) == 1:  # e.g. the autograder's grade and a results.json the student uploaded beside it
                j.matched[i] = counted[0]
                j.scores[i] = points_text(counted[0].total)
                j.beside += [(i, s) for s in got if s is not counted[0]]
            else:
                j.conflicts[i] = got
        elif not got[0].counted:
            j.withheld[i] = got[0]
        else:
            j.matched[i] = got[0]
            j.scores[i] = points_text(got[0].total)
    return j


def refusal(j: Join, limit: int = 10) -> str:
    """The one line `report` says when grades_canvas.csv is not written: which rows are not final, why, the flag."""
    rows = list(j.not_final.values())
    named = " | ".join(f"{s.student} ({'; '.join(s.not_final)})" for s in rows[:limit])
    more = f" | and {len(rows) - limit} more" if len(rows) > limit else ""
    return (
        f"{CANVAS_CSV} not written: {len(rows)} of the {len(j.matched)} score(s) it would import are not final "
        f"grades: {named}{more}. Regrade them (on a GPU, every part, no --no-perf or --case), or pass --allow-partial "
        "to import these scores as they are; grades.csv and class_summary.html list them"
    )


def render_canvas_csv(roster: Roster, j: Join) -> str:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, the assignment column; a "Points
    Possible" row (the assignment's, from its spec); one row per roster student, in the roster's order (an empty
    score leaves Canvas's as it is). Every cell formula-safe (grader/report/cells.py)."""
    rows: list[list[object]] = [
        [*CANVAS_HEADER, j.column],
        ["Points Possible", "", "", "", "", points_text(j.points_possible)],
    ]
    for row, score in zip(roster.rows, j.scores, strict=False):
        rows.append([row["Student"], row["ID"], row["SIS User ID"], row["SIS Login ID"], row["Section"], score])
    return csv_text(rows)
