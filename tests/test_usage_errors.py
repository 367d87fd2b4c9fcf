"""One usage-error type (grader/errors.py), caught once in the CLI (grader/app/ `_usage_caught`): every error the
grader's commands turn into 'grader error: ...' and exit 2 is a UsageError, and one raised deep in a command (the
roster's reader, a spec, a key file) reaches the terminal as that one line, whatever the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import cli, keyfile, pipeline
from grader.errors import UsageError
from grader.problem import course, spec
from grader.publish import gradescope, handout
from grader.report import roster, similarity


@pytest.mark.parametrize(
    "cls",
    [
        pipeline.GraderError,
        spec.SpecError,
        course.CourseError,
        roster.RosterError,
        keyfile.KeyFileError,
        handout.HandoutError,
        gradescope.GradescopeError,
        similarity.SimilarityError,
    ],
)
def test_each_usage_error_is_a_usage_error(cls: type) -> None:
    assert issubclass(cls, UsageError)


def test_roster_error_is_still_a_value_error() -> None:
    assert issubclass(roster.RosterError, ValueError)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("grader error: "), err
    return err


def test_errors_raised_inside_commands_are_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert cli.main(["report", str(tmp_path), "--canvas-column", "x"]) == 2
    assert _one_line(capsys) == (
        "grader error: --canvas-column needs --roster (grades_canvas.csv has one row per roster student)\n"
    )
    empty = tmp_path / "roster.csv"
    empty.write_text("")
    assert cli.main(["report", str(tmp_path), "--roster", str(empty)]) == 2  # RosterError from the reader
    assert _one_line(capsys).startswith(f"grader error: --roster {empty}: empty")
    assert cli.main(["grade", "--problem", str(tmp_path / "nope.yaml")]) == 2  # SpecError from the loader
    assert "cannot read the spec file" in _one_line(capsys)
    missing_key = tmp_path / "key"
    assert cli.main(["grade", "--staff", "--secret-file", str(missing_key), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in _one_line(capsys)  # KeyFileError from keyfile.load
    assert cli.main(["keygen", "--out", str(empty)]) == 2  # KeyFileError: never overwritten
    _one_line(capsys)
