"""Before the first grade: will the grades made here be official?

Why: docs/SECURITY.md, "Modules: the why", grader/preflight.py.
"""

from __future__ import annotations

from grader.problem.spec import Problem

ALLOW = "--allow-advisory"


def reasons(problem: Problem) -> list[str]:
    """Why a grade of `problem` made here now could not be official (empty: it can), without grading anything."""
    from grader import pipeline

    try:
        scratch = pipeline.open_scratch()
    except pipeline.GraderError as e:
        return [str(e)]
    with scratch:
        return pipeline.official_reasons(problem, scratch)


def message(why: list[str], what: str) -> str:
    """What a refused run prints: the reasons, one a line, and the two ways on."""
    lines = [
        f"grader error: {what} would not be official (advisory and unsigned; `report --secret-file` leaves an "
        "advisory grade's score empty), because:"
    ]
    lines += [f"  - {w}" for w in why]
    lines.append(f"fix these and run again, or pass {ALLOW} to grade anyway (every grade then says it is advisory)")
    return "\n".join(lines)


def warning(why: list[str], what: str) -> str:
    """What a run with --allow-advisory prints before the first grade."""
    return f"warning: {ALLOW}: {what} will be advisory (unsigned): " + "; ".join(why)


def check(problem: Problem, allow_advisory: bool, what: str) -> tuple[bool, str]:
    """(go on?, text to print on stderr; "" when the grades will be official)."""
    why = reasons(problem)
    if not why:
        return True, ""
    if allow_advisory:
        return True, warning(why, what)
    return False, message(why, what)
