"""`grade`, `autograde` and `bench`: one grade of a submission (results.json, the terminal's summary or bench's
table, the student's report), and `grade --watch`, which grades again each time a file of the submission changes.
`grade --course` is grader/app/course.py."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rich.console import Console

from grader import availability, keyfile, report
from grader.app import EXIT_GRADER_FAULT, EXIT_OK, EXIT_USAGE, ROOT, _check_writable, _key, course
from grader.commands import grader_command
from grader.graderun import Options
from grader.performance import anchor
from grader.pipeline import GraderError, grade
from grader.problem import layout
from grader.problem.spec import Problem, find_problem, load_problem
from grader.report import charts
from grader.results import FAILED, Grade, Kind
from grader.sandbox import GraderFault, become_subreaper, reap_strays

# A checkout grades its own assignment/; an installed grader (`pip install .`, then `kernel-grader`) the assignment/ of
# the directory it is run from, not the stubs installed beside it.
DEFAULT_SUBMISSION = ROOT / "assignment" if (ROOT / "pyproject.toml").is_file() else Path("assignment")
AUTOGRADE_KEY = Path("/autograder/secret/grader_key")  # Gradescope's staff-only folder; the container passes its own
GRADESCOPE_METADATA = Path("/autograder/submission_metadata.json")  # written by Gradescope for each submission
MAX_STUDENT_ID = 200
# grade's and bench's results folder: DEFAULT_OUT/<problem>/ (default_out). One folder per problem: a grade of
# --problem swiglu used to overwrite the GLU grade in grade-results/.
DEFAULT_OUT = Path("grade-results")


def default_out(problem: str) -> Path:
    """Where a grade of `problem` goes when --out is not given."""
    return DEFAULT_OUT / problem


# The options that grade and bench share (and profile, the first two), as parent parsers (argparse copies their
# actions into each child, in order). Three of them so that grade's options keep their order: --problem,
# --submission, --staff, --out, ...
def where_options() -> argparse.ArgumentParser:
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
    return where


def staff_option() -> argparse.ArgumentParser:
    grade_staff = argparse.ArgumentParser(add_help=False)
    grade_staff.add_argument("--staff", action="store_true", help="grade the staff solutions from reference/ instead")
    return grade_staff


def _what_options() -> argparse.ArgumentParser:
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
    return what


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    where, grade_staff, what = where_options(), staff_option(), _what_options()
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
    course.add_arguments(g)
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
    g.set_defaults(func=run)
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
    a.set_defaults(func=run)
    b = sub.add_parser(
        "bench", help="lecture-style timing table: baselines vs Triton vs CUDA (needs a GPU)", parents=[where, what]
    )
    b.add_argument("--staff", action="store_true", help="time the staff solutions (default: the submission)")
    b.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """grade, autograde or bench; grade --course (grader/app/course.py) and grade --watch."""
    if why := availability.torch_compiled_each_start():  # said once, before any grade (batch/cli.py says it too)
        print(f"warning: {why}", file=sys.stderr)
    if getattr(args, "course", None) is not None:
        if args.out is None:  # a course's problems go to OUT/<problem>/: the same folders as their own grades
            args.out = DEFAULT_OUT
        return course.run(args, _run)
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
