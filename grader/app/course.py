"""`grade --course COURSE`: grade each problem a course file lists, then the course's own files
(grader/problem/course.py)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from grader.app import ROOT


def add_arguments(g: argparse.ArgumentParser) -> None:
    """grade's --course (grade's register adds it here, so that grade's options keep their order)."""
    g.add_argument(
        "--course",
        type=Path,
        default=None,
        metavar="COURSE",
        help="a course file (grader/problem/course.py): grade each problem it lists from its folder of --submission "
        "into OUT/<problem>/, then OUT/course.json and one report with a section per problem",
    )


def run(args: argparse.Namespace) -> int:
    # grade's module and the CLI import this one: they are imported here, when a course is graded.
    from grader.app import grade
    from grader.cli import _usage_caught
    from grader.problem import course

    if args.out is None:  # a course's problems go to OUT/<problem>/: the same folders as their own grades
        args.out = grade.DEFAULT_OUT
    return course.run(args, ROOT, functools.partial(_usage_caught, grade._run))
