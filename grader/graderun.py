"""One grade's options (Options) and the record its steps read and add to (GradeRun): what grader/pipeline.py
hands from one step to the next (grader/partprep.py, grader/gradefinish.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader import identity
from grader.correctness.target import Target
from grader.problem.reference import Reference
from grader.problem.spec import Implementation, Problem
from grader.results import Grade
from grader.sandbox import Sandbox


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
    # `grade --watch` (grader/app/grade.py): the cases that failed last time run first, and each part stops at its first
    # failing case; a grade that stopped is partial (Grade.partial), never official, and not timed.
    first: tuple[str, ...] = ()
    stop_at_failure: bool = False
    # Whose submission this is, signed into results.json (grader/signing.py new_identity): `--student-id`, the
    # batch's id; on Gradescope its submission metadata's submission id and members (grader/publish/gradescope.py).
    student_id: str | None = None
    submission_id: str | None = None
    users: tuple[dict[str, str], ...] = ()
    # What the caller found out about the submission before the grade, for the student (the CLI: its files found in
    # the old layout of assignment/, grader/problem/layout.py): the grade's first notes.
    notes: tuple[str, ...] = ()
    # What the grade's box must not show even where it lies under a folder the box shows (grader/box.py): the key
    # file, the submission's own folder (the box sees the grade's copy) and the results folder.
    hidden: tuple[Path, ...] = ()


@dataclass
class GradeRun:
    """One grade in progress: what the steps of `_grade` read and add to. The Grade is the result; the rest is what
    one step hands the next (the parts to grade, what a worker runs for each, the timing workers started early)."""

    problem: Problem
    opts: Options
    device: str
    scratch: identity.Scratch
    progress: Callable[[str], None]
    ref: Reference
    grade: Grade
    impls: list[Implementation] = field(default_factory=list)  # the parts graded (--only, staff-only rows)
    targets: list[Target] = field(default_factory=list)  # the parts a worker can run, as it runs them
    cuda_sources: dict[str, tuple[Path, str]] = field(default_factory=dict)  # a GPU-built CUDA part's source
    no_triton: list[Implementation] = field(default_factory=list)  # Triton parts this machine cannot run
    no_triton_why: str | None = None  # why Triton cannot run here (grader/availability.py); None: it can
    no_compile: str = ""  # why there is no torch.compile baseline here; "": there is one
    early: dict[str, Sandbox] | None = None  # timing workers started before the correctness stage
    stopped: int = 0  # cases a --watch grade did not run after its first failure
    beside: Callable[[], None] | None = None  # the caller's work for the correctness stage's idle parent (grade())
    beside_thread: threading.Thread | None = None
