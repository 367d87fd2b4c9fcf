"""Command line: `python -m grader grade|autograde|bench|report ...`. Exit 0 when grading completed (whatever the
score), 2 when the grader cannot run (bad arguments, spec or folders), with one line on stderr saying why, and 3
when the grader itself failed while grading (a worker died before any submission code ran): then no results.json
is written, because nothing in it would be the submission's grade.

After results.json, grade/autograde/bench also write the student's report.md and report.html beside it; a failure
there prints one line and changes nothing else. `report DIR` writes the TA's grades.csv and class_summary.html."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from grader.app import _usage_caught, batch, grade, keygen, profile, publish, report, similarity
from grader.sandbox import make_undumpable

# Each command's module (grader/app/): its register(subparsers) adds the command's subparser(s), in the order that
# `--help` lists them, and sets func to the command's handler.
COMMANDS = (grade, report, publish, profile, batch, similarity, keygen)


def _parser() -> argparse.ArgumentParser:
    # @FILE: the arguments one a line from a file (the batch passes a grade's this way, from a 0600 file: a command
    # line is readable by every user in /proc, and a submission's path or id must not be; grader/batch/task.py).
    p = argparse.ArgumentParser(prog="python -m grader", description=__doc__, fromfile_prefix_chars="@")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    make_undumpable()  # before anything else: keep other processes of this user out of our memory
    argv = sys.argv[1:] if argv is None else argv
    batched = batch.intercept(argv)  # its own commands and options (grader/app/batch.py says why)
    if batched is not None:
        return batched
    args = _parser().parse_args(argv)
    if args.command == "gradescope" and any(a == "--key" or a.startswith("--key=") for a in argv):
        print("grader: gradescope --key is deprecated: say --secret-file KEY, as every other command", file=sys.stderr)
    func: Callable[[argparse.Namespace], int] = args.func
    return _usage_caught(func, args)
