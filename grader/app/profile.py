"""`profile`: the submission's kernels profiled (advisory, not graded; grader/profiling.py)."""

from __future__ import annotations

import argparse

from grader.app import ROOT
from grader.app.grade import _check_only, _submission, staff_option, where_options
from grader.problem.spec import find_problem, load_problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    where, grade_staff = where_options(), staff_option()
    pr = sub.add_parser(
        "profile",
        help="profile the submission's kernels (advisory, not graded): on a GPU the torch.profiler table, bandwidth "
        "against the copy ceiling and an Nsight Compute summary (with ncu on PATH); on a CPU the CUDA compiler's "
        "report and each Triton kernel's launch grid",
        parents=[where, grade_staff],
    )
    pr.add_argument("--only", action="append", default=[], help="profile only this implementation; repeatable")
    pr.add_argument(
        "--case",
        dest="cases",
        action="append",
        default=[],
        metavar="NAME",
        help="the case to profile (a glob; the first match). Default: the first performance case on a GPU, a small "
        "correctness case on a CPU",
    )
    pr.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    pr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from grader import profiling

    problem = load_problem(find_problem(args.problem, ROOT))
    _check_only(args.only, problem)
    # What the run under Nsight Compute repeats (grader/profiling.py adds --only and --case).
    submission, _ = _submission(args.submission, problem)
    argv = ["--problem", str(problem.path), "--submission", str(submission), "--device", args.device]
    return profiling.profile(
        problem,
        submission=submission,
        staff=args.staff,
        only=tuple(args.only),
        cases=tuple(args.cases),
        device=args.device,
        argv=argv + (["--staff"] if args.staff else []),
    )
