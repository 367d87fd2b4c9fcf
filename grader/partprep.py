"""The grade's prepare step: each part becomes what a worker runs (a Target: its file, its built library or the
CUDA-on-CPU layer's harness), or the rows that say why it cannot run here (missing, did not compile, no Triton or no
GPU). The static scan's row comes first; a CUDA part's one build step is grader/cuda/part.py."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from grader import availability
from grader.correctness import static
from grader.correctness.target import Target
from grader.graderun import GradeRun, Options
from grader.problem.spec import Implementation, Problem
from grader.results import FAILED, PASSED, SKIPPED, Code, Finding, Kind, Reason, TestResult
from grader.textscan import cut_at_word

# The most of a failed build's log its row keeps (nvcc's output, influenced by the submission's source): enough for
# every error and warning of a real mistake, cut between words past it.
BUILD_LOG_MAX = 20000

if TYPE_CHECKING:  # the CUDA build's modules are imported only when a CUDA part is graded
    from grader.cuda.part import BuildRequest, PartBuild


def _source(problem: Problem, impl: Implementation, opts: Options) -> tuple[Path, str]:
    if opts.staff:
        return impl.staff, impl.staff.name
    return opts.submission / impl.file, impl.file


def _one_line(impl: Implementation, kind: Kind, state: str, output: str, reason: Reason = Reason.OK) -> TestResult:
    """A row with no points of its own: the build, static warnings, the compiler report."""
    stage = "build" if kind == Kind.BUILD else "checks"
    return TestResult(
        name=f"{impl.name} / {kind}",
        part=impl.name,
        stage=stage,
        score=0.0,
        max_score=0.0,
        state=state,
        output=output,
        kind=kind,
        reason=reason,
    )


def fail_all(
    problem: Problem, impl: Implementation, state: str, why: str, reason: Reason, device: str = "cuda"
) -> list[TestResult]:
    """A row per case of a part that cannot run (missing, did not compile, ...). On a CPU a GPU-only case is pending
    whatever the part did, as the correctness stage skips it when the part loads (correctness/tally.py
    skip_gpu_only): else a part that fails to build would count it as failed here, and the same case would be pending
    or lost, and the points this machine can earn differ, depending on how the part failed."""
    where = "the CPU layer's sanitized run" if impl.kind == "cuda" else "the Triton interpreter"
    gpu_only = f"skipped: this case runs only on a GPU (too slow for {where})"
    return [
        TestResult(
            f"{impl.name} / correctness / {c.name}",
            impl.name,
            "correctness",
            0.0,
            c.points,
            SKIPPED if pending else state,
            gpu_only if pending else why,
            {"case": c.name},
            kind=Kind.CORRECTNESS,
            reason=Reason.NEEDS_GPU if pending else reason,
        )
        for c in problem.cases
        for pending in [device == "cpu" and c.gpu_only and state == FAILED]
    ]


def prepare_parts(run: GradeRun) -> None:
    """Each part becomes what a worker runs (a Target: its file, or its built library or harness), or rows that say
    why it cannot run here (missing, did not compile, no Triton or no GPU); the static scan's row comes first."""
    for impl in run.impls:
        target = _prepare_part(run, impl)
        if target is not None:
            run.targets.append(target)


def _prepare_part(run: GradeRun, impl: Implementation) -> Target | None:
    """One part: its file from the grade's read-only copy, the static scan, and the build of a CUDA part."""
    g = run.grade
    src, display = _source(run.problem, impl, run.opts)
    if run.opts.staff and src.is_file():
        src = run.scratch.add_file(src, src.name)
    else:
        src = run.scratch.submission / impl.file  # the grade's read-only copy, which the untrusted uid can read
    if not src.is_file():
        g.tests += fail_all(
            run.problem,
            impl,
            FAILED,
            f"not run: {display} not found in the submission directory",
            Reason.MISSING,
            run.device,
        )
        g.notes.append(f"{impl.name}: {display} is missing")
        return None
    warns = static.scan(src, impl.kind)
    row = _one_line(impl, Kind.STATIC, PASSED, "\n".join(w.text() for w in warns) if warns else "no static warnings")
    row.findings = [Finding(Code.STATIC, w.text()) for w in warns]
    g.tests.append(row)
    why = availability.triton_missing() if impl.kind == "triton" else None
    if why:
        # macOS, Windows: no Triton wheels. Nothing of this part can run here; say so, and how to grade it.
        g.tests += fail_all(run.problem, impl, SKIPPED, f"skipped: {why}", Reason.NEEDS_TRITON)
        g.notes.append(availability.not_graded_here(impl.name, why, run.opts.submission, run.opts.out))
        run.no_triton.append(impl)
        return None
    if impl.kind == "cuda":
        return _build_cuda(run, impl, src, display)
    return Target(impl, str(src), display)


def _build_cuda(run: GradeRun, impl: Implementation, src: Path, display: str) -> Target | None:
    """The one build step of a CUDA part (grader/cuda/part.py). nvcc builds the library the torch binding loads (on
    a GPU, what is run and timed); without a GPU the CUDA-on-CPU layer's build runs it here instead, nvcc (where it
    exists) still giving the build verdict. A source nvcc rejects fails every case of the part, with nvcc's errors
    in its build row."""
    from grader.cuda import build  # nvcc helpers; imported only when a CUDA part is graded
    from grader.cuda.part import BuildFor, BuildRequest, State, build_part

    g, problem = run.grade, run.problem
    req = BuildRequest(
        src,
        impl.name,
        impl.entry,
        inputs=len(problem.inputs),  # the harnesses' entry follows the spec's signature
        timeout_s=problem.limits.build_s,
        scratch=run.scratch,
        arch=build.gpu_arch(),
        cache_dir=build.default_cache_dir(),
    )
    t0 = time.monotonic()
    run.progress(f"{impl.name}: building {display} with nvcc")
    res = build_part(req, BuildFor.LIBRARY)
    g.phases["build"] = g.phases.get("build", 0.0) + time.monotonic() - t0
    if run.device == "cpu" and (res.ok or res.state == State.NO_COMPILER):
        # No GPU: the CUDA-on-CPU layer runs the kernel here (grader/cuda/cudacpu.py); nvcc, where it exists, still
        # gives the build verdict and the compiler report.
        return _cuda_on_cpu(run, impl, req, display, res)
    if not res.ok:
        # nvcc's whole log (its warnings too, which the error lines alone leave out), capped: the reports show it.
        log = cut_at_word(res.text.strip(), BUILD_LOG_MAX) or res.errors()
        g.tests.append(_one_line(impl, Kind.BUILD, FAILED, "nvcc failed:\n" + log, Reason.BUILD_FAILED))
        g.tests += fail_all(
            problem,
            impl,
            FAILED,
            f"not run: {display} did not compile (see '{impl.name} / build')",
            Reason.BUILD_FAILED,
            run.device,
        )
        return None
    g.tests.append(_one_line(impl, Kind.BUILD, PASSED, f"compiled with nvcc ({_how(res)})"))
    assert res.artifact is not None
    # the verified library, read-only to the worker
    target_path = str(run.scratch.add_file(res.artifact, res.artifact.name))
    run.cuda_sources[impl.name] = (src, display)
    return Target(impl, target_path, display)


def _how(res: PartBuild) -> str:
    return "cached" if res.cached else f"{res.seconds:.1f} s"


def _cuda_on_cpu(run: GradeRun, impl: Implementation, req: BuildRequest, display: str, res: PartBuild) -> Target | None:
    """A CUDA part on a machine without a GPU: nvcc's verdict and compiler report (where nvcc exists), then the
    build for the CPU layer. Its Target when the layer can run it; else its cases are skipped as needing a GPU, with
    the reason (what the layer cannot run, or no C++ compiler and how to get one), never failed."""
    from grader.cuda import build, cudacpu, cudainfo
    from grader.cuda.part import BuildFor, State, build_part

    g, problem, scratch = run.grade, run.problem, run.scratch
    if res.ok:
        g.tests.append(_one_line(impl, Kind.BUILD, PASSED, f"compiled with nvcc ({_how(res)})"))
        # No GPU to time it: the compiler's report (access widths, registers, spills) is what there is for speed.
        text, info = cudainfo.report(req.src, timeout_s=problem.limits.build_s, scratch=scratch)
        row = _one_line(impl, Kind.COMPILER_REPORT, PASSED if info else SKIPPED, text)  # no info: no report
        row.extra.update(info)
        g.tests.append(row)
    else:
        g.tests.append(
            _one_line(
                impl,
                Kind.BUILD,
                SKIPPED,
                f"{build.NVCC_MISSING}; the CPU build checks your kernel's results instead, but only nvcc can say "
                "that it is valid CUDA",
                Reason.NEEDS_GPU,
            )
        )
    t0 = time.monotonic()
    run.progress(f"{impl.name}: building {display} for the CPU (CUDA-on-CPU layer)")
    cpu = build_part(dataclasses.replace(req, nvcc_ok=res.ok), BuildFor.CPU_LAYER)
    g.phases["build"] = g.phases.get("build", 0.0) + time.monotonic() - t0
    ok = cpu.state == State.OK
    row = _one_line(impl, Kind.CPU_BUILD, PASSED if ok else SKIPPED, cpu.text, Reason.OK if ok else Reason.NEEDS_GPU)
    row.extra.update({"compiler": cpu.compiler, "sanitized": cpu.sanitized, "needs_gpu": cpu.constructs})
    g.tests.append(row)
    if ok:
        assert cpu.artifact is not None
        g.notes.append(f"{impl.name}: {cudacpu.CPU_NOTE}")
        return Target(impl, str(cpu.artifact), display, cpu_layer=True)
    first = cpu.text.splitlines()[0]
    g.tests += fail_all(problem, impl, SKIPPED, f"skipped: {first} (see '{row.name}')", Reason.NEEDS_GPU)
    g.notes.append(f"{impl.name}: not run on this machine: {first}")
    return None
