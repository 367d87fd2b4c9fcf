"""`similarity DIR`: pairs of submissions with similar code per part (grader/report/similarity.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.app import ROOT
from grader.report.similarity import CSV_NAME, DEFAULT_THRESHOLD, HTML_NAME


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "similarity",
        help="TA: pairs of submissions with similar code per part, the starter code left out "
        "(similarity.html, pairs.csv; grader/report/similarity.py): evidence to read, never a penalty",
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from grader.report import similarity

    return similarity.main(args, ROOT)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="a batch's OUT (its manifest names each submission's folder) or a folder of submissions (one folder "
        "per student, or a Gradescope export folder)",
    )
    p.add_argument("--out", type=Path, default=None, help=f"where {HTML_NAME} and {CSV_NAME} go (default: DIR)")
    p.add_argument(
        "--problem",
        default=None,
        metavar="NAME",
        help="the problem (a name under reference/, or a spec.yaml); default: the batch's, else the default problem",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="T",
        help=f"report pairs whose similarity (0-1, the share of both files' own code in shared runs) is at least T "
        f"(default {DEFAULT_THRESHOLD})",
    )
    p.add_argument(
        "--known",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="another known source to compare every submission with (last year's solutions, a published kernel): "
        "named known:<file>, its part by its suffix (.py, .cu); repeatable. The staff solutions are always known "
        "sources",
    )
