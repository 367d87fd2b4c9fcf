"""TA reports over a folder of graded submissions: `python -m grader report DIR [--out OUT] [--secret-file F]`.

Reads every results.json under DIR (recursively). The student id is `extra_data.student_id` when the file has one,
else the name of the directory holding the file (its parent's name when that directory is called `results`, as in
Gradescope's /autograder/results). Writes:
- grades.csv: student id, points per part and stage (e.g. triton_correctness, cuda_performance), total, max, flags;
- class_summary.html (self-contained): score histogram, speedup-vs-eager distribution per perf case, pass rate per
  correctness case, flagged submissions with why, and every file that could not be read (or a student directory
  with no results.json at all).
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
import reprlib
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import signing
from .report import advisory_line, write_text_atomic
from .results import PASSED, SKIPPED
from .studentreport import CSS, STAGES, _img, _matplotlib, _num, _png, flags_of, is_number, parts_of, tests_of

SCORE_TOLERANCE = 0.01  # top-level score vs the sum of the tests' scores (each rounded to 4 decimals)
SCHEMA_PATH = Path(__file__).resolve().parent / "results.schema.json"
MAX_FILE_BYTES = 8 * 1024 * 1024  # a real results.json is well under 1 MiB (the H200 staff grade: 57 KB)
MAX_DEPTH = 32  # the grader writes 8 levels
MAX_INT_DIGITS = 30


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

    @property
    def device(self) -> str:
        ex = self.data.get("extra_data") or {}
        dev = ((ex.get("performance") or {}).get("device") or {}).get("name")
        return str(dev or ex.get("device") or "")


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
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(v), "null")


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
            why = "has no signature" if sub.signature == signing.UNSIGNED else "has a signature that does not match its content"
            sub.flags.insert(0, f"NOT WRITTEN BY THE GRADER: this results.json {why} (grader/signing.py); regrade this submission")
    return sub


def collect(root: Path, progress: Callable[[str], None] = lambda s: None, exclude: Path | None = None, key: bytes | None = None) -> tuple[list[Submission], list[Unreadable]]:
    """Every results.json under root, read; plus every directory directly under root that holds none (except
    `exclude`, the report's own output folder)."""
    root = Path(root)
    skip = exclude.resolve() if exclude is not None else None
    files = sorted(p for p in root.rglob("results.json") if p.is_file() and (skip is None or skip not in p.resolve().parents))
    subs: list[Submission] = []
    bad: list[Unreadable] = []
    for i, p in enumerate(files, 1):
        progress(f"reading {i}/{len(files)}: {_rel(p, root)}")
        r = _load_one(p, root, key)
        (subs if isinstance(r, Submission) else bad).append(r)  # type: ignore[arg-type]
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
        order += sorted(c for c in cols_seen if c.startswith(f"{p}_") and c not in order and c[len(p) + 1:] not in STAGES)
    return order + sorted(cols_seen - set(order))


def _safe_cell(s: str) -> str:
    """No spreadsheet formulas from a directory or kernel name."""
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


def render_csv(subs: list[Submission], signatures: bool = False) -> str:
    """signatures: add a `signature` column (valid / INVALID / unsigned), when the report checked them."""
    cols = columns(subs)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student_id", *cols, "total", "max", "flags", *(["signature"] if signatures else [])])
    for s in subs:
        w.writerow([
            _safe_cell(s.student),
            *(f"{round(s.points[c][0], 4):g}" if c in s.points else "" for c in cols),
            f"{round(s.total, 4):g}", f"{round(s.max, 4):g}", _safe_cell(" | ".join(s.flags)),
            *([s.signature] if signatures else []),
        ])
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
            ax.scatter([i + 0.12 * ((j % 5) - 2) / 2 for j in range(len(vs))], vs, s=10, alpha=0.6, color="#8e24aa", zorder=3)
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
            rates = [100.0 * cells[(c, part)][0] / cells[(c, part)][1] if cells.get((c, part), (0, 0, 0))[1] else 0.0 for c in cases]
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
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>" + "".join(
        "<tr>" + "".join(_td(c) for c in r) + "</tr>" for r in rows
    ) + "</table>"


def render_summary(subs: list[Submission], bad: list[Unreadable], imgs: dict[str, bytes] | None, source: str) -> str:
    top = max([s.max for s in subs] + [0.0])
    totals = [s.total for s in subs]
    H = [f"<h1>Class summary: {len(subs)} graded submission(s)</h1>", f'<p class="facts">from {_e(source)}</p>']
    if imgs is None:
        H.append('<p class="note">Note: plots need matplotlib (pip install matplotlib); this summary has tables only.</p>')
    if totals:
        H.append(_table(["submissions", "mean", "median", "min", "max", "out of"], [[
            len(totals), f"{statistics.mean(totals):.2f}", f"{statistics.median(totals):.2f}", f"{min(totals):.4g}", f"{max(totals):.4g}", f"{top:g}",
        ]]))
    H.append(f"<h2>Files that could not be used ({len(bad)})</h2>")
    H.append(_table(["path", "why"], [[b.path, b.reason] for b in bad]) if bad else "<p>None.</p>")
    flagged = [s for s in subs if s.flags]
    H.append(f"<h2>Flagged submissions ({len(flagged)})</h2>")
    if flagged:
        H.append("<table><tr><th>student</th><th>total</th><th>why</th><th>file</th></tr>" + "".join(
            f"<tr><td>{_e(s.student)}</td>{_td(f'{s.total:.4g}')}<td><ul>{''.join(f'<li>{_e(f)}</li>' for f in s.flags)}</ul></td><td>{_e(s.path)}</td></tr>"
            for s in flagged
        ) + "</table>")
    else:
        H.append("<p>None.</p>")

    H.append("<h2>Score histogram</h2>")
    if imgs and "scores" in imgs:
        H.append(_img(imgs["scores"], "score histogram"))
    if totals:
        H.append(_table(["score from", "to", "submissions"], [[f"{a:.3g}", f"{b:.3g}", n] for a, b, n in histogram(totals, top)]))

    H.append("<h2>Speedup over eager per perf case</h2>")
    sp = speedups(subs)
    if imgs and "speedups" in imgs:
        H.append(_img(imgs["speedups"], "speedup over eager per perf case"))
    if sp:
        rows = []
        for case, impls in sp.items():
            for impl, vs in impls.items():
                rows.append([case, impl, len(vs), f"{min(vs):.2f}x", f"{statistics.median(vs):.2f}x", f"{max(vs):.2f}x", f"{100 * sum(v >= 1 for v in vs) / len(vs):.0f}%"])
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

    cols = columns(subs)
    H.append("<h2>All submissions</h2>")
    H.append(_table(["student", *cols, "total", "max", "device", "flags"], [
        [s.student, *(f"{s.points[c][0]:.4g}" if c in s.points else "" for c in cols), f"{s.total:.4g}", f"{s.max:g}", s.device, len(s.flags)]
        for s in subs
    ]))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Class summary</title>'
        f"<style>{CSS}</style></head><body>\n" + "\n".join(H) + "\n</body></html>\n"
    )


def write_ta_report(
    root: Path, out: Path | None = None, progress: Callable[[str], None] = lambda s: None, key: bytes | None = None
) -> tuple[Path, Path, list[Submission], list[Unreadable]]:
    """Write grades.csv and class_summary.html into out (default: root). Never raises for a bad results file.
    key: the signing key of the key file the grades were made with (keyfile.Key.signing); every file's signature
    is then checked (grader/signing.py)."""
    root = Path(root)
    out = Path(out) if out is not None else root
    validator()  # the schema and the jsonschema package are there before any file is judged by them
    subs, bad = collect(root, progress, exclude=out if out.resolve() != root.resolve() else None, key=key)
    progress("drawing charts")
    top = max([s.max for s in subs] + [0.0])
    try:
        imgs = _charts(subs, top)
    except Exception:  # a chart must never cost the CSV: fall back to tables only
        imgs = None
    csv_path, html_path = out / "grades.csv", out / "class_summary.html"
    write_text_atomic(csv_path, render_csv(subs, signatures=key is not None))
    write_text_atomic(html_path, render_summary(subs, bad, imgs, root.name or str(root)))
    return csv_path, html_path, subs, bad
