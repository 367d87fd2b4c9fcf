"""The one list of the course's public files: what every deliverable holds of the grader and the problems.

Why: docs/SECURITY.md, "Modules: the why", grader/publish/public_files.py.
"""

from __future__ import annotations

import re
from pathlib import Path

# Globs relative to the repository root, "/"-separated: "*" stays inside one folder, "**/" is any number of them.
PUBLIC: tuple[str, ...] = (
    # the grader package: its modules, the results schema, the report's templates, the CUDA-on-CPU layer's C++
    "grader/**/*.py",
    "grader/*.json",
    "grader/report/templates/*.j2",
    "grader/report/templates/*.css",
    "grader/child/cudacpu/*.h",
    "grader/child/cudacpu/*.cpp",
    "grader/child/cudacpu/*.cu",
    "grader/child/cudacpu/include/*.h",
    "grader/child/cudacpu/include/*.hpp",
    # every problem's public parts: spec, truth and baselines, words (advice, failure patterns, static checks)
    "reference/__init__.py",
    "reference/*/__init__.py",
    "reference/*/spec.yaml",
    "reference/*/reference.py",
    "reference/*/hints.yaml",
    # the stubs and handouts: the course's handout at the top of assignment/, each problem's in assignment/<name>/
    "assignment/README.md",
    "assignment/*/README.md",
    "assignment/*/*.py",
    "assignment/*/*.cu",
)
# Never public, whatever PUBLIC matches: the staff solutions (a file name), and build leftovers (a folder name).
STAFF: tuple[str, ...] = ("reference/*/solution_*", "**/solution_*")
SKIP_DIRS: tuple[str, ...] = ("__pycache__",)
# The folders PUBLIC covers: a deliverable's file under one of them is a course file and must be on the list.
SCOPE: tuple[str, ...] = ("grader", "reference", "assignment")


def regex(glob: str) -> re.Pattern[str]:
    """A glob as an anchored regex over a "/"-separated path (our own patterns, never submission text)."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob.startswith("**", i):  # at the end: anything below (a .dockerignore's "**")
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


_PUBLIC = tuple(regex(g) for g in PUBLIC)
_STAFF = tuple(regex(g) for g in STAFF)


def is_staff(rel: str) -> bool:
    """Whether a repository path is a staff file by its name (a staff solution)."""
    return any(r.match(rel) for r in _STAFF)


def is_public(rel: str) -> bool:
    """Whether a repository path ("/"-separated, relative to the root) is on the public list."""
    parts = rel.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]) or is_staff(rel):
        return False
    return any(r.match(rel) for r in _PUBLIC)


def in_scope(rel: str) -> bool:
    """Whether a path is under one of the folders the list decides (grader/, reference/, assignment/)."""
    return rel.split("/", 1)[0] in SCOPE


def files(root: Path) -> list[str]:
    """The public files of the tree at root, sorted ("/"-separated, relative to root)."""
    root = Path(root)
    out = []
    for top in SCOPE:
        base = root / top
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            if p.is_file() and not p.is_symlink():
                rel = p.relative_to(root).as_posix()
                if is_public(rel):
                    out.append(rel)
    return sorted(out)
