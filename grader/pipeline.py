"""The one place that knows the order of the stages:

    spec -> (build) -> inputs -> run in a child -> check -> time -> score -> report

Each stage is its own module and never calls the next one; this module passes data from one to the next. Its
steps: admit, prepare (grader/partprep.py), check, time, finish (grader/gradefinish.py); the record they read
and add to is grader/graderun.py's GradeRun. More: docs/architecture.md, "The grade's steps".
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from grader import availability, box, identity, signing
from grader.correctness.stage import run_correctness
from grader.correctness.target import Target
from grader.errors import UsageError
from grader.gradefinish import finish, note_stopped
from grader.graderun import GradeRun, Options
from grader.partprep import prepare_parts
from grader.performance import baselinerecord, gpulock, run_performance, skipped_tests, start_workers
from grader.performance.workers import settle
from grader.problem.reference import load_reference
from grader.problem.spec import Case, Implementation, Problem, sibling_folders
from grader.results import FAILED, SKIPPED, Grade, Kind, PerfSummary, Reason
from grader.sandbox import GraderFault, WorkerFailure


class GraderError(UsageError):
    """The grader itself cannot run (bad spec, missing submission directory). One line; exit code 2."""


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


def grade(
    problem: Problem,
    opts: Options,
    progress: Callable[[str], None] = lambda s: None,
    beside: Callable[[], None] | None = None,
) -> Grade:
    """Grade one submission, its untrusted processes under the grade's own identity and scratch (grader/identity.py).
    `beside`: the caller's own work (the CLI: the report's imports) run in a thread during a GPU grade's correctness
    stage, where the parent mostly waits on its children, and ended before the timing stage, so it never runs
    beside a timed call."""
    device = resolve_device(opts.device)
    problem = run_first(select_cases(problem, opts.cases), opts.first)
    _check_submission(problem, opts)
    scratch = open_scratch(opts.scratch, (*opts.hidden, opts.submission, opts.out))
    with scratch, identity.activate(scratch):
        return _grade(problem, opts, device, scratch, progress, beside)


def _check_submission(problem: Problem, opts: Options) -> None:
    """A missing or empty submission folder is a usage error, said before a scratch is made or anything runs."""
    if opts.staff:
        return
    if not opts.submission.is_dir():
        raise GraderError(f"submission directory {opts.submission} does not exist (pass --submission DIR)")
    if not any(opts.submission.iterdir()):
        raise GraderError(
            f"submission directory {opts.submission} is empty: it should hold "
            + ", ".join(i.file for i in problem.student_implementations.values())
        )


def open_scratch(base: Path | None = None, hidden: tuple[Path, ...] = ()) -> identity.Scratch:
    """The grade's identity and private scratch, where student code runs, in its box where one can be made
    (grader/identity.py, grader/box.py); `hidden`: what the box must not show (Options.hidden)."""
    from grader.cuda import build

    ident = identity.pick_identity()
    trusted_cache = build.default_cache_dir() / "trusted"
    hidden = tuple(Path(os.path.abspath(p)) for p in hidden)
    scratch = _scratch(ident, trusted_cache, base, hidden)
    why = identity.probe(ident, scratch) if ident.separated else ""
    if why:
        # The untrusted uid cannot start the grader's Python here (e.g. it is installed under /root): run as
        # ourselves rather than not at all, and say that this grade is not official.
        scratch.close()
        ident = identity.Identity(
            os.getuid(),
            os.getgid(),
            False,
            [identity.unreachable_python(why)],
        )
        scratch = _scratch(ident, trusted_cache, base, hidden)
    return scratch


def _scratch(
    ident: identity.Identity, trusted_cache: Path, base: Path | None, hidden: tuple[Path, ...] = ()
) -> identity.Scratch:
    try:
        return identity.Scratch(ident, trusted_cache, base=base, hidden=hidden)
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
    if scratch.containment == box.NONE:
        why.append(
            f"no kernel containment: {scratch.box_why}; or grade in the container, one grade per container "
            f"({box.DECLARE_ENV}=container)"
        )
    if scratch.box is None:
        # Without a box the student uid sees this machine's files as its modes allow: ask them. In a box, the view
        # shows none of them (read-only, and no staff file at all); the probe below checks that it holds.
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
    # asked of that uid through the worker's own interpreter, sys.path, finders and include paths.
    from grader import staffprobe

    staff = [i.staff.name for i in problem.implementations.values()]
    why += staffprobe.reasons(
        staffprobe.probe(scratch, staff, [problem.name, problem.path.parent.name], staffprobe.must_not_see(problem))
    )
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
    problems' folders of a course submission in the old layout (grader/problem/layout.py; spec.py sibling_folders)
    are no mistake; a folder of helpers, a link or an oversized file may be one (none of them reaches the grader)."""
    if not skipped:  # the common case: no spec beside this one is read
        return []
    expected = {"__pycache__", *sibling_folders(problem)}
    return [
        s for s in skipped if not (s in expected and (submission / s).is_dir() and not (submission / s).is_symlink())
    ]


def _grade(
    problem: Problem,
    opts: Options,
    device: str,
    scratch: identity.Scratch,
    progress: Callable[[str], None],
    beside: Callable[[], None] | None = None,
) -> Grade:
    """The grade, step by step; each step reads what the previous ones added to the run."""
    run = _admit(problem, opts, device, scratch, progress)
    run.beside = beside
    prepare_parts(run)
    _check(run)
    note_stopped(run)
    _time(run)
    finish(run)
    return run.grade


# -- admit: what is graded, whose it is, and whether it can count -----------------------------------------------


def _admit(
    problem: Problem, opts: Options, device: str, scratch: identity.Scratch, progress: Callable[[str], None]
) -> GradeRun:
    """Everything decided before any submission code runs: whether the grade can be official, the read-only copy
    of the submission and its hash (whose grade this is), and which parts are graded. A grade that cannot run as
    asked (--only naming no part, --staff without staff files) stops here, before anything is built."""
    ref = load_reference(problem)
    g = Grade(problem=problem.name, submission="staff solutions" if opts.staff else str(opts.submission), device=device)
    g.notes += opts.notes
    _officialness(g, problem, opts, scratch)
    if not opts.staff:
        skipped = scratch.add_submission(opts.submission)
        skipped = worth_naming(opts.submission, skipped, problem)
        if skipped:
            g.notes.append("not graded (links, folders, or over the size limit): " + ", ".join(skipped[:10]))
    g.identity = _identity(problem, opts, scratch)
    return GradeRun(problem, opts, device, scratch, progress, ref, g, impls=_parts(problem, opts))


def _officialness(g: Grade, problem: Problem, opts: Options, scratch: identity.Scratch) -> None:
    """Why this grade cannot be official (this machine, no key, --staff, --case), decided before it runs: only an
    official grade is signed. A --case grade is partial, and its notes say the score is of those cases only."""
    g.containment = scratch.containment
    if scratch.identity.separated and scratch.containment != box.BOX:
        # said once, in the grade's notes: what holds the grade instead of a box, and why there is none
        held = "one grade per container, as the deployment declares" if scratch.containment == box.CONTAINER else "none"
        g.notes.append(f"containment: {scratch.containment} ({held}); no box: {scratch.box_why}")
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


def _parts(problem: Problem, opts: Options) -> list[Implementation]:
    """The parts this grade covers: --only's, and a staff-only row (spec `staff_only`, e.g. the lecture's naive
    kernel) with --staff only. A usage error when --only names none, or --staff has no staff files here."""
    parts = problem.implementations if opts.staff else problem.student_implementations
    impls = [i for n, i in parts.items() if not opts.only or n in opts.only]
    if opts.only and not impls:
        raise GraderError(
            f"--only {','.join(opts.only)} matches no implementation (choose from {', '.join(problem.implementations)})"
        )
    if opts.staff:
        missing = [i.staff.name for i in impls if not i.staff.is_file()]
        if missing:
            raise GraderError(
                f"--staff: {', '.join(missing)} not in this install (the grading image has no staff "
                "solutions); grade them from a checkout of the repository"
            )
    return impls


# -- check: correctness of every part, while the timing workers start ------------------------------------------


def _check(run: GradeRun) -> None:
    """Correctness of every part (and, on a GPU, a CUDA part's compute-sanitizer pass), while the timing workers
    start in the background: their start-up (imports, CUDA context) overlaps this stage. They measure the GPU only
    when the timing step loads them. Another grade on this GPU (batch --per-gpu) may run beside this step, never
    beside timing (grader/performance/gpulock.py): the shared hold covers the workers' start and this stage."""
    # torch.compile's GPU code is Triton: where Triton cannot run there is no compiled baseline, so no thresholds.
    run.no_triton_why = availability.triton_missing()
    if run.no_triton_why and run.device == "cuda" and any("compile" in b for b in run.problem.baselines.values()):
        run.no_compile = f"the torch.compile baseline needs Triton: {run.no_triton_why}"
    with contextlib.ExitStack() as shared:
        if run.device == "cuda" and run.targets:
            if waited := shared.enter_context(gpulock.phase(False, run.progress)):
                run.grade.phases["gpu_wait"] = waited
        opts, problem = run.opts, run.problem
        if (
            opts.perf
            and problem.performance is not None
            and run.device == "cuda"
            and run.targets
            and not run.no_compile
        ):
            run.progress("performance: starting workers (in the background)")
            record = _record_path()
            run.early = start_workers(
                problem, run.targets, run.device, recorded=record is not None and record.is_file()
            )
            if run.beside is not None:
                run.beside_thread = threading.Thread(target=_quietly(run.beside), name="beside", daemon=True)
                run.beside_thread.start()
        if opts.correctness and run.targets:
            try:
                _check_parts(run)
            except BaseException:
                for b in (run.early or {}).values():
                    b.close()
                raise
        if run.early and os.environ.get(gpulock.ENV):
            # The timing workers' start-up and the baselines' torch.compile run on the GPU in the background: over
            # before the shared hold ends, so another grade's timing never runs beside them.
            run.progress("performance: waiting for the timing workers to be ready")
            settle(run.early, problem.limits.timing_s)


def _check_parts(run: GradeRun) -> None:
    """Parts are independent processes: check them concurrently (each waits mostly on its own child). A CUDA part's
    compute-sanitizer pass (on a GPU) is one more such process: it runs beside them, not after (it took 36 s of an
    80 s staff grade on the H200 when it ran after them), and before any timing."""
    g, opts = run.grade, run.opts
    t0 = time.monotonic()
    san_parts = [t for t in run.targets if t.impl.name in run.cuda_sources] if run.device == "cuda" else []
    with ThreadPoolExecutor(max_workers=len(run.targets) + len(san_parts)) as pool:
        futures = [
            pool.submit(
                run_correctness,
                run.problem,
                t,
                run.ref,
                device=run.device,
                secret=opts.secret,
                progress=run.progress,
                stop_at_failure=opts.stop_at_failure,
            )
            for t in run.targets
        ]
        san_futures = []
        if san_parts:
            from grader.correctness import sanitizer

            san_futures = [
                pool.submit(
                    sanitizer.run_pass,
                    run.problem,
                    t.impl,
                    *run.cuda_sources[t.impl.name],
                    run.ref,
                    secret=opts.secret,
                    scratch=run.scratch,
                    progress=run.progress,
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


# -- time: performance, alone on the GPU ---------------------------------------------------------------------------


def _time(run: GradeRun) -> None:
    """The performance rows: timed on a CUDA GPU, or skipped with the reason (no GPU, no Triton for the compiled
    baseline, a --watch grade that stopped), so that a grade always says what its speed points wait for."""
    g, problem, device = run.grade, run.problem, run.device
    if not run.opts.perf or problem.performance is None:
        return
    perf_targets = run.targets if device == "cuda" else [Target(i, "", i.file) for i in run.impls]
    if run.stopped and device == "cuda":  # (on a CPU nothing is timed anyway: the usual rows below)
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
    elif run.no_compile:
        g.tests += skipped_tests(
            problem, [Target(i, "", i.file) for i in run.impls], f"skipped: {run.no_compile}", Reason.NEEDS_TRITON
        )
        g.notes.append(f"performance: not timed on this machine: {run.no_compile}")
    else:
        g.tests += skipped_tests(
            problem,
            [Target(i, "", i.file) for i in run.no_triton],
            f"skipped: {run.no_triton_why}",
            Reason.NEEDS_TRITON,
        )
        _time_parts(run)


def _time_parts(run: GradeRun) -> None:
    """The timing stage, alone on the GPU (the exclusive hold). When the trusted baselines cannot be timed there are
    no thresholds, so no speed grade at all this run: the rows say so and the grade asks for a re-run."""
    g = run.grade
    if run.beside_thread is not None:
        run.beside_thread.join()  # nothing of the parent's own runs beside a timed call
    t0 = time.monotonic()
    try:
        with gpulock.phase(True, run.progress) as waited:  # alone on the GPU while timing
            if waited:
                g.phases["gpu_wait"] = g.phases.get("gpu_wait", 0.0) + waited
            t0 = time.monotonic()
            tests, info = run_performance(
                run.problem,
                run.targets,
                run.ref,
                device=run.device,
                secret=run.opts.secret,
                progress=run.progress,
                started=run.early,
                record_path=_record_path(),
            )
        g.perf = PerfSummary.from_json(info)  # the stage's dict, parsed once: Grade.to_json writes it back
        g.tests += tests
    except (RuntimeError, WorkerFailure) as e:
        # What reaches here failed on the trusted side (the baselines' worker; a submission's own worker that
        # fails is its row's 'not timed'). In a batch the GPU is shared with other grades, whose workers can take
        # the memory the baselines need (three grades on an 80 GB GPU did): the machine's doing, not the
        # submission's, so a grader fault, which the batch retries, never a grade that costs the speed points.
        if os.environ.get(gpulock.ENV):
            raise GraderFault(f"the timing stage failed on the trusted side (a shared GPU): {e}") from None
        g.tests += skipped_tests(run.problem, run.targets, f"not timed: {e}", Reason.NOT_TIMED)
        g.notes.append(f"performance: not graded this run ({e}); re-run the grader")
    g.phases["timing"] = time.monotonic() - t0
    _first_calls(g)


def _quietly(fn: Callable[[], None]) -> Callable[[], None]:
    """`fn` for a background thread: what it raises is dropped (the caller's optional work, done again when it is
    needed), never printed in the middle of a grade's progress."""

    def run() -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001
            pass

    return run


def _record_path() -> Path | None:
    """The batch's baseline record for this GPU (grader/performance/baselinerecord.py), named by the batch engine
    as it names the GPU's lock; none in a single grade."""
    path = os.environ.get(baselinerecord.ENV)
    return Path(path) if path else None


def _first_calls(g: Grade) -> None:
    """First calls (Triton JIT, torch.compile) are never inside a timed number; the summary says what they cost.
    The baselines' were made while the correctness stage ran (performance.start_workers) when their worker could
    prepare them (overlapped); the rest are inside the timing phase."""
    g.perf = g.perf.with_first_calls()
