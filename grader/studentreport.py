"""The student's report: report.md and a self-contained report.html, written beside results.json.

Everything is read from the results.json form of a Grade (Grade.to_json() plus the leaderboard), so a report can
be made again later from a results.json file alone. Contents:
- the score per part;
- per perf case, the lecture-style table (manual / eager / compiled / triton / cuda: ms, GB/s, % of the measured
  copy roofline, speedup over eager, credit) and a bar chart of the times with the credit thresholds drawn in;
- a chart of the achieved bandwidth against the measured copy ceiling;
- the correctness matrix (case x part: pass / fail / skip);
- every lost point with its reason (the test's first output lines) and what to try next;
- warnings and flags that cost nothing yet (static warnings, extra copies, FLAG lines).

Charts need matplotlib, an optional dependency: without it both files are still written, with tables only and a
note saying so. Images are embedded in the HTML as base64 data URIs; it loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hints as problem_hints
from .report import advisory_line, write_text_atomic
from .results import FAILED, FLAG, PASSED, SKIPPED, VIOLATION, WARNING, Code, Finding, Grade, Kind, Reason

NO_PLOTS = "plots need matplotlib (pip install matplotlib); this report has tables only"
REASON_LINES = 6  # lines of a test's output quoted as the reason for lost points
FULL_OUTPUT_MAX = 20000  # characters of a test's output the HTML report can expand to
STAGES = ("correctness", "performance")


# ----------------------------------------------------------------------------------------------------------------
# Reading results.json


@dataclass
class Test:
    name: str
    part: str
    stage: str
    state: str
    score: float
    max_score: float
    output: str
    extra: dict[str, Any] = field(default_factory=dict)
    kind: Kind | None = None  # None: a results.json from before results were typed, or a malformed one
    reason: Reason | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def case(self) -> str:
        c = self.extra.get("case")
        return str(c) if c else self.name.split(" / ")[-1]

    @property
    def lost(self) -> float:
        return max(0.0, self.max_score - self.score)

    def first_lines(self, n: int = REASON_LINES) -> list[str]:
        lines = [ln.rstrip() for ln in self.output.splitlines() if ln.strip()]
        return lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else [])


def _num(v: Any, default: float = 0.0) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def _enum(cls: Any, v: Any) -> Any:
    try:
        return cls(v)
    except (ValueError, TypeError):
        return None


def _findings(raw: Any) -> list[Finding]:
    out = []
    for d in raw if isinstance(raw, list) else []:
        code = _enum(Code, d.get("code")) if isinstance(d, dict) else None
        if code is not None and d.get("severity") in (VIOLATION, FLAG, WARNING):
            out.append(Finding(code, str(d.get("text", ""))[:2000], d["severity"]))
    return out


def tests_of(data: dict[str, Any]) -> list[Test]:
    """The tests of a results.json dict, with part/stage/state from tags and extra_data, and the typed fields
    (kind, reason, findings) that every decision below reads."""
    out = []
    for t in data.get("tests") or []:
        if not isinstance(t, dict):
            continue
        name = str(t.get("name", "?"))
        bits = [b.strip() for b in name.split(" / ")]
        tags = [str(x) for x in t.get("tags") or []]
        extra_data = t.get("extra_data")
        extra = extra_data if isinstance(extra_data, dict) else {}
        part = tags[0] if tags else bits[0]
        stage = tags[1] if len(tags) > 1 else (bits[1] if len(bits) > 1 else "")
        state = str(extra.get("state") or (SKIPPED if SKIPPED in tags else t.get("status", FAILED)))
        out.append(
            Test(
                name,
                part,
                stage,
                state,
                _num(t.get("score")),
                _num(t.get("max_score")),
                str(t.get("output") or ""),
                extra,
                _enum(Kind, extra.get("kind")),
                _enum(Reason, extra.get("reason")),
                _findings(extra.get("findings")),
            )
        )
    return out


def as_results(source: Grade | dict | str | Path) -> dict[str, Any]:
    """A results.json dict from a Grade, a dict, or the path of a results.json file."""
    if isinstance(source, Grade):
        from .report import results_json

        return results_json(source)
    if isinstance(source, dict):
        return source
    return json.loads(Path(source).read_text(encoding="utf-8"))


def flags_of(data: dict[str, Any]) -> list[str]:
    """Why a submission deserves a human look: performance flags, kernel-check violations, forfeits."""
    found: list[str] = []

    def add(s: str) -> None:
        if s not in found:
            found.append(s)

    tests = tests_of(data)
    for t in tests:
        where = f"{t.part} / {t.case}" if t.kind == Kind.PERFORMANCE else t.part
        for f in t.findings:
            if f.severity == FLAG:
                add(f"FLAG {where}: {f.text}")
            elif f.severity == VIOLATION:
                add(f"kernel check violation ({t.part}): {f.text}")
    for part in dict.fromkeys(t.part for t in tests if t.kind == Kind.KERNEL_CHECK and t.reason == Reason.VIOLATION):
        add(f"forfeit ({part}): all its points, see '{part} / kernel check'")
    return found


# ----------------------------------------------------------------------------------------------------------------
# What to try next


def _pct_at(c: dict[str, Any], ms: float, copy_bps: float) -> float:
    return 100.0 * c["bytes"] / (ms * 1e-3) / copy_bps if ms > 0 and copy_bps > 0 and c.get("bytes") else float("nan")


# Problem-independent advice, by reason (grader/results.py). A problem's own words come from its hints.yaml.
GENERIC = {
    Reason.MISSING: "The file is missing: submit it under exactly the name the handout gives.",
    Reason.NOT_IMPLEMENTED: "This part is still the stub: implement it (see the handout section named above).",
    Reason.BUILD_FAILED: "The CUDA file did not compile: read the first nvcc error in the build test's output, fix it, "
    "and build locally with `python -m grader grade --only cuda`.",
    Reason.LOAD_FAILED: "The file does not load: run `python -c 'import glu_triton'` in the submission directory and "
    "fix the first error; keep the function name and signature from the stub.",
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


def advice(
    t: Test,
    perf: dict[str, Any] | None = None,
    part_findings: list[Finding] | None = None,
    hints: dict[str, Any] | None = None,
) -> list[str]:
    """What to try next for a lost point: chosen by the result's reason and findings, the case's data, and the kernel
    check's findings for its part (part_findings); worded by the problem's hints.yaml, else generically."""
    h = hints or {}
    tips: list[str] = []
    if t.state == SKIPPED:
        return [
            "Not a fault of your code: these points need a CUDA GPU (or Triton, which installs on Linux only). They "
            "are earned when the submission is graded on a GPU (the autograder), or run `python -m grader grade` on "
            "a GPU machine."
        ]
    if t.reason in (Reason.FORFEIT, Reason.VIOLATION):
        codes = list(dict.fromkeys(f.code for f in part_findings or [] if f.severity == VIOLATION))
        worded = [w for w in (problem_hints.text(h, "finding", str(c)) for c in codes) if w]
        tips += worded or [GENERIC[Reason.FORFEIT]]
    elif t.reason in (Reason.WRONG_VALUES, Reason.UNWRITTEN, Reason.NAN_COMPUTED, Reason.WRONG_TENSOR):
        if t.reason == Reason.WRONG_VALUES and t.extra.get("padded") and t.extra.get("later_rows_only"):
            tips.append(problem_hints.text(h, "later_rows") or GENERIC[Reason.WRONG_VALUES])
        elif t.reason == Reason.WRONG_VALUES:
            special = problem_hints.text(h, "dist", str(t.extra.get("dist", ""))) or problem_hints.text(
                h, "dtype", str(t.extra.get("dtype", ""))
            )
            tips.append(special or problem_hints.text(h, "reason", str(t.reason)) or GENERIC[t.reason])
        else:
            tips.append(problem_hints.text(h, "reason", str(t.reason)) or GENERIC[t.reason])
    elif t.reason is not None and t.reason in GENERIC:
        tips.append(problem_hints.text(h, "reason", str(t.reason)) or GENERIC[t.reason])
    if t.kind == Kind.PERFORMANCE:
        tips += _perf_advice(t, perf or {}, h)
    if not tips:
        tips.append("Read the output above; run `python -m grader grade` locally to reproduce it.")
    return list(dict.fromkeys(tips))


def _perf_advice(t: Test, perf: dict[str, Any], h: dict[str, Any]) -> list[str]:
    tips = [problem_hints.text(h, "perf", str(f.code)) or FLAG_TIPS[f.code] for f in t.findings if f.code in FLAG_TIPS]
    credit = t.extra.get("credit")
    c = (perf.get("cases") or {}).get(t.case) or {}
    d = (c.get("impls") or {}).get(t.part) or {}
    if isinstance(credit, (int, float)) and credit < 1.0 and d:
        th = c.get("thresholds") or {}
        copy_bps = _num(perf.get("copy_bytes_per_s"))
        full_ms = _num(th.get("full_ms"))
        pct, target = _num(d.get("pct_roofline"), float("nan")), _pct_at(c, full_ms, copy_bps)
        tips.append(
            f"You reach {pct:.0f}% of the copy roofline here; full credit needs <= {full_ms:.4g} ms "
            f"(about {target:.0f}% of the roofline). " + (problem_hints.text(h, "perf", "roofline") or "")
        )
        for key in (str(t.extra.get("impl_kind", "")), "one_pass"):
            w = problem_hints.text(h, "perf", key)
            if w:
                tips.append(w)
    return tips


# ----------------------------------------------------------------------------------------------------------------
# The report's content, independent of its format


@dataclass
class Loss:
    title: str
    tests: list[Test]
    reason: list[str]
    tips: list[str]

    @property
    def points(self) -> float:
        return sum(t.lost for t in self.tests)

    @property
    def state(self) -> str:
        return self.tests[0].state

    @property
    def full_output(self) -> str:
        """The first test's whole output (the reason quotes its first lines), capped for the page."""
        out = self.tests[0].output.strip()
        return out if len(out) <= FULL_OUTPUT_MAX else out[:FULL_OUTPUT_MAX] + "\n[... cut at 20000 characters]"


def losses(data: dict[str, Any]) -> list[Loss]:
    """Every test that lost points, with tests that lost them for the same reason folded into one entry: correctness
    cases, skips, forfeits and untimed cases group by (part, kind, state, reason) and the first line of their output
    (the same words: one entry); anything else stands alone."""
    extra = data.get("extra_data") or {}
    perf = extra.get("performance") or {}
    h = problem_hints.load(str(extra.get("problem") or ""))
    tests = tests_of(data)
    part_findings = {t.part: t.findings for t in tests if t.kind == Kind.KERNEL_CHECK}
    groups: dict[tuple, list[Test]] = {}
    for t in tests:
        if t.lost <= 1e-9:
            continue
        lines = t.first_lines(1)
        first = lines[0] if lines else ""
        grouped = (
            t.kind == Kind.CORRECTNESS
            or t.state == SKIPPED
            or t.reason in (Reason.FORFEIT, Reason.NOT_RUN, Reason.NOT_TIMED)
        )
        key = (t.part, t.kind, t.state, t.reason, first) if grouped else (t.name,)
        groups.setdefault(key, []).append(t)
    out = []
    for ts in groups.values():
        t = ts[0]
        title = t.name if len(ts) == 1 else f"{t.part} / {t.stage}: {len(ts)} cases ({_case_list(ts)})"
        out.append(Loss(title, ts, t.first_lines(), advice(t, perf, part_findings.get(t.part), h)))
    return sorted(out, key=lambda lo: (lo.state == SKIPPED, -lo.points))


def _case_list(ts: list[Test], n: int = 6) -> str:
    cs = [t.case for t in ts]
    return ", ".join(cs[:n]) + (f", ... {len(cs) - n} more" if len(cs) > n else "")


def parts_of(data: dict[str, Any]) -> list[str]:
    """Implementation names in the order the grade first mentions them."""
    out: list[str] = []
    for t in tests_of(data):
        if t.part not in out:
            out.append(t.part)
    return out


def part_scores(data: dict[str, Any]) -> dict[str, dict[str, tuple[float, float]]]:
    """part -> stage -> (score, max) for the stages that carry points."""
    out: dict[str, dict[str, tuple[float, float]]] = {p: {} for p in parts_of(data)}
    for t in tests_of(data):
        if t.max_score <= 0 and t.stage not in STAGES:
            continue
        s, m = out.setdefault(t.part, {}).get(t.stage, (0.0, 0.0))
        out[t.part][t.stage] = (s + t.score, m + t.max_score)
    return {p: st for p, st in out.items() if st}


def correctness_matrix(data: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], Test]]:
    """(cases in order, parts in order, (case, part) -> test)."""
    cases: list[str] = []
    cells: dict[tuple[str, str], Test] = {}
    for t in tests_of(data):
        if t.stage != "correctness":
            continue
        if t.case not in cases:
            cases.append(t.case)
        cells[(t.case, t.part)] = t
    parts = [p for p in parts_of(data) if any(k[1] == p for k in cells)]
    return cases, parts, cells


def warnings_of(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) for things that cost nothing (yet) but deserve attention: static warnings, kernel-check warnings
    and violations, performance flags."""
    out = []
    for t in tests_of(data):
        for f in t.findings:
            label = {VIOLATION: "VIOLATION: ", FLAG: "FLAG: "}.get(
                f.severity, "" if f.code == Code.STATIC else "warning: "
            )
            out.append((t.name, label + f.text))
    return out


def gpu_compile_failures(data: dict[str, Any]) -> list[Test]:
    """The failed '<part> / GPU compile check' rows of a CPU grade: 0 points, yet every GPU case of that part
    would fail (grader/gpucompile.py), so the report says so before the lost points."""
    return [t for t in tests_of(data) if t.kind == Kind.COMPILE_CHECK and t.state == FAILED]


def compiler_reports(data: dict[str, Any]) -> list[Test]:
    """'<part> / compiler report' rows of a CPU grade (grader/cudainfo.py): what nvcc says without a GPU."""
    return [t for t in tests_of(data) if t.kind == Kind.COMPILER_REPORT and t.state == PASSED]


COMPILER_TITLE = "What the compiler says (no GPU here)"
GPU_COMPILE_TITLE = "Will not compile on a GPU"
GPU_COMPILE_INTRO = (
    "These kernels ran in Triton's interpreter here, but Triton's compiler rejects them: on a GPU "
    "(the autograder) every case of the part would fail. Fix the line it names, then grade again."
)


PERF_COLS = ("implementation", "ms", "GB/s", "% of copy roofline", "speedup vs eager", "credit")


def forfeit_parts(data: dict[str, Any]) -> set[str]:
    return {t.part for t in tests_of(data) if t.extra.get("forfeit")}


def perf_rows(c: dict[str, Any], forfeit: AbstractSet[str] = frozenset()) -> list[tuple[str, str, list[str]]]:
    """(name, kind, cells) per row of one perf case's lecture table; kind is 'baseline' or 'impl'."""
    rows = []
    for kind, group in (("baseline", c.get("baselines") or {}), ("impl", c.get("impls") or {})):
        for name, d in group.items():
            cr = d.get("credit")
            if kind == "baseline":
                credit = "baseline"
            elif name in forfeit:
                credit = "0% (forfeit)"
            else:
                credit = f"{100 * _num(cr):.0f}%" if cr is not None else "-"
            rows.append(
                (
                    name,
                    kind,
                    [
                        name,
                        f"{_num(d.get('effective_ms')):.4f}",
                        f"{_num(d.get('gbps')):.0f}",
                        f"{_num(d.get('pct_roofline')):.1f}%",
                        f"{_num(d.get('speedup_vs_eager')):.2f}x",
                        credit,
                    ],
                )
            )
    return rows


def thresholds_line(c: dict[str, Any], copy_bps: float) -> str:
    th = c.get("thresholds") or {}
    if not th:
        return ""
    full, part, zero = _num(th.get("full_ms")), _num(th.get("partial_ms")), _num(th.get("zero_ms"))
    return (
        f"Credit: full at <= {full:.4g} ms ({_pct_at(c, full, copy_bps):.0f}% of the roofline), "
        f"{_num(th.get('partial_credit'), 0.5):g} at {part:.4g} ms, none at >= {zero:.4g} ms "
        f"(margin {100 * _num(th.get('margin')):g}% in your favour). Physical floor: {_num(c.get('floor_ms')):.4g} ms."
    )


def case_title(name: str, c: dict[str, Any]) -> str:
    shape = "x".join(str(d) for d in c.get("shape") or [])
    return f"{name}: {shape} {c.get('dtype', '')}, {_num(c.get('bytes')) / 1e9:.2f} GB moved"


# ----------------------------------------------------------------------------------------------------------------
# Charts (matplotlib, optional)


def _matplotlib():
    """(Figure, FigureCanvasAgg), or None when matplotlib is missing or broken. No pyplot: no global state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except Exception:
        return None
    return Figure, FigureCanvasAgg


def _png(fig, canvas_cls) -> bytes:
    canvas_cls(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


CREDIT_COLORS = {"full": "#2e7d32", "partial": "#ef6c00", "none": "#c62828", "baseline": "#90a4ae"}


def _credit_color(kind: str, credit: Any) -> str:
    if kind == "baseline":
        return CREDIT_COLORS["baseline"]
    c = _num(credit)
    return CREDIT_COLORS["full"] if c >= 0.999 else CREDIT_COLORS["partial"] if c > 0 else CREDIT_COLORS["none"]


def chart_case(mpl, name: str, c: dict[str, Any], forfeit: AbstractSet[str] = frozenset()) -> bytes:
    """Bar chart of one perf case's times, baselines grey, with the credit thresholds as horizontal lines."""
    Figure, Canvas = mpl
    items = [(n, "baseline", d) for n, d in (c.get("baselines") or {}).items()] + [
        (n, "impl", d) for n, d in (c.get("impls") or {}).items()
    ]
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(items)))
    ms = [_num(d.get("effective_ms")) for _, _, d in items]
    bars = ax.bar(
        xs, ms, color=[_credit_color(k, 0.0 if n in forfeit else d.get("credit")) for n, k, d in items], width=0.6
    )
    for b, v in zip(bars, ms, strict=False):
        ax.annotate(f"{v:.3g}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    th = c.get("thresholds") or {}
    for key, label, color, style in (
        ("zero_ms", "no credit at or above", CREDIT_COLORS["none"], "--"),
        ("partial_ms", f"{_num(th.get('partial_credit'), 0.5):g} credit", CREDIT_COLORS["partial"], "--"),
        ("full_ms", "full credit at or below", CREDIT_COLORS["full"], "--"),
    ):
        if th.get(key):
            ax.axhline(
                _num(th[key]), color=color, linestyle=style, linewidth=1.2, label=f"{label} ({_num(th[key]):.3g} ms)"
            )
    if c.get("floor_ms"):
        ax.axhline(
            _num(c["floor_ms"]),
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"physical floor ({_num(c['floor_ms']):.3g} ms)",
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([n for n, _, _ in items])
    ax.set_ylabel("time per call (ms, lower is better)")
    ax.set_title(case_title(name, c), fontsize=10)
    ax.set_ylim(0, max(ms + [_num(th.get("zero_ms"))]) * 1.15 or 1.0)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig, Canvas)


def chart_bandwidth(mpl, perf: dict[str, Any]) -> bytes:
    """Achieved bandwidth per case and implementation against the measured copy ceiling."""
    Figure, Canvas = mpl
    cases = perf.get("cases") or {}
    names: list[str] = []
    for c in cases.values():
        for n in list(c.get("baselines") or {}) + list(c.get("impls") or {}):
            if n not in names:
                names.append(n)
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(names))
    palette = ["#b0bec5", "#78909c", "#546e7a", "#1e88e5", "#8e24aa", "#00897b", "#f4511e"]
    for j, n in enumerate(names):
        vals = []
        for c in cases.values():
            d = (c.get("baselines") or {}).get(n) or (c.get("impls") or {}).get(n) or {}
            vals.append(_num(d.get("gbps")))
        ax.bar(
            [i + (j - (len(names) - 1) / 2) * width for i in range(len(cases))],
            vals,
            width=width,
            label=n,
            color=palette[j % len(palette)],
        )
    ceiling = _num(perf.get("copy_bytes_per_s")) / 1e9
    if ceiling:
        ax.axhline(
            ceiling, color="black", linestyle="--", linewidth=1.2, label=f"measured copy ceiling ({ceiling:.0f} GB/s)"
        )
    ax.set_xticks(list(range(len(cases))))
    ax.set_xticklabels(list(cases))
    ax.set_ylabel("achieved GB/s (read + write)")
    dev = (perf.get("device") or {}).get("name", "")
    ax.set_title(f"Bandwidth against the copy roofline{' on ' + dev if dev else ''}", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig, Canvas)


def charts(data: dict[str, Any]) -> dict[str, bytes] | None:
    """name -> PNG bytes; {} when there is no perf data; None when matplotlib is missing."""
    perf = (data.get("extra_data") or {}).get("performance") or {}
    if not perf.get("cases"):
        return {}  # nothing to draw: no need for matplotlib at all
    mpl = _matplotlib()
    if mpl is None:
        return None
    out: dict[str, bytes] = {}
    for name, c in (perf.get("cases") or {}).items():
        out[f"time_{name}"] = chart_case(mpl, name, c, forfeit_parts(data))
    if perf.get("cases"):
        out["bandwidth"] = chart_bandwidth(mpl, perf)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Rendering


def _points(x: float) -> str:
    return f"{x:.4g} point" + ("" if abs(x - 1) < 1e-9 else "s")


def _fence(text: str) -> str:
    ticks = max([3] + [len(m) + 1 for m in re.findall(r"`+", text)])
    return f"{'`' * ticks}text\n{text}\n{'`' * ticks}"


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)] + [
        "| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows
    ]


CELL = {PASSED: "pass", FAILED: "FAIL", SKIPPED: "skip"}


def _header(data: dict[str, Any]) -> tuple[str, list[str]]:
    ex = data.get("extra_data") or {}
    perf = ex.get("performance") or {}
    dev = perf.get("device") or {}
    title = (
        f"{ex.get('problem', 'grade')} report: {_num(data.get('score')):.4g} / "
        f"{_num(data.get('max_score'), sum(t.max_score for t in tests_of(data))):g} points"
    )
    facts = [f"submission: {ex.get('submission', '?')}", f"device: {dev.get('name') or ex.get('device', '?')}"]
    if dev.get("torch"):
        facts.append(f"torch {dev['torch']}")
    if perf.get("copy_bytes_per_s"):
        facts.append(f"measured copy bandwidth {_num(perf['copy_bytes_per_s']) / 1e12:.2f} TB/s (read + write)")
    if ex.get("points_not_earnable_here"):
        facts.append(f"{_num(ex['points_not_earnable_here']):g} points cannot be earned on this machine")
    return title, facts


def _advisory(data: dict[str, Any]) -> str | None:
    """ "advisory: not an official grade (unsigned): <reasons>" when results.json says it is not official."""
    extra_data = data.get("extra_data")
    ex = extra_data if isinstance(extra_data, dict) else {}
    return advisory_line(ex.get("official"), ex.get("not_official_because"))


def render_md(data: dict[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    title, facts = _header(data)
    perf = (data.get("extra_data") or {}).get("performance") or {}
    copy_bps = _num(perf.get("copy_bytes_per_s"))
    L = [f"# {title}", "", "; ".join(facts), ""]
    L += [f"> **{adv}**", ""] if (adv := _advisory(data)) else []
    if imgs is None:
        L += [f"> Note: {note or NO_PLOTS}.", ""]
    elif imgs:
        L += ["Charts of these numbers are in report.html, beside this file.", ""]
    L += ["## Score", ""]
    ps = part_scores(data)
    stages = [s for s in STAGES if any(s in v for v in ps.values())]
    rows = []
    for part, st in ps.items():
        tot = (sum(v[0] for v in st.values()), sum(v[1] for v in st.values()))
        rows.append(
            [part]
            + [f"{st[s][0]:.4g} / {st[s][1]:g}" if s in st else "-" for s in stages]
            + [f"{tot[0]:.4g} / {tot[1]:g}"]
        )
    L += _md_table(["part", *stages, "total"], rows) + [""]

    L += ["## Performance", ""]
    if not perf.get("cases"):
        L += ["No performance data: speed is timed only on a CUDA GPU.", ""]
    for name, c in (perf.get("cases") or {}).items():
        L += [f"### {case_title(name, c)}", ""]
        L += _md_table(list(PERF_COLS), [cells for _, _, cells in perf_rows(c, forfeit_parts(data))]) + [""]
        if thresholds_line(c, copy_bps):
            L += [thresholds_line(c, copy_bps), ""]

    L += ["## Correctness", ""]
    cases, parts, cells = correctness_matrix(data)
    if cases:
        L += _md_table(
            ["case", *parts],
            [[cs] + [CELL.get(cells[(cs, p)].state, "?") if (cs, p) in cells else "-" for p in parts] for cs in cases],
        ) + [""]
    else:
        L += ["No correctness tests in this run.", ""]

    broken = gpu_compile_failures(data)
    if broken:
        L += [f"## {GPU_COMPILE_TITLE}", "", GPU_COMPILE_INTRO, ""]
        for t in broken:
            L += [f"### {t.name}", "", _fence(t.output), ""]

    L += ["## Lost points", ""]
    lost = losses(data)
    if not lost:
        L += ["None: every point was earned.", ""]
    for lo in lost:
        what = "not earnable on this machine" if lo.state == SKIPPED else "lost"
        L += [f"### {lo.title}: {_points(lo.points)} {what}", "", _fence("\n".join(lo.reason)), "", "What to try:", ""]
        L += [f"- {tip}" for tip in lo.tips] + [""]

    for t in compiler_reports(data):
        L += [f"## {COMPILER_TITLE}: {t.part}", "", _fence(t.output), ""]

    warns = warnings_of(data)
    if warns:
        L += ["## Warnings and flags", ""] + [f"- {w}: {_md_cell(text)}" for w, text in warns] + [""]
    notes = [n for n in str(data.get("output") or "").splitlines() if n.strip()]
    if notes:
        L += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(L)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}td ul{margin:0;padding-left:1.2em}
td.passed,td.failed,td.skipped,td.none{text-align:center}td.passed{background:#c8e6c9}td.failed{background:#ffcdd2;font-weight:bold}td.skipped{background:#fff3c4}td.none{background:#eee}
tr.impl td{font-weight:bold}pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.5em 1em}.lost{border-left:4px solid #c62828;padding-left:1em;margin:1em 0}
.lost.skipped{border-left-color:#f9a825}img{max-width:100%;display:block;margin:.5em 0}.facts{color:#555}
"""  # noqa: E501 (CSS rules, one selector group a line)


NUMBER = re.compile(r"[-+]?\d[\d.,]*(e[-+]?\d+)?( ?(x|%|ms|s)| / [\d.]+)?( \(\d+/\d+\))?")


def is_number(s: Any) -> bool:
    """Cells aligned right: numbers, with an optional unit, ratio or count."""
    return isinstance(s, (int, float)) or bool(NUMBER.fullmatch(str(s).strip()))


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _html_table(
    head: list[str],
    rows: list[list[str]],
    row_classes: list[str] | None = None,
    cell_classes: list[list[str]] | None = None,
) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for i, r in enumerate(rows):
        rc = f' class="{_e(row_classes[i])}"' if row_classes else ""
        tds = []
        for j, c in enumerate(r):
            cc = (cell_classes[i][j] if cell_classes else "") or ("n" if is_number(c) else "")
            tds.append(f'<td class="{_e(cc)}">{_e(c)}</td>' if cc else f"<td>{_e(c)}</td>")
        out.append(f"<tr{rc}>" + "".join(tds) + "</tr>")
    return "\n".join(out + ["</table>"])


def render_html(data: dict[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    title, facts = _header(data)
    perf = (data.get("extra_data") or {}).get("performance") or {}
    copy_bps = _num(perf.get("copy_bytes_per_s"))
    H = [f"<h1>{_e(title)}</h1>", f'<p class="facts">{"<br>".join(_e(f) for f in facts)}</p>']
    H += [f'<p class="note"><b>{_e(adv)}</b></p>'] if (adv := _advisory(data)) else []
    if imgs is None:
        H.append(f'<p class="note">Note: {_e(note or NO_PLOTS)}.</p>')
    H.append("<h2>Score</h2>")
    ps = part_scores(data)
    stages = [s for s in STAGES if any(s in v for v in ps.values())]
    rows = []
    for part, st in ps.items():
        tot = (sum(v[0] for v in st.values()), sum(v[1] for v in st.values()))
        rows.append(
            [part]
            + [f"{st[s][0]:.4g} / {st[s][1]:g}" if s in st else "-" for s in stages]
            + [f"{tot[0]:.4g} / {tot[1]:g}"]
        )
    H.append(_html_table(["part", *stages, "total"], rows))

    H.append("<h2>Performance</h2>")
    if not perf.get("cases"):
        H.append("<p>No performance data: speed is timed only on a CUDA GPU.</p>")
    for name, c in (perf.get("cases") or {}).items():
        H.append(f"<h3>{_e(case_title(name, c))}</h3>")
        pr = perf_rows(c, forfeit_parts(data))
        H.append(_html_table(list(PERF_COLS), [cells for _, _, cells in pr], row_classes=[k for _, k, _ in pr]))
        if thresholds_line(c, copy_bps):
            H.append(f"<p>{_e(thresholds_line(c, copy_bps))}</p>")
        if imgs and f"time_{name}" in imgs:
            H.append(_img(imgs[f"time_{name}"], f"times on {name} against the baselines and credit thresholds"))
    if imgs and "bandwidth" in imgs:
        H.append("<h3>Bandwidth against the measured copy ceiling</h3>")
        H.append(_img(imgs["bandwidth"], "achieved bandwidth per case against the measured copy ceiling"))

    H.append("<h2>Correctness</h2>")
    cases, parts, cells = correctness_matrix(data)
    if cases:
        head = ["case", *parts]
        body, classes = [], []
        for cs in cases:
            r, cl = [cs], [""]
            for p in parts:
                t = cells.get((cs, p))
                r.append(CELL.get(t.state, "?") if t else "-")
                cl.append(t.state if t else "none")
            body.append(r)
            classes.append(cl)
        H.append(_html_table(head, body, cell_classes=classes))
    else:
        H.append("<p>No correctness tests in this run.</p>")

    broken = gpu_compile_failures(data)
    if broken:
        H.append(f"<h2>{_e(GPU_COMPILE_TITLE)}</h2><p>{_e(GPU_COMPILE_INTRO)}</p>")
        H += [f'<div class="lost failed"><h3>{_e(t.name)}</h3><pre>{_e(t.output)}</pre></div>' for t in broken]

    H.append("<h2>Lost points</h2>")
    lost = losses(data)
    if not lost:
        H.append("<p>None: every point was earned.</p>")
    for lo in lost:
        what = "not earnable on this machine" if lo.state == SKIPPED else "lost"
        H.append(f'<div class="lost {_e(lo.state)}"><h3>{_e(lo.title)}: {_points(lo.points)} {what}</h3>')
        H.append(f"<pre>{_e(chr(10).join(lo.reason))}</pre>")
        if len(lo.full_output.splitlines()) > REASON_LINES:  # the quote was cut: the whole output, one click away
            H.append(f"<details><summary>the whole output</summary><pre>{_e(lo.full_output)}</pre></details>")
        H.append("<p>What to try:</p><ul>")
        H += [f"<li>{_e(tip)}</li>" for tip in lo.tips]
        H.append("</ul></div>")
    for t in compiler_reports(data):
        H.append(f"<h2>{_e(COMPILER_TITLE)}: {_e(t.part)}</h2><pre>{_e(t.output)}</pre>")
    warns = warnings_of(data)
    if warns:
        H.append(
            "<h2>Warnings and flags</h2><ul>"
            + "".join(f"<li><b>{_e(w)}</b>: {_e(text)}</li>" for w, text in warns)
            + "</ul>"
        )
    notes = [n for n in str(data.get("output") or "").splitlines() if n.strip()]
    if notes:
        H.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(H) + "\n</body></html>\n"
    )


def write_student_report(source: Grade | dict | str | Path, out_dir: str | Path) -> tuple[Path, Path]:
    """Write report.md and report.html into out_dir (beside results.json). Returns their paths."""
    out_dir = Path(out_dir)
    data = as_results(source)
    note = None
    try:
        imgs = charts(data)
    except Exception as e:  # a broken plotting stack costs the charts, never the report
        imgs, note = (
            None,
            f"plots failed ({type(e).__name__}: {' '.join(str(e).split())[:200]}); this report has tables only",
        )
    md, page = out_dir / "report.md", out_dir / "report.html"
    write_text_atomic(md, render_md(data, imgs, note))
    write_text_atomic(page, render_html(data, imgs, note))
    return md, page
