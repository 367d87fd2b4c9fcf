"""Performance scoring on CPU with synthetic timings: grader/performance/stats.py (summaries, the stop rule),
grader/performance/score.py (thresholds, the log-time credit curve, the physical floor) and the pure parts of
grader/performance/ (bytes moved, the per-round call/verification plan). No GPU, no sleeps, a few seconds.

Baseline times are the H200 medians in the shared ANCHORS.md table (section 1, measured 2026-11-30), copied here
so the tests do not depend on a file outside the repository.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest
import torch

from grader import performance
from grader.performance import score, stats
from grader.performance.rounds import plan_round
from grader.problem.spec import Curve, Problem, load_problem

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "reference" / "glu" / "spec.yaml"

# ANCHORS.md, section 1: H200 medians in ms, keyed by the spec's perf case names.
ANCHORS_MS = {
    "lecture_16k": {  # 16384x16384 fp32
        "manual": 1.852, "eager": 0.617, "compiled": 0.374,
        "triton_1d": 0.377, "triton_2d": 0.390, "cuda_naive": 0.680, "cuda_float4": 0.391,
    },
    "llama3_8b_mlp": {  # 8192x28672 bf16
        "manual": 1.028, "eager": 0.352, "compiled": 0.425, "triton_1d": 0.167, "triton_2d": 0.175,
    },
    # Not in ANCHORS.md (its fp16 row is 4096x8192, too short to time stably): each implementation's slowest median
    # over five H200 grades (docs/performance.md#thresholds-and-credit); the staff kernels stand in for "triton_1d"
    # and "cuda_float4".
    "fp16_8k": {  # 8192x16384 fp16
        "manual": 0.6032, "eager": 0.2061, "compiled": 0.0972, "triton_1d": 0.0972, "cuda_float4": 0.0971,
    },
}
BASELINES = ("manual", "eager", "compiled")
COPY_BPS = 4.27e12  # ANCHORS.md: 8 GiB device-to-device copy, bytes read + written
ELEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def baselines_of(case: str) -> dict[str, float]:
    return {b: ANCHORS_MS[case][b] for b in BASELINES}


@pytest.fixture(scope="module")
def problem() -> Problem:
    p = load_problem(SPEC)
    assert p.performance is not None
    return p


@pytest.fixture(scope="module")
def perf_cases(problem: Problem) -> dict:
    return {c.name: c for c in problem.performance.cases}


@pytest.fixture(scope="module")
def th_fp32(problem: Problem) -> score.Thresholds:
    perf = problem.performance
    return score.thresholds(perf.curve, perf.margin, baselines_of("lecture_16k"))


# --------------------------------------------------------------------------------------------------------------
# stats.summarize
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "samples, median, lo, q1, q3",
    [
        ([1, 2, 3, 4, 5], 3.0, 1.0, 2.0, 4.0),
        ([5, 3, 1, 4, 2], 3.0, 1.0, 2.0, 4.0),  # order does not matter
        ([1, 2, 3, 4, 5, 6, 7, 8], 4.5, 1.0, 2.75, 6.25),  # inclusive (linear) quartiles
        ([2.0, 2.0], 2.0, 2.0, 2.0, 2.0),
        ([0.5, 0.1, 0.3], 0.3, 0.1, 0.2, 0.4),
    ],
)
def test_summarize_known_samples(samples, median, lo, q1, q3):
    s = stats.summarize(samples)
    assert s.n == len(samples)
    assert s.median == pytest.approx(median)
    assert s.min == pytest.approx(lo)
    assert s.q1 == pytest.approx(q1)
    assert s.q3 == pytest.approx(q3)
    assert s.iqr == pytest.approx(q3 - q1)
    assert s.mean == pytest.approx(statistics.fmean(samples))
    assert s.std == pytest.approx(statistics.stdev(samples))
    assert s.sem == pytest.approx(statistics.stdev(samples) / math.sqrt(len(samples)))
    d = s.as_dict()
    assert d["iqr"] == pytest.approx(s.iqr) and d["rel_sem"] == s.rel_sem and d["n"] == len(samples)


def test_summarize_single_sample():
    s = stats.summarize([0.42])
    assert (s.n, s.median, s.min, s.q1, s.q3, s.mean) == (1, 0.42, 0.42, 0.42, 0.42, 0.42)
    assert s.iqr == 0.0 and s.std == 0.0
    assert math.isinf(s.sem)
    assert math.isinf(s.rel_sem)


@pytest.mark.parametrize("empty", [[], (), iter(())])
def test_summarize_empty_raises(empty):
    with pytest.raises(ValueError, match="no samples"):
        stats.summarize(empty)


# --------------------------------------------------------------------------------------------------------------
# Summary.rel_sem: robust standard error of the median, relative
# --------------------------------------------------------------------------------------------------------------


def noisy(n: int, center: float = 1.0, rel: float = 0.002, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1.0 + rng.uniform(-rel, rel)) for _ in range(n)]


@pytest.mark.parametrize("samples", [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7, 8], noisy(37, seed=3)])
def test_rel_sem_formula(samples):
    s = stats.summarize(samples)
    expected = 1.2533 * (s.iqr / 1.349) / math.sqrt(s.n) / s.median
    assert s.rel_sem == pytest.approx(expected, rel=1e-12)
    # known value for 1..5: IQR 2, median 3
    if list(samples) == [1, 2, 3, 4, 5]:
        assert s.rel_sem == pytest.approx(1.2533 * 2 / 1.349 / math.sqrt(5) / 3)


def test_rel_sem_shrinks_with_n():
    values = [stats.summarize(noisy(n, rel=0.02, seed=11)).rel_sem for n in (25, 100, 400, 1600)]
    for a, b in zip(values, values[1:]):
        assert b < a
        assert b == pytest.approx(a / 2, rel=0.35)  # 4x the samples: about half the SE


def test_rel_sem_is_scale_free():
    base = noisy(101, rel=0.01, seed=5)
    a = stats.summarize(base).rel_sem
    b = stats.summarize([1000.0 * x for x in base]).rel_sem
    assert b == pytest.approx(a, rel=1e-9)


def test_rel_sem_robust_to_outliers():
    samples = noisy(200, rel=0.002, seed=1)
    samples[17] = samples[99] = samples[150] = 50.0  # three huge hiccups (context switch, clock change)
    s = stats.summarize(samples)
    assert s.n == 200
    assert s.rel_sem < 0.005
    assert s.median == pytest.approx(1.0, abs=0.003)
    # the mean-based SE would never let the rule stop: the outliers dominate it
    assert s.sem / s.mean > 0.05


@pytest.mark.parametrize("samples", [[1.0], [3.5]])
def test_rel_sem_infinite_below_two_samples(samples):
    assert math.isinf(stats.summarize(samples).rel_sem)


def test_rel_sem_zero_spread_is_zero_and_nonpositive_median_is_inf():
    assert stats.summarize([2.0] * 10).rel_sem == 0.0
    assert math.isinf(stats.summarize([0.0] * 10).rel_sem)


# --------------------------------------------------------------------------------------------------------------
# StopRule.done
# --------------------------------------------------------------------------------------------------------------

RULE = stats.StopRule(rel_sem=0.005, min_n=20, max_n=400, max_seconds=8.0)


def precise(n: int, seed: int = 0) -> stats.Summary:
    return stats.summarize(noisy(n, rel=0.001, seed=seed))


def wild(n: int, seed: int = 0) -> stats.Summary:
    rng = random.Random(seed)
    return stats.summarize([rng.uniform(0.5, 1.5) for _ in range(n)])


def test_stop_rule_defaults_match_docs():
    r = stats.StopRule()
    assert (r.rel_sem, r.min_n, r.max_n, r.max_seconds) == (0.005, 100, 400, 8.0)


def test_stop_on_precision_when_all_precise_and_enough_samples():
    sums = [precise(20, seed=i) for i in range(4)]
    assert all(s.rel_sem <= RULE.rel_sem for s in sums)
    stop, why = RULE.done(sums, elapsed_s=1.0)
    assert stop
    assert "SEM" in why and "0.5%" in why


def test_no_stop_before_min_n_even_if_precise():
    sums = [precise(19, seed=1), precise(50, seed=2)]
    assert all(s.rel_sem <= RULE.rel_sem for s in sums)
    assert RULE.done(sums, elapsed_s=1.0) == (False, "")


@pytest.mark.parametrize("noisy_index", [0, 1, 2])
def test_keeps_going_if_any_one_is_noisy(noisy_index):
    sums = [precise(100, seed=i) for i in range(3)]
    sums[noisy_index] = wild(100, seed=9)
    assert sums[noisy_index].rel_sem > RULE.rel_sem
    assert RULE.done(sums, elapsed_s=1.0) == (False, "")


def test_stops_at_sample_cap_even_if_noisy():
    sums = [wild(400, seed=1), wild(401, seed=2)]
    assert all(s.rel_sem > RULE.rel_sem for s in sums)
    stop, why = RULE.done(sums, elapsed_s=1.0)
    assert stop
    assert "sample cap" in why and "400" in why


def test_sample_cap_needs_every_implementation():
    assert RULE.done([wild(400, seed=1), wild(399, seed=2)], elapsed_s=1.0) == (False, "")


@pytest.mark.parametrize("elapsed", [8.0, 8.001, 100.0])
@pytest.mark.parametrize("sums", [[], [wild(5)], [wild(5), precise(100)]])
def test_stops_at_time_cap(elapsed, sums):
    stop, why = RULE.done(sums, elapsed_s=elapsed)
    assert stop
    assert "time cap" in why and "8" in why


def test_just_under_time_cap_keeps_going():
    assert RULE.done([wild(5)], elapsed_s=7.999) == (False, "")


def test_no_summaries_never_stops_before_time_cap():
    assert RULE.done([], elapsed_s=0.0) == (False, "")


def test_custom_rule_thresholds():
    rule = stats.StopRule(rel_sem=0.05, min_n=3, max_n=10, max_seconds=1.0)
    s = stats.summarize([1.0, 1.01, 0.99, 1.0])
    assert rule.done([s], 0.0)[0] and "SEM" in rule.done([s], 0.0)[1]
    assert rule.done([wild(10)], 0.0) == (True, "sample cap (10)")
    assert rule.done([wild(3)], 1.0) == (True, "time cap (1 s)")


# --------------------------------------------------------------------------------------------------------------
# score.thresholds with the real curve from the spec
# --------------------------------------------------------------------------------------------------------------


def test_spec_curve_is_what_the_tests_assume(problem: Problem):
    perf = problem.performance
    assert perf.curve == Curve(zero_at="manual", partial_baseline="eager", partial_credit=0.5, full_at=("compiled", "eager"))
    assert perf.margin == pytest.approx(0.03)
    assert set(ANCHORS_MS) == {c.name for c in perf.cases}


@pytest.mark.parametrize(
    "case, full_from",
    [
        ("lecture_16k", "compiled"),  # compile hits the roofline on 16k^2 fp32
        ("llama3_8b_mlp", "eager"),  # compile is slower than eager here
        ("fp16_8k", "compiled"),
    ],
)
def test_thresholds_from_anchor_baselines(problem: Problem, case: str, full_from: str):
    perf = problem.performance
    base = baselines_of(case)
    k = 1.0 + perf.margin
    th = score.thresholds(perf.curve, perf.margin, base)
    assert th.full_ms == pytest.approx(min(base["compiled"], base["eager"]) * k)
    assert th.full_ms == pytest.approx(base[full_from] * k)
    assert th.partial_ms == pytest.approx(max(base["eager"] * k, th.full_ms))
    assert th.zero_ms == pytest.approx(base["manual"] * k)
    assert th.zero_ms >= th.partial_ms >= th.full_ms
    assert th.partial_credit == 0.5 and th.margin == perf.margin
    assert th.sources == base
    assert th.as_dict()["full_ms"] == th.full_ms
    assert "full at" in th.describe() and "eager" in th.describe()


def test_thresholds_fp32_values(th_fp32: score.Thresholds):
    assert th_fp32.full_ms == pytest.approx(0.374 * 1.03)
    assert th_fp32.partial_ms == pytest.approx(0.617 * 1.03)
    assert th_fp32.zero_ms == pytest.approx(1.852 * 1.03)


def test_thresholds_bf16_full_credit_at_eager(problem: Problem):
    perf = problem.performance
    th = score.thresholds(perf.curve, perf.margin, baselines_of("llama3_8b_mlp"))
    assert th.full_ms == pytest.approx(0.352 * 1.03)
    assert th.full_ms < 0.425  # not compiled's time
    assert th.partial_ms == pytest.approx(th.full_ms)  # eager is both the partial and the full anchor


@pytest.mark.parametrize(
    "base",
    [
        {"manual": 1.0, "eager": 2.0, "compiled": 0.5},  # eager slower than manual
        {"manual": 0.3, "eager": 2.0, "compiled": 1.0},  # manual fastest of all
        {"manual": 1.0, "eager": 1.0, "compiled": 1.0},  # all equal
        {"manual": 0.1, "eager": 0.2, "compiled": 0.3},  # fully reversed
    ],
)
@pytest.mark.parametrize("margin", [0.0, 0.03])
def test_thresholds_monotone_even_if_baselines_out_of_order(problem: Problem, base, margin):
    th = score.thresholds(problem.performance.curve, margin, base)
    assert th.zero_ms >= th.partial_ms >= th.full_ms > 0
    assert th.full_ms == pytest.approx(min(base["compiled"], base["eager"]) * (1 + margin))
    # and the credit curve over them stays within [0, 1] and non-increasing
    ts = [th.full_ms * 0.5 * 1.01**i for i in range(300)]
    cs = [score.credit(t, th) for t in ts]
    assert all(0.0 <= c <= 1.0 for c in cs)
    assert all(b <= a for a, b in zip(cs, cs[1:]))


def test_thresholds_partial_clamped_to_full_when_full_is_not_eager():
    curve = Curve(zero_at="manual", partial_baseline="eager", partial_credit=0.5, full_at=("compiled",))
    th = score.thresholds(curve, 0.0, {"manual": 2.0, "eager": 0.5, "compiled": 1.0})
    assert th.full_ms == 1.0 and th.partial_ms == 1.0 and th.zero_ms == 2.0


@pytest.mark.parametrize("missing", BASELINES)
def test_thresholds_missing_baseline_raises(problem: Problem, missing: str):
    base = {b: 1.0 for b in BASELINES if b != missing}
    with pytest.raises(ValueError, match=missing):
        score.thresholds(problem.performance.curve, 0.03, base)


def test_thresholds_missing_all_names_each(problem: Problem):
    with pytest.raises(ValueError) as e:
        score.thresholds(problem.performance.curve, 0.03, {"unrelated": 1.0})
    assert all(b in str(e.value) for b in BASELINES)


# --------------------------------------------------------------------------------------------------------------
# score.credit: the log-time curve
# --------------------------------------------------------------------------------------------------------------


def test_credit_full_at_and_below_full(th_fp32: score.Thresholds):
    for t in (th_fp32.full_ms, th_fp32.full_ms * 0.999, th_fp32.full_ms / 2, 1e-6):
        assert score.credit(t, th_fp32) == 1.0


def test_credit_zero_at_and_above_zero(th_fp32: score.Thresholds):
    for t in (th_fp32.zero_ms, th_fp32.zero_ms * 1.001, th_fp32.zero_ms * 10, math.inf):
        assert score.credit(t, th_fp32) == 0.0


def test_credit_exactly_partial_at_partial_anchor(th_fp32: score.Thresholds):
    assert th_fp32.full_ms < th_fp32.partial_ms < th_fp32.zero_ms
    assert score.credit(th_fp32.partial_ms, th_fp32) == th_fp32.partial_credit == 0.5


def test_credit_strictly_between_anchors(th_fp32: score.Thresholds):
    assert 0.5 < score.credit(th_fp32.partial_ms * 0.99, th_fp32) < 1.0
    assert 0.0 < score.credit(th_fp32.partial_ms * 1.01, th_fp32) < 0.5
    assert 0.0 < score.credit(th_fp32.zero_ms * 0.99, th_fp32) < 0.01


@pytest.mark.parametrize("case", list(ANCHORS_MS))
def test_credit_monotone_non_increasing_on_fine_grid(problem: Problem, case: str):
    perf = problem.performance
    th = score.thresholds(perf.curve, perf.margin, baselines_of(case))
    lo, hi = th.full_ms / 3, th.zero_ms * 3
    n = 4000
    ts = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    cs = [score.credit(t, th) for t in ts]
    assert cs[0] == 1.0 and cs[-1] == 0.0
    assert all(0.0 <= c <= 1.0 for c in cs)
    assert all(b <= a for a, b in zip(cs, cs[1:]))


def test_credit_is_log_time(th_fp32: score.Thresholds):
    """At the geometric mean of two adjacent anchors the credit is the midpoint of theirs."""
    th = th_fp32
    assert score.credit(math.sqrt(th.partial_ms * th.full_ms), th) == pytest.approx((0.5 + 1.0) / 2, abs=1e-12)
    assert score.credit(math.sqrt(th.zero_ms * th.partial_ms), th) == pytest.approx((0.0 + 0.5) / 2, abs=1e-12)
    # a quarter of the way in log time between partial and full: a quarter of the way in credit
    t = th.partial_ms ** 0.75 * th.full_ms ** 0.25
    assert score.credit(t, th) == pytest.approx(0.5 + 0.25 * 0.5, abs=1e-12)


def test_credit_log_time_with_synthetic_anchors():
    th = score.Thresholds(zero_ms=8.0, partial_ms=2.0, partial_credit=0.4, full_ms=1.0, margin=0.0, sources={})
    assert score.credit(4.0, th) == pytest.approx(0.2)  # sqrt(8 * 2)
    assert score.credit(math.sqrt(2.0), th) == pytest.approx(0.7)  # sqrt(2 * 1)
    assert score.credit(2.0, th) == pytest.approx(0.4)


@pytest.mark.parametrize("case", list(ANCHORS_MS))
def test_noise_margin_in_students_favour(problem: Problem, case: str):
    perf = problem.performance
    base = baselines_of(case)
    th = score.thresholds(perf.curve, perf.margin, base)
    best = min(base["compiled"], base["eager"])
    assert score.credit(best, th) == 1.0
    assert score.credit(best * 1.02, th) == 1.0  # 2% slower than the best baseline: within the 3% margin
    assert score.credit(best * (1 + perf.margin), th) == 1.0
    assert score.credit(best * 1.05, th) < 1.0  # 5% slower: not full credit


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -0.0, -1.0, -1e-9, -math.inf])
def test_credit_invalid_times_earn_nothing(th_fp32: score.Thresholds, bad: float):
    assert score.credit(bad, th_fp32) == 0.0


def test_credit_for_anchor_kernels_fp32(th_fp32: score.Thresholds):
    a = ANCHORS_MS["lecture_16k"]
    assert 0.9 < score.credit(a["triton_2d"], th_fp32) < 1.0  # 0.390 ms vs full at 0.385 ms
    assert 0.9 < score.credit(a["cuda_float4"], th_fp32) < 1.0
    assert score.credit(a["triton_1d"], th_fp32) == 1.0  # 0.377 ms: at the roofline
    assert score.credit(a["compiled"], th_fp32) == 1.0
    assert 0.0 < score.credit(a["cuda_naive"], th_fp32) < 0.5  # one thread per element: slower than eager
    assert 0.5 < score.credit(a["eager"], th_fp32) < 0.55  # eager itself, helped by the margin
    assert 0.0 < score.credit(a["manual"], th_fp32) < 0.02  # the manual baseline: almost nothing


def test_credit_for_anchor_triton_kernels_bf16(problem: Problem):
    perf = problem.performance
    a = ANCHORS_MS["llama3_8b_mlp"]
    th = score.thresholds(perf.curve, perf.margin, baselines_of("llama3_8b_mlp"))
    assert score.credit(a["triton_1d"], th) == 1.0
    assert score.credit(a["triton_2d"], th) == 1.0
    assert score.credit(a["eager"], th) == 1.0  # eager is the fastest baseline here
    # slower than eager, which is the full-credit anchor here: on the single 0..1 log ramp, not full credit
    assert 0.5 < score.credit(a["compiled"], th) < 1.0
    # and continuous at the full-credit anchor (no step down to partial_credit just past it)
    assert score.credit(th.full_ms * 1.0001, th) > 0.99


def test_credit_for_measured_kernels_fp16(problem: Problem):
    """fp16_8k, where compile is the fastest baseline (2.1x faster than eager): the staff kernels at its time get
    full credit, eager about half, a kernel between them on the log ramp, the manual version almost nothing."""
    perf = problem.performance
    a = ANCHORS_MS["fp16_8k"]
    th = score.thresholds(perf.curve, perf.margin, baselines_of("fp16_8k"))
    assert th.full_ms == pytest.approx(a["compiled"] * (1 + perf.margin))
    assert score.credit(a["triton_1d"], th) == 1.0
    assert score.credit(a["cuda_float4"], th) == 1.0
    assert 0.5 < score.credit(a["eager"], th) < 0.55
    between = math.sqrt(a["eager"] * a["compiled"])  # the geometric mean: three quarters on the log ramp
    assert 0.7 < score.credit(between, th) < 0.8
    assert 0.0 < score.credit(a["manual"], th) < 0.02


# --------------------------------------------------------------------------------------------------------------
# bytes moved and the physical floor
# --------------------------------------------------------------------------------------------------------------


def test_bytes_moved_matches_glu_formula_for_every_perf_case(problem: Problem):
    for case in problem.performance.cases:
        n = math.prod(case.shape)
        expected = 3 * n * ELEM_SIZE[case.dtype] // 2  # 1.5 * N * elem_size: read both halves, write one
        assert performance.bytes_moved(problem, case) == expected, case.name


def test_bytes_moved_lecture_case(problem: Problem, perf_cases: dict):
    case = perf_cases["lecture_16k"]
    assert case.shape == (16384, 16384) and case.dtype == "float32"
    assert performance.bytes_moved(problem, case) == 1.5 * 16384 * 16384 * 4 == 1_610_612_736


def test_physical_floor_lecture_case(problem: Problem, perf_cases: dict):
    b = performance.bytes_moved(problem, perf_cases["lecture_16k"])
    roofline = score.physical_floor_ms(b, COPY_BPS, slack=0.0)
    assert roofline == pytest.approx(0.377, abs=0.001)
    assert roofline == pytest.approx(b / COPY_BPS * 1e3)
    for slack in (0.0, 0.05, performance.FLOOR_SLACK):
        assert score.physical_floor_ms(b, COPY_BPS, slack=slack) == pytest.approx(roofline * (1 - slack))
    assert score.physical_floor_ms(b, COPY_BPS) == pytest.approx(roofline * 0.95)  # default slack


def test_below_floor_flags_only_impossible_times(problem: Problem, perf_cases: dict):
    b = performance.bytes_moved(problem, perf_cases["lecture_16k"])
    roofline = b / COPY_BPS * 1e3
    floor = score.physical_floor_ms(b, COPY_BPS, slack=performance.FLOOR_SLACK)
    assert floor == pytest.approx(roofline * (1 - performance.FLOOR_SLACK))
    assert score.below_floor(floor * 0.999, floor)
    assert score.below_floor(roofline * (1 - performance.FLOOR_SLACK) * 0.99, floor)
    assert score.below_floor(1e-6, floor)
    assert not score.below_floor(floor, floor)
    assert not score.below_floor(roofline, floor)
    assert not score.below_floor(roofline * 2, floor)


@pytest.mark.parametrize("case", list(ANCHORS_MS))
def test_measured_anchor_times_are_not_flagged(problem: Problem, perf_cases: dict, case: str):
    """Every real kernel in ANCHORS (compile even measured 101% of the copy bandwidth) is above the floor."""
    floor = score.physical_floor_ms(performance.bytes_moved(problem, perf_cases[case]), COPY_BPS, slack=performance.FLOOR_SLACK)
    for name, t in ANCHORS_MS[case].items():
        assert not score.below_floor(t, floor), (case, name, t, floor)


# --------------------------------------------------------------------------------------------------------------
# plan_round (grader/performance/rounds.py): the per-round call plan and what gets verified
# --------------------------------------------------------------------------------------------------------------

N_OUT_LECTURE = 16384 * 8192


def plans(seed: int, n_out: int, rounds: int, sets: int = performance.MIN_SETS) -> list[tuple[list, list]]:
    rng = random.Random(seed)
    return [plan_round(rng, n_out, first=(r == 0), sets=sets) for r in range(rounds)]


@pytest.fixture(scope="module")
def lecture_plans() -> list[tuple[list, list]]:
    return plans(1234, N_OUT_LECTURE, 60)


def test_plan_constants_are_sane():
    assert 2 <= performance.MIN_SETS <= performance.MAX_SETS
    assert performance.CALLS_PER_ROUND >= 2
    assert performance.FIRST_SAMPLE > performance.ROUND_SAMPLE > 0


@pytest.mark.parametrize("sets", [performance.MIN_SETS, performance.MAX_SETS])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_out", [N_OUT_LECTURE, 5000, 500, 1])
def test_plan_consecutive_calls_use_different_sets(seed: int, n_out: int, sets: int):
    for plan, _ in plans(seed, n_out, 50, sets):
        assert len(plan) == performance.CALLS_PER_ROUND
        ks = [k for k, _ in plan]
        assert all(0 <= k < sets for k in ks)
        assert all(a != b for a, b in zip(ks, ks[1:])), ks


def test_plan_rounds_do_not_repeat_the_last_set():
    rng = random.Random(9)
    prev = None
    for r in range(200):
        plan, _ = plan_round(rng, 5000, first=(r == 0), prev_k=prev)
        if prev is not None:
            assert plan[0][0] != prev
        prev = plan[-1][0]


def test_plan_sent_to_the_worker_carries_no_verification_hint(lecture_plans):
    # The worker sees only (set, scale) pairs; which call is checked is sent after the round.
    for plan, _ in lecture_plans:
        assert all(len(entry) == 2 and isinstance(entry[1], float) for entry in plan)


@pytest.mark.parametrize("sets", [performance.MIN_SETS, performance.MAX_SETS])
def test_plan_uses_every_set(sets):
    used = {k for plan, _ in plans(1234, N_OUT_LECTURE, 60, sets) for k, _ in plan}
    assert used == set(range(sets))


@pytest.mark.parametrize("shape,dtype,sets", [
    ((16384, 16384), torch.float32, 3),  # 1 GiB: the minimum
    ((8192, 28672), torch.bfloat16, 3),  # 448 MiB: one fits the budget, still the minimum
    ((4096, 8192), torch.float16, 8),  # 64 MiB: eight fit
    ((2048, 8192), torch.float32, 8),  # 64 MiB
    ((4096, 16384), torch.float16, 4),  # 128 MiB: four
    ((8, 64), torch.float32, 8),  # tiny: capped
])
def test_small_cases_rotate_more_input_sets_within_a_memory_budget(shape, dtype, sets):
    nbytes = shape[0] * shape[1] * torch.tensor([], dtype=dtype).element_size()
    assert performance.n_sets(nbytes) == sets
    assert performance.n_sets(nbytes) * nbytes <= max(performance.SET_BYTES, performance.MIN_SETS * nbytes)


def test_plan_scales_are_powers_of_two(lecture_plans):
    scales = [s for plan, _ in lecture_plans for _, s in plan]
    for s in scales:
        assert s in performance.SCALES
    for s in performance.SCALES:
        mant, _ = math.frexp(abs(s))
        assert s != 0 and mant == 0.5, s  # exact in fp32/fp16/bf16
    assert len(set(scales)) > 1 and any(s < 0 for s in scales)


def test_plan_exactly_one_verified_call_per_round(lecture_plans):
    for r, (plan, checks) in enumerate(lecture_plans):
        assert len(checks) == 1
        j, ck, cs, _ = checks[0]
        assert plan[j] == (ck, cs)  # the check names the set and scale that call really used
        if r == 0:
            assert j == 0  # the first timed output of each function is checked


def test_plan_verified_call_position_varies(lecture_plans):
    positions = {checks[0][0] for _, checks in lecture_plans[1:]}
    assert positions == set(range(performance.CALLS_PER_ROUND))  # a submission can't know which call is checked


@pytest.mark.parametrize("n_out", [N_OUT_LECTURE, 70_000, 5000, 1024, 1000, 1])
def test_plan_indices_in_range_and_include_tail(n_out: int):
    for plan, checks in plans(7, n_out, 4):
        (_, _, _, idx), = checks
        assert idx.dtype == torch.int64 and idx.dim() == 1
        assert int(idx.min()) >= 0 and int(idx.max()) < n_out
        tail = torch.arange(max(0, n_out - 1024), n_out)
        assert bool(torch.isin(tail, idx).all())


def test_plan_first_round_sample_larger(lecture_plans):
    sizes = [checks[0][3].numel() for _, checks in lecture_plans]
    assert sizes[0] == performance.FIRST_SAMPLE + 1024
    assert all(n == performance.ROUND_SAMPLE + 1024 for n in sizes[1:])
    assert sizes[0] > max(sizes[1:])


def test_plan_sample_capped_by_output_size():
    (_, first), (_, later) = plans(3, 5000, 2)
    assert first[0][3].numel() == 5000 + 1024
    assert later[0][3].numel() == 5000 + 1024


def test_plan_empty_output_verifies_nothing():
    for plan, checks in plans(5, 0, 5):
        assert checks == []
        assert len(plan) == performance.CALLS_PER_ROUND


def _fingerprint(ps: list[tuple[list, list]]) -> list:
    return [(plan, [(j, k, s, idx.tolist()) for j, k, s, idx in checks]) for plan, checks in ps]


def test_plan_depends_on_seed():
    a, b = plans(1, 70_000, 10), plans(2, 70_000, 10)
    assert [p for p, _ in a] != [p for p, _ in b]
    assert not torch.equal(a[1][1][0][3], b[1][1][0][3])  # the sampled indices differ too
    assert _fingerprint(plans(1, 70_000, 10)) == _fingerprint(a)  # same secret: same plan (reproducible)


def test_timer_samples_come_from_kept_outputs_and_free_them():
    # Timer.samples needs no GPU: it reads the outputs the last round kept, at indices chosen afterwards.
    from grader.child.timing import Timer

    t = object.__new__(Timer)
    outs = [torch.arange(10.0) * (j + 1) for j in range(3)]
    t.kept = {"triton": outs, "cuda": [torch.zeros(2, 3), "not a tensor"]}
    got = t.samples({"triton": [(2, torch.tensor([0, 9, 4]))], "cuda": [(1, torch.tensor([0]))]})
    assert got["triton"][0].tolist() == [0.0, 27.0, 12.0]
    assert "not a tensor" in got["cuda"][0]
    assert t.kept == {}  # outputs are freed after sampling
