"""Command line: `python -m grader grade|autograde|bench|report ...`. Exit 0 when grading completed (whatever the
score), 2 when the grader cannot run (bad arguments, spec or folders), with one line on stderr saying why, and 3
when the grader itself failed while grading (a worker died before any submission code ran): then no results.json
is written, because nothing in it would be the submission's grade.

After results.json, grade/autograde/bench also write the student's report.md and report.html beside it; a failure
there prints one line and changes nothing else. `report DIR` writes the TA's grades.csv and class_summary.html."""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from grader import keyfile, report, signing
from grader.commands import grader_command
from grader.errors import UsageError
from grader.performance import anchor
from grader.pipeline import GraderError, Options, grade
from grader.problem import layout
from grader.problem.spec import Problem, find_problem, load_problem
from grader.report import charts
from grader.results import FAILED, Grade, Kind
from grader.sandbox import GraderFault, become_subreaper, make_undumpable, reap_strays

if TYPE_CHECKING:  # the TA report's modules are imported only by `report`
    from grader.report.tareport import Assignment, ClassReport, Join, Roster, Submission

ROOT = Path(__file__).resolve().parent.parent
# A checkout grades its own assignment/; an installed grader (`pip install .`, then `kernel-grader`) the assignment/ of
# the directory it is run from, not the stubs installed beside it.
DEFAULT_SUBMISSION = ROOT / "assignment" if (ROOT / "pyproject.toml").is_file() else Path("assignment")
EXIT_OK, EXIT_USAGE, EXIT_GRADER_FAULT = 0, 2, 3  # 0: graded (whatever the score); 2: cannot run; 3: grader fault
AUTOGRADE_KEY = Path("/autograder/secret/grader_key")  # Gradescope's staff-only folder; the container passes its own
GRADESCOPE_METADATA = Path("/autograder/submission_metadata.json")  # written by Gradescope for each submission
MAX_STUDENT_ID = 200
# grade's and bench's results folder: DEFAULT_OUT/<problem>/ (default_out). One folder per problem: a grade of
# --problem swiglu used to overwrite the GLU grade in grade-results/.
DEFAULT_OUT = Path("grade-results")


def default_out(problem: str) -> Path:
    """Where a grade of `problem` goes when --out is not given."""
    return DEFAULT_OUT / problem


def _parser() -> argparse.ArgumentParser:
    # @FILE: the arguments one a line from a file (the batch passes a grade's this way, from a 0600 file: a command
    # line is readable by every user in /proc, and a submission's path or id must not be; grader/batch/task.py).
    p = argparse.ArgumentParser(prog="python -m grader", description=__doc__, fromfile_prefix_chars="@")
    sub = p.add_subparsers(dest="command", required=True)
    # The options that grade and bench share, as parent parsers (argparse copies their actions into each child, in
    # order). Three of them so that grade's options keep their order: --problem, --submission, --staff, --out, ...
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--problem",
        default=None,
        help="problem name under reference/, or a spec.yaml path (default: the problem whose spec says default: true)",
    )
    where.add_argument(
        "--submission",
        type=Path,
        default=DEFAULT_SUBMISSION,
        help="the student's files: a problem's folder, or a folder laid out like assignment/ (then its folder of the "
        "problem is graded); default: assignment/<problem>/, the default problem's stubs",
    )
    grade_staff = argparse.ArgumentParser(add_help=False)
    grade_staff.add_argument("--staff", action="store_true", help="grade the staff solutions from reference/ instead")
    what = argparse.ArgumentParser(add_help=False)
    what.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"where results.json goes (default: {DEFAULT_OUT}/PROBLEM/, one folder per problem, so that grading "
        "another problem keeps this one's results)",
    )
    what.add_argument(
        "--only",
        choices=None,
        action="append",
        default=[],
        help="grade only this implementation (triton or cuda); repeatable",
    )
    what.add_argument(
        "--case",
        dest="cases",
        action="append",
        default=[],
        metavar="NAME",
        help="run only the cases whose name matches NAME, a glob ('odd_h_1001/float16', 'strided_*', "
        "'*bfloat16'); repeatable; combines with --only. A partial grade: it says so, is never official, and is "
        "written to OUT/partial/ (the last full grade in OUT stays)",
    )
    what.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    g = sub.add_parser(
        "grade", help="grade a submission (default: assignment/<problem>/)", parents=[where, grade_staff, what]
    )
    g.add_argument("--no-perf", action="store_true", help="skip performance timing (correctness only)")
    g.add_argument(
        "--watch",
        action="store_true",
        help="grade, then grade again each time a file of the submission changes (checked every second); Ctrl-C "
        "stops. Each grade runs the cases that failed last time first and stops at the first failing case (written "
        "to OUT/partial/); a grade with no failure is a full one (OUT)",
    )
    g.add_argument(
        "--all",
        dest="watch_all",
        action="store_true",
        help="with --watch: run every case of every grade (no stop at the first failure)",
    )
    g.add_argument(
        "--course",
        type=Path,
        default=None,
        metavar="COURSE",
        help="a course file (grader/problem/course.py): grade each problem it lists from its folder of --submission "
        "into OUT/<problem>/, then OUT/course.json and one report with a section per problem",
    )
    g.add_argument(
        "--secret-file",
        type=Path,
        default=None,
        metavar="KEY",
        help="staff-only key file (made by `python -m grader keygen --out KEY`, mode 0600): mixed into every "
        "input and used to sign an official results.json; without it the grade is local and advisory",
    )
    g.add_argument(
        "--allow-advisory",
        action="store_true",
        help="with --secret-file: grade even where the grade cannot be official (checked before grading: root, a "
        "separate uid, no staff file it can read); without it such a grade stops with what to fix",
    )
    g.add_argument(
        "--student-id",
        default=None,
        metavar="ID",
        help="whose submission this is (the batch passes its id): signed into results.json, so that the TA report "
        "can tell a copy of it under another student (replayed) from this student's grade",
    )
    a = sub.add_parser("autograde", help="autograder entry (Gradescope paths; grading key from a staff-only file)")
    a.add_argument("--problem", default=None, help="as grade's --problem")
    a.add_argument("--submission", type=Path, default=Path("/autograder/submission"))
    a.add_argument("--out", type=Path, default=Path("/autograder/results"))
    a.add_argument(
        "--secret-file",
        type=Path,
        default=AUTOGRADE_KEY,
        metavar="KEY",
        help=f"staff-only key file made by `python -m grader keygen --out KEY` (default: {AUTOGRADE_KEY}); "
        "when there is no file there, the grade is advisory and unsigned",
    )
    a.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    a.add_argument(
        "--student-id", default=None, metavar="ID", help="whose submission this is (signed into results.json)"
    )
    a.add_argument(
        "--submission-metadata",
        type=Path,
        default=GRADESCOPE_METADATA,
        metavar="JSON",
        help=f"Gradescope's submission metadata (default: {GRADESCOPE_METADATA}): its submission id and members are "
        "signed into results.json; when there is no file there, the grade's identity is --student-id alone",
    )
    b = sub.add_parser(
        "bench", help="lecture-style timing table: baselines vs Triton vs CUDA (needs a GPU)", parents=[where, what]
    )
    b.add_argument("--staff", action="store_true", help="time the staff solutions (default: the submission)")
    r = sub.add_parser("report", help="TA reports: grades.csv and class_summary.html from every results.json under DIR")
    r.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="folder searched recursively for results.json files (one folder per student)",
    )
    r.add_argument("--out", type=Path, default=None, help="where grades.csv and class_summary.html go (default: DIR)")
    r.add_argument(
        "--secret-file",
        type=Path,
        default=None,
        metavar="KEY",
        help="the key file the grades were made with: check every file's signature",
    )
    r.add_argument(
        "--problem",
        default=None,
        metavar="NAME",
        help="the problem the class was graded on (a name under reference/, or a spec.yaml): its spec gives the "
        "columns and the points possible; default: the problem the valid (or, without --secret-file, all) files "
        "name, when it is a known spec",
    )
    r.add_argument(
        "--roster",
        type=Path,
        default=None,
        metavar="CSV",
        help="the class roster (Canvas's gradebook export, or a CSV with an id column): also write "
        "grades_canvas.csv, one row per roster student, for Canvas's grade import",
    )
    r.add_argument(
        "--canvas-column",
        default=None,
        metavar="NAME",
        help="the assignment column's header in grades_canvas.csv (default: '<PROBLEM> kernels', or that "
        "assignment's own column in a Canvas export; 'Name (12345)' names Canvas assignment 12345)",
    )
    r.add_argument(
        "--allow-partial",
        action="store_true",
        help="with --roster: write grades_canvas.csv even where a score it imports is not final (a CPU grade, a "
        "part or stage left out by --only or --no-perf, a --case grade); without it such a file is not written "
        "and the report names the rows (exit 2)",
    )
    h = sub.add_parser(
        "handout",
        help="staff: write the repository students get (stubs, handout, grader, public spec and "
        "reference, student-facing tests; no staff solutions, staff tests or staff notes)",
    )
    h.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new or empty directory for the handout")
    h.add_argument("--ref", default="HEAD", metavar="COMMIT", help="the commit to build it from (default: HEAD)")
    gs = sub.add_parser(
        "gradescope",
        help="staff: build Gradescope's autograder zip (setup.sh, run_autograder, the grader; "
        "no staff solutions); Gradescope has no GPU, so it grades the CPU checks",
    )
    gs.add_argument("--out", type=Path, required=True, metavar="ZIP", help="the zip to write (never overwritten)")
    gs.add_argument(
        "--secret-file",
        "--key",  # the old spelling, accepted for one term with a deprecation line (main); every command says this
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
    sub.add_parser(
        "batch",
        help="grade a whole class (folders, a Gradescope export, git repositories) on local GPUs or Slurm; "
        "`batch --help`, `batch status OUT` (grader/batch/)",
        add_help=False,
    )
    from grader.report.similarity import add_arguments as similarity_arguments

    similarity_arguments(
        sub.add_parser(
            "similarity",
            help="TA: pairs of submissions with similar code per part, the starter code left out "
            "(similarity.html, pairs.csv; grader/report/similarity.py): evidence to read, never a penalty",
        )
    )
    k = sub.add_parser("keygen", help="write a new 256-bit grading key (64 hex characters) to a new file of mode 0600")
    k.add_argument("--out", type=Path, required=True, metavar="FILE", help="where the key goes (never overwritten)")
    return p


def _key(path: Path | None, *, missing_ok: bool = False) -> keyfile.Key | None:
    """The grading key's derived values, read once from a staff-only file before any child is spawned; None
    without a file (a local grade). GRADER_SECRET_SEED is refused (grader/keyfile.py says why).

    missing_ok: a file that is not there means no key (autograde's default path), not an error."""
    keyfile.refuse_environment()
    if path is None or (missing_ok and not path.exists()):
        return None
    return keyfile.load(path)


def main(argv: list[str] | None = None) -> int:
    make_undumpable()  # before anything else: keep other processes of this user out of our memory
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["batch"]:  # its own commands and options (grader/batch/cli.py)
        from grader.batch.cli import main as batch_main

        return batch_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "gradescope" and any(a == "--key" or a.startswith("--key=") for a in argv):
        print("grader: gradescope --key is deprecated: say --secret-file KEY, as every other command", file=sys.stderr)
    return _usage_caught(_dispatch, args)


def _usage_caught(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """The one place a usage error (grader/errors.py) becomes its exit code: one line on stderr, exit 2. A course
    grades each problem through here too, so that one problem's bad spec or folder does not stop the others."""
    try:
        return command(args)
    except UsageError as e:
        print(f"grader error: {e}", file=sys.stderr)  # one line, never wrapped (rich would wrap at 80 in CI)
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "course", None) is not None:
        from grader.report import coursereport

        if args.out is None:  # a course's problems go to OUT/<problem>/: the same folders as their own grades
            args.out = DEFAULT_OUT
        return coursereport.run(args, ROOT, functools.partial(_usage_caught, _run))
    if args.command == "report":
        return _ta_report(
            args.dir, args.out, args.secret_file, args.roster, args.canvas_column, args.problem, args.allow_partial
        )
    if args.command == "similarity":
        from grader.report import similarity

        return similarity.main(args, ROOT)
    if args.command == "keygen":
        return _keygen(args.out)
    if args.command == "handout":
        return _handout(args.out, args.ref)
    if args.command == "gradescope":
        return _gradescope(args.out, args.key, args.ref, args.problem)
    if args.command == "profile":
        return _profile(args)
    if getattr(args, "watch", False):
        return _watch(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """One grade (or bench) as the arguments say: results.json, the terminal summary, the student report. A usage
    error raises (the caller says it: `_usage_caught`); a grader fault is exit 3 with no results.json."""
    try:
        problem = load_problem(find_problem(args.problem, ROOT))
        if args.out is None:  # (--watch grades again with the same args: the folder is chosen once)
            args.out = default_out(problem.name)
        _check_only(getattr(args, "only", []) or (), problem)
        key = _key(getattr(args, "secret_file", None), missing_ok=args.command == "autograde")
        opts = _options(args, problem, key)
        _check_writable(args.out)
        if not _preflight(args, problem, opts, key):
            return EXIT_USAGE
        g, path = _grade_and_write(args, problem, opts, key)
    except GraderFault as e:
        # Not the submission's doing: no results.json that would read as its grade. Gradescope shows a missing
        # results.json as an autograder failure, and a batch retries the task (exit code EXIT_GRADER_FAULT).
        print(f"grader fault (not the submission's): {e.line}", file=sys.stderr)
        if e.detail:
            print(e.detail, file=sys.stderr)
        return EXIT_GRADER_FAULT
    _say_graded(args, problem, g, path, key)
    return EXIT_OK


def _check_only(only: Iterable[str], problem: Problem) -> None:
    """Each --only must name one of the problem's parts (before anything is graded)."""
    for o in only:
        if o not in problem.implementations:
            raise GraderError(f"--only {o}: no such implementation (choose from {', '.join(problem.implementations)})")


def _options(args: argparse.Namespace, problem: Problem, key: keyfile.Key | None) -> Options:
    """The grade's options from the command line: whose submission (checked first), and the problem's own stubs
    folder when --submission was left at its default."""
    student_id, submission_id, users = _whose(args)
    submission, note = _submission(args.submission, problem)
    return Options(
        submission=submission,
        out=args.out,
        only=tuple(getattr(args, "only", []) or ()),
        device=args.device,
        staff=getattr(args, "staff", False),
        secret=key.inputs if key is not None else keyfile.local_input_secret(),
        keyed=key is not None,
        perf=not getattr(args, "no_perf", False),
        correctness=args.command != "bench",
        cases=tuple(getattr(args, "cases", []) or ()),
        first=tuple(getattr(args, "first", ()) or ()),  # set by _watch: last grade's failing cases
        stop_at_failure=bool(getattr(args, "stop_at_failure", False)),
        student_id=student_id,
        submission_id=submission_id,
        users=users,
        notes=(note,) if note and not getattr(args, "staff", False) else (),
    )


def _submission(given: Path, problem: Problem) -> tuple[Path, str]:
    """The folder graded as the problem's submission, and a note when it was found in the old layout: the default
    (assignment/) is the problem's own folder in it (grader/problem/layout.py `locate`); a --submission DIR is DIR,
    or its folder of the problem when DIR is laid out like assignment/ (`resolve`)."""
    where = layout.locate(given, problem) if given == DEFAULT_SUBMISSION else layout.resolve(given, problem)
    return where.path, where.note


def _preflight(args: argparse.Namespace, problem: Problem, opts: Options, key: keyfile.Key | None) -> bool:
    """Whether a keyed grade goes ahead: checked before the grade, not after it (grader/preflight.py), so that one
    that could not be official stops with what to fix. --staff and --case grades are never official by choice, and
    autograde (Gradescope) always grades."""
    if key is None or args.command != "grade" or opts.staff or opts.cases:
        return True
    from grader import preflight

    go, text = preflight.check(problem, getattr(args, "allow_advisory", False), "this grade")
    if text:
        print(text, file=sys.stderr)
    return go


def _grade_and_write(
    args: argparse.Namespace, problem: Problem, opts: Options, key: keyfile.Key | None
) -> tuple[Grade, Path]:
    """Grade with the terminal's progress bar, kill what the submission left running, and write results.json
    (signed when official): to OUT, or to OUT/partial/ for a partial grade, which never replaces the last full one."""
    steps = _progress_steps(problem, opts)
    # Orphans a submission leaves (daemons that escaped their process group) re-parent to us, and are
    # killed before the results are written. Only the CLI does this: a library caller keeps its children.
    become_subreaper()
    with report.progress("grading", steps=steps) as update:
        g = grade(problem, opts, progress=update, beside=charts.preload if args.command != "bench" else None)
    strays = reap_strays()
    if strays:
        g.notes.append(f"killed {strays} process(es) the submission left running after its part ended")
    if key is None:  # never official without a key, whatever grade() decided
        g.official = False
        if not g.official_why:
            g.official_why.append("no key file (--secret-file): a local grade, advisory and unsigned")
    path = report.write_results(g, _out_dir(args, g), key=key.signing if key is not None else None)
    args.failed = failing_cases(g)  # for --watch's next grade
    return g, path


def _say_graded(args: argparse.Namespace, problem: Problem, g: Grade, path: Path, key: keyfile.Key | None) -> None:
    """After results.json: the terminal's summary (or bench's table), where it was written, the warnings a staff
    member must see (signed for no student; a key that student code may have read), and the student's report."""
    if args.command == "bench":
        report.print_bench(g)
        anchor.print_anchor(problem, g.perf, report.make_console())  # the published table beside (spec anchor)
    else:
        report.print_summary(g)
    Console().print(
        f"results written to {path}"
        + (f" (a partial grade: the last full grade in {args.out} stays)" if g.partial else ""),
        highlight=False,
    )
    if g.official and key is not None and not (g.identity or {}).get("student_id"):
        print(
            "warning: official and signed, but for no student (no --student-id, no Gradescope metadata): the TA "
            "report calls it 'identity not signed' and does not import it; grade with --student-id ID",
            file=sys.stderr,
        )
    if key is not None and not g.official:
        print(
            f"warning: this grade is not official, so student code may have run as this user and read the key file "
            f"{key.path}: if so, treat that key as leaked and make a new one "
            f"(`{grader_command('keygen', '--out FILE')}`)",
            file=sys.stderr,
        )
    _student_report(g, _out_dir(args, g))


def _out_dir(args: argparse.Namespace, g: Grade) -> Path:
    """Where this grade's files go: OUT, or OUT/partial/ for a partial grade (--case, or a --watch grade that
    stopped at a failure), which never replaces the last full one."""
    out: Path = args.out
    return out / PARTIAL if g.partial else out


PARTIAL = "partial"  # OUT/partial/: where a partial grade goes


def _progress_steps(problem: Problem, opts: Options) -> list[str]:
    """The progress messages that mark one case each ("triton: tiny_1x2/float32", "performance: lecture_16k"), as the
    pipeline sends them (grader/correctness/stage.py, grader/performance/stage.py): the terminal's bar counts them.
    Raises
    GraderError for a --case or --device that grade() would refuse (the same one line)."""
    from grader.pipeline import resolve_device, select_cases

    device = resolve_device(opts.device)
    p = select_cases(problem, opts.cases)
    parts = opts.only or tuple(problem.implementations)
    steps = [f"{impl}: {c.name}" for impl in parts for c in p.cases if device == "cuda" or not c.gpu_only]
    if opts.perf and device == "cuda" and p.performance is not None:
        steps += [f"performance: {c.name}" for c in p.performance.cases]
    return steps if opts.correctness else [s for s in steps if s.startswith("performance: ")]


def failing_cases(g: Grade) -> list[str]:
    """The correctness cases the grade failed, once each, in the order they ran."""
    failed = (t for t in g.tests if t.kind == Kind.CORRECTNESS and t.state == FAILED)
    return list(dict.fromkeys(str(t.extra.get("case")) for t in failed))


def _whose(args: argparse.Namespace) -> tuple[str | None, str | None, tuple[dict[str, str], ...]]:
    """(student id, Gradescope submission id, Gradescope members) for the grade's signed identity: --student-id, and
    for autograde Gradescope's submission_metadata.json when it is there (its first member's SID is the student id
    unless --student-id names one). Raises GraderError for a bad --student-id or an unusable metadata file."""
    sid = getattr(args, "student_id", None)
    if sid is not None:
        if not sid.strip() or len(sid) > MAX_STUDENT_ID or not sid.isprintable() or sid != sid.strip():
            raise GraderError(
                f"--student-id {sid[:40]!r}: want the student's id as one line of at most {MAX_STUDENT_ID} "
                "printable characters, without leading or trailing spaces"
            )
    meta_path = getattr(args, "submission_metadata", None)
    if meta_path is None or not meta_path.exists():
        return sid, None, ()
    from grader.publish import gradescope

    try:
        meta = gradescope.read_submission_metadata(meta_path)
    except gradescope.GradescopeError as e:
        raise GraderError(str(e)) from None
    return sid or meta.student_id, meta.submission_id, meta.users


def _profile(args: argparse.Namespace) -> int:
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


WATCH_POLL_S = 1.0


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(mtime in ns, size) of every file under folder, by relative path; caches and hidden files left out (a
    grade's own __pycache__ must not trigger the next one)."""
    out: dict[str, tuple[int, int]] = {}
    try:
        paths = sorted(folder.rglob("*"))
    except OSError:
        return out
    for p in paths:
        rel = p.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        if p.is_file():
            out[rel.as_posix()] = (st.st_mtime_ns, st.st_size)
    return out


def _watch(args: argparse.Namespace, poll_s: float = WATCH_POLL_S, sleep: Callable[[float], None] = time.sleep) -> int:
    """`grade --watch`: grade, then poll the submission's files' mtimes and grade again when one changes. A plain
    loop (no file-watching dependency); Ctrl-C stops it: exit 0 while waiting (every grade so far was written), 130
    during a grade (that one is lost)."""
    folder = args.submission
    grading = False
    failed: list[str] = []
    # Ctrl-C is how a watch ends, so it must raise KeyboardInterrupt here even when this process inherited SIGINT
    # ignored (started in the background by a non-interactive shell: Python then installs no handler of its own).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            grading = True
            # The cases that failed last time first, and a stop at the first failing case (unless --all): a save
            # that fixes nothing is answered in seconds, and one that fixes it goes on to the rest.
            args.first = () if getattr(args, "watch_all", False) else tuple(failed)
            args.stop_at_failure = not getattr(args, "watch_all", False)
            args.failed = []
            code = _run(args)
            failed = list(getattr(args, "failed", []) or [])
            grading = False
            if code == EXIT_USAGE:
                return code  # bad arguments: grading again would fail the same way
            before = _snapshot(folder)
            print(f"watching {folder} for changes (every {poll_s:g} s); Ctrl-C to stop", flush=True)
            while True:
                sleep(poll_s)
                now = _snapshot(folder)
                if now != before:
                    break
            changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            print(f"changed: {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}; grading again", flush=True)
    except KeyboardInterrupt:
        print("\nstopped watching" + (" (the grade in progress was not written)" if grading else ""), flush=True)
        return 130 if grading else EXIT_OK


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


def _student_report(g: Grade, out: Path) -> None:
    """report.md + report.html beside results.json. Never fatal: results.json is already written, exit stays 0."""
    try:
        from grader.report.studentreport import write_student_report

        md, page = write_student_report(g, out)
    except Exception as e:
        print(f"report: not written ({_one_line(e)}); results.json is unaffected", file=sys.stderr)
        return
    Console().print(f"report written to {page} (and {md.name})", highlight=False)


def _ta_report(
    root: Path,
    out: Path | None,
    secret_file: Path | None = None,
    roster_path: Path | None = None,
    canvas_column: str | None = None,
    problem: str | None = None,
    allow_partial: bool = False,
) -> int:
    """grades.csv + class_summary.html over every results.json under root (+ grades_canvas.csv with a roster).
    Bad results files are listed, never fatal; a roster that cannot be used is (exit 2, before anything is written).
    A Canvas import that would hold a score that is not final is not written (exit 2 after the rest is), unless
    allow_partial."""
    from grader.report import tareport

    if allow_partial and roster_path is None:
        raise UsageError("--allow-partial needs --roster (it is about grades_canvas.csv, Canvas's import)")
    assignment, roster, key = _ta_inputs(root, out, secret_file, roster_path, canvas_column, problem)
    with report.progress("report", min_interval_s=1.0) as update:
        done = tareport.write_class_report(
            root,
            out,
            progress=update,
            key=key.signing if key is not None else None,
            roster=roster,
            canvas_column_name=canvas_column,
            assignment=assignment,
            allow_partial=allow_partial,
        )
    _say_class_read(done)
    if roster is not None and done.join is not None:
        _say_canvas(done.join, roster)
    _say_signatures(done.cls.subs, key)
    canvas = roster is not None and done.join is not None and done.join.written
    print(
        f"written: {done.csv_path}{f', {done.csv_path.parent / tareport.CANVAS_CSV}' if canvas else ''} "
        f"and {done.html_path}{f' (the class note: {done.notes_path})' if done.notes_path else ''}"
    )
    if done.join is not None and not done.join.written:
        print(f"grader error: {tareport.refusal(done.join)}", file=sys.stderr)  # one line, as _usage_caught's
        return EXIT_USAGE
    return EXIT_OK


def _ta_inputs(
    root: Path,
    out: Path | None,
    secret_file: Path | None,
    roster_path: Path | None,
    canvas_column: str | None,
    problem: str | None,
) -> tuple[Assignment | None, Roster | None, keyfile.Key | None]:
    """What `report` reads besides the results: the assignment (--problem), the roster and the key, each checked
    before anything is written, in this order; a usage error names the first that cannot be used."""
    from grader.report import tareport

    if canvas_column is not None and roster_path is None:
        raise UsageError("--canvas-column needs --roster (grades_canvas.csv has one row per roster student)")
    if canvas_column is not None and not canvas_column.strip():
        raise UsageError("--canvas-column: empty (give the assignment's name)")
    assignment = tareport.from_argument(problem, ROOT) if problem is not None else None
    roster = tareport.read_roster(roster_path) if roster_path is not None else None
    if secret_file is not None and not secret_file.is_file():
        raise UsageError(f"--secret-file {secret_file}: no such file (pass the key file the grades were made with)")
    key = _key(secret_file)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory (pass the folder that holds the students' results)")
    _check_writable(out or root)
    try:
        tareport.validator()
    except ImportError:
        raise UsageError(tareport.NEEDS_JSONSCHEMA) from None
    return assignment, roster, key


def _say_class_read(done: ClassReport) -> None:
    """How many results were read, flagged and unusable; grades made without a GPU; the problem and its points."""
    from grader.report import tareport

    subs, bad, a = done.cls.subs, done.cls.bad, done.cls.assignment
    flagged = sum(1 for x in subs if x.flags)
    print(
        f"{len(subs)} submission(s) read, {flagged} flagged, {len(bad)} file(s) or folder(s) unusable "
        "(listed in the summary)"
    )
    cpu = sum(1 for x in subs if x.without_gpu)
    if cpu:
        print(
            f"warning: {cpu} grade(s) made without a GPU (device CPU in grades.csv): no performance points "
            "in them; regrade on a GPU"
        )
    partial = sum(1 for x in subs if x.not_final)
    if partial:
        print(f"warning: {partial} grade(s) not final (column final in grades.csv, and listed in the summary)")
    print(f"problem {a.problem or 'unknown'} ({tareport.points_text(a.points) or 'unknown'} points), from {a.source}")
    for note in done.cls.notes:
        print(f"the whole class: {note}")


def _say_canvas(j: Join, roster: Roster) -> None:
    """The roster join behind grades_canvas.csv: who has a score, who has none, and results matched to no one."""
    from grader.report import tareport

    empty = len(roster.rows) - len(j.matched)
    print(
        f"{tareport.CANVAS_CSV}: {len(j.matched)} of {len(roster.rows)} roster student(s) with a score in column "
        f"'{j.column}' (points possible {tareport.points_text(j.points_possible)}); {empty} without one, "
        f"{len(j.unmatched) + len(j.ambiguous)} result(s) matched to no one (listed in the summary)"
    )
    m = tareport.CANVAS_ID_RE.match(j.column)
    if m and j.points_possible and float(m.group(2)) == j.points_possible:
        print(f"note: Canvas reads '({m.group(2)})' in '{j.column}' as the id of a Canvas assignment, not its points")


def _say_signatures(subs: list[Submission], key: keyfile.Key | None) -> None:
    """With a key: how many files verify, and who is forged, replayed or signed for no one (none is imported)."""
    if key is None:
        print("signatures: not checked (pass --secret-file KEY, the key file the grades were made with, to check them)")
        return

    def names(xs: list[str]) -> str:
        return (": " + ", ".join(xs[:10]) + (" ..." if len(xs) > 10 else "")) if xs else ""

    forged = [x.student for x in subs if x.signature in (signing.INVALID, signing.UNSIGNED)]
    valid = sum(1 for x in subs if x.signature == signing.VALID)
    line = f"signatures: {valid} valid, {len(forged)} not written by the grader with this key{names(forged)}"
    for what in (signing.REPLAYED, signing.NO_IDENTITY):
        these = [x.student for x in subs if x.signature == what]
        if these:
            line += f"; {len(these)} {what}{names(these)}"
    print(line + (" (not imported; listed in the summary)" if valid < len(subs) else ""))


def _keygen(out: Path) -> int:
    keyfile.keygen(out)
    print(f"wrote a new grading key to {out} (mode 0600): grade with --secret-file {out}; keep it from students")
    return 0


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


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise GraderError(f"cannot write results to {out}: {e.strerror or e} (pass --out DIR)") from None
