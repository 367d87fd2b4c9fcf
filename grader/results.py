"""The grade as data: what every stage produces and the report stage consumes. No logic lives here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class TestResult:
    name: str  # "triton / correctness / odd_h_1001/float16"
    part: str  # implementation name: "triton" | "cuda"
    stage: str  # "build" | "correctness" | "performance" | "checks"
    score: float
    max_score: float
    state: str  # PASSED | FAILED | SKIPPED (skipped = could not be earned on this machine)
    output: str
    extra: dict[str, Any] = field(default_factory=dict)

    def gradescope(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "score": round(self.score, 4),
            "max_score": self.max_score,
            # Gradescope knows only passed/failed; "skipped" is kept in extra_data and tags.
            "status": PASSED if self.state == PASSED else FAILED,
            "output": self.output,
            "tags": [self.part, self.stage] + ([SKIPPED] if self.state == SKIPPED else []),
            "visibility": "visible",
            "extra_data": {"state": self.state, **self.extra},
        }


@dataclass
class Grade:
    problem: str
    submission: str
    device: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one-line facts for the summary (skips, flags)
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase: build, correctness, ...
    perf: dict[str, Any] = field(default_factory=dict)  # per perf case: baselines, thresholds, times
    # Official: decided by the trusted side (key file present, student code unable to reach it). Only an official
    # grade is signed (report.write_results); any other is advisory, and official_why says why.
    official: bool = False
    official_why: list[str] = field(default_factory=list)  # reasons it is not official

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def unearnable(self) -> float:
        return sum(t.max_score for t in self.tests if t.state == SKIPPED)

    def to_json(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "max_score": self.max_score,
            "execution_time": round(sum(self.phases.values()), 2),
            "output": "\n".join(self.notes),
            "visibility": "visible",
            "tests": [t.gradescope() for t in self.tests],
            "extra_data": {
                "problem": self.problem,
                "submission": self.submission,
                "device": self.device,
                "points_not_earnable_here": self.unearnable,
                "phases_s": {k: round(v, 2) for k, v in self.phases.items()},
                "performance": self.perf,
                "official": bool(self.official),
                "not_official_because": [] if self.official else list(self.official_why),
            },
        }
