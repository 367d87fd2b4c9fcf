"""`similarity DIR`: pairs of submissions with similar code per part. Its arguments are grader/report/similarity.py's
(`add_arguments`), which checks them and writes the report (`main`)."""

from __future__ import annotations

import argparse

from grader.app import ROOT
from grader.report import similarity


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "similarity",
        help="TA: pairs of submissions with similar code per part, the starter code left out "
        "(similarity.html, pairs.csv; grader/report/similarity.py): evidence to read, never a penalty",
    )
    similarity.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return similarity.main(args, ROOT)
