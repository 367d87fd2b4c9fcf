"""What the class was graded on, from the course's own files, never from a results.json: the
problem, its parts (the CSV's part columns), and the points one grade of it is worth (Canvas's "Points Possible",
the summary's "out of"). A results.json is a student's row and nothing more: a file, signed or not, that claims
5000 points or a part named "=HYPERLINK(...)" changes no header and no class-wide number.

The problem is `report --problem NAME` (a name under reference/, or a spec.yaml path); without it, the problem that
the class's counted files name, when that name is a known spec under reference/ (the name only picks a spec; every
value is read from the spec). Counted files are, with the key, the valid ones (grader/report/classdata.py)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.problem.spec import Problem, SpecError, find_problem, load_problem
from grader.report.records import STAGES
from grader.results import Stage

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout (or install) whose reference/ holds the specs
_NAME = re.compile(r"[a-z0-9_]{1,64}")  # a problem folder's name: never a path


@dataclass(frozen=True)
class Assignment:
    problem: str  # "" when no problem could be determined
    parts: tuple[str, ...]  # the implementations a student submits, in the spec's order
    points: float | None  # what one grade of the problem is worth; None: unknown
    source: str  # for people: where these values come from
    spec_sha256: str = ""  # the spec's bytes, hashed: a valid grade signed over another version of it is flagged
    # ("part_stage", points) for every column, from the spec: what a final grade holds in each (grader/report/final.py)
    column_points: tuple[tuple[str, float], ...] = ()

    @property
    def columns(self) -> list[str]:
        """The part_stage columns of grades.csv and the summary: every part, in STAGES order."""
        return [f"{p}_{st}" for p in self.parts for st in STAGES]

    @property
    def canvas_title(self) -> str:
        return f"{self.problem.upper()} kernels" if self.problem else "Kernels"


UNKNOWN = Assignment("", (), None, "no problem: pass --problem NAME (a name under reference/ or a spec.yaml)")


def problem_points(problem: Problem) -> float:
    """One grade's max_score, as the grader writes it: every student part's correctness and performance cases."""
    perf = sum(c.points for c in problem.performance.cases) if problem.performance is not None else 0.0
    return len(problem.student_implementations) * (problem.correctness_points + perf)


def from_problem(problem: Problem, source: str) -> Assignment:
    spec = hashlib.sha256(problem.path.read_bytes()).hexdigest()
    perf = sum(c.points for c in problem.performance.cases) if problem.performance is not None else 0.0
    per_stage = {Stage.CORRECTNESS: problem.correctness_points, Stage.PERFORMANCE: perf}
    cols = tuple((f"{p}_{st}", per_stage.get(st, 0.0)) for p in problem.student_implementations for st in STAGES)
    return Assignment(problem.name, tuple(problem.student_implementations), problem_points(problem), source, spec, cols)


def from_argument(name_or_path: str, root: Path = ROOT) -> Assignment:
    """`report --problem NAME`. Raises SpecError naming what is wrong."""
    spec = find_problem(name_or_path, root)
    if not spec.is_file():
        known = ", ".join(known_problems(root)) or "none"
        raise SpecError(f"--problem {name_or_path}: no such problem (known under reference/: {known}; or a spec.yaml)")
    return from_problem(load_problem(spec), f"--problem {name_or_path}")


def known_problems(root: Path = ROOT) -> list[str]:
    return sorted(p.parent.name for p in (root / "reference").glob("*/spec.yaml"))


def from_names(names: Iterable[object], what: str, root: Path = ROOT) -> Assignment:
    """The problem most of `names` (the counted files' extra_data.problem) name, among the known specs; UNKNOWN when
    none names one. A name is only looked up as a folder of reference/: never a path, never a value."""
    known = set(known_problems(root))
    votes = Counter(n for n in names if isinstance(n, str) and _NAME.fullmatch(n) and n in known)
    if not votes:
        return UNKNOWN
    name = min(votes, key=lambda n: (-votes[n], n))
    try:
        problem = load_problem(find_problem(name, root))
    except SpecError:
        return UNKNOWN
    return from_problem(problem, f"reference/{name}/spec.yaml, named by {votes[name]} {what} file(s)")
