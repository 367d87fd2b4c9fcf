"""What the grade decides over all its rows once the stages ran: a --watch grade that stopped is partial
(note_stopped), and the finish step (finish): forfeits, the rows' order, the points this machine could not give."""

from __future__ import annotations

from grader.graderun import GradeRun
from grader.results import FAILED, PASSED, Grade, Kind, TestResult


def note_stopped(run: GradeRun) -> None:
    """A --watch grade that stopped at its first failing case is partial: never official, and not timed."""
    g = run.grade
    stopped = [t for t in g.tests if t.extra.get("stopped")]
    run.stopped = len(stopped)
    if not stopped:
        return
    ran = [str(t.extra["case"]) for t in g.tests if t.kind == Kind.CORRECTNESS and t.state in (PASSED, FAILED)]
    g.partial = g.partial or list(dict.fromkeys(ran))
    g.official_why.append("partial: --watch stopped at the first failing case; a grade counts only in full")
    g.official = False
    g.notes.append(
        f"stopped at the first failing case: {len(stopped)} case(s) not run and nothing timed; fix it and "
        "save, or watch with --all to run every case"
    )


def finish(run: GradeRun) -> None:
    """What is decided over the whole grade: forfeits (a kernel-check violation costs the part every point), the
    rows' order (part after part, stages in pipeline order; parts were checked concurrently, so they arrive in any
    order), and the points this machine could not give (cases --watch did not run are not its limit)."""
    g = run.grade
    _apply_forfeits(g)
    part_rank = {n: i for i, n in enumerate(run.problem.implementations)}
    g.tests.sort(key=lambda t: (part_rank.get(t.part, len(part_rank)), _stage_rank(t)))
    unearnable = g.unearnable  # without the cases --watch did not run: not this machine's limit
    if unearnable:
        g.notes.append(
            f"{unearnable:g} of {g.max_score:g} points could not be earned on this machine ({run.device}); grade "
            "on a GPU for those"
        )


def _apply_forfeits(g: Grade) -> None:
    """A part whose kernel check found the work done outside its own kernels earns nothing, however right or fast
    (the one record of a forfeit: grader/results.py Forfeit, read from the kernel check's row)."""
    for f in g.forfeits.values():
        f.charge(g.tests)
        g.notes.append(f.note)


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
