"""Failure-pattern hints (issue 18 item 2, grader/correctness/patterns.py): each pattern found from the wrong elements' positions
and values, as a typed Finding (code, severity hint) whose text names the case, one index and expected vs got.

Two levels: the detectors on tensors made here (every pattern, and outputs whose errors have no pattern get none),
and live grades of broken submissions of each kind (tests/data/problems/glu/broken/), on the few cases that show
the pattern (a partial grade, --case)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from grader.correctness import patterns
from grader.problem import hints
from grader.results import HINT, Code

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "data" / "problems" / "glu" / "broken"
WORDS = hints.load("glu")
AT = re.compile(r"at index \(([\d, ]+)\): expected (\S+), got (\S+)")


def glu(x: torch.Tensor) -> torch.Tensor:
    a, b = x.to(torch.float64).chunk(2, dim=-1)
    return a * torch.sigmoid(b)


def detect(x, got, dtype=torch.float32, **kw):
    truth = glu(x)
    got = got.to(torch.float64)
    bad = ~((got - truth).abs() <= 1e-6 + 1e-5 * truth.abs())
    return patterns.detect("case/x", x, truth, got, bad, out_cols="half", dtype=dtype, words=WORDS, **kw)


def codes(fs) -> list[Code]:
    return [f.code for f in fs]


def _index(text: str) -> tuple[int, ...]:
    m = AT.search(text)
    assert m, text
    return tuple(int(i) for i in m.group(1).split(","))


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(6, 40, generator=torch.Generator().manual_seed(1))


def test_overflow_only_where_the_gate_is_large(x):
    x[2, 25] = 95.0  # b at (2, 5)
    x[4, 39] = 120.0  # b at (4, 19)
    got = glu(x).clone()
    got[2, 5] = got[4, 19] = float("nan")  # what exp(b) / (1 + exp(b)) gives there
    (f,) = detect(x, got)
    assert f.code == Code.HINT_OVERFLOW and f.severity == HINT
    assert f.text.startswith("case/x: 2 outputs are NaN/inf") and _index(f.text) == (2, 5)
    assert "b (the second half) is 95 there" in f.text and "1 / (1 + exp(-b))" in f.text
    # A NaN where the gate is small is something else: no overflow hint.
    got[0, 0] = float("nan")
    assert Code.HINT_OVERFLOW not in codes(detect(x, got))


def test_poison_is_not_an_overflow(x):
    x[1, 30] = 100.0
    got = glu(x).clone()
    got[1, 10] = float("nan")
    poison = torch.zeros_like(got, dtype=torch.bool)
    poison[1, 10] = True  # never written: the all-ones NaN, not a computed one
    assert Code.HINT_OVERFLOW not in codes(detect(x, got, poison=poison))


def test_row_stride_from_the_unpadded_reading():
    base = torch.randn(6, 48, generator=torch.Generator().manual_seed(2))
    x = base[:, :40]  # padded rows: row stride 48, width 40
    unpadded = base.reshape(-1)[: x.numel()].view(x.shape)
    got = glu(unpadded)  # row 0 right, the rest read at row * 40
    fs = detect(x, got, unstrided=glu(unpadded))
    assert codes(fs) == [Code.HINT_ROW_STRIDE], [f.text for f in fs]
    assert _index(fs[0].text) == (1, 0) and "not padded" in fs[0].text and "row_stride" in fs[0].text
    # The same positions with other values: the values decide, and everything after row 0 is the flat tail.
    other = glu(x).clone()
    other[1:] += 1.0
    assert codes(detect(x, other, unstrided=glu(unpadded))) == [Code.HINT_TAIL]
    # Rows wrong past the first but not as a suffix (row 3 right), in a padded case: the row stride.
    other[3] = glu(x)[3]
    assert codes(detect(x, other, unstrided=glu(unpadded))) == [Code.HINT_ROW_STRIDE]


def test_flat_tail_and_row_tail(x):
    got = glu(x).clone()
    got.view(-1)[100:] = 7.0  # the last 20 of 120 outputs
    (f,) = detect(x, got)
    assert f.code == Code.HINT_TAIL and "last 20 of 120" in f.text and _index(f.text) == (5, 0)
    got = glu(x).clone()
    got[:, 18:] = 7.0  # the last 2 columns of every row
    (f,) = detect(x, got)
    assert f.code == Code.HINT_ROW_TAIL and "columns 18 to 19" in f.text and _index(f.text) == (0, 18)


def test_values_equal_an_operand_or_a_named_mistake(x):
    a, b = x.chunk(2, dim=-1)
    (f,) = detect(x, a.clone())
    assert f.code == Code.HINT_FORMULA and "equal a (the first half" in f.text and _index(f.text) == (0, 0)
    mistakes = {"swapped": b.double() * torch.sigmoid(a.double())}
    (f,) = detect(x, (b * torch.sigmoid(a)).clone(), mistakes=mistakes)
    assert f.code == Code.HINT_FORMULA and "b * sigmoid(a) (the halves swapped)" in f.text
    # Without the problem's words the operand is named generically; the detector does not know GLU.
    truth = glu(x)
    bad = torch.ones_like(truth, dtype=torch.bool)
    (f,) = patterns.detect("c", x, truth, a.double(), bad, out_cols="half", dtype=torch.float32)
    assert "the first operand" in f.text


def test_errors_without_a_pattern_get_no_hint(x):
    got = glu(x) * (1 + 1e-3 * torch.randn(x.shape[0], 20, generator=torch.Generator().manual_seed(3)).double())
    assert detect(x, got) == []


def test_low_precision_finding_names_the_twin_case():
    f = patterns.low_precision("odd/float16", (0, 3), 0.5, 0.4995, "odd/float32", WORDS)
    assert f.code == Code.HINT_LOW_PRECISION and f.severity == HINT
    assert f.text.startswith("odd/float16: wrong values while odd/float32") and "at index (0, 3)" in f.text
    assert "float32" in f.text and "cast once" in f.text


# ------------------------------------------------------------------------------------------------------------
# live grades: each pattern from a broken submission of that kind, on the cases that show it

LIVE = [
    # (submission, --case globs, {case: code})
    ("overflowing_sigmoid", ("saturating_gates/float32", "inf_nan/float32"),
     {"saturating_gates/float32": Code.HINT_OVERFLOW, "inf_nan/float32": Code.HINT_OVERFLOW}),
    ("ignores_row_stride", ("strided_*",),
     {"strided_rows/float32": Code.HINT_ROW_STRIDE, "strided_rows/bfloat16": Code.HINT_ROW_STRIDE,
      "strided_3d/float32": Code.HINT_ROW_STRIDE}),
    ("missing_mask", ("odd_h_1001/float32", "rows_127/float32"),
     {"odd_h_1001/float32": Code.HINT_TAIL, "rows_127/float32": Code.HINT_TAIL}),
    ("partial_output", ("rows_129/float32",), {"rows_129/float32": Code.HINT_TAIL}),
    ("row_tail", ("odd_h_1001/float32", "rows_129/bfloat16"),
     {"odd_h_1001/float32": Code.HINT_ROW_TAIL, "rows_129/bfloat16": Code.HINT_ROW_TAIL}),
    ("fp16_through_bf16", ("odd_h_1001/*", "batched_3d/*"),
     {"odd_h_1001/float16": Code.HINT_LOW_PRECISION, "batched_3d/float16": Code.HINT_LOW_PRECISION}),
    ("swapped_halves", ("rows_127/float32",), {"rows_127/float32": Code.HINT_FORMULA}),
    ("forgets_gate", ("odd_h_1001/float32",), {"odd_h_1001/float32": Code.HINT_FORMULA}),
    ("gate_only", ("rows_127/float32",), {"rows_127/float32": Code.HINT_FORMULA}),
]
WORDS_OF = {"swapped_halves": "halves swapped", "forgets_gate": "without the gate", "gate_only": "the gate alone"}
FAST = {"swapped_halves"}  # one live grade in the fast tier (~5 s); the others are each a partial grade of 5-15 s


@pytest.mark.parametrize("name, cases, want", [
    pytest.param(*row, marks=() if row[0] in FAST else pytest.mark.slow, id=row[0]) for row in LIVE
])
def test_each_hint_from_a_broken_submission_of_its_kind(grade_dir, name, cases, want):
    g = grade_dir(BROKEN / name, cases=cases)
    assert g.partial == list(cases) and not g.official
    by_case = {t.extra["case"]: t for t in g.tests if t.stage == "correctness"}
    for case, code in want.items():
        t = by_case[case]
        assert t.state == "failed", t.output
        hinted = [f for f in t.findings if f.code == code]
        assert hinted and hinted[0].severity == HINT, (case, [f.code for f in t.findings], t.output)
        text = hinted[0].text
        assert text.startswith(f"{case}: ") and AT.search(text), text
        # The index and values are the output's own: the expected value is the case's truth at that index.
        assert "hint: " + text in t.output
        if name in WORDS_OF:
            assert WORDS_OF[name] in text, text
    # Passing cases carry no hint.
    assert not [t.name for t in by_case.values() if t.state == "passed" and t.findings]


# ------------------------------------------------------------------------------------------------------------
# issue 40 item 6: hints ranked by evidence, premises checked against the source, fp32 through a 16-bit type


def _special(x: torch.Tensor) -> torch.Tensor:
    """x with +inf in b at a few places (the inf_nan cases' input)."""
    x = x.clone()
    x[0, 21] = x[3, 30] = float("inf")
    return x


def test_swapped_halves_outranks_an_overflow_that_came_from_an_input_inf(x):
    # b * sigmoid(a) on an input whose b holds +inf: inf where the answer (a) is finite, right where b is large,
    # and every other wrong value is the swapped formula. The formula explains nearly all; the "overflow" is the
    # input's own inf, so it comes after.
    x = _special(x)
    a, b = x.chunk(2, dim=-1)
    got = b.double() * torch.sigmoid(a.double())
    fs = detect(x, got, mistakes={"swapped": got})
    assert codes(fs) == [Code.HINT_FORMULA, Code.HINT_OVERFLOW], [f.text for f in fs]
    assert "halves swapped" in fs[0].text


def test_a_kernel_without_exp_gets_no_overflow_hint(x):
    x = _special(x)
    a, b = x.chunk(2, dim=-1)
    got = b.double() * torch.sigmoid(a.double())
    fs = detect(x, got, mistakes={"swapped": got}, calls=frozenset({"load", "store", "sigmoid", "arange"}))
    assert codes(fs) == [Code.HINT_FORMULA], [f.text for f in fs]
    # A source that calls exp keeps the premise: the overflow hint stays (ranked by its evidence).
    fs = detect(x, got, mistakes={"swapped": got}, calls=frozenset({"exp", "load"}))
    assert Code.HINT_OVERFLOW in codes(fs)


def test_source_calls_reads_the_names_a_file_calls(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("import triton.language as tl\ndef k(p):\n    return tl.sigmoid(tl.load(p))\n")
    assert patterns.source_calls(f) == {"sigmoid", "load"}
    f.write_text("def (:\n")  # does not parse: no premise judged
    assert patterns.source_calls(f) is None
    f.write_text("x = 1\n" * (patterns.MAX_SOURCE_BYTES // 6 + 1))  # past the cap: not read further
    assert patterns.source_calls(f) is None


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_float32_through_a_16_bit_type(x, half):
    got = glu(x).to(torch.float32).to(half).double()  # computed, then rounded through the 16-bit type
    fs = detect(x, got)
    assert codes(fs)[0] == Code.HINT_HALF_INTERMEDIATE, [f.text for f in fs]
    name = "bfloat16" if half == torch.bfloat16 else "float16"
    assert f"the wrong float32 outputs are {name} values" in fs[0].text and _index(fs[0].text)
    assert "float32" in fs[0].text.split(". ", 1)[1]
    # A 16-bit case itself, or float32 values that are not 16-bit values, get no such hint.
    assert Code.HINT_HALF_INTERMEDIATE not in codes(detect(x, got, dtype=half))
    noisy = glu(x) * (1 + 1e-3 * torch.randn(6, 20, generator=torch.Generator().manual_seed(3)).double())
    assert Code.HINT_HALF_INTERMEDIATE not in codes(detect(x, noisy))
