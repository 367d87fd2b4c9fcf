"""Unit tests of grader.problem.inputs (what every kernel is fed) and grader.correctness.check (how its output is judged)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from grader.correctness import check
from grader.problem import inputs
from grader.problem.spec import Case, Tolerance

INF, NAN = math.inf, math.nan


def runnable(problem) -> list[Case]:
    return [c for c in problem.cases if not c.gpu_only]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return check.same_values(a, b)


# ------------------------------------------------------------------------------------------------------------
# inputs


def test_inputs_are_reproducible_per_seed_and_secret(problem):
    for c in runnable(problem):
        if math.prod(c.shape) == 0:
            continue
        x = inputs.make_input(c, "cpu", secret=7)
        assert same(x, inputs.make_input(c, "cpu", secret=7)), c.name
        assert not same(x, inputs.make_input(c, "cpu", secret=8)), f"{c.name}: the secret must change the input"
        assert not same(x, inputs.make_input(c, "cpu", secret=7, salt="perf0")), f"{c.name}: the salt must change it"


def test_case_seeds_give_different_inputs():
    a = inputs.make_input(Case("a", (8, 64), "float32", seed=1), "cpu")
    b = inputs.make_input(Case("b", (8, 64), "float32", seed=2), "cpu")
    assert not same(a, b)


def test_mix_seed_depends_on_every_part():
    s = inputs.mix_seed(1, 2, "x")
    assert 0 <= s < 2**63
    assert len({s, inputs.mix_seed(2, 2, "x"), inputs.mix_seed(1, 3, "x"), inputs.mix_seed(1, 2, "y")}) == 4


def test_inputs_have_the_case_shape_and_dtype(problem):
    for c in runnable(problem):
        x = inputs.make_input(c, "cpu")
        assert tuple(x.shape) == c.shape, c.name
        assert x.dtype == inputs.TORCH_DTYPES[c.dtype], c.name
        assert x.stride(-1) == 1, c.name


def test_inputs_are_never_all_zeros(problem):
    for c in runnable(problem):
        if math.prod(c.shape):
            assert bool((inputs.make_input(c, "cpu") != 0).any()), c.name
    # The smallest inputs, over many seeds and every dtype and distribution.
    for dist in ("normal", "uniform", "saturating", "special"):
        for dt in ("float32", "float16", "bfloat16"):
            for seed in range(50):
                x = inputs.make_input(Case("t", (1, 2), dt, dist=dist, seed=seed), "cpu")
                assert bool((x != 0).any()), (dist, dt, seed)


def test_padded_inputs_are_views_with_random_padding(problem):
    padded = [c for c in runnable(problem) if c.pad]
    assert padded, "the spec has no padded case"
    for c in padded:
        x = inputs.make_input(c, "cpu")
        cols = c.shape[-1]
        assert x._base is not None, f"{c.name}: must be a view into a wider buffer, not a copy"
        assert x.stride(-1) == 1 and x.stride(-2) == cols + c.pad, (c.name, x.stride())
        assert not x.is_contiguous()
        base = x._base
        assert base.shape[-1] == cols + c.pad
        assert base.data_ptr() == x.data_ptr()
        pad = base[..., cols:].float()
        assert bool((pad != 0).any()), f"{c.name}: padding must not be zeros"
        assert float(pad.std()) > 0.1, f"{c.name}: padding must be random, not a constant"


def test_special_inputs_hold_inf_and_nan_in_both_halves(problem):
    special = [c for c in runnable(problem) if c.dist == "special"]
    assert special, "the spec has no special case"
    for c in special:
        x = inputs.make_input(c, "cpu").float()
        assert bool(torch.isnan(x).any()), c.name
        assert bool((x == INF).any()) and bool((x == -INF).any()), c.name
        h = c.shape[-1] // 2
        for half in (x[..., :h], x[..., h:]):
            assert bool((~torch.isfinite(half)).any()), c.name
        assert float(torch.isfinite(x).float().mean()) > 0.9, f"{c.name}: most entries stay finite"


def test_saturating_inputs_are_large(problem):
    sat = [c for c in runnable(problem) if c.dist == "saturating"]
    assert sat, "the spec has no saturating case"
    for c in sat:
        x = inputs.make_input(c, "cpu").float()
        assert float(x.abs().min()) >= 80.0, c.name
        assert float(x.abs().max()) <= 120.0, c.name
        assert bool((x > 0).any()) and bool((x < 0).any()), f"{c.name}: both signs"


def test_uniform_inputs_range():
    x = inputs.make_input(Case("u", (64, 256), "float32", dist="uniform"), "cpu")
    assert -6.0 <= float(x.min()) and float(x.max()) <= 6.0
    assert float(x.min()) < -5.0 and float(x.max()) > 5.0


def test_unknown_dist_is_an_error():
    with pytest.raises(ValueError):
        inputs.make_input(Case("t", (1, 2), "float32", dist="cauchy"), "cpu")


def test_zero_row_inputs():
    x = inputs.make_input(Case("z", (0, 64), "bfloat16"), "cpu")
    assert tuple(x.shape) == (0, 64) and x.dtype == torch.bfloat16


# ------------------------------------------------------------------------------------------------------------
# check_output


def truth64(x: torch.Tensor) -> torch.Tensor:
    x64 = x.to(torch.float64)
    a, b = x64.chunk(2, dim=-1)
    return a * torch.sigmoid(b)


@pytest.fixture(scope="module")
def fp16(problem):
    x = inputs.make_input(Case("h", (64, 512), "float16", seed=3), "cpu")
    t = truth64(x)
    e = F.glu(x, dim=-1)
    normal = torch.isfinite(t) & (t.abs() >= torch.finfo(torch.float16).tiny)
    eager_rel = float(((e.double() - t).abs()[normal] / t.abs()[normal]).max())
    r = max(eager_rel, check.UNIT_ROUNDOFF[torch.float16])
    return {"x": x, "truth": t, "eager": e, "r": r, "tol": problem.tolerances["float16"]}


def judge(out, d, **kw) -> check.Verdict:
    return check.check_output(out, d["truth"], tol=d["tol"], dtype=torch.float16, eager_out=d["eager"], **kw)


def test_eager_level_fp16_error_passes(fp16):
    assert fp16["tol"].eager_factor is not None, "fp16 is expected to use the eager-relative rule"
    v = judge(fp16["eager"], fp16)
    assert v.ok, v.text()
    # Anything up to the documented eager_factor passes; the bound scales with eager's own error.
    v = judge(fp16["truth"] * (1 + 0.9 * fp16["tol"].eager_factor * fp16["r"]), fp16)
    assert v.ok, v.text()


def test_four_times_eager_error_fails(fp16):
    v = judge(fp16["truth"] * (1 + 2 * fp16["tol"].eager_factor * fp16["r"]), fp16)
    assert not v.ok
    assert v.summary.startswith("wrong values")
    assert "eager rel err" in v.text()


def test_nan_where_finite_expected_fails_with_the_unwritten_hint(fp16):
    """The poison (every bit set) left in an output is "never written"; a NaN arithmetic made is an overflow's."""
    out = fp16["eager"].clone()
    out.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()])[3, 5] = -1  # all-ones bytes, the poison
    v = judge(out, fp16)
    assert not v.ok
    text = v.text()
    assert "1 of " in text and "at index (3, 5)" in text
    assert "NaN: expected 0, got 1" in text
    assert "never written" in text and "overflow" not in text
    out = fp16["eager"].clone()
    out[3, 5] = NAN
    text = judge(out, fp16).text()
    assert "NaN: expected 0, got 1" in text and "never written" not in text and "overflow" in text


def test_row_stride_hint_when_row_0_is_right(fp16):
    # The verdict records the pattern (typed); the hint's words come from grader/correctness/patterns.py (tests/test_hints.py).
    out = fp16["eager"].clone()
    out[1:] = -out[1:] - 1
    v = judge(out, fp16)
    assert not v.ok and v.later_rows_only and "bad rows: " in v.text()
    assert v.bad is not None and not bool(v.bad[0].any()) and bool(v.bad[1:].any())
    assert v.first_wrong is not None and v.first_wrong[0] == (1, 0)
    out = fp16["eager"].clone()
    out[0] = -out[0] - 1
    assert not judge(out, fp16).later_rows_only


FP32 = Tolerance(rtol=1e-5, atol=1e-6)


def judge32(out, truth) -> check.Verdict:
    return check.check_output(torch.tensor(out, dtype=torch.float32), torch.tensor(truth, dtype=torch.float64), tol=FP32, dtype=torch.float32)


def test_inf_must_match_in_sign():
    assert judge32([[INF, 1.0], [-INF, 2.0]], [[INF, 1.0], [-INF, 2.0]]).ok
    v = judge32([[-INF, 1.0], [-INF, 2.0]], [[INF, 1.0], [-INF, 2.0]])
    assert not v.ok and "at index (0, 0)" in v.text()
    assert not judge32([[3.0e38, 1.0], [-INF, 2.0]], [[INF, 1.0], [-INF, 2.0]]).ok  # finite for inf
    assert not judge32([[INF, 1.0], [-INF, 2.0]], [[5.0, 1.0], [-INF, 2.0]]).ok  # inf for finite


def test_nan_must_match_nan():
    assert judge32([[NAN, 1.0]], [[NAN, 1.0]]).ok
    assert not judge32([[0.0, 1.0]], [[NAN, 1.0]]).ok
    assert not judge32([[NAN, 1.0]], [[0.5, 1.0]]).ok


def test_fp32_absolute_rule():
    assert judge32([[1.0 + 5e-6]], [[1.0]]).ok
    assert not judge32([[1.0 + 5e-5]], [[1.0]]).ok
    assert judge32([[5e-7]], [[0.0]]).ok  # atol near zero
    assert not judge32([[5e-6]], [[0.0]]).ok


def test_shape_mismatch_and_empty():
    v = check.check_output(torch.zeros(2, 3), torch.zeros(2, 4, dtype=torch.float64), tol=FP32, dtype=torch.float32)
    assert not v.ok and "shape" in v.summary
    assert check.check_output(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.float64), tol=FP32, dtype=torch.float32).ok


def test_eager_bound_never_collapses_below_unit_roundoff():
    """Where eager happens to be exact, the bound is eager_factor * u, not 0."""
    t = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    tol = Tolerance(eager_factor=2.0, atol=0.0)
    u = check.UNIT_ROUNDOFF[torch.float16]
    assert check.check_output(t * (1 + 1.5 * u), t, tol=tol, dtype=torch.float16, eager_out=t.half()).ok
    assert not check.check_output(t * (1 + 3 * u), t, tol=tol, dtype=torch.float16, eager_out=t.half()).ok


def test_saturating_bf16_bound_is_not_blown_up_by_underflow(problem):
    c = next(c for c in problem.cases if c.dist == "saturating" and c.dtype == "bfloat16")
    x = inputs.make_input(c, "cpu")
    t = truth64(x)
    wrong = (t * 1.5).to(torch.bfloat16)  # 50% off everywhere
    v = check.check_output(wrong, t, tol=problem.tolerances["bfloat16"], dtype=torch.bfloat16, eager_out=F.glu(x, dim=-1))
    assert not v.ok, v.text()


# ------------------------------------------------------------------------------------------------------------
# same_values and check_meta


def test_same_values_treats_nan_as_equal():
    a = torch.tensor([NAN, 1.0, INF])
    assert check.same_values(a, a.clone())
    assert not check.same_values(a, torch.tensor([NAN, 1.0, -INF]))
    assert not check.same_values(a, torch.tensor([0.0, 1.0, INF]))
    assert not check.same_values(a, a.double()), "different dtypes are different"
    assert not check.same_values(a, a[:2]), "different shapes are different"


META = {"type": "Tensor", "shape": [4, 8], "dtype": "float16", "device_type": "cpu", "contiguous": True, "stride": [8, 1]}


def test_check_meta():
    assert check.check_meta(META, shape=(4, 8), dtype="float16", device_type="cpu").ok
    v = check.check_meta({**META, "dtype": "float32"}, shape=(4, 8), dtype="float16", device_type="cpu")
    assert not v.ok and "dtype float32, expected float16" in v.summary
    v = check.check_meta({**META, "contiguous": False, "stride": [16, 1]}, shape=(4, 8), dtype="float16", device_type="cpu")
    assert not v.ok and "not contiguous" in v.summary and "(16, 1)" in v.summary
    v = check.check_meta({**META, "shape": [4, 16]}, shape=(4, 8), dtype="float16", device_type="cpu")
    assert not v.ok and "shape (4, 16), expected (4, 8)" in v.summary
    v = check.check_meta(META, shape=(4, 8), dtype="float16", device_type="cuda")
    assert not v.ok and "device cpu, expected cuda" in v.summary
