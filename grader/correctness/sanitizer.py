"""On a GPU: one correctness pass of a CUDA part under NVIDIA's compute-sanitizer, as its own check row.

The cases run through a small harness (grader/child/cudacpu/gpu_harness.cu) that gives every input and output its own
cudaMalloc of exactly its size, under memcheck (and racecheck when the source uses __shared__), with the correctness
engine of grader/correctness/stage.py. The row has no points: each case it flagged fails instead (`charge`). Why
(the caching allocator's slack hides an over-read): docs/SECURITY.md, "An over-read that leaves values right".
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from grader import textscan
from grader.correctness.stage import run_correctness
from grader.correctness.target import Target
from grader.cuda import build, part
from grader.cuda.build import BuildFor, BuildRequest
from grader.problem.reference import Reference
from grader.problem.spec import Implementation, Problem
from grader.results import FAILED, PASSED, SKIPPED, Kind, Reason, TestResult

if TYPE_CHECKING:
    from grader.identity import Scratch

TOOLS = {
    # --padding: a guard band after every allocation, so an access just past x that would land in the next
    # allocation (y, when the driver places it right after x) is still outside every allocation.
    "memcheck": (
        "--tool",
        "memcheck",
        "--leak-check",
        "no",
        "--padding",
        "1024",
        "--error-exitcode",
        "86",
        "--print-limit",
        "10",
    ),
    "racecheck": ("--tool", "racecheck", "--error-exitcode", "86", "--print-limit", "10"),
}
_SHARED = re.compile(r"\b__shared__\b")
# A case that ended with an answer to check ran its kernel through under the sanitizer, right or wrong.
_RAN = (
    Reason.WRONG_VALUES,
    Reason.UNWRITTEN,
    Reason.NAN_COMPUTED,
    Reason.INPUT_MODIFIED,
    Reason.NOT_DETERMINISTIC,
    Reason.WRONG_TENSOR,
)


def find_compute_sanitizer() -> str | None:
    """compute-sanitizer from PATH, else beside nvcc (CUDA_HOME/bin or CUDA_HOME/compute-sanitizer)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    nvcc = build.find_nvcc()
    if nvcc is None:
        return None
    home = Path(nvcc).resolve().parent.parent
    for c in (home / "bin" / "compute-sanitizer", home / "compute-sanitizer" / "compute-sanitizer"):
        if c.is_file():
            return str(c)
    return None


def tools_for(source: str) -> list[str]:
    """memcheck always; racecheck when the source declares shared memory (the only memory racecheck watches).
    Comments and literals are blanked by textscan's linear scanner (the `/\\*.*?\\*/` regex under DOTALL this
    replaces never finished on a crafted file, and a "/*" in a string hid the code after it); `\\b__shared__\\b`
    is a fixed word, linear."""
    code = textscan.strip_comments(source)
    return ["memcheck", *(["racecheck"] if _SHARED.search(code) else [])]


def tools_for_file(src: Path) -> list[str]:
    """tools_for on a source read with a cap; one too big to read whole gets both tools (the part not read could
    declare shared memory)."""
    source, cut = textscan.read_capped(src, build.MAX_SOURCE_BYTES)
    return ["memcheck", "racecheck"] if cut else tools_for(source)


def build_harness(
    src: Path,
    *,
    entry: str,
    arch: str | None,
    scratch: Scratch | None,
    timeout_s: float,
    out_name: str,
    build_dir: Path | None = None,
    inputs: int = 1,
) -> tuple[Path | None, str]:
    """(the GPU harness in the scratch's libs/, '') or (None, nvcc's error lines), for run_pass: the build step's
    SANITIZER build (grader/cuda/part.py). Without a scratch (tests) it is built in `build_dir` as this
    process. inputs: how many the spec's entry takes (grader/child/cudacpu/protocol.h)."""
    req = BuildRequest(src, "", entry, inputs, timeout_s, scratch, arch=arch, build_dir=build_dir, out_name=out_name)
    b = part.build_part(req, BuildFor.SANITIZER)
    return (b.artifact, "") if b.ok else (None, b.errors())


def row(impl: Implementation, state: str, text: str, reason: Reason = Reason.OK, **extra: object) -> TestResult:
    return TestResult(
        f"{impl.name} / {Kind.SANITIZER}",
        impl.name,
        "checks",
        0.0,
        0.0,
        state,
        text,
        dict(extra),
        kind=Kind.SANITIZER,
        reason=reason,
    )


FLAGGED = (Reason.OUT_OF_BOUNDS, Reason.MISALIGNED, Reason.RACE, Reason.UNDEFINED)


def fold(
    impl: Implementation, tool: str, results: list[TestResult], cases: dict[str, tuple[str, str]] | None = None
) -> tuple[list[str], Reason]:
    """The lines of one tool's failed cases, those the sanitizer flagged: a wrong value, a stub's return code or a hang
    is the graded cases' business, already reported there. `cases` (when given) collects case -> (reason, line) for
    `charge`."""
    lines, first = [], Reason.OK
    for r in results:
        if r.kind == Kind.CORRECTNESS and r.state == FAILED and r.reason in FLAGGED:
            line = f"{tool}, case {r.extra.get('case')}: {r.output.splitlines()[0] if r.output else r.reason}"
            lines.append(line)
            first = first if first != Reason.OK else r.reason
            if cases is not None:
                cases.setdefault(str(r.extra.get("case")), (str(r.reason), line))
    return lines, first


def charge(tests: list[TestResult], sanitizer_row: TestResult) -> int:
    """Fail every graded case of the part that the sanitizer flagged on the same case: a kernel that reads or writes
    outside its buffers loses that case's points on a GPU exactly as the CPU layer's AddressSanitizer makes it lose
    them on a laptop, even when every value it wrote is right (an over-read past a row's end leaves the values right;
    the caching allocator's slack hides it from the graded run). Returns how many cases were charged."""
    flagged = sanitizer_row.extra.get("flagged_cases")
    if sanitizer_row.state != FAILED or not isinstance(flagged, dict):
        return 0
    charged = 0
    for t in tests:
        if t.part != sanitizer_row.part or t.kind != Kind.CORRECTNESS or t.state != PASSED:
            continue
        hit = flagged.get(str(t.extra.get("case")))
        if hit is None:
            continue
        reason, line = hit
        t.state, t.score, t.reason = FAILED, 0.0, Reason(reason)
        t.output = (
            f"{reason} under compute-sanitizer: every value was right, but the kernel touched memory outside its "
            f"buffers ({line}). The CPU layer's AddressSanitizer fails this case too; see '{sanitizer_row.name}'."
        )
        charged += 1
    return charged


def _chunks() -> int:
    """How many sanitizer workers run one part's cases side by side: each case is a sanitizer start (~0.8 s on the
    H200, 24 of them in a GLU grade), and a grade's other processes need cores too (a quarter of them here)."""
    return max(1, min(3, (os.cpu_count() or 2) // 4))


def _run_split(problem: Problem, target: Target, ref: Reference, secret: int) -> list[TestResult]:
    """The correctness engine over the problem's cases, dealt round-robin (large and small mixed) to _chunks()
    workers at once; the results in the cases' order."""
    n = min(_chunks(), max(1, len(problem.cases)))
    if n == 1:
        return run_correctness(problem, target, ref, device="cpu", secret=secret)
    parts = [dataclasses.replace(problem, cases=problem.cases[k::n]) for k in range(n)]
    with ThreadPoolExecutor(max_workers=n) as pool:
        runs = list(pool.map(lambda p: run_correctness(p, target, ref, device="cpu", secret=secret), parts))
    order = {c.name: i for i, c in enumerate(problem.cases)}
    return sorted((r for run in runs for r in run), key=lambda r: order.get(str(r.extra.get("case")), -1))


def run_pass(
    problem: Problem,
    impl: Implementation,
    src: Path,
    display: str,
    ref: Reference,
    *,
    secret: int,
    scratch: Scratch,
    progress: Callable[[str], None] = lambda s: None,
) -> TestResult:
    """The compute-sanitizer row of a CUDA part graded on a GPU."""
    tool = find_compute_sanitizer()
    if tool is None:
        return row(impl, SKIPPED, "compute-sanitizer not found (it ships with the CUDA toolkit): not run")
    t0 = time.monotonic()
    progress(f"{impl.name}: building {display} for compute-sanitizer")
    harness, why = build_harness(
        src,
        entry=impl.entry,
        arch=build.gpu_arch(),
        scratch=scratch,
        timeout_s=problem.limits.build_s,
        out_name=f"{impl.name}.sanitizer",
        inputs=len(problem.inputs),
    )
    if harness is None:
        return row(impl, SKIPPED, f"the compute-sanitizer harness did not build: {why}")
    lines: list[str] = []
    cases: dict[str, tuple[str, str]] = {}
    reason = Reason.OK
    tools = tools_for_file(src)
    for name in tools:
        progress(f"{impl.name}: correctness under compute-sanitizer {name}")
        target = Target(impl, str(harness), display, sanitizer=(tool, *TOOLS[name]))
        # A CPU worker: the harness moves the data to and from the GPU itself, so the worker's tensors stay on the host.
        results = _run_split(problem, target, ref, secret)
        found, first = fold(impl, name, results, cases)
        through = [r for r in results if r.kind == Kind.CORRECTNESS and (r.state == PASSED or r.reason in _RAN)]
        if not found and not through and results:
            # Nothing flagged, and no case ran through: the pass saw nothing, which is not "no errors".
            why = next((r.output.splitlines()[0] for r in results if r.state == FAILED and r.output), "no case ran")
            return row(
                impl, SKIPPED, f"compute-sanitizer ({name}): no case completed under it, so it checked nothing: {why}"
            )
        lines += found
        reason = reason if reason != Reason.OK else first
    ran = " and ".join(tools)
    seconds = round(time.monotonic() - t0, 1)
    if lines:
        return row(
            impl,
            FAILED,
            f"compute-sanitizer ({ran}) found errors the graded runs did not show:\n" + "\n".join(lines[:20]),
            reason,
            tools=tools,
            seconds=seconds,
            flagged_cases=cases,
        )
    return row(
        impl, PASSED, f"compute-sanitizer ({ran}): no errors in the CPU-sized cases", tools=tools, seconds=seconds
    )
