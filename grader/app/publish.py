"""Staff: `handout` (the repository students get) and `gradescope` (Gradescope's autograder zip)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.app import ROOT
from grader.problem.spec import find_problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    h = sub.add_parser(
        "handout",
        help="staff: write the repository students get (stubs, handout, grader, public spec and "
        "reference, student-facing tests; no staff solutions, staff tests or staff notes)",
    )
    h.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new or empty directory for the handout")
    h.add_argument("--ref", default="HEAD", metavar="COMMIT", help="the commit to build it from (default: HEAD)")
    h.set_defaults(func=run_handout)
    gs = sub.add_parser(
        "gradescope",
        help="staff: build Gradescope's autograder zip (setup.sh, run_autograder, the grader; "
        "no staff solutions); Gradescope has no GPU, so it grades the CPU checks",
    )
    gs.add_argument("--out", type=Path, required=True, metavar="ZIP", help="the zip to write (never overwritten)")
    gs.add_argument(
        "--secret-file",
        "--key",  # the old spelling, accepted for one term with a deprecation line (cli.main); every command says this
        dest="key",
        type=Path,
        default=None,
        metavar="KEY",
        help="also put this grading key in the zip (as grader_key): anyone with the zip has the key",
    )
    gs.add_argument("--ref", default="HEAD", metavar="COMMIT", help="the commit to build it from (default: HEAD)")
    gs.add_argument(
        "--problem", default=None, metavar="NAME", help="the problem it grades (default: the spec marked default: true)"
    )
    gs.set_defaults(func=run_gradescope)


def run_handout(args: argparse.Namespace) -> int:
    return _handout(args.out, args.ref)


def run_gradescope(args: argparse.Namespace) -> int:
    return _gradescope(args.out, args.key, args.ref, args.problem)


def _handout(out: Path, ref: str = "HEAD") -> int:
    from grader.publish import handout

    files = handout.export(out, ROOT, ref)
    print(
        f"wrote the student handout of {ref} to {out}: {len(files)} files (no staff solutions, staff tests or "
        "staff notes)"
    )
    _not_committed(handout.uncommitted(ROOT), ref)
    return 0


def _not_committed(files: list[str], ref: str) -> None:
    """Say which working-tree changes a build from a commit left out, so that nobody believes they went in."""
    if files:
        shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
        print(f"note: built from {ref}: uncommitted changes are not in it: {shown} (commit them and build again)")


def _gradescope(out: Path, key: Path | None, ref: str = "HEAD", problem: str | None = None) -> int:
    from grader.publish import gradescope, handout

    if problem is None:
        problem = find_problem(None, ROOT).parent.name

    names = gradescope.build(out, key, ROOT, ref, problem)
    print(
        f"wrote Gradescope's autograder zip to {out}: {len(names)} files (setup.sh, run_autograder, the grader; "
        f"no staff solutions; problem {problem}, from {ref}); upload it as the assignment's autograder (Ubuntu "
        "24.04 base image)"
    )
    _not_committed(handout.uncommitted(ROOT), ref)
    if key is not None:
        print(
            f"warning: the zip holds the grading key {key} (as grader_key): anyone with the zip has the key; "
            "keep it to the course staff",
            file=sys.stderr,
        )
    return 0
