"""`grade` writes to grade-results/<problem>/ by default (issue 40 item 9): a grade of --problem swiglu used to
overwrite the GLU grade in grade-results/. The grade itself is replaced (what matters is where it is written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import cli, pipeline
from grader.app import grade as app_grade

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_grades(monkeypatch):
    def fake_grade(problem, opts, progress=None, beside=None):
        g = pipeline.Grade(problem.name, str(opts.submission), "cpu")
        g.official_why = ["fake"]
        return g

    monkeypatch.setattr(app_grade, "grade", fake_grade)


def test_grading_another_problem_keeps_the_first_problems_results(fake_grades, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for problem in ("glu", "swiglu"):
        assert cli.main(["grade", "--problem", problem, "--device", "cpu", "--submission", str(ROOT / "assignment")]) == 0
    for problem in ("glu", "swiglu"):
        data = json.loads((tmp_path / "grade-results" / problem / "results.json").read_text())
        assert data["extra_data"]["problem"] == problem
    assert not (tmp_path / "grade-results" / "results.json").exists()


def test_the_default_is_said_in_the_help_and_an_explicit_out_is_kept(fake_grades, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    assert "grade-results/PROBLEM/" in "".join(capsys.readouterr().out.split())  # argparse wraps at a hyphen
    out = tmp_path / "mine"
    sub = ["--submission", str(ROOT / "assignment")]
    assert cli.main(["grade", "--problem", "swiglu", "--device", "cpu", "--out", str(out), *sub]) == 0
    assert (out / "results.json").is_file() and not (tmp_path / "grade-results").exists()
