"""The GPU compile check of CPU grades (grader/correctness/gpucompile.py): kernels that only the interpreter accepts.

End to end on CPU: a submission in tests/data/problems/glu/compile_fail/ earns every CPU correctness point (the
interpreter runs it) and its "triton / GPU compile check" row fails, naming the file line that Triton's compiler points
at. Correct kernels of any design pass that row (tests/test_correct_designs.py, and the staff in test_correctness.py).
The check never blames the submission for its own limits: those give SKIPPED.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.correctness import gpucompile
from grader.results import FAILED, PASSED, SKIPPED

COMPILE_FAIL = Path(__file__).resolve().parent / "data" / "problems" / "glu" / "compile_fail"
NAMES = sorted(p.name for p in COMPILE_FAIL.iterdir() if (p / "glu_triton.py").is_file())
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the check runs on CPU grades only")


def _bug_line(name: str) -> int:
    lines = (COMPILE_FAIL / name / "glu_triton.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "# BUG" in line)


def _row(g, part: str = "triton"):
    rows = [t for t in g.tests if t.name == f"{part} / GPU compile check"]
    assert len(rows) == 1, [t.name for t in g.tests]
    return rows[0]


def test_the_suite_is_there():
    assert len(NAMES) >= 2, NAMES


@cpu_only
# A CPU grade each (~6 s): the fast tier grades the first; the full tier every one.
@pytest.mark.parametrize("name", [n if n == NAMES[0] else pytest.param(n, marks=pytest.mark.slow) for n in NAMES])
def test_an_interpreter_only_kernel_passes_on_cpu_and_fails_the_compile_check(name, problem, grade_dir):
    g = grade_dir(COMPILE_FAIL / name)
    corr = [t for t in g.tests if t.stage == "correctness" and t.state != SKIPPED]
    assert corr and all(t.state == PASSED for t in corr), "the interpreter runs it: every CPU case passes"
    row = _row(g)
    assert row.state == FAILED and row.score == row.max_score == 0, row.output
    assert f"glu_triton.py, line {_bug_line(name)}:" in row.output, row.output
    assert "does not compile for a GPU" in row.output and "every triton case would fail" in row.output, row.output
    assert any("GPU compile check" in n for n in g.notes), g.notes


@cpu_only
@pytest.mark.slow  # grades glu's correct/tiles_2d too (~8 s; a full-tier grade of test_correct_designs.py)
def test_the_student_report_shows_the_compile_error_before_the_lost_points(grade_dir, tmp_path):
    from grader.report import studentreport

    g = grade_dir(COMPILE_FAIL / NAMES[0])
    md, html = (p.read_text() for p in studentreport.write_student_report(g, tmp_path))
    assert md.index("## Will not compile on a GPU") < md.index("## Lost points"), md
    assert f"glu_triton.py, line {_bug_line(NAMES[0])}:" in md.split("## Lost points")[0], md
    assert "Will not compile on a GPU" in html and f"line {_bug_line(NAMES[0])}:" in html
    clean = studentreport.render_md(studentreport.as_results(grade_dir(COMPILE_FAIL.parent / "correct" / "tiles_2d")), None)
    assert "Will not compile on a GPU" not in clean


@cpu_only
@pytest.mark.slow  # a grade of the stub (~14 s; shared with test_correctness.py's, also full tier)
def test_the_stub_launches_nothing_so_the_check_is_skipped_not_failed(grade_dir, repo_root):
    row = _row(grade_dir(repo_root / "assignment" / "glu"))
    assert row.state == SKIPPED and "no launch" in row.output, row.output


@pytest.mark.parametrize("reply, says", [
    ({"unavailable": "this Triton (triton 2.0) has no compiler API the check knows"}, "no compiler API"),
    ("not a dict", "malformed"),
    ({"compiled": [], "errors": [], "skipped": [{"kernel": "k", "why": "argument 'd' is a other (TensorDescriptor)"}]}, "TensorDescriptor"),
])
def test_what_the_check_cannot_do_is_skipped_never_failed(reply, says):
    state, output, _ = gpucompile.row_from_reply("triton", "glu_triton.py", reply)
    assert state == SKIPPED and says in output, output


def test_a_compile_error_reply_fails_the_row_with_its_line_and_message():
    err = {"kernel": "k", "signature": "(x: *fp32)", "options": {}, "message": "at 1:4:\n...\nNameError(...)", "line": 7}
    state, output, extra = gpucompile.row_from_reply("triton", "glu_triton.py", {"compiled": [], "errors": [err, err], "skipped": []})
    assert state == FAILED and output.startswith("glu_triton.py, line 7: kernel k"), output
    assert "NameError(...)" in output and "1 more launch signature" in output and extra["errors"] == 2


def test_malformed_launch_records_are_not_compiled():
    t = gpucompile.check_part({}, "triton", "glu_triton.py", [{"kernel": 3}], timeout_s=5)
    assert t.state == SKIPPED and "malformed" in t.output, t.output
