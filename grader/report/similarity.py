"""`python -m grader similarity OUT`: which submissions of a class share code beyond what everyone was given.

Every pair of submissions per part (the Triton .py, the CUDA .cu), and each with the staff solutions, is scored
(grader/report/simtokens.py, simscore.py); this reads the class's files (hostile: capped, never through a link) and
writes OUT/similarity.html (the flagged pairs ranked, side by side, and the groups) and OUT/pairs.csv. A match is
evidence for a human to read, never a verdict: the grader takes no points for it (README, "Similar submissions").
The method and its measurements: docs/architecture.md ("The similarity check"), docs/performance.md#similarity.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader import textscan
from grader.commands import grader_command
from grader.errors import UsageError
from grader.problem.spec import Implementation, Problem, SpecError, find_problem, load_problem
from grader.report import simnorm
from grader.report.simscore import (
    COMMON_SHARE,
    MIN_MATCH_TOKENS,
    OUTLIER_MIN,
    OUTLIER_MIN_FILES,
    RARE_SHARE,
    Doc,
    Pair,
    boilerplate,
    compare,
    groups,
    handout_code,
    line_ranges,
    make_doc,
)
from grader.report.simtokens import K, Vocabulary, W, lang_of, normalize

ROOT = Path(__file__).resolve().parents[2]

# Chosen on scripts/bench_similarity.py's class (README, "Similar submissions", quotes its output): at 0.7 recall is
# at least 0.9 there with under 1% of the honest pairs flagged.
DEFAULT_THRESHOLD = 0.7
MAX_FILE_BYTES = 1 << 20  # a kernel source is a few kB; a file over 1 MiB is listed, not compared
MAX_SHOWN_LINES = 600  # lines of a file shown in the report (pairs.csv and the scores use all of them)
MAX_SHOWN_LINE_CHARS = 240
MAX_DETAILED_PAIRS = 500  # pairs shown side by side per part (every flagged pair of a class); the rest: pairs.csv
MAX_TABLE_ROWS = 2000  # pairs listed in the report's table per part; all of them are in pairs.csv
HTML_NAME, CSV_NAME = "similarity.html", "pairs.csv"
STAFF_PREFIX, KNOWN_PREFIX = "staff:", "known:"


class SimilarityError(UsageError):
    """The check cannot run (bad arguments, no submissions): one line saying what is wrong and how to fix it."""


# -- reading the class --------------------------------------------------------------------------------------------


@dataclass
class Skipped:
    name: str
    part: str
    path: str
    why: str


def read_source(path: Path, limit: int = MAX_FILE_BYTES) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why it is left out). Never follows a link, never opens a device or a pipe
    (O_NOFOLLOW | O_NONBLOCK, then fstat), reads at most limit + 1 bytes, and wants UTF-8 text without NUL bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return None, "a link (not followed)"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None, "not a regular file"
        try:
            data = f.read(limit + 1)
        except OSError as e:
            return None, f"cannot be read ({e.strerror or e})"
    if len(data) > limit:
        return None, f"over {limit >> 10} KiB (a kernel source is a few kB): not compared; read it by hand"
    if not data.strip():
        return None, "empty"
    if b"\0" in data:
        return None, "binary (holds NUL bytes), not source code"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text (bad byte at offset {e.start}): save it as UTF-8 to compare it"
    return text, ""


@dataclass
class Submission:
    name: str
    folder: Path


def find_submissions(src: Path, problem: Problem) -> tuple[list[Submission], str, list[Skipped]]:
    """(the submissions, what src is, those that cannot be read). src: a batch's OUT (its manifest names each
    submission's graded folder) or a folder of submissions the batch would take (per-student folders or a
    Gradescope export folder: grader/classfiles/discover.py, the same ids)."""
    from grader.classfiles import discover, state

    if (state.batch_dir(src) / "manifest.json").is_file():
        try:
            m = state.read_manifest(src)
        except (OSError, ValueError) as e:
            raise SimilarityError(f"{src}: its batch manifest cannot be read ({e})") from None
        subs, gone = [], []
        for it in m.get("items", []):
            if not isinstance(it, dict) or not isinstance(it.get("sid"), str) or not isinstance(it.get("path"), str):
                continue
            folder = Path(it["path"])
            if folder.is_dir():
                subs.append(Submission(it["sid"], folder))
            else:
                gone.append(Skipped(it["sid"], "*", str(folder), "its submission folder is gone (batch inputs)"))
        if not subs and gone:
            raise SimilarityError(
                f"{src}: none of the batch's {len(gone)} submission folders is still there (the first was "
                f"{gone[0].path}): run `{grader_command('similarity', f'SUBMISSIONS --out {src}')}` on the "
                "class's files"
            )
        return subs, "batch", gone
    if not src.is_dir():
        raise SimilarityError(
            f"{src}: not a folder (pass a batch's OUT or a folder with one folder of files per student; unzip a "
            "Gradescope export first)"
        )
    files = tuple(i.file for i in problem.student_implementations.values())
    try:
        found = discover.discover(src, files, src / ".similarity-unused")
    except discover.DiscoverError as e:
        raise SimilarityError(str(e)) from None
    return [Submission(it.sid, it.path) for it in found.items], found.kind, []


def staff_files(problem: Problem, impl: Implementation) -> list[Path]:
    """The staff solutions of every implementation of this part's kind (a staff-only row like gelu's naive CUDA
    kernel included: the lecture's code is a known source too), that are on this machine."""
    got = []
    for other in problem.implementations.values():
        if other.kind == impl.kind and other.staff.is_file() and other.staff not in got:
            got.append(other.staff)
    return got


# -- the run ------------------------------------------------------------------------------------------------------


@dataclass
class PartResult:
    part: str
    file: str
    compared: int  # submissions' files compared
    stub_only: int  # of those, files with no code of their own (the stub, or the handout's code)
    staff: list[str]
    pairs: list[Pair]
    groups: list[list[str]]
    scored: list[Pair] = field(default_factory=list)  # every pair scored, flagged or not (run_check keep_all)


@dataclass
class Result:
    source: Path
    kind: str
    problem: Problem
    threshold: float
    parts: list[PartResult]
    skipped: list[Skipped]
    submissions: int
    seconds: float = 0.0


def _normalize_all(texts: Sequence[str], lang: str) -> list[simnorm.Normal]:
    """normalize() of every text; C's in threads (each waits on its cpp subprocess)."""
    if lang != "c" or len(texts) < 4:
        return [normalize(t, lang) for t in texts]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        return list(pool.map(lambda t: normalize(t, lang), texts))


def run_check(
    src: Path,
    problem: Problem,
    threshold: float = DEFAULT_THRESHOLD,
    known: Sequence[Path] = (),
    root: Path = ROOT,
    min_tokens: int = MIN_MATCH_TOKENS,
    keep_all: bool = False,
) -> Result:
    """Compare every pair of src's submissions per part. Raises SimilarityError when src holds no submission."""
    t0 = time.monotonic()
    subs, kind, skipped = find_submissions(src, problem)
    if not subs:
        raise SimilarityError(f"{src}: no submissions found (one folder of files per student)")
    handout = root / problem.handout if problem.handout else None
    given = handout_code(read_source(handout)[0] or "") if handout is not None else []
    parts: list[PartResult] = []
    for pname, impl in problem.student_implementations.items():
        lang = lang_of(impl.file)
        vocab = Vocabulary()
        stub_text, _ = read_source(root / problem.stubs / impl.file)
        given_here = [(c, lg) for c, lg in given if lg == lang]
        boiler = boilerplate(([(stub_text, lang)] if stub_text else []) + given_here, vocab)
        docs: list[Doc] = []
        stub_only = 0
        read: list[tuple[Submission, Path, str]] = []
        for s in subs:
            path = s.folder / impl.file
            text, why = read_source(path)
            if text is None:
                skipped.append(Skipped(s.name, pname, str(path), why))
                continue
            read.append((s, path, text))
        normals = _normalize_all([text for _, _, text in read], lang)
        for (s, path, text), normal in zip(read, normals, strict=True):
            d = make_doc(s.name, pname, str(path), text, lang, vocab, boiler, staff=False, normal=normal)
            if not d.tokens:
                skipped.append(Skipped(s.name, pname, str(path), "no code (comments or blank lines only)"))
                continue
            stub_only += not d.keys and not d.skeys
            docs.append(d)
        staff_names = []
        for p in [*staff_files(problem, impl), *(k for k in known if lang_of(k.name) == lang)]:
            text, why = read_source(p)
            is_staff = p.parent == problem.path.parent
            name = f"{STAFF_PREFIX}{problem.name}/{p.name}" if is_staff else f"{KNOWN_PREFIX}{p.name}"
            if text is None:
                skipped.append(Skipped(name, pname, str(p), why))
                continue
            docs.append(make_doc(name, pname, str(p), text, lang, vocab, boiler, staff=True))
            staff_names.append(name)
        compared = sum(1 for d in docs if not d.staff)
        scored: list[Pair] = []
        pairs = compare(docs, threshold, min_tokens, scored_out=scored if keep_all else None)
        parts.append(PartResult(pname, impl.file, compared, stub_only, staff_names, pairs, groups(pairs), scored))
    skipped = [x for x in skipped if x.why != "missing"] + [x for x in skipped if x.why == "missing"]
    return Result(src, kind, problem, threshold, parts, skipped, len(subs), time.monotonic() - t0)


# -- output -------------------------------------------------------------------------------------------------------


def pairs_csv(result: Result) -> str:
    """pairs.csv: one row per reported pair, most similar first within each part; every cell formula-safe."""
    from grader.report.cells import csv_text

    rows: list[list[object]] = [
        [
            "submission_a",
            "submission_b",
            "part",
            "similarity",
            "lines_a",
            "lines_b",
            "staff",
            "group",
            "coverage_a",
            "coverage_b",
            "longest_run",
            "outlier",
            "reason",
        ]  # fmt: skip
    ]
    for part in result.parts:
        for p in part.pairs:
            rows.append(
                [
                    p.a.name,
                    p.b.name,
                    p.part,
                    f"{p.similarity:.3f}",
                    line_ranges(p.lines_a),
                    line_ranges(p.lines_b),
                    "yes" if p.staff else "",
                    p.group or "",
                    f"{p.side_a.coverage:.3f}" if p.side_a else "",
                    f"{p.side_b.coverage:.3f}" if p.side_b else "",
                    max(p.side_a.longest, p.side_b.longest) if p.side_a and p.side_b else "",
                    f"{p.outlier:.1f}",
                    p.reason,
                ]
            )
    return csv_text(rows)


@dataclass
class ShownLine:
    number: int
    text: str
    matched: bool


@dataclass
class ShownFile:
    name: str
    path: str
    lines: list[ShownLine]
    cut: int  # lines left out at the end


def shown(d: Doc, matched: Iterable[int]) -> ShownFile:
    marks = set(matched)
    all_lines = d.text.splitlines()
    lines = [
        ShownLine(
            n,
            t[:MAX_SHOWN_LINE_CHARS] + (" ..." if len(t) > MAX_SHOWN_LINE_CHARS else ""),
            n in marks,
        )
        for n, t in enumerate(all_lines[:MAX_SHOWN_LINES], 1)
    ]
    return ShownFile(d.name, d.path, lines, max(0, len(all_lines) - MAX_SHOWN_LINES))


def render_html(result: Result, out: Path) -> str:
    from grader.report import html

    views = []
    for part in result.parts:
        members = []
        for n, g in enumerate(part.groups, 1):
            inside = [p for p in part.pairs if p.group == n]
            members.append({"number": n, "names": g, "pairs": inside, "top": max(p.similarity for p in inside)})
        detailed = part.pairs[:MAX_DETAILED_PAIRS]
        views.append(
            {
                "part": part,
                "groups": members,
                "detailed": [(p, shown(p.a, p.lines_a), shown(p.b, p.lines_b)) for p in detailed],
                "not_detailed": len(part.pairs) - len(detailed),
            }
        )
    total = sum(len(p.pairs) for p in result.parts)
    page = {
        "title": f"Similarity: {total} pair(s) flagged",
        "result": result,
        "views": views,
        "ranges": line_ranges,
        "class_summary": (out / "class_summary.html").is_file(),
        "k": K,
        "w": W,
        "min_tokens": MIN_MATCH_TOKENS,
        "max_rows": MAX_TABLE_ROWS,
        "outlier_min": OUTLIER_MIN,
        "outlier_files": OUTLIER_MIN_FILES,
        "rare_share": RARE_SHARE,
        "common_share": COMMON_SHARE,
    }
    return html.environment().get_template("similarity.html.j2").render(page=page)


def write(result: Result, out: Path) -> tuple[Path, Path]:
    from grader.report import write_text_atomic

    csv_path, html_path = out / CSV_NAME, out / HTML_NAME
    write_text_atomic(csv_path, pairs_csv(result))
    write_text_atomic(html_path, render_html(result, out))
    return csv_path, html_path


# -- command line -------------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="a batch's OUT (its manifest names each submission's folder) or a folder of submissions (one folder "
        "per student, or a Gradescope export folder)",
    )
    p.add_argument("--out", type=Path, default=None, help=f"where {HTML_NAME} and {CSV_NAME} go (default: DIR)")
    p.add_argument(
        "--problem",
        default=None,
        metavar="NAME",
        help="the problem (a name under reference/, or a spec.yaml); default: the batch's, else the default problem",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="T",
        help=f"report pairs whose similarity (0-1, the share of both files' own code in shared runs) is at least T "
        f"(default {DEFAULT_THRESHOLD})",
    )
    p.add_argument(
        "--known",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="another known source to compare every submission with (last year's solutions, a published kernel): "
        "named known:<file>, its part by its suffix (.py, .cu); repeatable. The staff solutions are always known "
        "sources",
    )


def command(argv: Sequence[str]) -> int:
    """`python -m grader similarity ...` without grader.cli (whose imports load torch, ~2 s this command never
    needs): the same arguments and exit codes."""
    p = argparse.ArgumentParser(
        prog="python -m grader similarity",
        description="TA: pairs of submissions with similar code per part, the starter code left out (similarity.html, "
        "pairs.csv; grader/report/similarity.py): evidence to read, never a penalty",
    )
    add_arguments(p)
    return main(p.parse_args(list(argv)))


def _problem_of(src: Path, name: str | None, root: Path) -> Problem:
    if name is None:
        from grader.classfiles import state

        try:
            spec = state.read_manifest(src).get("options", {}).get("problem")
        except (OSError, ValueError):
            spec = None
        name = spec if isinstance(spec, str) and Path(spec).is_file() else None
    return load_problem(find_problem(name, root))


def main(args: argparse.Namespace, root: Path = ROOT) -> int:
    """`similarity DIR`: exit 0 with the report written (whatever it found), 2 when it cannot run."""
    src: Path = args.dir
    out: Path = args.out or src
    try:
        if not 0.0 < args.threshold <= 1.0:
            raise SimilarityError(f"--threshold {args.threshold:g}: want a share between 0 and 1, e.g. 0.5")
        for k in args.known:
            if not k.is_file() or lang_of(k.name) == "c" and not k.name.endswith((".cu", ".cuh", ".cpp", ".c", ".h")):
                raise SimilarityError(f"--known {k}: want a .py or .cu file that exists")
        if not src.exists():
            raise SimilarityError(f"{src}: no such folder (pass a batch's OUT or a folder of submissions)")
        problem = _problem_of(src, args.problem, root)
        result = run_check(src, problem, args.threshold, tuple(args.known), root)
        out.mkdir(parents=True, exist_ok=True)
        csv_path, html_path = write(result, out)
    except SpecError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    except SimilarityError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"grader error: cannot write to {out}: {e.strerror or e} (pass --out DIR)", file=sys.stderr)
        return 2
    for part in result.parts:
        staff = sum(1 for p in part.pairs if p.staff)
        print(
            f"{part.part} ({part.file}): {part.compared} file(s) compared, {len(part.pairs)} pair(s) flagged (at or "
            f"above {result.threshold:g}; {staff} with a staff or known solution), {len(part.groups)} group(s) of 3+ "
            "(every two of them a flagged pair)"
        )
    bad = [s for s in result.skipped if s.why != "missing"]
    if bad:
        print(
            f"{len(bad)} file(s) not compared (listed in the report): "
            + "; ".join(f"{s.name} {s.part}: {s.why}" for s in bad[:3])
            + (" ..." if len(bad) > 3 else "")
        )
    print(f"written: {csv_path} and {html_path} ({result.seconds:.1f} s)")
    print("a match is evidence for a TA to read, never a penalty by itself (README, 'Similar submissions')")
    summary = out / "class_summary.html"
    if summary.is_file() and HTML_NAME not in (textscan.read_capped(summary, 16 << 20)[0]):
        print(f"run `{grader_command('report', str(out))}` again to link it from class_summary.html")
    return 0
