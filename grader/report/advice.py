"""What to try next for a lost point: chosen by a result's typed fields (grader/results.py: kind, reason, finding
codes) and the case's own data (dtype, input distribution, padded rows), never by its name or output text; worded
by the problem's hints.yaml (grader/problem/hints.py), else in the grader's generic terms below.

A finding code the grader adds later needs no change here: its words come from hints.yaml's `finding` section
when the problem has them, and the report shows the finding's own text in any case."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.problem import hints as problem_hints
from grader.results import (
    HINT,
    SKIPPED,
    VIOLATION,
    Code,
    Finding,
    Kind,
    PerfCase,
    PerfSummary,
    Reason,
    TestResult,
    number,
)

# Problem-independent advice, by reason (grader/results.py). A problem's own words come from its hints.yaml.
GENERIC: dict[Reason, str] = {
    Reason.MISSING: "The file is missing: submit it under exactly the name the handout gives.",
    Reason.NOT_IMPLEMENTED: "This part is still the stub: implement it (see the handout section named above).",
    Reason.BUILD_FAILED: "The CUDA file did not compile: read the first nvcc error in the build test's output, fix it, "
    "and build it again locally with `nox -s grade -- --only cuda`.",
    Reason.LOAD_FAILED: "The file does not load: read the traceback above from its last line up to the first frame "
    "in your own file, fix that line, and grade again (`nox -s grade`); keep the function name and signature from "
    "the stub.",
    Reason.TIMEOUT: "The call never finished: look for a loop whose bound never changes, or a grid that relaunches "
    "itself.",
    Reason.CRASHED: "The process crashed: an out-of-bounds or misaligned access. Mask every load and store (offsets < "
    "n), use 64-bit offsets for large shapes, and check alignment before 16-byte vector accesses.",
    Reason.INPUT_MODIFIED: "Your kernel wrote into x. Never store into the input: allocate the output with torch.empty "
    "and write only there.",
    Reason.NOT_DETERMINISTIC: "Two runs on the same input differ: a race (two threads writing the same output element, "
    "or a block reading what another block writes) or a read of unwritten memory. Give each output "
    "element exactly one writer, and mask loads so no thread reads past the end.",
    Reason.NOT_PLAIN: "Return a plain torch.Tensor that your kernel has filled before the function returns: no "
    "subclass, no torch function or dispatch mode, no autograd.",
    Reason.PROTOCOL: "The worker's reply was tampered with: the grader's own process must be left alone.",
    Reason.NOT_TIMED: "The part could not be timed (see the reason); fix correctness first.",
    Reason.WRONG_TENSOR: "Return a new contiguous tensor of the input's dtype and device, of the shape the handout "
    "gives.",
    Reason.UNWRITTEN: "Some outputs were never written (the output is poisoned with NaN before each call): cover every "
    "output element, and check the mask and the tail.",
    Reason.WRONG_VALUES: "Compare with the reference in the handout, element by element, and compute in fp32.",
    Reason.NAN_COMPUTED: "Your kernel computed NaN where the answer is finite: an intermediate overflowed (exp() of a "
    "large argument is inf, and inf/inf or inf-inf is NaN). Rewrite the formula so that no step overflows.",
    Reason.OUT_OF_BOUNDS: "A load or store went past the end (or before the start) of the buffer the message names: "
    "at the line it gives, bound the index by that buffer's own size (the last row's last column is "
    "(rows - 1) * row_stride + cols - 1), and guard every thread whose index is past it (if (i < n), or a mask).",
    Reason.MISALIGNED: "A vector access (float4, uint4, __half2) at an address its type's alignment forbids: take the "
    "vector path only when the pointer and the row stride are multiples of 16 bytes, else a scalar path.",
    Reason.UNDEFINED: "Undefined behaviour at the line the message names (an integer overflow, a shift past the "
    "width): use 64-bit (int64_t) index arithmetic.",
    Reason.RACE: "Give each output element exactly one writer, and do not read what another thread or block writes "
    "in the same launch (a __syncthreads() between writing and reading shared memory).",
    Reason.FORFEIT: "The kernel check found the work done outside your own kernel: every point of this part is "
    "forfeit. See the kernel check's output.",
}
FLAG_TIPS = {
    Code.BELOW_FLOOR: "A time under the physical floor cannot be real work: no caching, skipping or reusing outputs.",
    Code.HIDDEN_WORK: "The host clock saw much more time than the CUDA events: do all work on the current stream and "
    "synchronously in the call (no side streams, no deferred work).",
    Code.WALL_EXCESS: "The grader's own clock saw more time than the reported one: do all the work inside the call, on "
    "the current stream.",
    Code.TIMED_WRONG: "The outputs timed on the large perf shape were wrong: a kernel must stay correct at every size.",
}
SKIP_TIP = (
    "Not a fault of your code: these points need a CUDA GPU (or Triton, which installs on Linux only). They are "
    "earned when the submission is graded on a GPU (the autograder), or run `nox -s grade` on a GPU machine."
)
# Every command a tip suggests runs as written in a fresh shell of the student's checkout: `nox -s grade` makes its
# own environment (a fresh shell has no torch for `python -m grader`).
FALLBACK = "Read the output above; run `nox -s grade` locally to reproduce it."
VALUE_REASONS = (Reason.WRONG_VALUES, Reason.UNWRITTEN, Reason.NAN_COMPUTED, Reason.WRONG_TENSOR)


def advice(
    t: TestResult,
    perf: PerfSummary | None = None,
    part_findings: Sequence[Finding] | None = None,
    hints: dict[str, Any] | None = None,
) -> list[str]:
    """What to try next for one lost point. part_findings: the kernel check's findings for the test's part (they
    say why a forfeit happened). Distinct, in order: the reason's tip, then one per finding code with words."""
    h = hints or {}
    if t.state == SKIPPED:
        return [SKIP_TIP]
    tips: list[str] = []
    if t.reason in (Reason.FORFEIT, Reason.VIOLATION):
        codes = dict.fromkeys(f.code for f in part_findings or [] if f.severity == VIOLATION)
        worded = [w for w in (problem_hints.text(h, "finding", str(c)) for c in codes) if w]
        tips += worded or [GENERIC[Reason.FORFEIT]]
    elif t.reason == Reason.WRONG_VALUES:
        tips.append(_wrong_values(t, h))
    elif t.reason in GENERIC:
        tips.append(problem_hints.text(h, "reason", str(t.reason)) or GENERIC[t.reason])
    # The test's own findings, worded by the problem where it has words: a failure pattern's hint
    # (grader/correctness/patterns.py)
    # by its `pattern` words, what its code means whatever the case (the case's index and values are in its text).
    tips += [
        w
        for w in (
            problem_hints.text(h, "pattern" if f.severity == HINT else "finding", str(f.code)) for f in t.findings
        )
        if w
    ]
    if t.kind == Kind.PERFORMANCE and t.reason != Reason.FORFEIT:  # speed tips for a forfeit part are noise
        tips += _perf_advice(t, perf or PerfSummary(), h)
    return list(dict.fromkeys(w for w in tips if w)) or [FALLBACK]


def case_advice(t: TestResult, hints: dict[str, Any] | None = None) -> str | None:
    """The advice a case's own input adds to its failure's (failures.py gathers it per case, so that one failure
    over several inputs says each input's words once, with its cases): NaN computed on a special-values or
    saturating case gets that distribution's words (hints.yaml `dist`)."""
    if t.state != SKIPPED and t.reason == Reason.NAN_COMPUTED:
        return problem_hints.text(hints or {}, "dist", str(t.extra.get("dist", "")))
    return None


def _wrong_values(t: TestResult, h: dict[str, Any]) -> str:
    if t.extra.get("padded") and t.extra.get("later_rows_only"):
        return problem_hints.text(h, "later_rows") or GENERIC[Reason.WRONG_VALUES]
    special = problem_hints.text(h, "dist", str(t.extra.get("dist", ""))) or problem_hints.text(
        h, "dtype", str(t.extra.get("dtype", ""))
    )
    return special or problem_hints.text(h, "reason", str(Reason.WRONG_VALUES)) or GENERIC[Reason.WRONG_VALUES]


def pct_at(c: PerfCase, ms: float, copy_bps: float) -> float:
    """The share of the measured copy roofline (%) that a time of ms on perf case c stands for."""
    return 100.0 * c.bytes / (ms * 1e-3) / copy_bps if ms > 0 and copy_bps > 0 and c.bytes else float("nan")


def _perf_advice(t: TestResult, perf: PerfSummary, h: dict[str, Any]) -> list[str]:
    tips = [problem_hints.text(h, "perf", str(f.code)) or FLAG_TIPS[f.code] for f in t.findings if f.code in FLAG_TIPS]
    c = perf.cases.get(t.case)
    d = c.impls.get(t.part) if c is not None else None
    if c is not None and d is not None and d.credit is not None and d.credit < 1.0:
        full_ms = c.thresholds.full_ms if c.thresholds is not None else 0.0
        pct, target = number(d.pct_roofline, float("nan")), pct_at(c, full_ms, perf.copy_bytes_per_s)
        tips.append(
            f"You reach {pct:.0f}% of the copy roofline here; full credit needs <= {full_ms:.4g} ms "
            f"(about {target:.0f}% of the roofline). " + (problem_hints.text(h, "perf", "roofline") or "")
        )
        for key in (str(t.extra.get("impl_kind", "")), "one_pass"):
            w = problem_hints.text(h, "perf", key)
            if w:
                tips.append(w)
    return tips
