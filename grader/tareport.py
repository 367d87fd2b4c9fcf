"""TA reports over a folder of graded submissions:
`python -m grader report DIR [--out OUT] [--secret-file F] [--roster CSV [--canvas-column NAME]]`.

Reads every results.json under DIR (recursively). The student id is `extra_data.student_id` when the file has one,
else the name of the directory holding the file (its parent's name when that directory is called `results`, as in
Gradescope's /autograder/results). In Gradescope's export layout (submission_metadata.yml at DIR or one level
down), each submission folder's submitters (name, SID, email) come from that file. Writes:
- grades.csv: student id (then name, email, sid in Gradescope's layout), points per part and stage (e.g.
  triton_correctness, cuda_performance), device (the GPU model, or CPU), total, max, flags;
- class_summary.html (self-contained but for links to the students' own report.html): a banner when any grade was
  made without a GPU, score histogram, speedup-vs-eager distribution per perf case, pass rate per correctness case,
  flagged submissions with why, and every file that could not be read (or a student directory with no
  results.json at all);
- with a roster, grades_canvas.csv: Canvas's gradebook import (read_roster, join_roster, render_canvas_csv), one
  row per roster student, and the summary lists who has no score and which results match no one.
Every file is validated before anything reads it (`parse_results`): strict JSON (no NaN or Infinity, no number too big
for a float, no integer of more than 30 digits), at most 8 MiB and 32 levels deep, then grader/results.schema.json
(points within [-1e6, 1e6], strings, arrays and objects capped, the fields the report reads typed). A file that fails
is listed with what is wrong, never fatal, and never breaks the CSV. With the key file the grades were made with
(--secret-file), every file's signature is checked (grader/signing.py): a file the grader did not write is flagged
first and grades.csv gets a `signature` column. A file that says it is not an official grade is flagged too.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import re
import reprlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import signing
from .report import advisory_line, write_text_atomic
from .results import PASSED, SKIPPED
from .studentreport import CSS, STAGES, _img, _matplotlib, _num, _png, flags_of, is_number, parts_of, tests_of

SCORE_TOLERANCE = 0.01  # top-level score vs the sum of the tests' scores (each rounded to 4 decimals)
SCHEMA_PATH = Path(__file__).resolve().parent / "results.schema.json"
MAX_FILE_BYTES = 8 * 1024 * 1024  # a real results.json is well under 1 MiB (the H200 staff grade: 57 KB)
MAX_DEPTH = 32  # the grader writes 8 levels
MAX_INT_DIGITS = 30
CANVAS_CSV = "grades_canvas.csv"


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


@dataclass
class Unreadable:
    path: str  # relative to DIR
    reason: str


def _rel(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix() or "."
    except ValueError:
        return p.name


def _student_id(data: dict[str, Any], path: Path, root: Path) -> str:
    sid = (data.get("extra_data") or {}).get("student_id")
    if isinstance(sid, (str, int)) and str(sid).strip():
        return str(sid).strip()
    d = path.parent
    if d.name == "results" and d != root:
        d = d.parent
    return d.name or d.resolve().name


class BadResults(ValueError):
    """A results.json that cannot be used; the message says what is wrong (one line, bounded)."""


def _short(v: Any) -> str:
    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxlist, r.maxdict, r.maxlevel = 40, 40, 3, 3, 2
    return r.repr(v)


def _json_type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null"
    )


def _no_constant(name: str) -> Any:
    raise BadResults(f"{name} is not JSON (no NaN or Infinity in a results.json)")


def _bounded_int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BadResults(f"an integer with {digits} digits (at most {MAX_INT_DIGITS})")
    return int(s)


def _finite_float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise BadResults(f"the number {s[:40]} is too big for a float")
    return f


def _depth_over(data: Any, limit: int) -> bool:
    """Whether data nests more than limit levels of arrays/objects (iterative: no recursion on hostile input)."""
    stack = [(data, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


_VALIDATOR: Any = None


def validator() -> Any:
    """The Draft 2020-12 validator of grader/results.schema.json (built once). Needs the jsonschema package."""
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema

        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    return _VALIDATOR


def _where(path: Any) -> str:
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{_short(str(p))[1:-1]}"
    return out


def _schema_reason(err: Any) -> str:
    """One short line for a jsonschema ValidationError; never the whole offending value."""
    kw, want, inst = err.validator, err.validator_value, err.instance
    if kw in ("minimum", "maximum"):
        what = f"{_short(inst)} is {'under' if kw == 'minimum' else 'over'} the {kw} {want:g}"
    elif kw == "maxLength":
        what = f"a string of {len(inst)} characters (at most {want})"
    elif kw in ("maxItems", "maxProperties"):
        what = f"{len(inst)} {'items' if kw == 'maxItems' else 'keys'} (at most {want})"
    elif kw == "type":
        what = f"{_json_type(inst)} {_short(inst)} is not {want if isinstance(want, str) else ' or '.join(want)}"
    elif kw == "required":
        what = f"missing {', '.join(repr(k) for k in want if isinstance(inst, dict) and k not in inst)}"
    elif kw == "additionalProperties" and isinstance(inst, dict):
        allowed = set((err.schema or {}).get("properties") or {})
        what = "unexpected key(s) " + ", ".join(_short(k) for k in [k for k in inst if k not in allowed][:5])
    elif kw == "enum":
        what = f"{_short(inst)} is not one of {', '.join(map(str, want))}"
    else:
        what = f"fails '{kw}' ({_short(want)})"
    return f"{_where(err.absolute_path)}: {what}"


def parse_results(raw: bytes, size: int | None = None) -> dict[str, Any]:
    """A results.json's bytes -> its dict, or BadResults naming what is wrong. Never anything else: strict JSON,
    bounded size, depth, numbers and strings, then grader/results.schema.json. size: the file's, when raw is only
    its first MAX_FILE_BYTES + 1 bytes."""
    size = max(size or 0, len(raw))
    if size > MAX_FILE_BYTES:
        raise BadResults(f"{size / 2**20:.1f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB a results.json may be")
    if not raw.strip():
        raise BadResults("empty file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadResults("not UTF-8 text") from None
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int, parse_float=_finite_float)
    except BadResults as e:
        raise BadResults(f"corrupt JSON: {e}") from None
    except json.JSONDecodeError as e:
        raise BadResults(f"corrupt JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise BadResults("corrupt JSON: nested too deeply") from None
    except ValueError as e:  # int() limits and the like
        raise BadResults(f"corrupt JSON: {' '.join(str(e).split())[:120]}") from None
    if not isinstance(data, dict):
        raise BadResults(f"not a grader results.json (a JSON {_json_type(data)}, not an object)")
    if not isinstance(data.get("tests"), list):
        raise BadResults("not a grader results.json (no 'tests' list)")
    if _depth_over(data, MAX_DEPTH):
        raise BadResults(f"nested more than {MAX_DEPTH} levels deep")
    try:
        from jsonschema.exceptions import best_match

        err = best_match(validator().iter_errors(data))
    except RecursionError:
        raise BadResults("could not be checked (nested too deeply)") from None
    if err is not None:
        raise BadResults(f"fails grader/results.schema.json: {_schema_reason(err)}"[:400])
    return data


def _load_one(path: Path, root: Path, key: bytes | None = None) -> Submission | Unreadable:
    rel = _rel(path, root)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(MAX_FILE_BYTES + 1)  # a larger file is refused without reading it all
    except OSError as e:
        return Unreadable(rel, f"cannot read: {e.strerror or e}")
    try:
        data = parse_results(raw, size)
    except BadResults as e:
        return Unreadable(rel, str(e))
    sub = Submission(_student_id(data, path, root), rel, data)
    tests = tests_of(data)
    for t in tests:
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        col = f"{t.part}_{t.stage}"
        s, m = sub.points.get(col, (0.0, 0.0))
        sub.points[col] = (s + t.score, m + t.max_score)
    tsum = sum(t.score for t in tests)
    sub.total = _num(data.get("score"), tsum) if isinstance(data.get("score"), (int, float)) else tsum
    sub.max = _num(data.get("max_score"), 0.0) or sum(t.max_score for t in tests)
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


# ----------------------------------------------------------------------------------------------------------------
# Gradescope's export layout: submission_metadata.yml beside one folder per submission

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 32 * 1024 * 1024


def _yaml_loader() -> Any:
    """yaml.SafeLoader that reads a Ruby-tagged node (`!ruby/object:BigDecimal ...`, which Gradescope's Ruby
    exporter may write) as plain data instead of refusing the whole file. Builds no Python object from a tag."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", plain)
    Loader.add_multi_constructor("tag:", plain)
    return Loader


def _field(d: Any, name: str) -> Any:
    """d[':name'] (Ruby symbol keys, as Gradescope writes them) or d['name']."""
    if not isinstance(d, dict):
        return None
    return d.get(f":{name}", d.get(name))


def _text(v: Any, limit: int = 1000) -> str:
    return str(v).strip()[:limit] if isinstance(v, (str, int)) and not isinstance(v, bool) else ""


def read_gradescope_metadata(path: Path) -> dict[str, list[dict[str, str]]]:
    """submission_metadata.yml -> submission folder name -> its submitters [{name, sid, email}]. Raises
    BadResults naming what is wrong."""
    import yaml

    try:
        size = path.stat().st_size
        if size > MAX_METADATA_BYTES:
            raise BadResults(f"{size / 2**20:.1f} MiB, over the {MAX_METADATA_BYTES // 2**20} MiB it may be")
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())  # a SafeLoader
    except BadResults:
        raise
    except OSError as e:
        raise BadResults(f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BadResults("not UTF-8 text") from None
    except Exception as e:  # YAMLError, and whatever else hostile YAML raises: listed, never fatal
        raise BadResults(f"not YAML: {' '.join(str(e).split())[:200]}") from None
    if not isinstance(data, dict):
        raise BadResults("not Gradescope's submission metadata (a mapping of submission folders)")
    out: dict[str, list[dict[str, str]]] = {}
    for folder, sub in data.items():
        people = _field(sub, "submitters")
        if not isinstance(folder, str) or not isinstance(people, list):
            continue
        rows = [{k: _text(_field(p, k)) for k in ("name", "sid", "email")} for p in people[:50] if isinstance(p, dict)]
        out[folder.lstrip(":")] = [r for r in rows if any(r.values())]
    return out


def gradescope_layout(root: Path) -> tuple[dict[Path, list[dict[str, str]]], list[Unreadable]]:
    """Every submission folder named in a submission_metadata.yml at root or one level down -> its submitters."""
    found: dict[Path, list[dict[str, str]]] = {}
    bad: list[Unreadable] = []
    candidates = [root / GRADESCOPE_METADATA, *sorted(root.glob(f"*/{GRADESCOPE_METADATA}"))] if root.is_dir() else []
    for meta in candidates:
        if not meta.is_file():
            continue
        try:
            folders = read_gradescope_metadata(meta)
        except BadResults as e:
            bad.append(Unreadable(_rel(meta, root), str(e)))
            continue
        for name, people in folders.items():
            found[(meta.parent / name).resolve()] = people
    return found, bad


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
        progress(f"reading {i}/{len(files)}: {_rel(p, root)}")
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
            bad.append(Unreadable(_rel(d, root) + "/", "no results.json in this directory"))
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


def _safe_cell(s: str) -> str:
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
                _safe_cell(s.student),
                *(
                    [_safe_cell(who(s, "name")), _safe_cell(who(s, "email")), _safe_cell(who(s, "sid"))]
                    if people
                    else []
                ),
                *(f"{round(s.points[c][0], 4):g}" if c in s.points else "" for c in cols),
                _safe_cell(s.device_label),
                f"{round(s.total, 4):g}",
                f"{round(s.max, 4):g}",
                _safe_cell(" | ".join(s.flags)),
                *([s.signature] if signatures else []),
            ]
        )
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------------------------
# The roster and the LMS: grades_canvas.csv

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
_MUTED = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.IGNORECASE)  # Canvas's rows under the header
CANVAS_ID_RE = re.compile(
    r"\A(.*)\s\((\d+)\)\Z"
)  # Canvas reads "Title (123)" as assignment 123 (Assignment.title_and_id)


class RosterError(ValueError):
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
        raw = path.read_bytes()
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
        if not any(cells) or all(_MUTED.match(c) for c in cells):
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
    points_possible: float
    scores: list[str]  # per roster row: the score as written, or "" (none)
    matched: dict[int, Submission] = field(default_factory=dict)  # roster row -> its results
    missing: list[int] = field(default_factory=list)  # roster rows with no results at all
    conflicts: dict[int, list[Submission]] = field(default_factory=dict)  # roster rows with several results: no score
    withheld: dict[int, Submission] = field(default_factory=dict)  # signature not valid: no score
    unmatched: list[Submission] = field(default_factory=list)  # results that match no roster student
    ambiguous: list[tuple[Submission, list[int]]] = field(default_factory=list)  # results that match several


def _identities(s: Submission) -> list[set[str]]:
    """Who a result is for, as a set of keys (casefolded) per person: Gradescope's submitters (SID, email) where
    the export names them, else the student id (extra_data.student_id or the folder's name)."""
    people = [{p.get("sid", ""), p.get("email", "")} for p in s.submitters] if s.submitters else [{s.key or s.student}]
    return [ks for ks in ({k.casefold() for k in keys if k} for keys in people) if ks]


def _local(k: str) -> str:
    return k.split("@", 1)[0] if "@" in k else ""


def points_text(v: float) -> str:
    return f"{round(v, 2):.2f}".rstrip("0").rstrip(".") if math.isfinite(v) else ""


def canvas_column(subs: list[Submission], roster: Roster, name: str | None = None) -> str:
    """The assignment column's header. A Canvas export's own column of that assignment ("Title (12345)", its
    Canvas id) is reused, so the import updates it; otherwise the plain title, and Canvas makes a new assignment
    of that name with the "Points Possible" row's points. Default title: "<PROBLEM> kernels". Not "Title (76)":
    Canvas reads a number in parentheses as the assignment's id, not its points."""
    if not name:
        probs = [" ".join(str((s.data.get("extra_data") or {}).get("problem") or "").split())[:60] for s in subs]
        prob = max(sorted(set(probs)), key=probs.count) if any(probs) else ""
        name = f"{prob.upper() or 'GLU'} kernels"
    m = CANVAS_ID_RE.match(name)
    if m:
        return name  # an explicit Canvas id: as given
    for h in roster.header[len(CANVAS_HEADER) :]:
        hm = CANVAS_ID_RE.match(h)
        if hm and hm.group(1).strip().casefold() == name.strip().casefold():
            return h
    return name


def join_roster(subs: list[Submission], roster: Roster, column: str | None = None, signatures: bool = False) -> Join:
    """Match every result to the roster (its keys: ID, SIS User ID, SIS Login ID and any email/login column) and
    give each roster student a score: empty when there are no results, several results, or (signatures checked)
    results the grader did not sign."""
    index: dict[str, set[int]] = {}
    local: dict[str, set[int]] = {}  # an email's local part -> rows: tried when no key matches in full
    for i, ks in enumerate(roster.keys):
        for k in ks:
            index.setdefault(k, set()).add(i)
            if _local(k):
                local.setdefault(_local(k), set()).add(i)

    def rows_of(keys: set[str]) -> set[int]:
        full = set().union(*(index.get(k, set()) for k in keys))
        if full:
            return full
        short = keys | {_local(k) for k in keys if _local(k)}
        return set().union(*(index.get(k, set()) | local.get(k, set()) for k in short))

    found: dict[int, list[Submission]] = {}
    j = Join(canvas_column(subs, roster, column), max([s.max for s in subs] + [0.0]), [""] * len(roster.rows))
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
            j.conflicts[i] = got
        elif signatures and got[0].signature != signing.VALID:
            j.withheld[i] = got[0]
        else:
            j.matched[i] = got[0]
            j.scores[i] = points_text(got[0].total)
    return j


def render_canvas_csv(roster: Roster, j: Join) -> str:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, the assignment column; a "Points
    Possible" row; one row per roster student, in the roster's order (an empty score leaves Canvas's as it is)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*CANVAS_HEADER, j.column])
    w.writerow(["Points Possible", "", "", "", "", points_text(j.points_possible)])
    for row, score in zip(roster.rows, j.scores, strict=False):
        w.writerow(
            [
                _safe_cell(row["Student"]),
                row["ID"],
                row["SIS User ID"],
                row["SIS Login ID"],
                _safe_cell(row["Section"]),
                score,
            ]
        )
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------------------------
# Class statistics


def speedups(subs: list[Submission]) -> dict[str, dict[str, list[float]]]:
    """perf case -> implementation -> speedups over eager, one per submission that was timed."""
    out: dict[str, dict[str, list[float]]] = {}
    for s in subs:
        cases = ((s.data.get("extra_data") or {}).get("performance") or {}).get("cases") or {}
        for case, c in cases.items():
            for impl, d in (c.get("impls") or {}).items():
                v = _num((d or {}).get("speedup_vs_eager"), float("nan"))
                if v == v and v > 0:
                    out.setdefault(case, {}).setdefault(impl, []).append(v)
    return out


def pass_rates(subs: list[Submission]) -> tuple[list[str], list[str], dict[tuple[str, str], tuple[int, int, int]]]:
    """(cases, parts, (case, part) -> (passed, run, skipped)); skipped cases are not counted as run."""
    cases: list[str] = []
    parts: list[str] = []
    cells: dict[tuple[str, str], tuple[int, int, int]] = {}
    for s in subs:
        parts += [p for p in parts_of(s.data) if p not in parts]
        for t in tests_of(s.data):
            if t.stage != "correctness":
                continue
            if t.case not in cases:
                cases.append(t.case)
            ok, n, k = cells.get((t.case, t.part), (0, 0, 0))
            if t.state == SKIPPED:
                k += 1
            else:
                n += 1
                ok += t.state == PASSED
            cells[(t.case, t.part)] = (ok, n, k)
    return cases, [p for p in parts if any(key[1] == p for key in cells)], cells


def histogram(values: list[float], top: float, bins: int = 10) -> list[tuple[float, float, int]]:
    if not (math.isfinite(top) and top / bins > 0):  # no usable max (0, negative, or too small to divide)
        top = max([v for v in values if math.isfinite(v)] + [1.0])
    width = top / bins
    counts = [0] * bins
    for v in values:
        q = v / width
        counts[min(bins - 1, max(0, int(q))) if math.isfinite(q) else (bins - 1 if q > 0 else 0)] += 1
    return [(i * width, (i + 1) * width, n) for i, n in enumerate(counts)]


def _charts(subs: list[Submission], top: float) -> dict[str, bytes] | None:
    mpl = _matplotlib()
    if mpl is None:
        return None
    Figure, Canvas = mpl
    out: dict[str, bytes] = {}
    if subs:
        fig = Figure(figsize=(7, 3))
        ax = fig.add_subplot(1, 1, 1)
        ax.hist([s.total for s in subs], bins=20, range=(0, top or None), color="#1e88e5", edgecolor="white")
        ax.set_xlabel("total score")
        ax.set_ylabel("submissions")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"Scores ({len(subs)} submissions)", fontsize=10)
        out["scores"] = _png(fig, Canvas)
    sp = speedups(subs)
    if sp:
        fig = Figure(figsize=(7.5, 3.5))
        ax = fig.add_subplot(1, 1, 1)
        labels, data = [], []
        for case, impls in sp.items():
            for impl, vs in impls.items():
                labels.append(f"{case}\n{impl}")
                data.append(vs)
        ax.boxplot(data, showfliers=False)
        for i, vs in enumerate(data, 1):
            ax.scatter(
                [i + 0.12 * ((j % 5) - 2) / 2 for j in range(len(vs))], vs, s=10, alpha=0.6, color="#8e24aa", zorder=3
            )
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, fontsize=7)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="eager (1x)")
        ax.set_ylabel("speedup over eager")
        ax.set_title("Speedup over eager per perf case", fontsize=10)
        ax.legend(fontsize=7)
        out["speedups"] = _png(fig, Canvas)
    cases, parts, cells = pass_rates(subs)
    if cases:
        fig = Figure(figsize=(7.5, 1 + 0.22 * len(cases)))
        ax = fig.add_subplot(1, 1, 1)
        h = 0.8 / max(1, len(parts))
        for j, part in enumerate(parts):
            ys = [i + (j - (len(parts) - 1) / 2) * h for i in range(len(cases))]
            rates = [
                100.0 * cells[(c, part)][0] / cells[(c, part)][1] if cells.get((c, part), (0, 0, 0))[1] else 0.0
                for c in cases
            ]
            ax.barh(ys, rates, height=h, label=part)
        ax.set_yticks(range(len(cases)))
        ax.set_yticklabels(cases, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of submissions passing (of those where the case ran)")
        ax.set_title("Pass rate per correctness case", fontsize=10)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        out["pass_rates"] = _png(fig, Canvas)
    return out


# ----------------------------------------------------------------------------------------------------------------
# HTML


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _td(c: Any) -> str:
    return f'<td class="n">{_e(c)}</td>' if is_number(c) else f"<td>{_e(c)}</td>"


def _table(head: list[str], rows: list[list[Any]]) -> str:
    return (
        "<table><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(_td(c) for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def _student_cell(s: Submission) -> str:
    """The student's id (and Gradescope names), linked to their report.html when there is one (a relative link)."""
    name = s.student + (f" ({who(s, 'name')})" if who(s, "name") else "")
    if not s.report_href:
        return f"<td>{_e(name)}</td>"
    return f'<td><a href="{_e(s.report_href)}">{_e(name)}</a></td>'


def _names(subs: list[Submission], limit: int = 30) -> str:
    names = [s.student for s in subs]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _roster_section(roster: Roster, j: Join) -> list[str]:
    def person(i: int) -> list[str]:
        r = roster.rows[i]
        return [r["Student"], r["ID"], r["SIS User ID"], r["SIS Login ID"], r["Section"]]

    facts = (
        f'<p class="facts">roster {_e(roster.path.name)}; assignment column "{_e(j.column)}", points possible '
        f"{_e(points_text(j.points_possible))}. Import it in Canvas (Grades, Import); an empty score leaves the "
        "gradebook's as it is.</p>"
    )
    H = [f"<h2>Roster: grades_canvas.csv ({len(j.matched)} of {len(roster.rows)} students with a score)</h2>", facts]
    empty = [[*person(i), "no results"] for i in j.missing]
    empty += [
        [*person(i), "several results: " + ", ".join(s.student for s in subs) + " (choose one by hand)"]
        for i, subs in j.conflicts.items()
    ]
    empty += [
        [*person(i), f"results not signed by the grader ({s.signature}): {s.student}"] for i, s in j.withheld.items()
    ]
    H.append(f"<h3>Roster students without a score ({len(empty)})</h3>")
    H.append(_table([*CANVAS_HEADER, "why"], empty) if empty else "<p>None.</p>")
    left = [[s.student, s.path, f"{s.total:.4g}", "matches no roster student"] for s in j.unmatched]
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
    H.append(f"<h3>Results not in grades_canvas.csv ({len(left)})</h3>")
    H.append(_table(["student", "file", "total", "why"], left) if left else "<p>None.</p>")
    return H


def render_summary(
    subs: list[Submission],
    bad: list[Unreadable],
    imgs: dict[str, bytes] | None,
    source: str,
    roster: Roster | None = None,
    join: Join | None = None,
) -> str:
    top = max([s.max for s in subs] + [0.0])
    totals = [s.total for s in subs]
    H = [f"<h1>Class summary: {len(subs)} graded submission(s)</h1>", f'<p class="facts">from {_e(source)}</p>']
    cpu = [s for s in subs if s.without_gpu]
    if cpu:
        H.append(
            f'<p class="note"><b>{len(cpu)} of {len(subs)} grade(s) were made without a GPU</b> (device "CPU"): '
            "they cannot hold the performance points nor the GPU-only cases, so their totals are not final. "
            f"Regrade them on a GPU: {_e(_names(cpu))}.</p>"
        )
    if imgs is None:
        H.append(
            '<p class="note">Note: plots need matplotlib (pip install matplotlib); this summary has tables only.</p>'
        )
    if totals:
        H.append(
            _table(
                ["submissions", "mean", "median", "min", "max", "out of"],
                [
                    [
                        len(totals),
                        f"{statistics.mean(totals):.2f}",
                        f"{statistics.median(totals):.2f}",
                        f"{min(totals):.4g}",
                        f"{max(totals):.4g}",
                        f"{top:g}",
                    ]
                ],
            )
        )
    H.append(f"<h2>Files that could not be used ({len(bad)})</h2>")
    H.append(_table(["path", "why"], [[b.path, b.reason] for b in bad]) if bad else "<p>None.</p>")
    flagged = [s for s in subs if s.flags]
    H.append(f"<h2>Flagged submissions ({len(flagged)})</h2>")
    if flagged:
        H.append(
            "<table><tr><th>student</th><th>total</th><th>why</th><th>file</th></tr>"
            + "".join(
                f"<tr>{_student_cell(s)}{_td(f'{s.total:.4g}')}"
                f"<td><ul>{''.join(f'<li>{_e(f)}</li>' for f in s.flags)}</ul></td><td>{_e(s.path)}</td></tr>"
                for s in flagged
            )
            + "</table>"
        )
    else:
        H.append("<p>None.</p>")

    H.append("<h2>Score histogram</h2>")
    if imgs and "scores" in imgs:
        H.append(_img(imgs["scores"], "score histogram"))
    if totals:
        H.append(
            _table(
                ["score from", "to", "submissions"], [[f"{a:.3g}", f"{b:.3g}", n] for a, b, n in histogram(totals, top)]
            )
        )

    H.append("<h2>Speedup over eager per perf case</h2>")
    sp = speedups(subs)
    if imgs and "speedups" in imgs:
        H.append(_img(imgs["speedups"], "speedup over eager per perf case"))
    if sp:
        rows = []
        for case, impls in sp.items():
            for impl, vs in impls.items():
                rows.append(
                    [
                        case,
                        impl,
                        len(vs),
                        f"{min(vs):.2f}x",
                        f"{statistics.median(vs):.2f}x",
                        f"{max(vs):.2f}x",
                        f"{100 * sum(v >= 1 for v in vs) / len(vs):.0f}%",
                    ]
                )
        H.append(_table(["case", "implementation", "timed", "min", "median", "max", "faster than eager"], rows))
    else:
        H.append("<p>No performance data (no submission was timed on a GPU).</p>")

    H.append("<h2>Pass rate per correctness case</h2>")
    cases, parts, cells = pass_rates(subs)
    if imgs and "pass_rates" in imgs:
        H.append(_img(imgs["pass_rates"], "pass rate per correctness case"))
    if cases:

        def cell(c: str, p: str) -> str:
            ok, n, k = cells.get((c, p), (0, 0, 0))
            return (f"{100 * ok / n:.0f}% ({ok}/{n})" if n else "-") + (f", {k} skipped" if k else "")

        H.append(_table(["case", *parts], [[c, *(cell(c, p) for p in parts)] for c in cases]))
    else:
        H.append("<p>No correctness results.</p>")

    if roster is not None and join is not None:
        H += _roster_section(roster, join)

    cols = columns(subs)
    H.append("<h2>All submissions</h2>")
    if any(s.report_href for s in subs):
        H.append("<p>A student's name links to their own report (report.html beside their results.json).</p>")
    H.append(
        "<table><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in ["student", *cols, "total", "max", "device", "flags"])
        + "</tr>"
        + "".join(
            "<tr>"
            + _student_cell(s)
            + "".join(
                _td(c)
                for c in [
                    *(f"{s.points[c][0]:.4g}" if c in s.points else "" for c in cols),
                    f"{s.total:.4g}",
                    f"{s.max:g}",
                    s.device_label,
                    len(s.flags),
                ]
            )
            + "</tr>"
            for s in subs
        )
        + "</table>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Class summary</title>'
        f"<style>{CSS}</style></head><body>\n" + "\n".join(H) + "\n</body></html>\n"
    )


def _report_href(s: Submission, root: Path, out: Path) -> str:
    """The relative link from out/class_summary.html to the report.html beside s's results.json ("" if none)."""
    page = (root / s.path).parent / "report.html"
    try:
        if not page.is_file():
            return ""
        rel = os.path.relpath(page.resolve(), out.resolve())
    except (OSError, ValueError):  # another drive (Windows), an unreadable folder
        return ""
    return quote(Path(rel).as_posix(), safe="/")


def write_ta_report(
    root: Path,
    out: Path | None = None,
    progress: Callable[[str], None] = lambda s: None,
    key: bytes | None = None,
    roster: Roster | None = None,
    canvas_column_name: str | None = None,
) -> tuple[Path, Path, list[Submission], list[Unreadable]]:
    """Write grades.csv and class_summary.html into out (default: root). Never raises for a bad results file.
    key: the signing key of the key file the grades were made with (keyfile.Key.signing); every file's signature
    is then checked (grader/signing.py). roster (read_roster): also write grades_canvas.csv, one row per roster
    student (join_roster), with the assignment column canvas_column_name (default: canvas_column's)."""
    root = Path(root)
    out = Path(out) if out is not None else root
    validator()  # the schema and the jsonschema package are there before any file is judged by them
    subs, bad = collect(root, progress, exclude=out if out.resolve() != root.resolve() else None, key=key)
    for s in subs:
        s.report_href = _report_href(s, root, out)
    join = join_roster(subs, roster, canvas_column_name, signatures=key is not None) if roster is not None else None
    progress("drawing charts")
    top = max([s.max for s in subs] + [0.0])
    try:
        imgs = _charts(subs, top)
    except Exception:  # a chart must never cost the CSV: fall back to tables only
        imgs = None
    csv_path, html_path = out / "grades.csv", out / "class_summary.html"
    write_text_atomic(csv_path, render_csv(subs, signatures=key is not None))
    if roster is not None and join is not None:
        write_text_atomic(out / CANVAS_CSV, render_canvas_csv(roster, join))
    write_text_atomic(html_path, render_summary(subs, bad, imgs, root.name or str(root), roster, join))
    return csv_path, html_path, subs, bad
