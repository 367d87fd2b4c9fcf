"""Stage 4: compare a submission's output with the float64 truth, and explain any difference.

Tolerances (from the spec):
- `rtol` + `atol`: |out - truth| <= atol + rtol * |truth| element-wise (float32).
- `eager_factor` + `atol`: the bound is set by how well PyTorch eager does *on this very input* in this dtype:
  |out - truth| <= atol + eager_factor * max(eager_rel, u) * |truth|, where eager_rel is eager's worst relative
  error over normal-range elements and u is the dtype's unit roundoff (so the bound never collapses to 0 on
  tiny cases where eager happens to be exact).
Where the truth is NaN the output must be NaN; where it is +-inf the output must be the same infinity; where it
is finite the output must be finite. That is "the same NaN/inf pattern as the reference".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from grader.problem import operands
from grader.problem.spec import Tolerance
from grader.results import Finding, Reason

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
MAX_SHOWN = 5
EAGER_REL_CAP = 8.0  # eager's measured relative error is capped at 8 unit roundoffs


@dataclass
class Verdict:
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    reason: Reason = Reason.OK  # why not ok (the summary says it to a person)
    later_rows_only: bool = False  # wrong values, with the first row right and later rows wrong (a row-stride bug?)
    # Wrong values: where (bad), which of them still hold the poison, and the first wrong element, for the
    # failure-pattern hints (grader/correctness/patterns.py) and the cross-case ones (grader/correctness/stage.py).
    bad: torch.Tensor | None = None
    poison: torch.Tensor | None = None
    first_wrong: tuple[tuple[int, ...], float, float] | None = None  # (index, expected, got)
    findings: list[Finding] = field(default_factory=list)  # the failure patterns, as hints

    def text(self) -> str:
        return "\n".join([self.summary, *("  " + d for d in self.details)])


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def bound_for(
    truth: torch.Tensor, eager_out: torch.Tensor | None, tol: Tolerance, dtype: torch.dtype
) -> tuple[torch.Tensor, str]:
    """Per-element allowed |out - truth|, and a one-line description of the rule used."""
    mag = truth.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
    if tol.eager_factor is None:
        return tol.atol + (tol.rtol or 0.0) * mag, f"atol {tol.atol:g} + rtol {tol.rtol:g}*|expected|"
    u = UNIT_ROUNDOFF[dtype]
    eager_rel = 0.0
    if eager_out is not None and truth.numel():
        # Only where the value is far from underflow in this dtype: near 1e-38 bf16 flushes to 0 (relative
        # error 1), and one such element must not loosen the bound for every other one.
        tiny = torch.finfo(dtype).tiny / u
        normal = torch.isfinite(truth) & (truth.abs() >= tiny)
        if normal.any():
            err = (eager_out.to(torch.float64) - truth).abs()[normal] / truth.abs()[normal]
            eager_rel = float(err.max())
    eager_rel = min(eager_rel, EAGER_REL_CAP * u)  # eager itself is never allowed to set a sloppy bar
    rel = tol.eager_factor * max(eager_rel, u)
    rule = (
        f"atol {tol.atol:g} + {tol.eager_factor:g} x max(eager rel err {eager_rel:.3g}, u {u:.3g}) = "
        f"{rel:.3g}*|expected|"
    )
    return tol.atol + rel * mag, rule


def check_output(
    out: torch.Tensor,
    truth: torch.Tensor,
    *,
    tol: Tolerance,
    dtype: torch.dtype,
    eager_out: torch.Tensor | None = None,
) -> Verdict:
    """Values only (shape/dtype/layout are checked by check_meta). `truth` is float64 on the same device."""
    if out.shape != truth.shape:
        return Verdict(
            False, f"wrong shape {tuple(out.shape)}, expected {tuple(truth.shape)}", reason=Reason.WRONG_TENSOR
        )
    if truth.numel() == 0:
        return Verdict(True, "ok (empty output)")
    got = out.to(torch.float64)
    bound, rule = bound_for(truth, eager_out, tol, dtype)
    t_nan, g_nan = torch.isnan(truth), torch.isnan(got)
    t_inf, g_inf = torch.isinf(truth), torch.isinf(got)
    finite_t = ~(t_nan | t_inf)
    err = (got - truth).abs()
    with torch.no_grad():
        bad = (t_nan & ~g_nan) | (t_inf & (got != truth)) | (finite_t & ~(err <= bound))
    n_bad = int(bad.sum())
    comparable = finite_t & torch.isfinite(got)  # error figures only where both are numbers: NaN/inf are counted
    ferr = torch.where(comparable, err, torch.zeros_like(err))
    max_abs = float(ferr.max())
    rel = ferr / truth.abs().clamp_min(1e-30)
    max_rel = float(torch.where(finite_t & (truth.abs() > 0), rel, torch.zeros_like(rel)).max())
    if n_bad == 0:
        return Verdict(
            True,
            f"ok (max abs err {_fmt(max_abs)}, max rel err {_fmt(max_rel)})",
            max_abs_err=max_abs,
            max_rel_err=max_rel,
        )

    n = truth.numel()
    details = [f"{n_bad} of {n} elements wrong ({100.0 * n_bad / n:.3g}%); allowed |err| <= {rule}"]
    # The NaN/inf counts first: a case whose wrong elements are NaN is about those, and an error figure over the
    # rest (which may be tiny) must not read as "nearly right".
    details.append(
        f"NaN: expected {int(t_nan.sum())}, got {int(g_nan.sum())}; inf: expected {int(t_inf.sum())}, got "
        f"{int(g_inf.sum())}"
    )
    idx = bad.nonzero()[:MAX_SHOWN].tolist()
    for i in idx:
        t = tuple(i)
        details.append(f"at index {t}: expected {_fmt(float(truth[t]))}, got {_fmt(float(got[t]))}")
    n_cmp = int(comparable.sum())
    n_bad_cmp = int((bad & comparable).sum())
    if n_bad_cmp:
        details.append(
            f"max abs err {_fmt(max_abs)}, max rel err {_fmt(max_rel)} (over the {n_cmp} elements where both the "
            f"expected and your value are finite; {n_bad - n_bad_cmp} wrong elements are NaN/inf, not in it)"
            if n_bad > n_bad_cmp
            else f"max abs err {_fmt(max_abs)}, max rel err {_fmt(max_rel)} (over the {n_cmp} finite elements)"
        )
    else:
        details.append(f"no error figure: all {n_bad} wrong elements are NaN or inf (counted above)")
    poison = _poison_bits(out)
    unwritten = int((finite_t & poison).sum())
    computed_nan = int((finite_t & g_nan & ~poison).sum())
    if unwritten:
        details.append(
            f"hint: {unwritten} outputs still hold the poison (the output is filled with an all-ones NaN before each "
            "call) where a finite value was expected: they were never written (mask, grid size or tail handling)"
        )
    if computed_nan:
        details.append(
            f"hint: {computed_nan} outputs are a NaN your kernel computed where a finite value was expected (not the "
            "poison): an overflow such as exp() reaching inf, then inf/inf or inf-inf?"
        )
    if truth.dim() >= 2:
        rows_bad = bad.reshape(-1, truth.shape[-1]).any(dim=1)
        cols_bad = bad.reshape(-1, truth.shape[-1]).any(dim=0)
        first_row = int(rows_bad.nonzero()[0])
        details.append(
            f"bad rows: {int(rows_bad.sum())} of {rows_bad.numel()} (first: {first_row}); "
            f"bad columns: {int(cols_bad.sum())} of {cols_bad.numel()}"
        )
        later_rows_only = first_row > 0 and not bool(rows_bad[0])
    else:
        later_rows_only = False
    reason = Reason.UNWRITTEN if unwritten else Reason.NAN_COMPUTED if computed_nan else Reason.WRONG_VALUES
    first = tuple(idx[0])
    return Verdict(
        False,
        f"wrong values: {n_bad} of {n} elements outside tolerance",
        details,
        max_abs,
        max_rel,
        reason,
        later_rows_only,
        bad=bad,
        poison=poison,
        first_wrong=(first, float(truth[first]), float(got[first])),
    )


_BITS = {4: torch.int32, 2: torch.int16, 8: torch.int64}


def _poison_bits(out: torch.Tensor) -> torch.Tensor:
    """Where `out` holds the grader's poison exactly: every bit set (0xFF bytes, a NaN in float32, float16 and
    bfloat16 alike; the workers fill outputs with it). NaNs that arithmetic produces are other patterns."""
    bits = _BITS.get(out.element_size())
    if bits is None or not out.is_floating_point():
        return torch.zeros(out.shape, dtype=torch.bool, device=out.device)
    return out.contiguous().view(bits) == -1


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element-wise, treating NaN == NaN and telling -0.0 from 0.0 apart only through values."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def extra_unchanged(reply: dict[str, Any], extra: list[torch.Tensor]) -> bool:
    """Whether the worker's copies of inputs 1.. after the calls ("extra_after") equal what was sent
    (grader/problem/operands.py makes them)."""
    after = reply.get("extra_after", [])
    if len(after) != len(extra) or not all(isinstance(a, torch.Tensor) for a in after):
        return not extra
    return all(same_values(a, operands.buffer(e)) for a, e in zip(after, extra, strict=True))


def check_meta(meta: dict[str, Any], *, shape: tuple[int, ...], dtype: str, device_type: str) -> Verdict:
    """Shape, dtype, device and contiguity as reported for the returned tensor."""
    problems = []
    if tuple(meta["shape"]) != tuple(shape):
        problems.append(f"shape {tuple(meta['shape'])}, expected {tuple(shape)}")
    if meta["dtype"] != dtype:
        problems.append(f"dtype {meta['dtype']}, expected {dtype} (the same dtype as the input)")
    if meta["device_type"] != device_type:
        problems.append(f"device {meta['device_type']}, expected {device_type} (the input's device)")
    if not meta["contiguous"]:
        problems.append(f"not contiguous (strides {tuple(meta['stride'])}); return a new contiguous tensor")
    if problems:
        return Verdict(False, "wrong output tensor: " + "; ".join(problems), reason=Reason.WRONG_TENSOR)
    return Verdict(True, "ok")
