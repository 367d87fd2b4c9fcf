"""The one place that knows the order of the stages:

    spec -> (build) -> inputs -> run in a child -> check -> time -> score -> report

Each stage is its own module and never calls the next one; this module passes data from one to the next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grader import availability, identity, signing
from grader.correctness import static
from grader.correctness.stage import Target, run_correctness
from grader.errors import UsageError
from grader.performance import gpulock, run_performance, skipped_tests, start_workers
from grader.performance.workers import settle
from grader.problem.reference import load_reference
from grader.problem.spec import Case, Implementation, Problem, sibling_folders
from grader.results import FAILED, PASSED, SKIPPED, Code, Finding, Grade, Kind, Reason, TestResult
from grader.sandbox import WorkerFailure


class GraderError(UsageError):
    """The grader itself cannot run (bad spec, missing submission directory). One line; exit code 2."""


@dataclass
class Options:
    submission: Path
    out: Path
    only: tuple[str, ...] = ()
    device: str = "auto"
    staff: bool = False  # grade the staff solutions named in the spec instead of a submission
    secret: int = 0
    perf: bool = True
    keyed: bool = False  # a key file was read (cli): the grade can be official, and then it is signed
    scratch: Path | None = None  # where the grade's private scratch is made (default: the system's temp directory)
    correctness: bool = True  # False for `bench`: timing (with its sampled output checks) only
    # --case: fnmatch patterns; only the correctness and performance cases whose name matches one are run. A
    # grade of a subset is partial: never official, so never signed (Grade.partial says which patterns).
    cases: tuple[str, ...] = ()
    # `grade --watch` (grader/cli.py): the cases that failed last time run first, and each part stops at its first
    # failing case; a grade that stopped is partial (Grade.partial), never official, and not timed.
    first: tuple[str, ...] = ()
    stop_at_failure: bool = False
    # Whose submission this is, signed into results.json (grader/signing.py new_identity): `--student-id`, the
    # batch's id; on Gradescope its submission metadata's submission id and members (grader/publish/gradescope.py).
    student_id: str | None = None
    submission_id: str | None = None
    users: tuple[dict[str, str], ...] = ()


def select_cases(problem: Problem, patterns: tuple[str, ...]) -> Problem:
    """The problem with only the cases (correctness and performance) whose name matches a pattern (fnmatch,
    case-sensitive). A pattern that matches no case is an error naming the cases there are."""
    if not patterns:
        return problem
    names = [c.name for c in problem.cases] + [
        c.name for c in (problem.performance.cases if problem.performance else ())
    ]
    for p in patterns:
        if not any(fnmatch.fnmatchcase(n, p) for n in names):
            raise GraderError(
                f"--case {p}: matches no case (cases: {', '.join(dict.fromkeys(n.split('/')[0] for n in names))}; "
                "a glob such as 'odd_h_1001/*' or '*float16' selects several)"
            )

    def keep(c: Case) -> bool:
        return any(fnmatch.fnmatchcase(c.name, p) for p in patterns)

    perf = problem.performance
    if perf is not None:
        perf = dataclasses.replace(perf, cases=tuple(c for c in perf.cases if keep(c)))
    return dataclasses.replace(problem, cases=tuple(c for c in problem.cases if keep(c)), performance=perf)


def run_first(problem: Problem, names: tuple[str, ...]) -> Problem:
    """The problem with the correctness cases named in `names` first (in that order), the rest after them in the
    spec's order. Only the order changes: each case's inputs come from its own seed, not its position."""
    if not names:
        return problem
    rank = {n: i for i, n in enumerate(names)}
    cases = sorted(problem.cases, key=lambda c: rank.get(c.name, len(rank)))  # stable: the rest keep their order
    return dataclasses.replace(problem, cases=tuple(cases))


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise GraderError("--device cuda was asked for, but PyTorch sees no CUDA GPU here (use --device auto or cpu)")
    if device not in ("cpu", "cuda"):
        raise GraderError(f"--device must be auto, cpu or cuda, not {device!r}")
    return device


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


def _fail_all(problem: Problem, impl: Implementation, state: str, why: str, reason: Reason) -> list[TestResult]:
    return [
        TestResult(
            f"{impl.name} / correctness / {c.name}",
            impl.name,
            "correctness",
            0.0,
            c.points,
            state,
            why,
            {"case": c.name},
            kind=Kind.CORRECTNESS,
            reason=reason,
        )
        for c in problem.cases
    ]


def grade(problem: Problem, opts: Options, progress: Callable[[str], None] = lambda s: None) -> Grade:
    """Grade one submission, its untrusted processes under the grade's own identity and scratch (grader/identity.py)."""
    device = resolve_device(opts.device)
    problem = run_first(select_cases(problem, opts.cases), opts.first)
    if not opts.staff:
        if not opts.submission.is_dir():
            raise GraderError(f"submission directory {opts.submission} does not exist (pass --submission DIR)")
        if not any(opts.submission.iterdir()):
            raise GraderError(
                f"submission directory {opts.submission} is empty: it should hold "
                + ", ".join(i.file for i in problem.student_implementations.values())
            )
    scratch = open_scratch(opts.scratch)
    with scratch, identity.activate(scratch):
        return _grade(problem, opts, device, scratch, progress)


def open_scratch(base: Path | None = None) -> identity.Scratch:
    """The grade's identity and private scratch, where student code runs (grader/identity.py)."""
    from grader.cuda import build

    ident = identity.pick_identity()
    trusted_cache = build.default_cache_dir() / "trusted"
    scratch = _scratch(ident, trusted_cache, base)
    why = identity.probe(ident, scratch) if ident.separated else ""
    if why:
        # The untrusted uid cannot start the grader's Python here (e.g. it is installed under /root): run as
        # ourselves rather than not at all, and say that this grade is not official.
        scratch.close()
        ident = identity.Identity(
            os.getuid(),
            os.getgid(),
            False,
            [
                f"the unprivileged uid could not start this Python ({why}); install the grader where other "
                "users can read it (the container does)"
            ],
        )
        scratch = _scratch(ident, trusted_cache, base)
    return scratch


def _scratch(ident: identity.Identity, trusted_cache: Path, base: Path | None) -> identity.Scratch:
    try:
        return identity.Scratch(ident, trusted_cache, base=base)
    except OSError as e:
        raise GraderError(
            f"cannot make a private scratch directory ({e.strerror or e}): set TMPDIR to a writable folder"
        ) from None


def official_reasons(problem: Problem, scratch: identity.Scratch) -> list[str]:
    """Why a grade made here could not be official (empty: it can). An official grade needs a separate uid for
    submission code, which must not be able to read the staff solutions or write the grader's code or Python."""
    ident = scratch.identity
    why = list(ident.why_not)
    if not ident.separated:
        return why
    for impl in problem.implementations.values():
        if impl.staff.exists() and identity.readable_by(impl.staff, ident):
            why.append(
                f"the staff solution {impl.staff.name} is readable by the student uid "
                "(grade from the container, which has none, or chmod 600 it)"
            )
    for d in {Path(__file__).resolve().parent, *(Path(p) for p in sys.path if p and Path(p).is_dir())}:
        if identity.writable_by(d, ident):
            why.append(f"{d.name or d} (the grader's code or Python) is writable by the student uid")
    # Not only this spec's files: whatever staff file or trusted module the student uid can import or #include,
    # asked of that uid through the worker's own interpreter, sys.path, finders and include paths (issue 28, 8).
    from grader import staffprobe

    staff = [i.staff.name for i in problem.implementations.values()]
    why += staffprobe.reasons(staffprobe.probe(scratch, staff, [problem.name, problem.path.parent.name]))
    return why


def _identity(problem: Problem, opts: Options, scratch: identity.Scratch) -> dict[str, Any]:
    """Whose grade this is, hashed before any submission code runs: the files are the grade's own read-only copy of
    the submission (what the workers import), so the hash is of exactly what was graded."""
    return signing.new_identity(
        student_id=None if opts.staff else opts.student_id,
        files_sha256=None if opts.staff else signing.files_digest(scratch.submission),
        problem=problem.name,
        spec_sha256=hashlib.sha256(problem.path.read_bytes()).hexdigest(),
        submission_id=opts.submission_id,
        users=list(opts.users),
    )


def worth_naming(submission: Path, skipped: list[str], problem: Problem) -> list[str]:
    """What of the submission's skipped entries the student should hear about. Python's own cache and the other
    problems' folders of a course submission (or of assignment/ itself, grader/problem/spec.py sibling_folders) are no
    mistake; a folder of helpers, a link or an oversized file may be one (none of them reaches the grader)."""
    if not skipped:  # the common case: no spec beside this one is read
        return []
    expected = {"__pycache__", *sibling_folders(problem)}
    return [
        s for s in skipped if not (s in expected and (submission / s).is_dir() and not (submission / s).is_symlink())
    ]


def _grade(
    problem: Problem, opts: Options, device: str, scratch: identity.Scratch, progress: Callable[[str], None]
) -> Grade:
    ref = load_reference(problem)
    g = Grade(problem=problem.name, submission="staff solutions" if opts.staff else str(opts.submission), device=device)
    g.official_why = official_reasons(problem, scratch)
    if not opts.keyed:
        g.official_why.append("no key file (--secret-file): a local grade, advisory and unsigned")
    if opts.staff:
        g.official_why.append("--staff grades the staff solutions, not a submission")
    if opts.cases:
        g.partial = list(opts.cases)
        g.official_why.append(
            f"partial: only the cases matching --case {' '.join(opts.cases)} were run; a grade counts only in full"
        )
        g.notes.append(
            f"partial grade: only the {len(problem.cases)} correctness and "
            f"{len(problem.performance.cases) if problem.performance else 0} performance case(s) matching --case "
            f"{' '.join(opts.cases)} were run; the score is of those, not the assignment's"
        )
    g.official = not g.official_why
    if not opts.staff:
        skipped = scratch.add_submission(opts.submission)
        skipped = worth_naming(opts.submission, skipped, problem)
        if skipped:
            g.notes.append("not graded (links, folders, or over the size limit): " + ", ".join(skipped[:10]))
    g.identity = _identity(problem, opts, scratch)
    # A staff-only row (spec `staff_only`, e.g. the lecture's naive kernel) is graded and timed with --staff only.
    parts = problem.implementations if opts.staff else problem.student_implementations
    impls = [i for n, i in parts.items() if not opts.only or n in opts.only]
    if opts.only and not impls:
        raise GraderError(
            f"--only {','.join(opts.only)} matches no implementation (choose from {', '.join(problem.implementations)})"
        )

    targets: list[Target] = []
    cuda_sources: dict[str, tuple[Path, str]] = {}  # a CUDA part's source, for the compute-sanitizer pass on a GPU
    no_triton: list[Implementation] = []  # Triton parts this machine cannot run (grader/availability.py)
    if opts.staff:
        missing = [i.staff.name for i in impls if not i.staff.is_file()]
        if missing:
            raise GraderError(
                f"--staff: {', '.join(missing)} not in this install (the grading image has no staff "
                "solutions); grade them from a checkout of the repository"
            )
    for impl in impls:
        src, display = _source(problem, impl, opts)
        if opts.staff and src.is_file():
            src = scratch.add_file(src, src.name)
        else:
            src = scratch.submission / impl.file  # the grade's read-only copy, which the untrusted uid can read
        if not src.is_file():
            g.tests += _fail_all(
                problem, impl, FAILED, f"not run: {display} not found in the submission directory", Reason.MISSING
            )
            g.notes.append(f"{impl.name}: {display} is missing")
            continue
        target_path = str(src)
        warns = static.scan(src, impl.kind)
        row = _one_line(
            impl, Kind.STATIC, PASSED, "\n".join(w.text() for w in warns) if warns else "no static warnings"
        )
        row.findings = [Finding(Code.STATIC, w.text()) for w in warns]
        g.tests.append(row)
        why = availability.triton_missing() if impl.kind == "triton" else None
        if why:
            # macOS, Windows: no Triton wheels. Nothing of this part can run here; say so, and how to grade it.
            g.tests += _fail_all(problem, impl, SKIPPED, f"skipped: {why}", Reason.NEEDS_TRITON)
            g.notes.append(availability.not_graded_here(impl.name, why, opts.submission, opts.out))
            no_triton.append(impl)
            continue
        if impl.kind == "cuda":
            from grader.cuda import build  # nvcc helpers; imported only when a CUDA part is graded

            t0 = time.monotonic()
            progress(f"{impl.name}: building {display} with nvcc")
            res = build.build_cuda(
                src,
                cache_dir=build.default_cache_dir(),
                arch=build.gpu_arch(),
                timeout_s=problem.limits.build_s,
                scratch=scratch,
            )
            g.phases["build"] = g.phases.get("build", 0.0) + time.monotonic() - t0
            no_nvcc = not res.ok and build.find_nvcc() is None
            if device == "cpu" and (res.ok or no_nvcc):
                # No GPU: the CUDA-on-CPU layer runs the kernel here (grader/cuda/cudacpu.py); nvcc, where it exists,
                # still gives the build verdict and the compiler report.
                target = _cuda_on_cpu(problem, impl, src, display, res, g, scratch, progress)
                if target is not None:
                    targets.append(target)
                continue
            if not res.ok:
                errs = build.error_lines(res.log) or res.log.strip().splitlines()[-20:]
                g.tests.append(
                    _one_line(impl, Kind.BUILD, FAILED, "nvcc failed:\n" + "\n".join(errs), Reason.BUILD_FAILED)
                )
                g.tests += _fail_all(
                    problem,
                    impl,
                    FAILED,
                    f"not run: {display} did not compile (see '{impl.name} / build')",
                    Reason.BUILD_FAILED,
                )
                continue
            how = "cached" if res.cached else f"{res.seconds:.1f} s"
            g.tests.append(_one_line(impl, Kind.BUILD, PASSED, f"compiled with nvcc ({how})"))
            assert res.lib is not None
            target_path = str(scratch.add_file(res.lib, res.lib.name))  # the verified library, read-only to the worker
            cuda_sources[impl.name] = (src, display)
        targets.append(Target(impl, target_path, display))

    # The timing workers start now, in the background: their start-up (imports, CUDA context) overlaps the
    # correctness stage. They measure the GPU only when the timing stage loads them.
    # torch.compile's GPU code is Triton: where Triton cannot run there is no compiled baseline, so no thresholds.
    no_triton_why = availability.triton_missing()
    no_compile = (
        f"the torch.compile baseline needs Triton: {no_triton_why}"
        if no_triton_why and device == "cuda" and any("compile" in b for b in problem.baselines.values())
        else ""
    )
    # Another grade on this GPU (batch --per-gpu) may run beside this one's stages, never beside its timing
    # (grader/performance/gpulock.py): the shared hold covers the timing workers' start and the correctness stage.
    shared = contextlib.ExitStack()
    if device == "cuda" and targets:
        if waited := shared.enter_context(gpulock.phase(False, progress)):
            g.phases["gpu_wait"] = waited
    early = None
    if opts.perf and problem.performance is not None and device == "cuda" and targets and not no_compile:
        progress("performance: starting workers (in the background)")
        early = start_workers(problem, targets, device)
    if opts.correctness and targets:
        # Parts are independent processes: check them concurrently (each waits mostly on its own child). A CUDA
        # part's compute-sanitizer pass (on a GPU) is one more such process: it runs beside them, not after (it
        # took 36 s of an 80 s staff grade on the H200 when it ran after them), and before any timing.
        t0 = time.monotonic()
        san_parts = [t for t in targets if t.impl.name in cuda_sources] if device == "cuda" else []
        try:
            with ThreadPoolExecutor(max_workers=len(targets) + len(san_parts)) as pool:
                futures = [
                    pool.submit(
                        run_correctness,
                        problem,
                        t,
                        ref,
                        device=device,
                        secret=opts.secret,
                        progress=progress,
                        stop_at_failure=opts.stop_at_failure,
                    )
                    for t in targets
                ]
                san_futures = []
                if san_parts:
                    from grader.cuda import sanitizer

                    san_futures = [
                        pool.submit(
                            sanitizer.run_pass,
                            problem,
                            t.impl,
                            *cuda_sources[t.impl.name],
                            ref,
                            secret=opts.secret,
                            scratch=scratch,
                            progress=progress,
                        )
                        for t in san_parts
                    ]
                for f in futures:
                    g.tests += f.result()
                g.phases["correctness"] = time.monotonic() - t0
                t1 = time.monotonic()
                for sf in san_futures:
                    san_row = sf.result()
                    g.tests.append(san_row)
                    sanitizer.charge(g.tests, san_row)  # a flagged case loses its points, as on the CPU layer
                if san_futures:
                    g.phases["sanitizer"] = time.monotonic() - t1  # what it added after the correctness stage
            for t in g.tests:
                if t.kind == Kind.COMPILE_CHECK and t.state == FAILED:
                    g.notes.append(
                        f"{t.part}: passes here in Triton's interpreter but will not compile on a GPU, "
                        f"where every {t.part} case would fail: see '{t.name}'"
                    )
        except BaseException:
            for b in (early or {}).values():
                b.close()
            shared.close()
            raise
    if early and os.environ.get(gpulock.ENV):
        # The timing workers' start-up and the baselines' torch.compile run on the GPU in the background: over
        # before the shared hold ends, so another grade's timing never runs beside them.
        progress("performance: waiting for the timing workers to be ready")
        settle(early, problem.limits.timing_s)
    shared.close()

    perf_targets = targets if device == "cuda" else [Target(i, "", i.file) for i in impls]
    stopped = [t for t in g.tests if t.extra.get("stopped")]
    if stopped:
        ran = [str(t.extra["case"]) for t in g.tests if t.kind == Kind.CORRECTNESS and t.state in (PASSED, FAILED)]
        g.partial = g.partial or list(dict.fromkeys(ran))
        g.official_why.append("partial: --watch stopped at the first failing case; a grade counts only in full")
        g.official = False
        g.notes.append(
            f"stopped at the first failing case: {len(stopped)} case(s) not run and nothing timed; fix it and "
            "save, or watch with --all to run every case"
        )
    if not opts.perf or problem.performance is None:
        pass
    elif stopped and device == "cuda":  # (on a CPU nothing is timed anyway: the usual rows below)
        unrun = skipped_tests(
            problem, perf_targets, "not timed: --watch stopped at the first failing case", Reason.NOT_RUN
        )
        for t in unrun:
            t.state = SKIPPED  # not run, so not failed: the grade is partial, and a full one times them
        g.tests += unrun
    elif device != "cuda":
        g.tests += skipped_tests(
            problem, perf_targets, "skipped: performance is timed only on a CUDA GPU", Reason.NEEDS_GPU
        )
        g.notes.append("performance: skipped, no CUDA GPU on this machine")
    elif no_compile:
        g.tests += skipped_tests(
            problem, [Target(i, "", i.file) for i in impls], f"skipped: {no_compile}", Reason.NEEDS_TRITON
        )
        g.notes.append(f"performance: not timed on this machine: {no_compile}")
    else:
        g.tests += skipped_tests(
            problem, [Target(i, "", i.file) for i in no_triton], f"skipped: {no_triton_why}", Reason.NEEDS_TRITON
        )
        t0 = time.monotonic()
        try:
            with gpulock.phase(True, progress) as waited:  # alone on the GPU while timing
                if waited:
                    g.phases["gpu_wait"] = g.phases.get("gpu_wait", 0.0) + waited
                t0 = time.monotonic()
                tests, g.perf = run_performance(
                    problem, targets, ref, device=device, secret=opts.secret, progress=progress, started=early
                )
            g.tests += tests
        except (RuntimeError, WorkerFailure) as e:
            # The trusted baselines could not be timed: no thresholds, so no speed grade at all this run.
            g.tests += skipped_tests(problem, targets, f"not timed: {e}", Reason.NOT_TIMED)
            g.notes.append(f"performance: not graded this run ({e}); re-run the grader")
        g.phases["timing"] = time.monotonic() - t0
        # First calls (Triton JIT, torch.compile) are never inside a timed number. The baselines' were made while
        # the correctness stage ran (performance.start_workers) when their worker could prepare them; the rest
        # are inside the timing phase.
        early = g.perf.get("baseline_first_calls_s", {})
        g.perf["first_call_s"] = sum(
            float(d.get("compile_s") or 0.0)
            for name, ci in g.perf.get("cases", {}).items()
            for d in (*([] if name in early else ci.get("baselines", {}).values()), *ci.get("impls", {}).values())
        )
        g.perf["first_call_overlapped_s"] = sum(float(v) for c in early.values() for v in c.values())

    _apply_forfeits(g)
    # One part after the other, stages in pipeline order (parts are checked concurrently, so append order varies).
    part_rank = {n: i for i, n in enumerate(problem.implementations)}
    g.tests.sort(key=lambda t: (part_rank.get(t.part, len(part_rank)), _stage_rank(t)))
    # (cases --watch did not run are not this machine's limit: a full grade runs them)
    unearnable = g.unearnable - sum(t.max_score for t in g.tests if t.state == SKIPPED and t.reason == Reason.NOT_RUN)
    if unearnable:
        g.notes.append(
            f"{unearnable:g} of {g.max_score:g} points could not be earned on this machine ({device}); grade "
            "on a GPU for those"
        )
    return g


def _cuda_on_cpu(
    problem: Problem,
    impl: Implementation,
    src: Path,
    display: str,
    res: Any,
    g: Grade,
    scratch: identity.Scratch,
    progress: Callable[[str], None],
) -> Target | None:
    """A CUDA part on a machine without a GPU: nvcc's verdict and compiler report (where nvcc exists), then the
    build for the CPU layer. Its Target when the layer can run it; else its cases are skipped as needing a GPU, with
    the reason (what the layer cannot run, or no C++ compiler and how to get one), never failed."""
    from grader.cuda import build, cudacpu, cudainfo

    if res.ok:
        how = "cached" if res.cached else f"{res.seconds:.1f} s"
        g.tests.append(_one_line(impl, Kind.BUILD, PASSED, f"compiled with nvcc ({how})"))
        # No GPU to time it: the compiler's report (access widths, registers, spills) is what there is for speed.
        text, info = cudainfo.report(src, timeout_s=problem.limits.build_s, scratch=scratch)
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
    progress(f"{impl.name}: building {display} for the CPU (CUDA-on-CPU layer)")
    cpu = cudacpu.build_cpu(
        src,
        entry=impl.entry,
        out_name=f"{impl.name}.cpu",
        scratch=scratch,
        timeout_s=problem.limits.build_s,
        nvcc_ok=res.ok,
        inputs=len(problem.inputs),  # the harness's entry follows the spec's signature
    )
    g.phases["build"] = g.phases.get("build", 0.0) + time.monotonic() - t0
    ok = cpu.state == cudacpu.State.OK
    row = _one_line(impl, Kind.CPU_BUILD, PASSED if ok else SKIPPED, cpu.text, Reason.OK if ok else Reason.NEEDS_GPU)
    row.extra.update({"compiler": cpu.compiler, "sanitized": cpu.sanitized, "needs_gpu": cpu.constructs})
    g.tests.append(row)
    if ok:
        assert cpu.harness is not None
        g.notes.append(f"{impl.name}: {cudacpu.CPU_NOTE}")
        return Target(impl, str(cpu.harness), display, cpu_layer=True)
    first = cpu.text.splitlines()[0]
    g.tests += _fail_all(problem, impl, SKIPPED, f"skipped: {first} (see '{row.name}')", Reason.NEEDS_GPU)
    g.notes.append(f"{impl.name}: not run on this machine: {first}")
    return None


def _apply_forfeits(g: Grade) -> None:
    """A part whose kernel check found the work done outside its own kernels earns nothing, however right or fast."""
    for part in {t.part for t in g.tests if t.kind == Kind.KERNEL_CHECK and t.reason == Reason.VIOLATION}:
        for t in g.tests:
            if t.part == part and t.score:
                t.score = 0.0
                t.state = FAILED
                t.reason = Reason.FORFEIT
                t.output = (
                    f"forfeit: the '{part} / kernel check' found the work done outside your own kernel\n" + t.output
                )
        g.notes.append(f"{part}: all points forfeit, see '{part} / kernel check'")


_KIND_RANK = {
    Kind.STATIC: 0,
    Kind.BUILD: 1,
    Kind.COMPILER_REPORT: 1,
    Kind.CPU_BUILD: 1,
    Kind.CORRECTNESS: 2,
    Kind.KERNEL_CHECK: 3,
    Kind.COMPILE_CHECK: 3,
    Kind.SANITIZER: 3,
    Kind.PERFORMANCE: 4,
}


def _stage_rank(t: TestResult) -> int:
    return _KIND_RANK.get(t.kind, 5)
