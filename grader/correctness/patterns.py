"""Failure patterns of one correctness case: what the wrong elements' positions and values say about the bug.

Why: docs/architecture.md, "Modules: the why", grader/correctness/patterns.py.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import torch

from grader import textscan
from grader.problem import hints as problem_hints
from grader.results import HINT, Code, Finding

# |x| from which exp(x) overflows in half precision (exp(11.1) > 65504); float32 overflows at 88.7. An overflow
# hint needs every non-finite wrong output to sit where an input operand is at least this large.
LARGE = 11.0
MATCH_SHARE = 0.95  # an alternative explains the values when it matches this share of the wrong finite elements
MATCH_UNITS = 16.0  # ... within atol + this many unit roundoffs of the case's dtype (relative to the alternative)
UNIT = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}

GENERIC = {
    Code.HINT_OVERFLOW: "An intermediate overflows where that input is large (exp of a large value is inf, and "
    "inf/inf or inf-inf is NaN): use a form that saturates instead.",
    Code.HINT_ROW_STRIDE: "Row 0 is right and later rows are wrong: a row starts at row * row_stride (the input's "
    "stride between rows, in elements), not at row * (the row's width).",
    Code.HINT_TAIL: "Only the end of the output is wrong: launch enough programs/blocks to cover every output "
    "element (cdiv(n, BLOCK)) and mask the last one.",
    Code.HINT_ROW_TAIL: "Only the last columns of rows are wrong: a vectorized or blocked loop over a row needs a "
    "scalar tail for the columns left over.",
    Code.HINT_LOW_PRECISION: "Only the 16-bit dtypes are wrong while float32 on the same input is right: load, "
    "compute in float32, and cast once on the store, to the output's own dtype.",
    Code.HINT_FORMULA: "Check the formula, and which part of the input each operand is.",
    Code.HINT_HALF_INTERMEDIATE: "A float32 result went through a 16-bit type (a .to(tl.float16), a 16-bit "
    "intermediate or constant): keep every step of a float32 case in float32, and store y_ptr.dtype.element_ty.",
}
HALVES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}  # bfloat16 first: its values are float16's too
FIRST, SECOND = "first operand", "second operand"  # the operands' names in hints.yaml's `formula` section
# The overflow hint's premise is an exp the kernel computes itself: a source that calls none of these (tl.sigmoid
# only) contradicts it, and the hint is not shown.
EXP_CALLS = frozenset({"exp", "exp2", "expm1", "expf", "exp2f", "__expf"})
MAX_SOURCE_BYTES = 256 * 1024  # a Triton file parsed for its calls (static.py's cap for Python)


def source_calls(path: Path | str) -> frozenset[str] | None:
    """The names a Triton submission's source calls (tl.exp -> 'exp', libdevice.exp2 -> 'exp2'), parsed with `ast`
    from at most MAX_SOURCE_BYTES of the file; None when it cannot be read or parsed (no premise is then judged)."""
    try:
        src, cut = textscan.read_capped(path, MAX_SOURCE_BYTES)
        if cut:
            return None
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            out.add(name)
    return frozenset(out)


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _words(words: Mapping[str, object], code: Code) -> str:
    return problem_hints.text(dict(words), "pattern", str(code)) or GENERIC[code]


def _finding(
    code: Code,
    case: str,
    what: str,
    at: tuple[int, ...],
    truth: torch.Tensor,
    got: torch.Tensor,
    words: Mapping[str, object],
    extra: str = "",
) -> Finding:
    text = (
        f"{case}: {what}; at index {at}: expected {_fmt(float(truth[at]))}, got {_fmt(float(got[at]))}{extra}. "
        f"{_words(words, code)}"
    )
    return Finding(code, text, HINT)


def operands(x: torch.Tensor, out_cols: str) -> dict[str, torch.Tensor]:
    """The input elements each output element reads, shaped like the output: for out_cols "half", output (.., c)
    reads x[.., c] (the first operand) and x[.., h + c] (the second); for "same", x[.., c]."""
    if out_cols == "half":
        h = x.shape[-1] // 2
        return {FIRST: x[..., :h], SECOND: x[..., h : 2 * h]}
    return {FIRST: x}


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0].tolist())


def _half_intermediate(
    case: str,
    dtype: torch.dtype,
    truth: torch.Tensor,
    got: torch.Tensor,
    wrong: torch.Tensor,
    n_bad: int,
    words: Mapping[str, object],
) -> list[tuple[float, Finding]]:
    """A float32 case whose wrong outputs are the answer rounded to a 16-bit type: the math went through that type.
    Random float32 results are 16-bit values with odds of about 2^-13 each (bfloat16: 2^-16): no accident."""
    if dtype != torch.float32 or not bool(wrong.any()):
        return []
    w, t = got[wrong], truth[wrong]
    for half, name in HALVES.items():
        # Exact 16-bit values within a few of that type's roundings of the answer: a constant (7.0, a stale 0)
        # is a 16-bit value too, but not the answer rounded.
        near = (w - t).abs() <= 4 * UNIT[half] * t.abs()
        share = float(((w.to(half).to(torch.float64) == w) & near).double().mean())
        if share >= MATCH_SHARE:
            at = _first(wrong)
            rel = float(((got - truth).abs() / truth.abs().clamp_min(1e-30))[wrong].max())
            what = (
                f"the wrong float32 outputs are {name} values ({100 * share:.0f}% of {int(wrong.sum())} exactly), "
                f"off by up to {rel:.2g} relative ({name} rounds at {UNIT[half]:.2g})"
            )
            f = _finding(Code.HINT_HALF_INTERMEDIATE, case, what, at, truth, got, words)
            return [(share * int(wrong.sum()) / n_bad, f)]
    return []


def detect(
    case: str,
    x: torch.Tensor,
    truth: torch.Tensor,
    got: torch.Tensor,
    bad: torch.Tensor,
    *,
    out_cols: str,
    dtype: torch.dtype,
    poison: torch.Tensor | None = None,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    words: Mapping[str, object] | None = None,
    unstrided: torch.Tensor | None = None,
    calls: frozenset[str] | None = None,
) -> list[Finding]:
    """The patterns of one wrong case. x: the input (its logical view, padding excluded); truth: float64; got: the
    output as float64; bad: where it is outside tolerance; poison: where the output still holds the grader's poison
    (never written); mistakes: name -> what a known wrong formula gives on x (the reference's `mistakes`);
    unstrided: for an input with padded rows, the truth of the same buffer read as if rows were not padded (what a
    kernel that ignores the row stride computes); calls: the names the kernel's source calls (`source_calls`), to
    drop a hint whose premise the source contradicts (None: not known).

    The findings come most evident first: by the share of the wrong elements each explains (a formula that the
    wrong values equal explains nearly all; an overflow only its NaN/inf, and half as surely where the large operand
    is itself an inf of the input, which any formula propagates). The report shows them in this order."""
    words = words or {}
    if not bool(bad.any()) or truth.shape != got.shape:
        return []
    out: list[tuple[float, Finding]] = []  # (evidence: the share of the wrong elements it explains, finding)
    n_bad = int(bad.sum())
    ops = {k: v.to(torch.float64) for k, v in operands(x, out_cols).items() if v.shape == truth.shape}
    finite_t = torch.isfinite(truth)
    unwritten = poison if poison is not None else torch.zeros_like(bad)

    # NaN/inf computed (not the poison) where the answer is finite, and all of them where an operand is large.
    nonfinite = bad & finite_t & ~torch.isfinite(got) & ~unwritten
    exp_free = calls is not None and not (calls & EXP_CALLS)
    if bool(nonfinite.any()) and not exp_free:
        for name in (SECOND, FIRST):
            op = ops.get(name)
            if op is None:
                continue
            large = op.abs() >= LARGE
            if bool(large[nonfinite].all()):
                at = _first(nonfinite)
                n = int(nonfinite.sum())
                said = problem_hints.text(dict(words), "formula", name) or f"the {name}"
                what = f"{n} outputs are NaN/inf where the answer is finite, all where {said} is large"
                what += f" (|value| >= {LARGE:g})"
                extra = f" ({said} is {_fmt(float(op[at]))} there)"
                from_input = not bool(torch.isfinite(op[nonfinite]).any())
                evidence = n / n_bad * (0.5 if from_input else 1.0)
                out.append((evidence, _finding(Code.HINT_OVERFLOW, case, what, at, truth, got, words, extra)))
                break

    flat = bad.reshape(-1)
    n = flat.numel()
    k = int(flat.nonzero()[0])
    suffix = k > 0 and bool(flat[k:].all())
    tol = MATCH_UNITS * UNIT.get(dtype, 2.0**-24)
    wrong = bad & finite_t & torch.isfinite(got) & ~unwritten
    # Rows past the first read at row * width instead of row * stride: the wrong values are that input's truth.
    strided = unstrided is not None and unstrided.shape == truth.shape and bool(wrong.any())
    if strided:
        assert unstrided is not None
        close = (got - unstrided.to(torch.float64)).abs() <= 1e-6 + tol * unstrided.to(torch.float64).abs()
        strided = float(close[wrong].double().mean()) >= MATCH_SHARE
    suffix = suffix and not strided
    if suffix:
        at = _first(bad)  # flat index k
        what = f"exactly the last {n - k} of {n} outputs (flat indices {k} to {n - 1}) are wrong, all before are right"
        out.append((1.0, _finding(Code.HINT_TAIL, case, what, at, truth, got, words)))
    if truth.dim() >= 2 and not suffix:
        cols = truth.shape[-1]
        b2 = bad.reshape(-1, cols)
        rows_bad = b2.any(dim=1)
        if b2.shape[0] > 1 and not bool(rows_bad[0]) and (strided or unstrided is not None):
            r = int(rows_bad.nonzero()[0])
            at = _first(bad)  # in row r: row 0 has none
            what = f"row 0 is right, {int(rows_bad.sum())} of the {b2.shape[0]} rows are wrong (the first: row {r})"
            if strided:
                what += ", and they are what the rows would give if they were not padded"
            out.append((1.0, _finding(Code.HINT_ROW_STRIDE, case, what, at, truth, got, words)))
        c0 = int(b2.any(dim=0).nonzero()[0])
        if c0 > 0 and bool(b2[rows_bad][:, c0:].all()) and int(rows_bad.sum()) > 1:
            at = _first(bad)
            what = (
                f"only the last {cols - c0} of {cols} columns are wrong "
                f"({f'column {c0}' if c0 == cols - 1 else f'columns {c0} to {cols - 1}'}), in "
                f"{int(rows_bad.sum())} rows"
            )
            out.append((1.0, _finding(Code.HINT_ROW_TAIL, case, what, at, truth, got, words)))

    out += _half_intermediate(case, dtype, truth, got, wrong, n_bad, words)

    # The wrong values equal something else: an operand as is, or a wrong formula the problem names.
    if bool(wrong.any()) and not strided:
        alts = {**ops, **{k: v.to(torch.float64) for k, v in (mistakes or {}).items() if v.shape == truth.shape}}
        for name, alt in alts.items():
            close = (got - alt).abs() <= 1e-6 + tol * alt.abs()
            share = float(close[wrong].double().mean())
            if share >= MATCH_SHARE:
                at = _first(wrong & close)
                said = problem_hints.text(dict(words), "formula", name) or f"the {name}"
                what = f"the wrong outputs equal {said} ({100 * share:.0f}% of {int(wrong.sum())})"
                extra = f" (which is {_fmt(float(alt[at]))} there)"
                text = (
                    f"{case}: {what}; at index {at}: expected {_fmt(float(truth[at]))}, got {_fmt(float(got[at]))}"
                    f"{extra}. "
                    + (
                        problem_hints.text(dict(words), "pattern", str(Code.HINT_FORMULA)) or GENERIC[Code.HINT_FORMULA]
                    ).replace("{name}", said)
                )
                out.append((share * int(wrong.sum()) / n_bad, Finding(Code.HINT_FORMULA, text, HINT)))
                break
    out.sort(key=lambda ef: -ef[0])  # stable: equal evidence keeps the detectors' order
    return [f for _, f in out]


def low_precision(
    case: str, where: tuple[int, ...], expected: float, got: float, fp32_case: str, words: Mapping[str, object]
) -> Finding:
    """The cross-case pattern: this 16-bit case is wrong (values) while `fp32_case`, the same input in float32,
    passed."""
    text = (
        f"{case}: wrong values while {fp32_case} (this case in float32) passes; at index {where}: expected "
        f"{_fmt(expected)}, got {_fmt(got)}. {_words(words or {}, Code.HINT_LOW_PRECISION)}"
    )
    return Finding(Code.HINT_LOW_PRECISION, text, HINT)
