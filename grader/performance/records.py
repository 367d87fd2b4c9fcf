"""Typed records of the performance stage: what one implementation's timing of one case came to, and why.

grader/performance/ fills them step by step (rounds, re-timing, verification, description, judgement); `as_dict`
writes them into results.json (extra_data.performance.cases) as grader/results.py TimingJSON, the one shape that the
reports read back (Grade.perf, a PerfSummary of TimingViews). A field added to the report is added to Timing, to
TimingJSON and its renderer's view, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.performance.stats import Summary
from grader.results import Code, Finding, TimingJSON


@dataclass
class FirstPass:
    """An implementation whose first pass went over the wall-clock slack, and what its re-timings did."""

    event_median_ms: float
    wall_excess_ms: float
    retimes: int = 0  # re-timings done (each in a fresh worker)
    retimed: bool = False  # at least one re-timing produced times (the last one counts)
    # The earlier case on which its excess recurred in all MAX_RETIMES re-timings: not re-timed again (stage.py).
    confirmed_on: str | None = None

    def as_dict(self, retime_rounds: int) -> dict[str, Any]:
        d: dict[str, Any] = {"event_median_ms": self.event_median_ms, "wall_excess_ms": self.wall_excess_ms}
        if self.retimes:
            d["retimes"] = self.retimes
        if self.confirmed_on is not None:
            d["confirmed_on"] = self.confirmed_on
        return {**d, "retimed": self.retimed, "retime_rounds": retime_rounds}


@dataclass
class Rates:
    """What a scored time means: its bandwidth, its share of the measured copy, its speed-up over the reference."""

    effective_ms: float
    gbps: float
    pct_roofline: float
    speedup_vs_eager: float  # over the problem's reference baseline (spec: tolerance_baseline; eager for GLU)

    @staticmethod
    def of(eff_ms: float, nbytes: int, copy_bps: float, reference_ms: float | None) -> Rates:
        bps = nbytes / (eff_ms * 1e-3)
        ref = reference_ms if reference_ms is not None else eff_ms
        return Rates(eff_ms, bps / 1e9, 100 * bps / copy_bps, ref / eff_ms)


@dataclass
class Timing:
    """One function's timing of one case (a baseline, or an implementation under test): the producer's record, the
    source of what results.json says of it (as_dict, a TimingJSON); the reports read that back as a TimingView."""

    event: Summary
    host: Summary
    host_derived_ms: float  # host-clock median less the reference baseline's host - event gap
    hidden_work: bool  # the host-derived time is far over the event median: work outside the timed stream
    rates: Rates
    compile_s: float | None
    verified: str  # what the check of its timed outputs found
    overhead: list[float] = field(default_factory=list)  # the parent's clock less reported times, per call
    # Implementations only:
    wall_excess_ms: float | None = None
    first_pass: FirstPass | None = None
    credit: float | None = None  # the speed credit, 0..1: its one source (set by judgement.judge; stage.py derives)
    findings: list[Finding] = field(default_factory=list)

    @property
    def overhead_ms(self) -> float:
        xs = sorted(self.overhead)
        if not xs:
            return 0.0
        m = len(xs) // 2
        return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2

    @property
    def wall_derived_ms(self) -> float | None:
        return None if self.wall_excess_ms is None else self.event.median + self.wall_excess_ms

    def has(self, code: Code) -> bool:
        return any(f.code == code for f in self.findings)

    def as_dict(self, retime_rounds: int = 0) -> TimingJSON:
        """The record as results.json holds it: grader/results.py TimingJSON, the one shape the readers parse."""
        d: TimingJSON = {
            "event": self.event.as_dict(),
            "host": self.host.as_dict(),
            "host_derived_ms": self.host_derived_ms,
            "hidden_work": self.hidden_work,
            "effective_ms": self.rates.effective_ms,
            "gbps": self.rates.gbps,
            "pct_roofline": self.rates.pct_roofline,
            "speedup_vs_eager": self.rates.speedup_vs_eager,
            "compile_s": self.compile_s,
            "verified": self.verified,
            "overhead_ms": self.overhead_ms,
            "overhead_range_ms": [min(self.overhead), max(self.overhead)] if self.overhead else None,
        }
        if self.wall_excess_ms is not None:
            d["wall_excess_ms"], d["wall_derived_ms"] = self.wall_excess_ms, self.wall_derived_ms
        if self.first_pass is not None:
            d["first_pass"] = self.first_pass.as_dict(retime_rounds)
        if self.credit is not None:
            d["credit"], d["flags"] = self.credit, [f.text for f in self.findings]
        return d
