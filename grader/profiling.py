"""`python -m grader profile` (`nox -s profile`): lecture 6's "profile before you optimize", on the student's own
kernels. Advisory: nothing here is graded or written to results.json.

On a GPU, for one performance case: the torch.profiler table, the call's bandwidth against the copy ceiling measured
here, and with `ncu` on PATH a summary of Nsight Compute's metrics; on a CPU, the CUDA compiler's report and each
Triton kernel's launch grid. Student code runs in an untrusted worker, as in a grade. What each part shows and why
it sits beside the pipeline: docs/performance.md, "`grader profile`".
"""

from __future__ import annotations

import csv
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import availability, identity
from grader.box import BOX
from grader.correctness.target import Target
from grader.pipeline import GraderError, open_scratch, resolve_device
from grader.problem import operands
from grader.problem.spec import Case, Implementation, Problem
from grader.sandbox import Sandbox, WorkerFailure

REPS = 10  # calls under torch.profiler
NCU_PASS_ENV = "GRADER_PROFILE_NCU_PASS"  # set for the run that ncu profiles: one call per kernel, no report
# Nsight Compute metrics (ncu --query-metrics lists them; these are the names of ncu 2023+ on sm_70 and later).
NCU_METRICS = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput, % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy, % of the SM's warps",
    "smsp__inst_executed_op_global_ld.sum": "global load instructions",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum": "global load bytes",
    "smsp__inst_executed_op_global_st.sum": "global store instructions",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum": "global store bytes",
    "gpu__time_duration.sum": "duration",
}
# ncu's injection into the worker: the variables it sets for its child processes, which the worker's fresh
# environment must keep (grader/identity.py passes the names in GRADER_PASS_ENV).
_NCU_ENV = re.compile(r"^(LD_PRELOAD|CUDA_INJECTION\d*_PATH|NVTX_INJECTION\d*_PATH|NV_.*|NSIGHT_.*|NVIDIA_.*)$")


def pick_case(problem: Problem, device: str, patterns: tuple[str, ...] = ()) -> Case:
    """The case to profile: the first matching --case (performance cases first), else on a GPU the first
    performance case, on a CPU the first correctness case with more than one row (small enough to interpret)."""
    perf = list(problem.performance.cases) if problem.performance is not None else []
    small = [c for c in problem.cases if not c.gpu_only and 0 not in c.shape]
    if patterns:
        hits = [c for c in (*perf, *problem.cases) if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        if not hits:
            names = ", ".join(c.name for c in (*perf, *problem.cases))
            raise GraderError(f"--case {' '.join(patterns)}: matches no case (cases: {names})")
        return hits[0]
    if device == "cuda" and perf:
        return perf[0]
    rows = [c for c in small if len(c.shape) > 1 and c.shape[0] > 1]
    if not (rows or small):
        raise GraderError(f"{problem.name}: no correctness case to profile")
    return (rows or small)[0]


def copy_ceiling() -> dict[str, float]:
    """Bytes read + written per second on this GPU: a 1 GiB device-to-device copy, and c = a + b (2 reads : 1
    write, GLU's mix), each the median of triton.testing.do_bench (L2 flushed before every call). Trusted code
    only: this runs in the grader's own process."""
    import torch

    n = 1 << 30
    m = n // 3 // 4
    copy_ms, add_ms = _copy_ms(n), _add_ms(m)
    torch.cuda.empty_cache()
    return {"copy": 2 * n / (copy_ms * 1e-3), "read2_write1": 3 * m * 4 / (add_ms * 1e-3)}


def _copy_ms(n: int) -> float:
    import torch
    import triton.testing

    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    return float(triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median"))


def _add_ms(m: int) -> float:
    import torch
    import triton.testing

    a = torch.randn(m, device="cuda")
    b, c = torch.randn_like(a), torch.empty_like(a)
    return float(triton.testing.do_bench(lambda: torch.add(a, b, out=c), return_mode="median"))


def _strs(v: Any, limit: int = 64) -> list[Any]:
    """A list from the worker's reply, bounded (the reply is the submission's process's: data, never trusted)."""
    return list(v)[:limit] if isinstance(v, list) else []


def launch_lines(launches: list[Any]) -> list[str]:
    """One line per distinct launch: kernel, grid, programs, constexprs, options."""
    out: list[str] = []
    for d in launches:
        if not isinstance(d, dict):
            continue
        grid = d.get("grid")
        g = "x".join(str(v) for v in grid) if isinstance(grid, list) else "(could not be worked out)"
        c, o = d.get("constexprs"), d.get("options")
        consts: dict[str, Any] = c if isinstance(c, dict) else {}
        opts: dict[str, Any] = o if isinstance(o, dict) else {}
        extra = ", ".join(f"{k}={v}" for k, v in {**consts, **opts}.items())
        line = f"  {d.get('kernel', '?')}[grid {g}] ({d.get('programs', '?')} programs){'; ' + extra if extra else ''}"
        if line not in out:
            out.append(line[:500])
    return out or ["  no launch of this file's @triton.jit kernels was recorded"]


def _base_name(kernel: str) -> str:
    """A kernel's function name as ncu's -k matches it (no namespace, no template, no parameters):
    'void glu_f32<4>(float const*, ...)' -> 'glu_f32', 'void (anonymous namespace)::glu_kernel<float, ...>(...)'
    -> 'glu_kernel' (the staff CUDA kernel's name, which matched nothing on the H200 with its namespace kept)."""
    s = kernel.removeprefix("void ").strip().replace("(anonymous namespace)::", "")
    head = re.split(r"[<(\s]", s, maxsplit=1)[0] or s
    return head.rsplit("::", 1)[-1] or head


def ncu_summary(argv: list[str], kernels: list[str], timeout_s: float = 600.0, boxed: bool = False) -> list[str]:
    """Nsight Compute's metrics for `kernels`, from a run of `python -m grader profile ARGV` (its worker launches
    each kernel once) under ncu. Lines to print; one line saying why when there is no summary. `boxed`: the
    workers run in the grader's box, which ncu's injection cannot reach from outside (measured on an H100: "No
    kernels were profiled"), so an empty run is said to be that, with what to do."""
    exe = shutil.which("ncu")
    if exe is None:
        return ["Nsight Compute: `ncu` is not on PATH (it ships with the CUDA toolkit: add its bin/ to PATH)"]
    names = sorted({_base_name(k) for k in kernels if k})
    if not names:
        return ["Nsight Compute: no kernel of the submission's was seen, so there is nothing to profile"]
    cmd = [
        exe,
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(NCU_METRICS),
        "-k",
        "regex:^(" + "|".join(re.escape(n) for n in names) + ")$",
        "-c",
        str(len(names)),
        sys.executable,
        "-m",
        "grader",
        "profile",
        *argv,
    ]
    try:
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, NCU_PASS_ENV: "1"}, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"Nsight Compute: could not run ncu ({type(e).__name__}: {e})"]
    rows = parse_ncu_csv(r.stdout)
    if not rows and boxed:
        return [
            "Nsight Compute: not available while the grader runs submission code in its box (as root with "
            "bubblewrap: the worker has its own PID, network and /tmp, which ncu's injection does not reach). "
            "Profile as a user without root, or run ncu on your own script: "
            "ncu --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed python my_script.py"
        ]
    if not rows:
        tail = [ln for ln in (r.stderr + r.stdout).strip().splitlines() if ln.strip()][-5:]
        return [f"Nsight Compute: ncu reported no metrics (exit code {r.returncode}); its last lines:"] + [
            "  " + ln[:300] for ln in tail
        ]
    out = []
    for row in rows:
        out.append(f"  {row.get('Kernel Name', '?')[:120]}:")
        for metric, what in NCU_METRICS.items():
            if metric in row and "bytes" not in metric and "inst_executed" not in metric:
                out.append(f"    {what}: {row[metric]}")
        for op in ("ld", "st"):
            per = _bytes_per_thread(row, op)
            if per is not None:
                out.append(
                    f"    global {'loads' if op == 'ld' else 'stores'}: {per:.1f} bytes per thread per instruction "
                    "(16 = 128-bit vector accesses; 4 = one fp32)"
                )
    return out


def _num(v: str | None) -> float | None:
    try:
        return float(str(v).replace(",", ""))
    except (TypeError, ValueError):
        return None


def _bytes_per_thread(row: dict[str, str], op: str) -> float | None:
    inst = _num(row.get(f"smsp__inst_executed_op_global_{op}.sum"))
    nbytes = _num(row.get(f"l1tex__t_bytes_pipe_lsu_mem_global_op_{op}.sum"))
    if not inst or nbytes is None:
        return None
    return nbytes / (inst * 32)  # a warp-level instruction is 32 threads' accesses


def parse_ncu_csv(text: str) -> list[dict[str, str]]:
    """Rows of `ncu --csv --page raw`: a header row (starting with "ID"), a units row, then one row per kernel."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    reader = csv.reader(lines[start:])
    header = next(reader, [])
    rows = [dict(zip(header, r, strict=False)) for r in reader if len(r) == len(header)]
    return [r for r in rows if _num(r.get("ID")) is not None]  # the units row has no ID


def _ncu_env() -> None:
    """In the run ncu profiles: keep ncu's injection variables in the worker's fresh environment."""
    names = [k for k in os.environ if _NCU_ENV.match(k)]
    old = [n for n in os.environ.get("GRADER_PASS_ENV", "").split(",") if n]
    os.environ["GRADER_PASS_ENV"] = ",".join(dict.fromkeys([*old, *names]))


def profile(
    problem: Problem,
    *,
    submission: Path,
    staff: bool = False,
    only: tuple[str, ...] = (),
    cases: tuple[str, ...] = (),
    device: str = "auto",
    argv: list[str] | None = None,
    emit: Callable[[str], None] = print,
) -> int:
    """Print the profile of each part; 0 when it was printed (whatever it says), 2 for bad arguments."""
    device = resolve_device(device)
    ncu_pass = os.environ.get(NCU_PASS_ENV) == "1"
    if ncu_pass:
        _ncu_env()
        emit = _quiet
    impls = [i for n, i in problem.implementations.items() if not only or n in only]
    case = pick_case(problem, device, cases)
    if not staff and not submission.is_dir():
        raise GraderError(f"submission directory {submission} does not exist (pass --submission DIR)")
    ceiling = copy_ceiling() if device == "cuda" and not ncu_pass else None
    if ceiling is not None:
        emit(_ceiling_line(ceiling))
    with open_scratch() as scratch, identity.activate(scratch):
        if not staff:
            scratch.add_submission(submission)
        for impl in impls:
            emit("")
            emit(f"== {impl.name} ({impl.file}) on {case.name}: shape {list(case.shape)}, {case.dtype}, {device} ==")
            kernels = _profile_part(problem, impl, case, device, staff, scratch, emit, ceiling, timed=not ncu_pass)
            if kernels is None:
                continue
            if device == "cuda" and not ncu_pass:
                emit("Nsight Compute summary:")
                where = [*(argv or []), "--only", impl.name, "--case", case.name]
                for line in ncu_summary(where, kernels, boxed=scratch.containment == BOX):
                    emit(line)
    return 0


def _quiet(line: str) -> None:
    pass


def _ceiling_line(c: dict[str, float]) -> str:
    return (
        f"copy ceiling on this GPU: {c['copy'] / 1e9:.0f} GB/s (1 GiB device copy), {c['read2_write1'] / 1e9:.0f} GB/s "
        "(c = a + b, 2 reads : 1 write)"
    )


def _profile_part(
    problem: Problem,
    impl: Implementation,
    case: Case,
    device: str,
    staff: bool,
    scratch: identity.Scratch,
    emit: Callable[[str], None],
    ceiling: dict[str, float] | None,
    timed: bool = True,
) -> list[str] | None:
    """Profile one part; the names of the kernels it ran on a GPU (None: nothing ran)."""
    src = scratch.add_file(impl.staff, impl.staff.name) if staff else scratch.submission / impl.file
    if not src.is_file():
        emit(f"{impl.file} not found{' (no staff solution in this install)' if staff else ''}")
        return None
    if impl.kind == "cuda":
        from grader.cuda import build, cudainfo

        if device == "cpu":
            text, _info = cudainfo.report(src, timeout_s=problem.limits.build_s, scratch=scratch)
            emit("CUDA compiler report (nvcc -ptx, ptxas -v; no GPU here, so the kernel cannot run or be timed):")
            emit(text)
            return None
        res = build.build_cuda(
            src,
            cache_dir=build.default_cache_dir(),
            arch=build.gpu_arch(),
            timeout_s=problem.limits.build_s,
            scratch=scratch,
        )
        if not res.ok or res.lib is None:
            emit("nvcc failed:\n" + "\n".join(build.error_lines(res.log) or res.log.strip().splitlines()[-20:]))
            return None
        path = str(scratch.add_file(res.lib, res.lib.name))
    else:
        why = availability.triton_missing()
        if why:
            emit(f"cannot run Triton here: {why}")
            return None
        path = str(src)
    target = Target(impl, path, impl.file)
    payload = {
        "inputs": operands.timing_seeds(problem, case, 0, 1),  # every input of the op (spec `inputs:`)
        "reps": REPS if timed else 0,
        "time": timed,
    }
    try:
        with Sandbox(device) as box:
            box.request("load", target.payload(problem), timeout_s=problem.limits.case_s, what="loading the submission")
            r = box.request("profile", payload, timeout_s=problem.limits.timing_s, what=f"profiling {case.name}")
    except WorkerFailure as e:
        emit(f"the call failed: {e.line}" + (f"\n{e.detail}" if e.detail else ""))
        return None
    if not isinstance(r, dict):
        emit("the worker sent a malformed reply")
        return None
    if impl.kind == "triton":
        emit("Triton launches (one call):")
        for line in launch_lines(_strs(r.get("launches"))):
            emit(line)
    if device != "cuda":
        return None
    ms = r.get("median_ms")
    kernels = [k for k in _strs(r.get("kernels")) if isinstance(k, list) and len(k) == 3]
    if isinstance(r.get("table"), str):
        emit(f"torch.profiler, {REPS} calls (sorted by device time):")
        emit(r["table"][:30000])
    for name, count, us in kernels:
        emit(f"  {str(name)[:120]}: {count} launch(es) in {REPS} calls, {float(us) / REPS:.1f} us per call")
    if isinstance(ms, float) and ms > 0:
        from grader.performance.judgement import bytes_moved  # here: grader.performance imports torch

        nbytes = bytes_moved(problem, case)
        bps = nbytes / (ms * 1e-3)
        line = (
            f"median {ms:.4f} ms per call (triton.testing.do_bench); {nbytes / 1e9:.3f} GB moved: {bps / 1e9:.0f} GB/s"
        )
        if ceiling:
            line += f" = {100 * bps / ceiling['copy']:.0f}% of the copy ceiling"
            line += f" ({100 * bps / max(ceiling.values()):.0f}% of the faster 2:1 one)"
        emit(line)
    return [str(k[0]) for k in kernels]
