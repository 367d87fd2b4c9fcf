"""Reading a results.json back into typed records: the one form every report (student, terminal, TA) starts from.

A report is made from the results.json form of a Grade (Grade.to_json() plus the leaderboard), so it can be made
again later from the file alone. A file may be old (written before results were typed) or hostile (the TA report
reads files students could edit): every reader here tolerates both, and a field that does not parse is None."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.results import FAILED, FLAG, HINT, SKIPPED, VIOLATION, WARNING, Code, Finding, Grade, Kind, Reason

STAGES = ("correctness", "performance")  # the stages that carry points, in the order the reports show them


@dataclass
class Test:
    """One test of a results.json, with the typed fields (kind, reason, findings) every decision reads."""

    name: str
    part: str
    stage: str
    state: str
    score: float
    max_score: float
    output: str
    extra: dict[str, Any] = field(default_factory=dict)
    kind: Kind | None = None  # None: a results.json from before results were typed, or a malformed one
    reason: Reason | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def case(self) -> str:
        c = self.extra.get("case")
        return str(c) if c else self.name.split(" / ")[-1]

    @property
    def lost(self) -> float:
        return max(0.0, self.max_score - self.score)


def num(v: Any, default: float = 0.0) -> float:
    """v as a finite float, else default (results.json numbers may be null, strings or absent)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def _enum(cls: Any, v: Any) -> Any:
    try:
        return cls(v)
    except (ValueError, TypeError):
        return None


def findings_of(raw: Any) -> list[Finding]:
    """The findings of a test's extra_data; an unknown code or severity is dropped (a newer or edited file)."""
    out = []
    for d in raw if isinstance(raw, list) else []:
        code = _enum(Code, d.get("code")) if isinstance(d, dict) else None
        if code is not None and d.get("severity") in (VIOLATION, FLAG, WARNING, HINT):
            out.append(Finding(code, str(d.get("text", ""))[:2000], d["severity"]))
    return out


def tests_of(data: dict[str, Any]) -> list[Test]:
    """The tests of a results.json dict, with part/stage/state from tags and extra_data."""
    out = []
    for t in data.get("tests") or []:
        if not isinstance(t, dict):
            continue
        name = str(t.get("name", "?"))
        bits = [b.strip() for b in name.split(" / ")]
        tags = [str(x) for x in t.get("tags") or []]
        extra_data = t.get("extra_data")
        extra = extra_data if isinstance(extra_data, dict) else {}
        part = tags[0] if tags else bits[0]
        stage = tags[1] if len(tags) > 1 else (bits[1] if len(bits) > 1 else "")
        state = str(extra.get("state") or (SKIPPED if SKIPPED in tags else t.get("status", FAILED)))
        out.append(
            Test(
                name,
                part,
                stage,
                state,
                num(t.get("score")),
                # a pending test (skipped here, e.g. GPU-only on a CPU) is max_score 0 for Gradescope; its points
                # are in extra_data (grader/results.py TestResult.gradescope)
                num(extra.get("pending_max_score"), num(t.get("max_score"))),
                str(t.get("output") or ""),
                extra,
                _enum(Kind, extra.get("kind")),
                _enum(Reason, extra.get("reason")),
                findings_of(extra.get("findings")),
            )
        )
    return out


def as_results(source: Grade | dict | str | Path) -> dict[str, Any]:
    """A results.json dict from a Grade, a dict, or the path of a results.json file."""
    if isinstance(source, Grade):
        from grader.report.output import results_json

        return results_json(source)
    if isinstance(source, dict):
        return source
    return json.loads(Path(source).read_text(encoding="utf-8"))


def extra_of(data: dict[str, Any]) -> dict[str, Any]:
    ex = data.get("extra_data")
    return ex if isinstance(ex, dict) else {}


def perf_of(data: dict[str, Any]) -> dict[str, Any]:
    perf = extra_of(data).get("performance")
    return perf if isinstance(perf, dict) else {}


def parts_of(data: dict[str, Any]) -> list[str]:
    """Implementation names in the order the grade first mentions them."""
    return list(dict.fromkeys(t.part for t in tests_of(data)))


def part_scores(data: dict[str, Any]) -> dict[str, dict[str, tuple[float, float]]]:
    """part -> stage -> (score, max) for the stages that carry points."""
    out: dict[str, dict[str, tuple[float, float]]] = {p: {} for p in parts_of(data)}
    for t in tests_of(data):
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        s, m = out.setdefault(t.part, {}).get(t.stage, (0.0, 0.0))
        out[t.part][t.stage] = (s + t.score, m + t.max_score)
    return {p: st for p, st in out.items() if st}


def forfeit_parts(data: dict[str, Any]) -> set[str]:
    return {t.part for t in tests_of(data) if t.extra.get("forfeit")}


def flags_of(data: dict[str, Any]) -> list[str]:
    """Why a submission deserves a human look: performance flags, kernel-check violations, forfeits."""
    found: list[str] = []

    def add(s: str) -> None:
        if s not in found:
            found.append(s)

    tests = tests_of(data)
    for t in tests:
        where = f"{t.part} / {t.case}" if t.kind == Kind.PERFORMANCE else t.part
        for f in t.findings:
            if f.severity == FLAG:
                add(f"FLAG {where}: {f.text}")
            elif f.severity == VIOLATION:
                add(f"kernel check violation ({t.part}): {f.text}")
    for part in dict.fromkeys(t.part for t in tests if t.kind == Kind.KERNEL_CHECK and t.reason == Reason.VIOLATION):
        add(f"forfeit ({part}): all its points, see '{part} / kernel check'")
    return found
