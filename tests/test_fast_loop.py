"""A fast, quiet loop (issue 29, item 8): one progress bar on a terminal (plain lines elsewhere), `--watch` runs
the cases that failed last time first and stops at the first failing case unless `--all`, and a partial grade
(`--case`, or a watch grade that stopped) goes to OUT/partial/, never over the last full grade."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from grader import cli, report, results
from grader.app import grade as app_grade
from grader.correctness.partrun import STOPPED
from grader.report import student
from grader.pipeline import Options, grade, run_first
from grader.results import FAILED, PASSED, SKIPPED, Grade, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent


def _case(name: str, state: str) -> results.TestResult:
    return results.TestResult(
        f"triton / correctness / {name}",
        "triton",
        "correctness",
        1.0 if state == PASSED else 0.0,
        1.0,
        state,
        "ok" if state == PASSED else "wrong values: 1 of 2 elements outside tolerance",
        {"case": name},
        kind=Kind.CORRECTNESS,
        reason=Reason.OK if state == PASSED else Reason.WRONG_VALUES,
    )


# -- the order and the stop ----------------------------------------------------------------------------------------


def test_the_cases_that_failed_last_time_run_first_and_the_rest_keep_their_order(problem):
    names = [c.name for c in problem.cases]
    p = run_first(problem, ("odd_h_1001/float16", "tiny_1x2/float32", "no/such"))
    assert [c.name for c in p.cases][:2] == ["odd_h_1001/float16", "tiny_1x2/float32"]
    assert [c.name for c in p.cases][2:] == [n for n in names if n not in ("odd_h_1001/float16", "tiny_1x2/float32")]
    assert sorted(c.name for c in p.cases) == sorted(names)  # nothing lost, nothing added
    assert run_first(problem, ()) is problem


@pytest.mark.slow  # one CPU grade of the Triton stub: ~6 s
def test_a_watch_grade_runs_the_last_failure_first_and_stops_at_the_first_failing_case(problem, tmp_path):
    """The stub fails every case: the one case run is the one named first, every other is 'not run' (skipped, no
    points lost to it), the grade is partial and not official, and nothing is timed."""
    first = "odd_h_1001/float16"
    g = grade(
        problem,
        Options(
            submission=ROOT / "assignment" / "glu",
            out=tmp_path,
            only=("triton",),
            device="cpu",
            first=(first,),
            stop_at_failure=True,
        ),
    )
    cases = {t.extra["case"]: t for t in g.tests if t.kind == Kind.CORRECTNESS}
    ran = [n for n, t in cases.items() if not t.extra.get("stopped") and t.reason != Reason.NEEDS_GPU]
    assert ran == [first] and cases[first].state == FAILED, {n: cases[n].output for n in ran}
    stopped = [t for t in cases.values() if t.extra.get("stopped")]
    assert len(stopped) == len([c for c in problem.cases if not c.gpu_only]) - 1
    assert all(t.state == SKIPPED and t.reason == Reason.NOT_RUN and t.output == STOPPED for t in stopped)
    assert g.partial == [first] and not g.official
    assert any("stopped at the first failing case" in n for n in g.notes), g.notes
    # Gradescope and the terminal say why: not this machine's limit, and not lost
    assert stopped[0].gradescope()["output"].startswith("not run: 1 point, --watch stopped")
    gpu_only = sum(t.max_score for t in g.tests if t.state == SKIPPED and t.reason != Reason.NOT_RUN)
    assert any(n.startswith(f"{gpu_only:g} of ") and "could not be earned" in n for n in g.notes), g.notes
    # ... and what the file, the headline and the report's facts say of it (issue 40 item 7): the unrun cases are
    # neither "not earnable on this machine" nor lost
    assert g.unearnable == gpu_only and g.not_run == sum(t.max_score for t in stopped) > 0
    doc = json.loads(json.dumps(g.to_json()))
    assert doc["extra_data"]["points_not_earnable_here"] == gpu_only
    head = student.headline(doc)
    assert f"({g.max_score:g} in all, {g.not_run:g} not run (--watch))" in head, head
    perf = [t for t in g.tests if t.kind == Kind.PERFORMANCE]  # on a CPU: never timed here anyway
    assert perf and all(t.state == SKIPPED and t.reason == Reason.NEEDS_GPU for t in perf)


# -- --watch -------------------------------------------------------------------------------------------------------


def _watch(args_list, results, tmp_path):
    """Runs _watch with a fake _run that records what each grade was asked and reports `results[i]`'s failures."""
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "glu_triton.py").write_text("v0")
    asked: list[tuple[tuple[str, ...], bool]] = []

    def fake_run(args):
        asked.append((tuple(args.first), args.stop_at_failure))
        args.failed = results[len(asked) - 1]
        return 0

    polls = {"n": 0}

    def sleep(_s: float) -> None:
        polls["n"] += 1
        if polls["n"] > len(results) - 1:
            raise KeyboardInterrupt
        (sub / "glu_triton.py").write_text("v" * (polls["n"] + 1))  # a save: the next grade

    args = cli._parser().parse_args(["grade", "--watch", "--submission", str(sub), *args_list])
    return args, asked, fake_run, sleep


def test_watch_runs_the_last_failures_first_and_stops_at_a_failure(tmp_path, monkeypatch):
    results = [["odd_h_1001/float16"], ["strided_rows/float32", "odd_h_1001/float16"], []]
    args, asked, fake_run, sleep = _watch([], results, tmp_path)
    monkeypatch.setattr(app_grade, "_run", fake_run)
    assert app_grade._watch(args, poll_s=0.0, sleep=sleep) == 0
    assert asked == [
        ((), True),
        (("odd_h_1001/float16",), True),
        (("strided_rows/float32", "odd_h_1001/float16"), True),
    ]


def test_watch_all_runs_every_case_in_order(tmp_path, monkeypatch):
    args, asked, fake_run, sleep = _watch(["--all"], [["odd_h_1001/float16"], []], tmp_path)
    monkeypatch.setattr(app_grade, "_run", fake_run)
    assert app_grade._watch(args, poll_s=0.0, sleep=sleep) == 0
    assert asked == [((), False), ((), False)]


# -- where a partial grade goes -------------------------------------------------------------------------------------


def _fake_grade(partial: list[str]):
    def fake(problem, opts, progress, beside=None):
        for c in problem.cases[:3]:
            progress(f"triton: {c.name}")
        g = Grade(problem="glu", submission=str(opts.submission), device="cpu")
        g.tests = [_case(problem.cases[0].name, FAILED), _case(problem.cases[1].name, PASSED)]
        g.partial = list(partial)
        return g

    return fake


@pytest.mark.parametrize("partial", [["tiny_1x2/*"], []])
def test_a_partial_grade_goes_to_its_own_folder_and_the_full_grade_stays(partial, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    out.mkdir()
    full = out / "results.json"
    full.write_text('{"the": "last full grade"}')
    monkeypatch.setattr(app_grade, "grade", _fake_grade(partial))
    args = cli._parser().parse_args(["grade", "--staff", "--device", "cpu", "--only", "triton", "--out", str(out)])
    assert app_grade._run(args) == 0
    printed = capsys.readouterr().out
    if partial:
        assert full.read_text() == '{"the": "last full grade"}'  # untouched
        data = json.loads((out / "partial" / "results.json").read_text())
        assert data["extra_data"]["partial_cases"] == partial
        # the terminal wraps its lines at its width: the phrase may cross a line break where tmp_path is long
        assert (out / "partial" / "report.md").exists() and "the last full grade in" in " ".join(printed.split())
    else:  # a full grade replaces the full grade, and makes no partial folder
        assert json.loads(full.read_text())["tests"] and not (out / "partial").exists()
    assert args.failed == ["tiny_1x2/float32"]  # what --watch runs first next time


# -- the progress bar -----------------------------------------------------------------------------------------------


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_progress_is_one_bar_that_counts_the_cases():
    steps = ["triton: a", "triton: b", "cuda: a"]
    buf = _FakeTTY()
    with report.progress("grading", stream=buf, steps=steps) as update:
        update("triton: building glu_triton.py")  # not a step: the bar does not move
        for s in steps:
            update(s)
        update("triton: a")  # a repeat (the sanitizer pass) is not counted twice
    text = buf.getvalue()
    assert "3/3" in text and "4/3" not in text, text[-2000:]
    assert " s] grading:" not in text  # no plain progress line: the bar only


def test_off_a_terminal_progress_stays_one_plain_line_per_message():
    buf = io.StringIO()
    with report.progress("grading", stream=buf, steps=["triton: a"]) as update:
        update("triton: a")
        update("triton: b")
    lines = buf.getvalue().splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines] == ["grading: triton: a", "grading: triton: b"]


def test_the_bar_s_steps_are_the_messages_the_pipeline_sends(problem):
    opts = Options(submission=ROOT / "assignment" / "glu", out=Path("."), only=("triton",), device="cpu", cases=("odd_h*",))
    assert app_grade._progress_steps(problem, opts) == [
        "triton: odd_h_1001/float32",
        "triton: odd_h_1001/float16",
        "triton: odd_h_1001/bfloat16",
    ]
    every = app_grade._progress_steps(problem, Options(submission=ROOT, out=Path("."), device="cpu"))
    assert len(every) == len(problem.implementations) * len([c for c in problem.cases if not c.gpu_only])
