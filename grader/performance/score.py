"""Speed scoring: thresholds from baselines measured in the same run, a log-time credit curve, and the
physical floor. Pure functions of numbers: tested on CPU with synthetic timings.

The curve (all times in ms, each anchor multiplied by 1 + margin, in the student's favour):
    t >= zero_at (manual)                 -> 0
    zero_at > t > partial_at (eager)      -> log-time interpolation 0 .. partial_credit
    partial_at >= t > full_at             -> log-time interpolation partial_credit .. 1
    t <= full_at (fastest of compiled, eager) -> 1
Log time because speedups multiply: going from 2x slower to 1x earns what going from 1x to 0.5x would.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from grader.problem.spec import Curve


@dataclass(frozen=True)
class Thresholds:
    zero_ms: float
    partial_ms: float
    partial_credit: float
    full_ms: float
    margin: float
    sources: dict[str, float]  # baseline name -> its measured median (ms), for the report

    def describe(self) -> str:
        src = ", ".join(f"{k} {v:.4g} ms" for k, v in self.sources.items())
        return (
            f"0 credit at >= {self.zero_ms:.4g} ms, {self.partial_credit:g} at {self.partial_ms:.4g} ms, "
            f"full at <= {self.full_ms:.4g} ms (margin {100 * self.margin:g}%; baselines: {src})"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def thresholds(curve: Curve, margin: float, baseline_ms: dict[str, float]) -> Thresholds:
    """Anchor times from this run's baseline medians. Anchors are made monotone (zero >= partial >= full)."""
    need = {curve.zero_at, curve.partial_baseline, *curve.full_at}
    missing = sorted(need - set(baseline_ms))
    if missing:
        raise ValueError(f"baseline times missing for {', '.join(missing)}")
    k = 1.0 + margin
    full = min(baseline_ms[b] for b in curve.full_at) * k
    partial = max(baseline_ms[curve.partial_baseline] * k, full)
    zero = max(baseline_ms[curve.zero_at] * k, partial)
    return Thresholds(zero, partial, curve.partial_credit, full, margin, {b: baseline_ms[b] for b in sorted(need)})


def _interp(t: float, slow: float, fast: float, c_slow: float, c_fast: float) -> float:
    if slow <= fast:  # degenerate segment: treat as a step at `fast`
        return c_fast if t <= fast else c_slow
    f = math.log(slow / t) / math.log(slow / fast)
    return c_slow + (c_fast - c_slow) * min(1.0, max(0.0, f))


def credit(t_ms: float, th: Thresholds) -> float:
    """Fraction of the case's points earned at time t_ms (0..1)."""
    if not (t_ms > 0) or math.isnan(t_ms):
        return 0.0
    if t_ms <= th.full_ms:
        return 1.0
    if t_ms >= th.zero_ms:
        return 0.0
    if th.partial_ms <= th.full_ms:
        # The partial baseline is itself the full-credit one (eager fastest): one log-time ramp 0 .. 1,
        # so that the credit never jumps from 1 to partial_credit at a single point.
        return _interp(t_ms, th.zero_ms, th.full_ms, 0.0, 1.0)
    if t_ms <= th.partial_ms:
        return _interp(t_ms, th.partial_ms, th.full_ms, th.partial_credit, 1.0)
    return _interp(t_ms, th.zero_ms, th.partial_ms, 0.0, th.partial_credit)


def physical_floor_ms(bytes_moved: int, copy_bytes_per_s: float, slack: float = 0.05) -> float:
    """Fastest possible time: the bytes the op must move at the measured copy bandwidth, less a small slack."""
    return bytes_moved / copy_bytes_per_s * 1e3 * (1.0 - slack)


def below_floor(t_ms: float, floor_ms: float) -> bool:
    """A time under the physical floor cannot be real: the work was skipped, cached or hidden."""
    return t_ms < floor_ms
