"""Where a problem's files are in a folder laid out like assignment/: a course submission (`grade --course`), or
assignment/ itself (a plain `grade` of a checkout).

Every problem's stubs are a folder of their own below assignment/ (spec `stubs:`, default assignment/<name>), so in
such a folder a problem's files are in <folder>/ (`Problem.folder`: gelu's in gelu/, GLU's in glu/). Courses that
published the handout before GLU had its folder have submissions with GLU's files at the top, beside the
other problems' folders. Those still grade: when a problem's folder is absent and one of its files is at the top,
the top is that problem's submission, with a note that says so (`Located.note`). The rule is the same for every
problem; nothing here names one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.problem.spec import Problem

OLD_LAYOUT = (
    "{name}'s files were found at the top of the submission, not in its folder {folder}/ (the layout before each "
    "problem had its own folder): graded from there; move them into {folder}/ for the next submission"
)


@dataclass(frozen=True)
class Located:
    path: Path  # the folder to grade as the problem's submission
    note: str = ""  # non-empty: the files were found in the old layout (OLD_LAYOUT), say so to the student


def locate_files(root: Path, folder: str, name: str, files: Iterable[str]) -> Located:
    """The problem's folder `folder` of root when it exists (whatever it holds: the grade says what is missing);
    else root itself when one of the problem's `files` is a plain file at its top (the old layout, with a note);
    else the (missing) folder, so that the grade names the folder it looked in."""
    own = root.joinpath(*folder.split("/"))
    if own.exists() or own.is_symlink():
        return Located(own)
    if any((root / f).is_file() and not (root / f).is_symlink() for f in files):
        return Located(root, OLD_LAYOUT.format(name=name, folder=folder))
    return Located(own)


def locate(root: Path, problem: Problem) -> Located:
    """`locate_files` for a problem: its folder, and the files a student submits for it."""
    files = [i.file for i in problem.student_implementations.values()]
    return locate_files(root, problem.folder, problem.name, files)


def resolve(path: Path, problem: Problem) -> Located:
    """The folder to grade when a grade is pointed at `path` (`--submission`): path itself when one of the problem's
    files is at its top (the problem's own folder, a Gradescope upload, or the old layout's assignment/); else its
    folder of the problem (`Problem.folder`) when path is laid out like assignment/ (a student's assignment/, a
    course submission) and has it; else path (the grade then says which files are missing)."""
    files = [i.file for i in problem.student_implementations.values()]
    if any((path / f).is_file() for f in files):
        return Located(path)
    own = path.joinpath(*problem.folder.split("/"))
    if own.is_dir() and not own.is_symlink():
        return Located(own)
    return Located(path)
