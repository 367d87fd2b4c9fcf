"""`batch`: grade a whole class (grader/batch/). Its commands and options are grader/batch/cli.py's own parser's,
reached by `intercept` before the grader's parser reads the command line: `batch SUBMISSIONS ...` and `batch status
OUT` (resubmit, collect, task) are one command with a subcommand or none, which argparse's subparsers cannot say;
the batch parser reads no @FILE (the grader's does); and it sets the umask before it parses. The subparser
registered here only lists batch in `--help`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser(
        "batch",
        help="grade a whole class (folders, a Gradescope export, git repositories) on local GPUs or Slurm; "
        "`batch --help`, `batch status OUT` (grader/batch/)",
        add_help=False,
    ).set_defaults(func=run)


def intercept(argv: list[str]) -> int | None:
    """The batch's exit code when argv is a batch command, else None (the grader's parser reads argv)."""
    if argv[:1] == ["batch"]:  # its own commands and options (grader/batch/cli.py)
        from grader.batch.cli import main as batch_main

        return batch_main(argv[1:])
    return None


def run(args: argparse.Namespace) -> int:
    """`batch` reached through the grader's parser (only from an @FILE, alone: the batch's parser says what it
    wants, as `python -m grader batch` does)."""
    from grader.batch.cli import main as batch_main

    return batch_main([])
