"""Command line: `python -m grader grade|autograde|bench|report ...`. Exit 0 when grading completed (whatever the
score), 2 when the grader itself cannot run, with one line on stderr saying why.

After results.json, grade/autograde/bench also write the student's report.md and report.html beside it; a failure
there prints one line and changes nothing else. `report DIR` writes the TA's grades.csv and class_summary.html."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from . import report, signing
from .pipeline import GraderError, Options, grade
from .sandbox import become_subreaper, make_undumpable, reap_strays
from .spec import SpecError, find_problem, load_problem

ROOT = Path(__file__).resolve().parent.parent


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade a submission (default: assignment/)")
    g.add_argument("--problem", default="glu", help="problem name under reference/, or a spec.yaml path (default: glu)")
    g.add_argument("--submission", type=Path, default=ROOT / "assignment", help="directory with the student's files (default: assignment/)")
    g.add_argument("--staff", action="store_true", help="grade the staff solutions from reference/ instead")
    g.add_argument("--out", type=Path, default=Path("grade-results"), help="where results.json goes (default: grade-results/)")
    g.add_argument("--only", choices=None, action="append", default=[], help="grade only this implementation (triton or cuda); repeatable")
    g.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    g.add_argument("--no-perf", action="store_true", help="skip performance timing (correctness only)")
    g.add_argument("--secret-file", type=Path, default=None, help="file holding a secret seed mixed into every input")
    a = sub.add_parser("autograde", help="autograder entry (Gradescope paths; secret seed from a staff-only file)")
    a.add_argument("--problem", default="glu")
    a.add_argument("--submission", type=Path, default=Path("/autograder/submission"))
    a.add_argument("--out", type=Path, default=Path("/autograder/results"))
    a.add_argument("--secret-file", type=Path, default=Path("/autograder/secret/seed"), help="staff-only file holding the secret seed (an integer)")
    a.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    b = sub.add_parser("bench", help="lecture-style timing table: baselines vs Triton vs CUDA (needs a GPU)")
    for a in ("--problem", "--submission", "--out", "--only", "--device"):
        b._add_action(next(x for x in g._actions if a in x.option_strings))
    b.add_argument("--staff", action="store_true", help="time the staff solutions (default: the submission)")
    r = sub.add_parser("report", help="TA reports: grades.csv and class_summary.html from every results.json under DIR")
    r.add_argument("dir", type=Path, metavar="DIR", help="folder searched recursively for results.json files (one folder per student)")
    r.add_argument("--out", type=Path, default=None, help="where grades.csv and class_summary.html go (default: DIR)")
    r.add_argument("--secret-file", type=Path, default=None,
                   help="the secret seed the grades were made with (else GRADER_SECRET_SEED): check every file's signature")
    return p


def _secret(path: Path | None) -> int:
    """The secret seed: from a staff-only file, else GRADER_SECRET_SEED, else 0 (local grading).

    Taken out of the environment before any child is spawned: student processes never inherit it, and in the
    container they run as another user who cannot read the file or this process's /proc entries."""
    raw = os.environ.pop("GRADER_SECRET_SEED", "0")
    source = "GRADER_SECRET_SEED"
    if path is not None and path.exists():
        source = f"the secret seed file {path}"
        try:
            raw = path.read_text().strip()
        except OSError as e:
            raise GraderError(f"cannot read the secret seed file {path}: {e.strerror or e}") from None
        if not raw:
            raise GraderError(f"the secret seed file {path} is empty: write an integer into it")
    try:
        return int(raw)
    except ValueError:
        raise GraderError(f"{source} must hold an integer, got {raw[:40]!r}") from None


def main(argv: list[str] | None = None) -> int:
    make_undumpable()  # before anything else: the secret seed may be in our environment
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _ta_report(args.dir, args.out, args.secret_file)
    try:
        problem = load_problem(find_problem(args.problem, ROOT))
        for o in getattr(args, "only", []) or ():
            if o not in problem.implementations:
                raise GraderError(f"--only {o}: no such implementation (choose from {', '.join(problem.implementations)})")
        secret = _secret(getattr(args, "secret_file", None))
        opts = Options(
            submission=args.submission,
            out=args.out,
            only=tuple(getattr(args, "only", []) or ()),
            device=args.device,
            staff=getattr(args, "staff", False),
            secret=secret,
            perf=not getattr(args, "no_perf", False),
            correctness=args.command != "bench",
        )
        _check_writable(args.out)
        # Orphans a submission leaves (daemons that escaped their process group) re-parent to us, and are
        # killed before the results are written. Only the CLI does this: a library caller keeps its children.
        become_subreaper()
        with report.progress("grading") as update:
            g = grade(problem, opts, progress=update)
        strays = reap_strays()
        if strays:
            g.notes.append(f"killed {strays} process(es) the submission left running after its part ended")
        path = report.write_results(g, args.out, secret=secret)
    except (SpecError, GraderError) as e:
        print(f"grader error: {e}", file=sys.stderr)  # one line, never wrapped (rich would wrap at 80 in CI)
        return 2
    if args.command == "bench":
        report.print_bench(g)
    else:
        report.print_summary(g)
    Console().print(f"results written to {path}", highlight=False)
    _student_report(g, args.out)
    return 0


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


def _student_report(g, out: Path) -> None:
    """report.md + report.html beside results.json. Never fatal: results.json is already written, exit stays 0."""
    try:
        from .studentreport import write_student_report

        md, page = write_student_report(g, out)
    except Exception as e:
        print(f"report: not written ({_one_line(e)}); results.json is unaffected", file=sys.stderr)
        return
    Console().print(f"report written to {page} (and {md.name})", highlight=False)


def _ta_report(root: Path, out: Path | None, secret_file: Path | None = None) -> int:
    """grades.csv + class_summary.html over every results.json under root. Bad files are listed, never fatal."""
    from . import tareport

    if secret_file is not None and not secret_file.is_file():
        print(f"grader error: --secret-file {secret_file}: no such file (pass the file the grades were made with)", file=sys.stderr)
        return 2
    try:
        secret = _secret(secret_file) if (secret_file is not None or "GRADER_SECRET_SEED" in os.environ) else None
    except GraderError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"grader error: {root} is not a directory (pass the folder that holds the students' results)", file=sys.stderr)
        return 2
    try:
        _check_writable(out or root)
    except GraderError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    with report.progress("report", min_interval_s=1.0) as update:
        csv_path, html_path, subs, bad = tareport.write_ta_report(root, out, progress=update, secret=secret)
    flagged = sum(1 for x in subs if x.flags)
    print(f"{len(subs)} submission(s) read, {flagged} flagged, {len(bad)} file(s) or folder(s) unusable (listed in the summary)")
    if secret is not None:
        forged = [x.student for x in subs if x.signature != signing.VALID]
        names = (": " + ", ".join(forged[:10]) + (" ..." if len(forged) > 10 else "")) if forged else ""
        print(f"signatures: {len(subs) - len(forged)} valid, {len(forged)} not written by the grader with this secret{names}")
    else:
        print("signatures: not checked (pass --secret-file, or set GRADER_SECRET_SEED, to check them)")
    print(f"written: {csv_path} and {html_path}")
    return 0


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise GraderError(f"cannot write results to {out}: {e.strerror or e} (pass --out DIR)") from None
