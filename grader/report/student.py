"""The student's report: one Page built from a results.json, written as report.md and report.html beside it.

Contents: the score per part; per perf case the lecture-style table and a chart of the times against the credit
thresholds; the bandwidth against the measured copy ceiling; the correctness matrix (case x part); what will not
compile on a GPU; every lost point, one entry per distinct failure, with the cases it covers, the whole output and
what to try next; what the compiler says without a GPU; warnings and flags that cost nothing yet; the notes.

Charts need matplotlib, an optional dependency: without it both files are still written, with tables only and a
note saying so."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader.report import charts as charts_module
from grader.report import html, markdown
from grader.report.blocks import Bullets, CaseOutput, Cases, Cell, Chart, Output, Page, Pre, Row, Section, Table, Text
from grader.report.failures import Failure, capped, failures, first_lines
from grader.report.output import student_advisory, write_text_atomic
from grader.report.perf import case_title, perf_table, thresholds_line
from grader.report.records import STAGES, grade_of, part_scores
from grader.results import (
    FAILED,
    FLAG,
    PASSED,
    SKIPPED,
    VIOLATION,
    Code,
    Grade,
    Kind,
    PerfSummary,
    Reason,
    Stage,
    State,
    TestResult,
    number,
)

NO_PLOTS = "plots need matplotlib (pip install matplotlib); this report has tables only"
CELL: dict[State, str] = {PASSED: "pass", FAILED: "FAIL", SKIPPED: "skip"}
COMPILER_TITLE = "What the compiler says (no GPU here)"
GPU_COMPILE_TITLE = "Will not compile on a GPU"
BUILD_TITLE = "Build output"
GPU_COMPILE_INTRO = (
    "These kernels ran in Triton's interpreter here, but Triton's compiler rejects them: on a GPU "
    "(the autograder) every case of the part would fail. Fix the line it names, then grade again."
)


def build_rows(tests: list[TestResult]) -> list[TestResult]:
    """The builds whose output a student must read: a build that failed (nvcc's errors), or one whose output says
    more than its one-line verdict (the compiler's warnings). A failed build costs no points of its own (its cases
    lose them), so it is in no lost-points entry: without this, its errors were in results.json only."""
    return [
        t for t in tests if t.kind in (Kind.BUILD, Kind.CPU_BUILD) and (t.state == FAILED or "\n" in t.output.strip())
    ]


def points(x: float) -> str:
    return f"{x:.4g} point" + ("" if abs(x - 1) < 1e-9 else "s")


def headline(source: Grade | Mapping[str, Any]) -> str:
    """'76 / 76 points'; on a machine that cannot earn every point (no GPU), what it can:
    '24/24 points earnable on this machine (76 in all)'. The score and maximum the file states."""
    g = grade_of(source)
    stated = g.stated
    assert stated is not None  # read from a file
    score = number(stated.score)
    top = number(stated.max_score, g.max_score)
    unearnable = number(stated.unearnable)
    # Cases --watch did not run are neither lost nor beyond this machine: said apart, so that the score reads right.
    unrun = f", {g.not_run:g} not run (--watch)" if g.not_run else ""
    if unearnable > 0:
        return f"{score:.4g}/{max(0.0, top - unearnable):g} points earnable on this machine ({top:g} in all{unrun})"
    return f"{score:.4g} / {top:g} points" + (f" ({unrun[2:]})" if unrun else "")


def _facts(g: Grade, perf: PerfSummary) -> str:
    facts = [f"submission: {g.submission}", f"device: {perf.device_name or g.device}"]
    if perf.torch:
        facts.append(f"torch {perf.torch}")
    if perf.copy_bytes_per_s:
        facts.append(f"measured copy bandwidth {perf.copy_bytes_per_s / 1e12:.2f} TB/s (read + write)")
    unearnable = number(g.stated.unearnable) if g.stated is not None else g.unearnable
    if unearnable:
        facts.append(f"{unearnable:g} points cannot be earned on this machine")
    if g.not_run:
        facts.append(f"{g.not_run:g} points not run (--watch stopped at the first failing case)")
    return "; ".join(facts)


def _score(g: Grade) -> Section:
    ps = part_scores(g)
    stages = [s for s in STAGES if any(s in v for v in ps.values())]
    rows = []
    for part, st in ps.items():
        tot = (sum(v[0] for v in st.values()), sum(v[1] for v in st.values()))
        cells = [f"{st[s][0]:.4g} / {st[s][1]:g}" if s in st else "-" for s in stages]
        rows.append(Row.of([part, *cells, f"{tot[0]:.4g} / {tot[1]:g}"]))
    return Section("Score", [Table(["part", *stages, "total"], rows)])


def _performance(g: Grade, perf: PerfSummary, imgs: dict[str, bytes] | None) -> Section:
    copy_bps = perf.copy_bytes_per_s
    s = Section("Performance")
    if not perf.cases:
        s.blocks.append(Text("No performance data: speed is timed only on a CUDA GPU."))
    for name, c in perf.cases.items():
        sub = Section(case_title(name, c), [perf_table(c, g.forfeits.keys())])
        if thresholds_line(c, copy_bps):
            sub.blocks.append(Text(thresholds_line(c, copy_bps)))
        if imgs and f"time_{name}" in imgs:
            sub.blocks.append(
                Chart(f"times on {name} against the baselines and credit thresholds", imgs[f"time_{name}"])
            )
        s.sections.append(sub)
    if imgs and "bandwidth" in imgs:
        alt = "achieved bandwidth per case against the measured copy ceiling"
        s.sections.append(Section("Bandwidth against the measured copy ceiling", [Chart(alt, imgs["bandwidth"])]))
    return s


def correctness_matrix(g: Grade) -> tuple[list[str], list[str], dict[tuple[str, str], TestResult]]:
    """(cases in order, parts in order, (case, part) -> test)."""
    cells: dict[tuple[str, str], TestResult] = {}
    for t in g.tests:
        if t.stage == Stage.CORRECTNESS:
            cells[(t.case, t.part)] = t
    cases = list(dict.fromkeys(c for c, _ in cells))
    parts = [p for p in g.parts if any(k[1] == p for k in cells)]
    return cases, parts, cells


def _correctness(g: Grade) -> Section:
    cases, parts, cells = correctness_matrix(g)
    if not cases:
        return Section("Correctness", [Text("No correctness tests in this run.")])
    rows = []
    for cs in cases:
        marks = [cells.get((cs, p)) for p in parts]
        rows.append(
            Row([Cell(cs)] + [Cell(CELL.get(t.state, "?"), t.state) if t else Cell("-", "none") for t in marks])
        )
    return Section("Correctness", [Table(["case", *parts], rows)])


def failure_section(f: Failure) -> Section:
    what = "lost"
    if f.state == SKIPPED:
        not_run = all(t.reason == Reason.NOT_RUN for t in f.tests)
        what = "not run (--watch stopped at the first failing case)" if not_run else "not earnable on this machine"
    s = Section(f"{f.title}: {points(f.points)} {what}", style=f.state)
    if len(f.tests) > 1:
        s.blocks.append(Text(f"The {len(f.tests)} cases this covers, each with its own output:"))
        # Cases whose line is the same are one entry with their count (26 copies of "did not compile" said nothing
        # the first did not); each keeps its first case's whole output.
        by_line: dict[str, list[TestResult]] = {}
        for t in f.tests:
            by_line.setdefault((first_lines(t.output, 1) or [""])[0], []).append(t)
        s.blocks.append(
            Cases(
                [
                    CaseOutput(
                        ts[0].case if len(ts) == 1 else f"{len(ts)} cases ({', '.join(t.case for t in ts)})",
                        line,
                        f.shown(ts[0].output),
                    )
                    for line, ts in by_line.items()
                ]
            )
        )
        s.blocks.append(Text(f"The output of the first, {f.first.case}:"))
    s.blocks.append(Output(f.output, f.preview))
    found = f.found  # each finding once, with the cases it covers; no internal codes shown
    if found:
        s.blocks.append(Bullets(found, "Found:"))
    s.blocks.append(Bullets(f.tips, "What to try:"))
    return s


def _lost(lost: list[Failure]) -> Section:
    s = Section("Lost points", [] if lost else [Text("None: every point was earned.")])
    s.sections = [failure_section(f) for f in lost]
    return s


def _warnings(tests: list[TestResult], shown: set[str]) -> Section | None:
    """Findings that cost nothing (yet) or belong to no lost point: static warnings, kernel-check warnings and
    violations, performance flags. Those of a lost point are in its own entry (shown: those tests' names)."""
    keys, items = [], []
    for t in tests:
        if t.name in shown:
            continue
        for f in t.findings:
            label = {VIOLATION: "VIOLATION: ", FLAG: "FLAG: "}.get(
                f.severity, "" if f.code == Code.STATIC else "warning: "
            )
            keys.append(t.name)
            items.append(label + f.text)
    return Section("Warnings and flags", [Bullets(items, keys=keys)]) if items else None


def build(source: Grade | Mapping[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> Page:
    """The student report's model: everything both report.md and report.html show."""
    g = grade_of(source)
    perf = g.perf
    page = Page(f"{g.problem or 'grade'} report: {headline(g)}", [Text(_facts(g, perf), "facts")])
    said = g.stated is None or g.stated.says_official  # as advisory_of: a file that says neither gets no line
    adv = student_advisory(bool(g.official) if said else None, g.official_why)
    if adv:
        page.head.append(Text("", "note", lead=adv))
    if imgs is None:
        page.head.append(Text(f"Note: {note or NO_PLOTS}.", "note"))
    tests = g.tests
    lost = failures(g)
    page.sections = [_score(g), _performance(g, perf, imgs), _correctness(g)]
    for t in build_rows(tests):
        page.sections.append(Section(f"{BUILD_TITLE}: {t.name}", [Pre(capped(t.output))], style=t.state))
    broken = [t for t in tests if t.kind == Kind.COMPILE_CHECK and t.state == FAILED]
    if broken:
        intro = Section(GPU_COMPILE_TITLE, [Text(GPU_COMPILE_INTRO)])
        intro.sections = [Section(t.name, [Pre(t.output)], style=FAILED) for t in broken]
        page.sections.append(intro)
    page.sections.append(_lost(lost))
    for t in tests:
        if t.kind == Kind.COMPILER_REPORT and t.state == PASSED:
            page.sections.append(Section(f"{COMPILER_TITLE}: {t.part}", [Pre(t.output)]))
    warns = _warnings(tests, {t.name for f in lost for t in f.tests})
    if warns:
        page.sections.append(warns)
    notes = [n for n in g.notes if n.strip()]
    if notes:
        page.sections.append(Section("Notes", [Bullets(notes)]))
    return page.fix_levels()


def charts(source: Grade | Mapping[str, Any]) -> dict[str, bytes] | None:
    return charts_module.charts(grade_of(source))


def write_student_report(source: Grade | Mapping[str, Any] | str | Path, out_dir: str | Path) -> tuple[Path, Path]:
    """Write report.md and report.html into out_dir (beside results.json). Returns their paths."""
    out_dir = Path(out_dir)
    data = grade_of(source)
    note = None
    try:
        imgs = charts(data)
    except Exception as e:  # a broken plotting stack costs the charts, never the report
        imgs = None
        note = f"plots failed ({type(e).__name__}: {' '.join(str(e).split())[:200]}); this report has tables only"
    page = build(data, imgs, note)
    md, page_path = out_dir / "report.md", out_dir / "report.html"
    write_text_atomic(md, markdown.render(page))
    write_text_atomic(page_path, html.render(page))
    return md, page_path
