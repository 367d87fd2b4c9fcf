"""`grade --course COURSE`: grade each problem a course file lists, then the course's own files
(grader/report/coursereport.py; the course as data: grader/problem/course.py)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path

from grader.app import ROOT, _usage_caught


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


def run(args: argparse.Namespace, grade_one: Callable[[argparse.Namespace], int]) -> int:
    """Grade each problem of the course with grade_one (grade's, on one problem; a usage error is that problem's
    exit 2, and the others are graded), then the course's files."""
    from grader.report import coursereport

    return coursereport.run(args, ROOT, functools.partial(_usage_caught, grade_one))
