"""The performance stage's summary as a grade holds it (Grade.perf) and results.json stores it
(extra_data.performance): each timing's one JSON shape (TimingJSON), the readers' view of it (TimingView), a perf
case's thresholds and timings, and the summary. Parsed once, written once (grader/results.py Grade)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from grader.resultvalues import float_or_none as _float_or_none
from grader.resultvalues import number
from grader.resultvalues import obj as _obj


class TimingJSON(TypedDict, total=False):
    """The one shape of a timing in results.json (performance.cases.<case>.impls/baselines.<name>): the producer's
    record (grader/performance/records.py Timing.as_dict) writes it, the readers parse it (TimingView.from_json).
    A key added here is added to the producer's as_dict and, if a report shows it, to TimingView; nothing else."""

    event: dict[str, float]  # the CUDA-event times' summary (grader/performance/stats.py Summary.as_dict)
    host: dict[str, float]  # the host clock's
    host_derived_ms: float
    hidden_work: bool
    effective_ms: float  # the scored time
    gbps: float
    pct_roofline: float
    speedup_vs_eager: float
    compile_s: float | None
    verified: str
    overhead_ms: float
    overhead_range_ms: list[float] | None
    wall_excess_ms: float  # implementations only, from here on
    wall_derived_ms: float | None
    first_pass: dict[str, Any]
    credit: float  # the speed credit, 0..1
    flags: list[str]
    recorded: bool  # a baseline from the batch's record, not timed in this grade (its event median only)


class CaseJSON(TypedDict, total=False):
    """One perf case in results.json (performance.cases.<case>): written by the performance stage
    (grader/performance/stage.py _CaseRun.case_info, each implementation's timing added to "impls"), read by
    PerfCase.from_json. The keys no report reads (rounds, wall times, spin) are kept for the TA's audit."""

    shape: list[int]
    dtype: str
    bytes: int  # moved per call (read + write)
    floor_ms: float
    thresholds: dict[str, float]
    stop: str  # why the timing rounds stopped
    rounds: int
    baselines: dict[str, TimingJSON]
    impls: dict[str, TimingJSON]
    worker_spin_s: float
    setups: int
    wall_s: dict[str, float]  # setup, rounds, verify
    baseline_overhead_ms: float
    stopped_early: list[str]
    baseline_record: dict[str, Any]  # this case's use of the batch's record, when one was given


class PerfJSON(TypedDict, total=False):
    """The performance stage's whole record (results.json extra_data.performance): run_performance builds it,
    the pipeline adds the first calls' cost, PerfSummary parses it once and keeps it as `raw`."""

    cases: dict[str, CaseJSON]
    baseline_first_calls_s: dict[str, dict[str, float]]  # case -> baseline -> seconds (the worker's `prepare`)
    load_wall_s: dict[str, float]
    device: dict[str, Any]  # the baselines' worker's description of the GPU (name, uuid, torch, ...)
    copy_bytes_per_s: float
    read2_write1_bytes_per_s: float
    baseline_record: dict[str, Any]  # whether the batch's record was used, and where it was refused
    first_call_s: float | None
    first_call_overlapped_s: float | None


@dataclass(frozen=True)
class TimingView:
    """What the reports read of one timing (a TimingJSON, parsed): frozen, every field optional (an older file)."""

    effective_ms: float | None = None
    gbps: float | None = None
    pct_roofline: float | None = None
    speedup_vs_eager: float | None = None
    credit: float | None = None  # impls only: the speed credit, 0..1 (a copy of the producer's, stage.py says)
    compile_s: float | None = None  # the first call (JIT, torch.compile), never inside a timed number
    iqr_ms: float | None = None  # of the CUDA-event times
    n: int | None = None  # CUDA-event samples
    flags: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: TimingJSON | Any) -> TimingView:
        d = _obj(d)
        ev = _obj(d.get("event"))
        n = ev.get("n")
        return cls(
            _float_or_none(d.get("effective_ms")),
            _float_or_none(d.get("gbps")),
            _float_or_none(d.get("pct_roofline")),
            _float_or_none(d.get("speedup_vs_eager")),
            None if d.get("credit") is None else number(d.get("credit")),
            _float_or_none(d.get("compile_s")),
            _float_or_none(ev.get("iqr")),
            n if isinstance(n, int) and not isinstance(n, bool) else None,
            tuple(str(f) for f in d.get("flags") or [] if isinstance(f, str))
            if isinstance(d.get("flags"), list)
            else (),
        )


@dataclass(frozen=True)
class Thresholds:
    """A perf case's credit thresholds (ms): full credit at or below full_ms, partial_credit at partial_ms, none at
    or above zero_ms; margin is the slack given in the student's favour."""

    full_ms: float = 0.0
    partial_ms: float = 0.0
    zero_ms: float = 0.0
    partial_credit: float = 0.5
    margin: float = 0.0

    @classmethod
    def from_json(cls, d: Any) -> Thresholds | None:
        d = _obj(d)
        if not d:
            return None
        return cls(
            number(d.get("full_ms")),
            number(d.get("partial_ms")),
            number(d.get("zero_ms")),
            number(d.get("partial_credit"), 0.5),
            number(d.get("margin")),
        )


@dataclass(frozen=True)
class PerfCase:
    """One perf case's timings (performance.cases.<case>)."""

    shape: tuple[int, ...] = ()
    dtype: str = ""
    bytes: float = 0.0  # moved per call (read + write)
    floor_ms: float = 0.0  # the physical floor: bytes over the measured copy bandwidth
    stop: str = ""  # why the timing rounds stopped
    thresholds: Thresholds | None = None
    baselines: dict[str, TimingView] = field(default_factory=dict)
    impls: dict[str, TimingView] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Any) -> PerfCase:
        d = _obj(d)
        shape = d.get("shape") if isinstance(d.get("shape"), list) else []
        return cls(
            tuple(x for x in shape if isinstance(x, int) and not isinstance(x, bool)),
            str(d.get("dtype", "")),
            number(d.get("bytes")),
            number(d.get("floor_ms")),
            str(d.get("stop", "")),
            Thresholds.from_json(d.get("thresholds")),
            {str(k): TimingView.from_json(v) for k, v in _obj(d.get("baselines")).items()},
            {str(k): TimingView.from_json(v) for k, v in _obj(d.get("impls")).items()},
        )

    def timing(self, name: str) -> TimingView | None:
        """An implementation's timing, else a baseline's."""
        return self.impls.get(name) or self.baselines.get(name)


@dataclass(frozen=True)
class PerfSummary:
    """What the performance stage measured (Grade.perf, results.json extra_data.performance), typed: the device,
    the measured copy bandwidth, the first calls' cost and each perf case's timings (TimingView).

    Parsed once: from the stage's dict where the pipeline receives it, from results.json where a grade is read back
    (from_json); written once, by Grade.to_json (to_json). `raw` is that JSON form, kept whole for the fields no
    report reads (rounds, wall times, the baseline record) and for their order, so that results.json keeps every
    byte; it is never parsed again: with_first_calls() updates the typed fields and the JSON form together."""

    cases: dict[str, PerfCase] = field(default_factory=dict)
    device_name: str | None = None
    torch: str | None = None
    copy_bytes_per_s: float = 0.0
    first_call_s: float | None = None
    first_call_overlapped_s: float | None = None
    # case -> baseline -> seconds: the baselines' first calls made while the correctness stage ran
    baseline_first_calls_s: dict[str, dict[str, float]] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Any) -> PerfSummary:
        d = _obj(d)
        dev = _obj(d.get("device"))
        name, torch = dev.get("name"), dev.get("torch")
        return cls(
            {str(k): PerfCase.from_json(v) for k, v in _obj(d.get("cases")).items() if isinstance(v, dict)},
            None if name is None else str(name),
            None if torch is None else str(torch),
            number(d.get("copy_bytes_per_s")),
            _float_or_none(d.get("first_call_s")),
            _float_or_none(d.get("first_call_overlapped_s")),
            {
                str(c): {str(b): number(s) for b, s in _obj(bs).items()}
                for c, bs in _obj(d.get("baseline_first_calls_s")).items()
            },
            d,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    def with_first_calls(self) -> PerfSummary:
        """The summary with what the first calls (Triton JIT, torch.compile) cost: first_call_s inside the timing
        phase, first_call_overlapped_s for the baselines' made while correctness ran (baseline_first_calls_s;
        those cases' baselines are not counted again)."""
        early = self.baseline_first_calls_s
        first = sum(
            t.compile_s or 0.0
            for name, c in self.cases.items()
            for t in (*([] if name in early else c.baselines.values()), *c.impls.values())
        )
        overlapped = sum(v for c in early.values() for v in c.values())
        raw = {**self.raw, "first_call_s": first, "first_call_overlapped_s": overlapped}
        return replace(self, first_call_s=first, first_call_overlapped_s=overlapped, raw=raw)
