"""A results.json read back into the typed Grade (grader/results.py Grade.from_json), once: the one form every report
(student, terminal, TA) renders from, and the few facts over a grade that several reports show.

A report is made from the results.json form of a Grade (Grade.to_json() plus the leaderboard), so it can be made
again later from the file alone, and says the same of a grade just made as of its file. A file may be old (written
before results were typed) or hostile (the TA report reads files students could edit, validated first by
grader/report/validate.py): Grade.from_json tolerates both."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader.results import FLAG, VIOLATION, Grade, Kind, Stage, TestResult, number

STAGES = (Stage.CORRECTNESS, Stage.PERFORMANCE)  # the stages that carry points, in the order the reports show them

Test = TestResult  # the name the reports used for a test read back
num = number  # v as a finite float, else a default


def as_results(source: Grade | Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """A results.json dict from a Grade, a dict, or the path of a results.json file."""
    if isinstance(source, Grade):
        from grader.report.output import results_json

        return results_json(source)
    if isinstance(source, Mapping):
        return dict(source)
    data = json.loads(Path(source).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def grade_of(source: Grade | Mapping[str, Any] | str | Path) -> Grade:
    """The Grade every report renders from, read once: a Grade already read from a file as it is; a grade the
    pipeline just made as its results.json reads back (the file's rounding, its null for NaN, a pending test's
    "pending:" line: what the report of its file would say); a dict or a file's path through Grade.from_json."""
    if isinstance(source, Grade) and source.stated is not None:
        return source
    return Grade.from_json(as_results(source))


def tests_of(data: Mapping[str, Any]) -> list[TestResult]:
    """The tests of a results.json dict, typed (for callers that hold the dict; reports take the Grade)."""
    return Grade.from_json(data).tests


def part_scores(g: Grade) -> dict[str, dict[str, tuple[float, float]]]:
    """part -> stage -> (score, max) for the stages that carry points."""
    out: dict[str, dict[str, tuple[float, float]]] = {p: {} for p in g.parts}
    for t in g.tests:
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        s, m = out.setdefault(t.part, {}).get(t.stage, (0.0, 0.0))
        out[t.part][t.stage] = (s + t.score, m + t.max_score)
    return {p: st for p, st in out.items() if st}


def flags_of(g: Grade) -> list[str]:
    """Why a submission deserves a human look: performance flags, kernel-check violations, forfeits."""
    found: list[str] = []

    def add(s: str) -> None:
        if s not in found:
            found.append(s)

    for t in g.tests:
        where = f"{t.part} / {t.case}" if t.kind == Kind.PERFORMANCE else t.part
        for f in t.findings:
            if f.severity == FLAG:
                add(f"FLAG {where}: {f.text}")
            elif f.severity == VIOLATION:
                add(f"kernel check violation ({t.part}): {f.text}")
    for forfeit in g.forfeits.values():
        add(f"forfeit ({forfeit.part}): all its points, see '{forfeit.check}'")
    return found
