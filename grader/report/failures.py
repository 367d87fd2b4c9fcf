"""Lost points, one entry per distinct failure: the tests that lost points the same way (the same part, kind, state
and reason, the same finding codes, hence the same advice) are one Failure that lists the cases it covers, instead
of one near-identical section per case. Grouping reads the typed fields only; the cases' outputs (which differ in
their counts and indices) are kept, each whole, for the reader."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grader.problem import hints as problem_hints
from grader.report.advice import advice, case_advice
from grader.report.records import grade_of
from grader.results import FLAG, HINT, SKIPPED, VIOLATION, WARNING, Finding, Grade, Kind, Reason, State, TestResult
from grader.textscan import cut_at_word

REASON_LINES = 6  # lines of a test's output quoted as the reason for lost points (the preview)
FULL_OUTPUT_MAX = 20000  # characters of one test's output a report keeps (each case's, and the whole of the first)
TERMINAL_LINES = 12  # lines of an error's output the terminal shows


@dataclass
class Failure:
    title: str
    tests: list[TestResult]
    tips: list[str]

    @property
    def first(self) -> TestResult:
        return self.tests[0]

    @property
    def points(self) -> float:
        return sum(t.lost for t in self.tests)

    @property
    def state(self) -> State:
        return self.first.state

    @property
    def cases(self) -> list[str]:
        return [t.case for t in self.tests]

    @property
    def output(self) -> str:
        """The first test's whole output, capped for the page."""
        return self.shown(self.first.output)

    def shown(self, output: str) -> str:
        """A test's output as the report quotes it: a hint's general words, which "What to try" says once for the
        whole failure, replaced by a pointer there (the output keeps the case's own index and values)."""
        for tip in self.tips:
            if len(tip) > 40:
                output = output.replace(tip, "(see What to try)")
        return capped(output)

    @property
    def preview(self) -> list[str]:
        return first_lines(self.first.output)

    @property
    def found(self) -> list[str]:
        """What the tests covered found, in words (no internal codes). A failure pattern (a hint) once per code: the
        first case's own text (its index and values) without the general words that "What to try" gives once, then
        the cases where it was found. Any other finding once per distinct text, with its severity in words."""
        first: dict[str, Finding] = {}
        where: dict[str, list[str]] = {}
        out: dict[str, None] = {}
        for t in self.tests:
            for f in t.findings:
                if f.severity != HINT:
                    label = {VIOLATION: "VIOLATION: ", FLAG: "FLAG: ", WARNING: "warning: "}.get(f.severity, "")
                    out.setdefault(label + f.text, None)
                    continue
                first.setdefault(str(f.code), f)
                cases = where.setdefault(str(f.code), [])
                if t.case not in cases:
                    cases.append(t.case)
        hints = []
        for code, f in first.items():
            text = f.text
            for tip in self.tips:  # display only: a pattern's words end its text and are a tip of their own
                shorter = f.text.removesuffix(tip).rstrip() if tip else f.text
                if shorter and shorter != f.text:
                    text = shorter
                    break
            if len(where[code]) > 1:
                text += f" (found in {len(where[code])} cases: {', '.join(where[code])})"
            hints.append(text)
        return [*hints, *out]

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the tests covered, each (code, text) once: a hint names its case and index."""
        seen: dict[tuple[str, str], Finding] = {}
        for t in self.tests:
            for f in t.findings:
                seen.setdefault((str(f.code), f.text), f)
        return list(seen.values())


def capped(text: str, limit: int = FULL_OUTPUT_MAX) -> str:
    """An output as a report quotes it: whole up to `limit` characters (it is the submission's text, so capped),
    and past that cut between words, never inside one."""
    return cut_at_word(text.strip(), limit)


def first_lines(text: str, n: int = REASON_LINES) -> list[str]:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else [])


# A traceback frame line ('  File "glu_triton.py", line 28, in glu_triton'); the worker writes the submission's
# own files by their bare name and the grader's relative to the package (grader/child/worker.py: _tail).
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+')


def short_output(test: TestResult, lines: int = TERMINAL_LINES) -> list[str]:
    """What the terminal shows of a failure's output: for an error (raised, failed to load), its line and only the
    frames of the submission's own files (a bare file name), then the exception line; else the first lines. The
    whole output is in report.md. Display only: which tests are errors is decided by their reason."""
    text = [ln.rstrip() for ln in test.output.splitlines() if ln.strip()]
    if test.reason not in (Reason.RAISED, Reason.LOAD_FAILED) or len(text) <= lines:
        return text[:lines] + ([f"... ({len(text) - lines} more lines in report.md)"] if len(text) > lines else [])
    keep, own = [text[0]], False
    for ln in text[1:]:
        m = _FRAME.match(ln)
        if m:
            own = "/" not in m["file"] and "\\" not in m["file"] and not m["file"].startswith("<")
            if own:
                keep.append(ln)
        elif own and ln.startswith("    "):
            keep.append(ln)  # the frame's source line (and its ^^^ marker)
        elif not ln.startswith(" "):
            own = False
    keep.append(text[-1])
    dropped = len(text) - len(keep)
    return keep[:lines] + [f"... ({dropped} lines of grader and library frames: the full traceback is in report.md)"]


def _grouping(t: TestResult, tips: list[str]) -> tuple[Any, ...]:
    """Which tests are one failure: correctness cases, skips and the rows a stopped part leaves (forfeit, not run,
    not timed) by their typed pattern and advice; anything else (a build, a perf case, a kernel check) alone."""
    grouped = (
        t.kind == Kind.CORRECTNESS
        or t.state == SKIPPED
        or t.reason in (Reason.FORFEIT, Reason.NOT_RUN, Reason.NOT_TIMED)
    )
    if not grouped:
        return (t.name,)
    codes = tuple(sorted(dict.fromkeys(str(f.code) for f in t.findings)))
    return (t.part, t.kind, t.stage, t.state, t.reason, codes, tuple(tips))


def failures(source: Grade | Mapping[str, Any]) -> list[Failure]:
    """Every test that lost points, one Failure per distinct failure: the largest first, skips last."""
    g = grade_of(source)
    perf = g.perf
    h = problem_hints.load(g.problem)
    part_findings: dict[str, Sequence[Finding]] = {t.part: t.findings for t in g.tests if t.kind == Kind.KERNEL_CHECK}
    groups: dict[tuple[Any, ...], tuple[list[TestResult], list[str]]] = {}
    for t in g.tests:
        if t.lost <= 1e-9:
            continue
        tips = advice(t, perf, part_findings.get(t.part), h)
        groups.setdefault(_grouping(t, tips), ([], tips))[0].append(t)
    out = []
    for ts, tips in groups.values():
        t = ts[0]
        why = f", {t.reason}" if t.reason not in (Reason.OK, Reason.UNKNOWN) else ""
        title = t.name if len(ts) == 1 else f"{t.part} / {t.stage}: {len(ts)} cases{why}"
        # Each case input's own words once, with the cases they are for (all of them: no list).
        by_words: dict[str, list[str]] = {}
        for x in ts:
            w = case_advice(x, h)
            if w:
                by_words.setdefault(w, []).append(x.case)
        own = [w if len(cs) == len(ts) else f"{w} (cases: {', '.join(cs)})" for w, cs in by_words.items()]
        out.append(Failure(title, ts, [tips[0], *own, *tips[1:]] if tips else own))
    return sorted(out, key=lambda f: (f.state == SKIPPED, -f.points))
