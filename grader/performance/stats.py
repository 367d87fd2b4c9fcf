"""Summary statistics and the adaptive stop rule for timing samples. Pure Python: testable on CPU."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    min: float
    q1: float
    q3: float
    mean: float
    std: float
    sem: float  # standard error of the mean: std / sqrt(n)

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_sem(self) -> float:
        """Standard error of the *median*, relative to it: the stop rule's precision measure.

        Uses a robust spread (IQR / 1.349 estimates sigma for normal data) so that a few outliers (a context
        switch, a clock change) do not keep the rule from stopping; 1.2533 sigma / sqrt(n) is the median's SE.
        """
        if self.median <= 0 or self.n < 2:
            return math.inf
        return 1.2533 * (self.iqr / 1.349) / math.sqrt(self.n) / self.median

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "iqr": self.iqr, "rel_sem": self.rel_sem}


def summarize(samples: Sequence[float]) -> Summary:
    xs = sorted(float(s) for s in samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return Summary(1, xs[0], xs[0], xs[0], xs[0], xs[0], 0.0, math.inf)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    std = statistics.stdev(xs)
    return Summary(n, statistics.median(xs), xs[0], q1, q3, statistics.fmean(xs), std, std / math.sqrt(n))


@dataclass(frozen=True)
class StopRule:
    rel_sem: float = 0.005  # stop when SEM/median <= 0.5% ...
    min_n: int = 100  # ... and at least this many samples (20 rounds of 5: samples within a round share a clock
    # state, so a few rounds can agree with each other and still miss the run-to-run drift: 6 rounds spread 1.8%)
    max_n: int = 400  # ... or at this many ...
    max_seconds: float = 8.0  # ... or when the case's timing budget is spent

    def done(self, summaries: Sequence[Summary], elapsed_s: float) -> tuple[bool, str]:
        """(stop?, why) for a set of implementations timed together: all must be precise enough."""
        if elapsed_s >= self.max_seconds:
            return True, f"time cap ({self.max_seconds:g} s)"
        if summaries and all(s.n >= self.max_n for s in summaries):
            return True, f"sample cap ({self.max_n})"
        if summaries and all(s.n >= self.min_n and s.rel_sem <= self.rel_sem for s in summaries):
            return True, f"SEM/median <= {100 * self.rel_sem:g}%"
        return False, ""
