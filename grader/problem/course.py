"""A course: which problems a term grades and what each is worth (`grade --course course.yaml`).

    name: CS336 Spring 2026, assignment 2      # shown in the combined report
    problems:
      - {problem: glu, points: 60}             # a name under reference/, or a spec.yaml path (relative to this file)
      - {problem: gelu, points: 40}

Why: docs/architecture.md, "Modules: the why", grader/problem/course.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grader.errors import UsageError
from grader.problem import layout
from grader.problem.spec import SpecError, find_problem, load_problem

# A partial grade's folder under OUT/<problem>/: grader/cli.py's PARTIAL (not imported: the CLI imports this module;
# tests/test_course.py checks the two agree).
PARTIAL = "partial"


class CourseError(UsageError):
    """A course file is malformed. str(err) is one line: file, key, what was expected."""


@dataclass(frozen=True)
class CourseProblem:
    name: str
    spec: Path
    points: float
    stubs: str  # the problem's spec `stubs:` (its folder in the repository)
    folder: str = ""  # its folder in a submission laid out like assignment/ (Problem.folder)
    files: tuple[str, ...] = ()  # the files a student submits for it


@dataclass(frozen=True)
class Course:
    name: str
    path: Path
    problems: tuple[CourseProblem, ...]


def load_course(path: str | Path, root: Path) -> Course:
    path = Path(path).absolute()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CourseError(f"{path}: cannot read the course file ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise CourseError(f"{path}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise CourseError(f"{path}: expected a mapping with 'name' and 'problems', got {raw!r}")
    unknown = sorted(set(raw) - {"name", "problems"})
    if unknown:
        raise CourseError(f"{path}: unknown key '{unknown[0]}' (allowed here: name, problems)")
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise CourseError(f"{path}: key 'name': expected a non-empty string, got {name!r}")
    items = raw.get("problems")
    if not isinstance(items, list) or not items:
        raise CourseError(f"{path}: key 'problems': expected a non-empty list of {{problem, points}}, got {items!r}")
    out: list[CourseProblem] = []
    for i, it in enumerate(items):
        k = f"problems[{i}]"
        if not isinstance(it, dict) or set(it) != {"problem", "points"}:
            raise CourseError(f"{path}: key '{k}': expected exactly the keys problem and points, got {it!r}")
        pname, pts = it["problem"], it["points"]
        if not isinstance(pname, str) or not pname:
            raise CourseError(f"{path}: key '{k}.problem': expected a problem name or a spec path, got {pname!r}")
        if isinstance(pts, bool) or not isinstance(pts, (int, float)) or not 0 < pts <= 1e6:
            raise CourseError(f"{path}: key '{k}.points': expected a number in (0, 1e6], got {pts!r}")
        spec = find_problem(pname, root)
        if spec.suffix in (".yaml", ".yml") and not spec.is_absolute():
            spec = path.parent / spec
        try:
            problem = load_problem(spec)
        except SpecError as e:
            raise CourseError(f"{path}: key '{k}.problem': {e}") from None
        if any(p.name == problem.name for p in out):
            raise CourseError(f"{path}: key '{k}.problem': problem '{problem.name}' is listed twice")
        files = tuple(i.file for i in problem.student_implementations.values())
        out.append(CourseProblem(problem.name, problem.path, float(pts), problem.stubs, problem.folder, files))
    return Course(name, path, tuple(out))


def submission_dir(root: Path, p: CourseProblem) -> layout.Located:
    """Where a problem's files are in a course submission: its folder (grader/problem/layout.py), or the top of the
    submission in the old layout (then with a note for the student)."""
    return layout.locate_files(root, p.folder or p.name, p.name, p.files)


def summarize(
    course: Course, out: Path, layout_notes: dict[str, str] | None = None, partial: Sequence[str] = ()
) -> dict[str, Any]:
    """course.json's content from each problem's OUT/<problem>/results.json (a missing one counts 0, and says so).
    layout_notes: problem -> where its files were found when not in its folder (`submission_dir`), said in the
    row's note. partial: the --case patterns when only the matching cases were graded: each problem's grade is then
    OUT/<problem>/partial/results.json (OUT/<problem>/results.json is an earlier full grade, or none), and each
    row's note and the summary's "partial" say the total is of a partial grade."""
    rows = []
    folder = f"{PARTIAL}/" if partial else ""  # relative to OUT/<problem>/, where this run's grade was written
    part = f"a partial grade: only the cases matching --case {' '.join(partial)} were graded" if partial else ""
    for p in course.problems:
        moved = (layout_notes or {}).get(p.name, "")
        res = out / p.name / folder / "results.json"
        try:
            doc = json.loads(res.read_text(encoding="utf-8"))
            score, max_score = float(doc["score"]), float(doc["max_score"])
            why = ""
        except (OSError, ValueError, KeyError, TypeError) as e:
            score, max_score, why = 0.0, 0.0, f"no results ({type(e).__name__})"
        earned = p.points * score / max_score if max_score > 0 else 0.0
        rows.append(
            {
                "problem": p.name,
                "score": score,
                "max_score": max_score,
                "points": p.points,
                "earned": earned,
                "results": f"{p.name}/{folder}results.json",
                "note": "; ".join(n for n in (moved, part, why) if n),
                "layout": moved,
            }
        )
    summary: dict[str, Any] = {
        "course": course.name,
        "problems": rows,
        "earned": sum(r["earned"] for r in rows),
        "points": sum(r["points"] for r in rows),
    }
    if partial:  # only then: a full grade's course.json is unchanged
        summary["partial"] = list(partial)
    return summary


def partial_line(summary: dict[str, Any]) -> str:
    """The one line that says a course total is of a partial grade ("" for a full one)."""
    if not summary.get("partial"):
        return ""
    cases = " ".join(summary["partial"])
    return f"partial grade: only the cases matching --case {cases} were graded; this total is not the course grade"


def grade_dir(row: dict[str, Any]) -> str:
    """The folder (relative to OUT) of the grade a summary row was made from: <problem>, or <problem>/partial."""
    return str(row["results"]).rpartition("/")[0]
