"""A class of graded submissions: every results.json under a folder, read (validated first, grader/report/validate.py)
into a Submission with its points per part and stage, its flags and (with the key) its signature; and grades.csv.

Why: docs/architecture.md, "Modules: the why", grader/report/classdata.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import filetree, signing
from grader.report import final
from grader.report.assignment import UNKNOWN, Assignment, from_names
from grader.report.cells import csv_text, safe_cell
from grader.report.gsexport import class_root, gradescope_layout
from grader.report.output import advisory_line, advisory_of
from grader.report.records import STAGES, flags_of
from grader.report.validate import MAX_FILE_BYTES, BadResults, Unreadable, parse_results, rel
from grader.results import Grade, number

__all__ = ["Submission", "collect", "columns", "read_class", "render_csv", "safe_cell", "who"]

# How far down, and through how many entries, the report looks for results.json: a class folder is OUT/<id>/ or an
# export's submission folders; a student's upload can nest a folder 1,000 deep (Path.rglob's recursion failed).
MAX_DEPTH = 32
MAX_ENTRIES = 5_000_000
SCORE_TOLERANCE = 0.01  # top-level score vs the sum of the tests' scores (each rounded to 4 decimals)


@dataclass
class Submission:
    student: str
    path: str  # relative to DIR
    data: dict[str, Any]  # the file as validated: what its signature is checked over
    grade: Grade  # the file read once (Grade.from_json): what every report of the class reads
    points: dict[str, tuple[float, float]] = field(default_factory=dict)  # "part_stage" -> (score, max)
    total: float = 0.0
    max: float = 0.0
    flags: list[str] = field(default_factory=list)
    # The file's standing: the HMAC's verdict (valid, INVALID, unsigned, not checked: grader/signing.py verify), then
    # for a file whose HMAC verifies, check_identities' (replayed, identity not signed). Only VALID is imported
    # into Canvas when the key was given.
    signature: str = signing.NOT_CHECKED
    identity: signing.Identity | None = None  # the file's identity block (signed only when signature is VALID)
    key: str = ""  # the student id before collect() told duplicates apart (what a roster is matched against)
    row_keys: set[str] = field(default_factory=set)  # the row's ids, casefolded: its folder, its submitters
    misfit: str = ""  # why the file does not fit the class's assignment (another problem, more points than it has)
    submitters: list[dict[str, str]] = field(default_factory=list)  # Gradescope's: name, sid, email (one per member)
    report_href: str = ""  # relative link from class_summary.html to this student's report.html, when there is one
    # Why this grade is not a final grade of the assignment (grader/report/final.py; empty: final). A score that is
    # not final is imported into Canvas only with `report --allow-partial`.
    not_final: list[str] = field(default_factory=list)

    @property
    def counted(self) -> bool:
        """This file's grade counts: in Canvas, in the class's statistics and charts. With the key only a valid
        file does; without it every file that fits the assignment (nothing could be checked)."""
        return self.signature in (signing.VALID, signing.NOT_CHECKED) and not self.misfit

    @property
    def device_label(self) -> str:
        """The GPU model the grade was made on; "CPU" for a grade without a GPU; "GPU (model not recorded)" for a
        GPU grade without timing (--no-perf); "unknown" for a file that does not say."""
        dev = self.grade.perf.device_name
        if dev is not None and dev.strip():
            return dev.strip()
        return {"cpu": "CPU", "cuda": "GPU (model not recorded)"}.get(self.grade.device, "unknown")

    @property
    def without_gpu(self) -> bool:
        """Graded without a GPU: GPU-only cases and performance points could not be earned (grader/pipeline.py)."""
        return self.grade.device == "cpu"


def _student_id(data: dict[str, Any], g: Grade, path: Path, top: Path, key: bytes | None) -> str:
    """The row's id: the row's folder, the first folder under the class root `top` on the file's path (a file deeper
    in it is still that row's: a classmate's file copied to alice/bob/results.json stays alice's, where it is
    reported as replayed; the nearest folder's name would have put it in bob's row, beside bob's own). A file at
    top/results.json or top/results/results.json is top's row (Gradescope's /autograder/results).

    Without the key (nothing is checked), a file without an identity block (from before identities were signed)
    may name its row in extra_data.student_id. With the key it may not: an unsigned file claiming a classmate's id
    would sit in the classmate's row and withhold the classmate's grade (several results for one student)."""
    sid = g.extra.get("student_id")
    old_style = signing.IDENTITY not in (data.get("extra_data") or {})
    if key is None and old_style and isinstance(sid, (str, int)) and str(sid).strip():
        return str(sid).strip()
    try:
        parts = path.parent.relative_to(top).parts
    except ValueError:  # not under the class root (the root wraps one folder and this file is beside it)
        parts = ()
    if parts and not (parts == ("results",)):
        return parts[0]
    d = top if parts or path.parent == top else path.parent
    return d.name or d.resolve().name


def _load_one(path: Path, root: Path, key: bytes | None = None, top: Path | None = None) -> Submission | Unreadable:
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
    g = Grade.from_json(data)
    row = _student_id(data, g, path, root if top is None else top, key)
    sub = Submission(row, where, data, g, identity=signing.identity_of(data))
    for t in g.tests:
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        col = f"{t.part}_{t.stage}"
        s, m = sub.points.get(col, (0.0, 0.0))
        sub.points[col] = (s + t.score, m + t.max_score)
    tsum = g.score
    stated = g.stated
    assert stated is not None  # read from a file
    sub.total = tsum if stated.score is None else number(stated.score, tsum)
    sub.max = number(stated.max_score) or g.max_score
    sub.flags = flags_of(g)
    if abs(sub.total - tsum) > SCORE_TOLERANCE:
        sub.flags.append(f"top-level score {sub.total:g} differs from the sum of the tests' scores {tsum:.4g}")
    if key is not None:
        _check_signature(sub, key)
    return sub


def _check_signature(sub: Submission, key: bytes) -> None:
    sub.signature = signing.verify(sub.data, key)
    if sub.signature != signing.VALID:
        why = (
            "has no signature"
            if sub.signature == signing.UNSIGNED
            else "has a signature that does not match its content"
        )
        sub.flags.insert(
            0, f"NOT WRITTEN BY THE GRADER: this results.json {why} (grader/signing.py); regrade this submission"
        )


@dataclass
class ClassData:
    subs: list[Submission]
    bad: list[Unreadable]
    assignment: Assignment
    notes: list[str] = field(default_factory=list)  # class_notes: what is the same for every grade of the class

    @property
    def counted(self) -> list[Submission]:
        return [s for s in self.subs if s.counted]


def read_class(
    root: Path,
    progress: Callable[[str], None] = lambda s: None,
    exclude: Path | None = None,
    key: bytes | None = None,
    assignment: Assignment | None = None,
) -> ClassData:
    """collect(), then the class's assignment (given: `report --problem`; else the problem the counted files name,
    when it is a known spec), then each file checked against it (fit)."""
    subs, bad = collect(root, progress, exclude, key)
    if assignment is None:
        what = "valid" if key is not None else "unchecked"
        assignment = from_names([s.grade.problem for s in subs if s.counted], what)
    fit(subs, assignment)
    for s in subs:
        s.not_final = final.reasons(s.grade, assignment)
    return ClassData(subs, bad, assignment, class_notes(subs))


def fit(subs: list[Submission], a: Assignment) -> None:
    """Flag (and stop counting) a file that does not fit the assignment: another problem's grade, or more points
    than the problem has. Its row stays, with its own numbers; nothing class-wide is taken from it."""
    for s in subs:
        prob = s.grade.problem
        if a.problem and prob != a.problem:
            s.misfit = f"graded for problem {str(prob)[:60]!r}, not this class's {a.problem!r}"
        elif a.points is not None and max(s.total, s.max) > a.points + SCORE_TOLERANCE:
            s.misfit = f"claims {s.total:.4g} of {s.max:.4g} points; {a.problem} is worth {a.points:g}"
        if s.misfit:
            s.flags.insert(0, f"NOT COUNTED: {s.misfit}")
        signed_spec = s.identity.spec_sha256 if s.identity is not None and s.signature == signing.VALID else None
        if a.spec_sha256 and signed_spec and signed_spec.casefold() != a.spec_sha256:
            # Counted (the grade is real), but not comparable: another term's, or a grade from before a spec fix.
            s.flags.append(
                f"graded against another version of {a.problem}'s spec.yaml (signed {signed_spec[:12]}, this "
                f"class's {a.spec_sha256[:12]}) on {s.identity.graded_at if s.identity else '?'}: regrade it to compare"
            )


def check_identities(subs: list[Submission]) -> None:
    """With the key, after every HMAC was checked: whose grade each verified file is.

    - No signed student id (identity block missing: an old file, or a grade made without --student-id) ->
      `identity not signed`: not imported; regrade with the student's id.
    - A signed identity that is not the row's (no id in common with the folder and its submitters) -> `replayed`:
      another student's grade, copied here.
    - One signature (so one nonce) in several rows: the row whose identity it is keeps it (the others are replayed
      by the rule above); when no single row owns it (the same file in two folders of one student, or of one
      group), every copy is `replayed`, for a person to choose. The original is never withheld because someone
      copied it: that would let a student erase a classmate's grade.
    - The same graded files (files_sha256) signed for different students: each is a real grade of what was
      submitted (the hash is signed with its own student id, so neither is a copy of the other's results), so both
      stay valid, and both get a `same files` flag for a person: identical submissions (copied code, or both
      unchanged stubs). Withholding them would zero honest students who happen to submit identical files."""
    for s in subs:
        if s.signature == signing.VALID:
            _check_identity(s)
    _replayed_signatures(subs)
    _same_files(subs)


def _check_identity(s: Submission) -> None:
    """A verified file whose identity is missing (`identity not signed`) or is not its row's (`replayed`)."""
    ident = s.identity
    if ident is None or not ident.keys():
        s.signature = signing.NO_IDENTITY
        s.flags.insert(
            0,
            "IDENTITY NOT SIGNED: this results.json does not say whose grade it is (made before identities were "
            "signed, or without --student-id); regrade it with the student's id to import it",
        )
    elif not ident.keys() & s.row_keys:
        s.signature = signing.REPLAYED
        s.flags.insert(
            0,
            f"REPLAYED: signed for {ident.who} (graded {ident.graded_at or 'at an unknown time'}), not for "
            f"{s.key}: another student's grade copied here; not imported",
        )


def _replayed_signatures(subs: list[Submission]) -> None:
    """One signature in several rows: only the one row whose identity it is keeps it."""
    by_sig: dict[str, list[Submission]] = {}
    for s in subs:
        sig = s.grade.extra.get("signature")
        if s.signature in (signing.VALID, signing.REPLAYED, signing.NO_IDENTITY) and isinstance(sig, str):
            by_sig.setdefault(sig, []).append(s)
    for group in by_sig.values():
        if len(group) < 2:
            continue
        owners = [s for s in group if s.signature == signing.VALID]
        rows = ", ".join(s.key for s in group)
        for s in group:
            if len(owners) == 1 and s is owners[0]:
                continue
            if s.signature == signing.VALID:
                s.signature = signing.REPLAYED
                s.flags.insert(0, f"REPLAYED: the same signed grade is in {len(group)} rows ({rows}); keep one by hand")
            else:
                s.flags.append(f"the same signed grade is in {len(group)} rows: {rows}")


def _same_files(subs: list[Submission]) -> None:
    """The same graded files signed for different students: both stay valid, both flagged for a person."""
    by_files: dict[str, list[Submission]] = {}
    for s in subs:
        if s.signature == signing.VALID and s.identity is not None and s.identity.files_sha256:
            by_files.setdefault(s.identity.files_sha256, []).append(s)
    for group in by_files.values():
        if len({s.identity.who.casefold() for s in group if s.identity is not None}) < 2:
            continue
        for s in group:
            others = ", ".join(o.key for o in group if o is not s)
            s.flags.append(
                f"same files: graded from files byte for byte identical to those of {others} (both grades are real "
                "and imported; identical submissions: check by hand)"
            )


def collect(
    root: Path, progress: Callable[[str], None] = lambda s: None, exclude: Path | None = None, key: bytes | None = None
) -> tuple[list[Submission], list[Unreadable]]:
    """Every results.json under root, read; plus every directory directly under root that holds none (except
    `exclude`, the report's own output folder). In Gradescope's export layout (a submission_metadata.yml in the
    class root), each submission also gets its submitters' names, SIDs and emails. With the key, every file's
    signature and identity are checked (check_identities)."""
    root = Path(root)
    skip = exclude.resolve() if exclude is not None else None
    tree = filetree.walk(root, max_depth=MAX_DEPTH, max_entries=MAX_ENTRIES)
    files = sorted(
        p
        for _, _, p in tree.entries
        if p.name == "results.json" and p.is_file() and (skip is None or skip not in p.resolve().parents)
    )
    subs: list[Submission] = []
    bad: list[Unreadable] = [
        Unreadable(f"{d}/", f"folders nested over {MAX_DEPTH} deep: not read below") for d in tree.too_deep[:100]
    ]
    top = class_root(root)
    for i, p in enumerate(files, 1):
        progress(f"reading {i}/{len(files)}: {rel(p, root)}")
        r = _load_one(p, root, key, top)
        (subs if isinstance(r, Submission) else bad).append(r)  # type: ignore[arg-type]
    layout, meta_bad = gradescope_layout(root)
    bad += meta_bad
    for s in subs:
        s.key = s.student
        if layout:
            where = (root / s.path).resolve()
            s.submitters = next((layout[d] for d in where.parents if d in layout), [])
        s.row_keys = {
            k.casefold() for k in (s.key, *(p.get(f, "") for p in s.submitters for f in ("sid", "email"))) if k
        }
    _advisories(subs)
    if key is not None:
        check_identities(subs)
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


MAX_REASON = 300  # characters of one not_official_because reason a class note quotes (the file's text)


def class_wide(subs: list[Submission]) -> list[str]:
    """The reasons every grade of the class gives for being advisory: a property of the grading
    host or deployment (no key, a Python the grade's uid cannot start, no box), not of any submission. Said once
    for the class, not in every row's flags, where nine copies of one sentence drowned a real flag. Only a reason
    that every row (two or more) states counts: no one file can make a class note, nor take its own advisory line
    out of its row unless the whole class shares it (and then the note says it)."""
    if len(subs) < 2 or any(advisory_of(s.grade) is None for s in subs):
        return []
    first, *rest = ([str(w)[:MAX_REASON] for w in s.grade.official_why] for s in subs)
    return [w for w in dict.fromkeys(first) if all(w in r for r in rest)]


def class_notes(subs: list[Submission]) -> list[str]:
    """What is the same for the whole class, as notes for the top of the report, class_notes.txt and the batch."""
    common = class_wide(subs)
    if not common:
        return []
    return [
        f"all {len(subs)} grades are advisory (not official, unsigned) for the same reason, a property of the "
        f"grading host rather than of any submission: {'; '.join(common)}"
    ]


def _advisories(subs: list[Submission]) -> None:
    """Each row's advisory flag, less the class-wide reasons (class_notes says those once)."""
    common = set(class_wide(subs))
    for s in subs:
        adv = advisory_of(s.grade)
        if adv is None:
            continue
        own = [w for w in s.grade.official_why if str(w)[:MAX_REASON] not in common]
        if common and not own:
            continue  # advisory only for the class's reason: in the class note, not in this row
        line = advisory_line(False, own) or adv
        s.flags.insert(1 if s.flags and s.flags[0].startswith("NOT WRITTEN") else 0, line)


def columns(a: Assignment = UNKNOWN) -> list[str]:
    """The part_stage columns: the assignment's parts (its spec's), never a name from a file."""
    return a.columns


def who(s: Submission, what: str) -> str:
    """The submitters' names, SIDs or emails (Gradescope's export), joined with '; ' for a group."""
    return "; ".join(p[what] for p in s.submitters if p.get(what))


def render_csv(subs: list[Submission], signatures: bool = False, assignment: Assignment = UNKNOWN) -> str:
    """student_id, then name/email/sid (Gradescope's export layout only), the assignment's part_stage columns (from
    its spec, grader/report/assignment.py: a file's own parts add none), device (the GPU model, or CPU: such a grade
    holds no performance points), containment (what held its untrusted processes, grader/box.py: box, container,
    none; "not recorded" for an older grader's file), final ("yes", or "no: " and why: grader/report/final.py), total,
    max, flags. A report of no submission has only
    student_id, total, max and flags. signatures: add a `signature` column (valid, INVALID, unsigned, replayed,
    identity not signed), when the report checked them. Every cell, headers included, is formula-safe
    (grader/report/cells.py)."""
    cols = columns(assignment) if subs else []
    people = any(s.submitters for s in subs)
    head: list[object] = [
        "student_id",
        *(["name", "email", "sid"] if people else []),
        *cols,
        *(["device", "containment", "final"] if subs else []),
        "total",
        "max",
        "flags",
        *(["signature"] if signatures else []),
    ]
    rows: list[list[object]] = [head]
    for s in subs:
        rows.append(
            [
                s.student,
                *([who(s, "name"), who(s, "email"), who(s, "sid")] if people else []),
                *(f"{round(s.points[c][0], 4):g}" if c in s.points else "" for c in cols),
                s.device_label,
                s.grade.containment or "not recorded",
                "no: " + "; ".join(s.not_final) if s.not_final else "yes",
                f"{round(s.total, 4):g}",
                f"{round(s.max, 4):g}",
                " | ".join(s.flags),
                *([s.signature] if signatures else []),
            ]
        )
    # The class's notes (class_notes) are not rows here: every row of grades.csv is a submission, which an LMS import
    # or a TA's script can rely on; they go to class_notes.txt beside it (grader/report/classsummary.py).
    return csv_text(rows)
