"""Messages a student can act on (issue 29 items 7 and 10), from real CPU grades of the repo's broken kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.results import FAILED

ROOT = Path(__file__).resolve().parent.parent


def case_output(g, case: str) -> str:
    (t,) = [t for t in g.tests if t.stage == "correctness" and t.extra.get("case") == case]
    assert t.state == FAILED, t.output
    return t.output


@pytest.mark.parametrize("case", ["tiny_1x2/float32", "odd_h_1001/float32"])
def test_an_overread_names_the_buffer_asan_names_with_block_thread_and_line(grade_dir, case):
    """tests/data/problems/glu/cuda_cpu/overread_past_row reads one element past each row: on the last row, just past
    the end of x. On tiny_1x2 the output y is allocated 24 bytes after x, and the message used to say "24 bytes before
    y"."""
    g = grade_dir(ROOT / "tests/data/problems/glu/cuda_cpu/overread_past_row", only=("cuda",), cases=(case,))
    first = case_output(g, case).splitlines()[0]
    assert first.startswith("out of bounds: read of 1 bytes at glu_cuda.cu:28 in "), first
    assert "0 bytes past the end of x (the input)" in first, first
    assert "before y" not in first and "of y" not in first, first
    assert " block (" in first and " thread (" in first, first
    if case == "tiny_1x2/float32":  # x is one row of 2 floats: the read at byte 8 is x[2]
        assert "index 2 of x, whose last element is index 1" in first and "block (0,0,0) thread (0,0,0)" in first, first
    assert "What to try: the index at that line reaches past the last element of x" in first, first


def test_the_kernel_check_does_not_say_no_case_passed_when_an_empty_one_did(grade_dir, tmp_path):
    """A wrapper that only allocates the output passes the cases with no elements and fails the rest: the kernel
    check has no call with work in it to profile, and says so without claiming that no case passed."""
    (tmp_path / "glu_triton.py").write_text(
        "import torch\n\n\ndef glu_triton(x):\n"
        "    return torch.zeros((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype, device=x.device)\n"
    )
    g = grade_dir(tmp_path, cases=("zero_rows/*", "tiny_1x2/float32"))
    assert any(t.state == "passed" and t.extra.get("case", "").startswith("zero_rows/") for t in g.tests)
    (check,) = [t for t in g.tests if t.name == "triton / kernel check"]
    assert "no case passed" not in check.output, check.output
    assert "only cases with no elements passed (zero_rows/float32, zero_rows/bfloat16)" in check.output, check.output


def test_a_local_grade_says_one_advisory_line_in_the_terminal(tmp_path):
    """Graded as root with no key file (a student's local check): the terminal and report.md say once that it is a
    practice grade, not the staff's list (a probe's PermissionError, the staff solutions' modes); results.json keeps
    them."""
    import io

    from rich.console import Console

    from grader.report.student import write_student_report
    from grader.report.terminal import print_summary
    from grader.results import Grade

    g = Grade(problem="glu", submission="assignment", device="cpu")
    g.official_why = [
        "the staff solution solution_triton.py is readable by the student uid (grade from the container, which has "
        "none, or chmod 600 it)",
        "could not check what the student uid can import and include (PermissionError: [Errno 13] Permission "
        "denied: 'venv'); an official grade needs that check",
        "no key file (--secret-file): a local grade, advisory and unsigned",
    ]
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=100))
    out = buf.getvalue()
    # issue 40 item 8: a local grade says once, briefly, that it is a practice grade; the staff's reasons (and their
    # number, which varied between runs) are in results.json only
    assert out.count("practice grade") == 1 and "advisory" not in out, out
    assert "PermissionError" not in out and "staff solution" not in out and "more reason" not in out, out
    md, _ = write_student_report(g, tmp_path)
    text = md.read_text()
    assert text.count("practice grade") == 1 and "PermissionError" not in text and "staff solution" not in text


def test_every_command_a_tip_suggests_runs_in_a_fresh_shell():
    """A fresh shell of the student's checkout has no torch: `python -m grader ...` (or `python -c 'import ...'`)
    fails there as written; `nox -s grade` makes its own environment."""
    import re

    from grader.report import advice

    tips = [*advice.GENERIC.values(), *advice.FLAG_TIPS.values(), advice.SKIP_TIP, advice.FALLBACK]
    commands = [c for t in tips for c in re.findall(r"`([^`]+)`", t)]
    assert commands, "expected the tips to suggest commands"
    for c in commands:
        assert c.startswith("nox -s "), c


def test_a_suggested_command_runs_in_a_fresh_shell(monkeypatch):
    """A message that names a grader command to run next names the nox session when the grader runs in the
    checkout's nox environment (a fresh shell's `python` has no torch, issue 40), else `python -m grader`."""
    import sys as _sys

    from grader import commands

    monkeypatch.setattr(_sys, "prefix", str(commands.NOX_ENV))
    assert commands.grader_command("report", "OUT") == "nox -s report -- OUT"
    assert commands.grader_command("keygen") == "nox -s keygen"
    monkeypatch.setattr(_sys, "prefix", str(commands.NOX_ENV.parent / "elsewhere"))
    assert commands.grader_command("report", "OUT") == "python -m grader report OUT"
