"""Preflight (issue 29 item 4): `grade --secret-file` and `batch --secret-file` find out before the first grade
whether the grades will be official (grader/preflight.py: the grade's own identity pick, uid probe and staff probe),
and stop with what to fix unless --allow-advisory.

GRADER_SAME_UID=1 makes this machine one where no grade can be official whoever runs the tests (submission code
runs as the grader's own user; without root it is so anyway)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from grader import cli, keyfile, pipeline, preflight
from grader.app import grade as app_grade
from grader.batch import EXIT_OK, EXIT_USAGE
from grader.problem.spec import find_problem, load_problem

ROOT = Path(__file__).resolve().parent.parent
FAKE = Path(__file__).resolve().parent / "batch_fake_grade.py"


@pytest.fixture
def advisory_here(monkeypatch):
    monkeypatch.setenv("GRADER_SAME_UID", "1")


@pytest.fixture
def key(tmp_path) -> Path:
    k = tmp_path / "key"
    keyfile.keygen(k)
    return k


@pytest.fixture
def grades(monkeypatch) -> list[object]:
    """The grades the CLI starts (the grade itself replaced: what matters is whether one starts)."""
    seen: list[object] = []

    def fake_grade(problem, opts, progress=None, beside=None):
        seen.append(opts)
        g = pipeline.Grade(problem.name, str(opts.submission), "cpu")
        g.official_why = ["fake"]
        return g

    monkeypatch.setattr(app_grade, "grade", fake_grade)
    return seen


def _grade(tmp_path: Path, key: Path, *extra: str) -> int:
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "glu_triton.py").write_text("# a kernel\n")
    return cli.main(
        [
            "grade",
            "--submission",
            str(sub),
            "--out",
            str(tmp_path / "out"),
            "--device",
            "cpu",
            "--secret-file",
            str(key),
            *extra,
        ]
    )


def test_a_keyed_grade_that_cannot_be_official_stops_before_grading(advisory_here, key, grades, tmp_path, capsys):
    assert _grade(tmp_path, key) == 2
    err = capsys.readouterr().err
    assert not grades, "the grade started: the check must come before it"
    assert not (tmp_path / "out" / "results.json").exists()
    assert err.startswith("grader error: this grade would not be official"), err
    assert "GRADER_SAME_UID=1" in err and "--allow-advisory" in err, err


def test_allow_advisory_grades_anyway_and_says_so_first(advisory_here, key, grades, tmp_path, capsys):
    assert _grade(tmp_path, key, "--allow-advisory") == 0
    err = capsys.readouterr().err
    assert len(grades) == 1
    assert "warning: --allow-advisory: this grade will be advisory (unsigned): " in err and "GRADER_SAME_UID" in err


def test_no_key_a_staff_grade_or_a_partial_grade_is_not_checked(advisory_here, key, grades, tmp_path, capsys):
    """Advisory by choice: without a key, --staff, --case."""
    sub = tmp_path / "s"
    sub.mkdir()
    (sub / "glu_triton.py").write_text("# a kernel\n")
    assert cli.main(["grade", "--submission", str(sub), "--out", str(tmp_path / "o1"), "--device", "cpu"]) == 0
    assert _grade(tmp_path, key, "--case", "tiny_1x2/*") == 0
    assert len(grades) == 2 and "would not be official" not in capsys.readouterr().err


def test_the_preflight_says_what_the_grade_would(advisory_here):
    """The same reasons the grade itself records (pipeline.official_reasons over the same identity pick)."""
    problem = load_problem(find_problem("glu", ROOT))
    why = preflight.reasons(problem)
    assert why and any("GRADER_SAME_UID=1" in w for w in why), why
    with pipeline.open_scratch() as scratch:
        assert pipeline.official_reasons(problem, scratch) == why


def _class(root: Path) -> Path:
    for sid in ("a", "b"):
        (root / sid).mkdir(parents=True)
        (root / sid / "glu_triton.py").write_text(f"# {sid}'s kernel\n")
    root.chmod(0o700)
    return root


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_BATCH_GRADE_COMMAND", json.dumps([sys.executable, str(FAKE)]))
    monkeypatch.setenv("FAKE_GRADE_LOG", str(tmp_path / "fakelog"))
    monkeypatch.setenv("FAKE_GRADE_SLEEP", "0")
    return tmp_path / "fakelog"


def test_a_keyed_batch_that_cannot_be_official_stops_before_the_first_grade(advisory_here, key, fake, tmp_path, capsys):
    subs, out = _class(tmp_path / "class"), tmp_path / "out"
    args = ["batch", str(subs), "--out", str(out), "--slots", "1", "--no-perf", "--secret-file", str(key)]
    assert cli.main(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "this batch's grades would not be official" in err and "GRADER_SAME_UID=1" in err, err
    assert not out.exists() and not fake.exists(), "nothing graded, nothing made"
    # --allow-advisory: graded, each grade told the batch already checked (no check per submission)
    assert cli.main([*args, "--allow-advisory"]) == EXIT_OK
    assert "warning: --allow-advisory: this batch's grades will be advisory" in capsys.readouterr().err
    assert (out / "a" / "results.json").is_file() and (out / "b" / "results.json").is_file()
    calls = [json.loads(x) for x in (fake / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 2


def test_a_batch_without_a_key_is_not_checked(advisory_here, fake, tmp_path, capsys):
    subs, out = _class(tmp_path / "class"), tmp_path / "out"
    assert cli.main(["batch", str(subs), "--out", str(out), "--slots", "1", "--no-perf"]) == EXIT_OK
    assert "would not be official" not in capsys.readouterr().err


def test_where_grades_can_be_official_the_preflight_lets_them_through(key, grades, tmp_path, monkeypatch, capsys):
    """No reason, no stop, no warning (the reasons themselves are pipeline.official_reasons, tested with the
    official end-to-end grade in tests/test_boundary.py)."""
    monkeypatch.setattr(preflight, "reasons", lambda problem: [])
    assert _grade(tmp_path, key) == 0
    assert len(grades) == 1 and "advisory" not in capsys.readouterr().err


def test_a_batch_without_a_box_is_never_official_even_in_a_declared_container(separated, monkeypatch, tmp_path):
    """Issue 38 item 3: "one grade per container" (the image's GRADER_CONTAINMENT=container) makes a single grade
    without a box official, not a batch: its grades share the host. The batch's preflight drops the declaration (and
    so does each task), and the check names the missing containment."""
    from grader import box
    from grader.batch import cli as batch_cli

    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    monkeypatch.setenv(box.BWRAP_ENV, "/nonexistent/bwrap")
    monkeypatch.setenv(box.DECLARE_ENV, box.CONTAINER)
    box.support.cache_clear()
    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    try:
        assert not any("no kernel containment" in w for w in preflight.reasons(problem))  # a single grade: ok
        args = type("Args", (), {"engine": "local", "container_image": None, "allow_advisory": False})()
        assert batch_cli._preflight(args, problem) == EXIT_USAGE
        assert box.DECLARE_ENV not in __import__("os").environ
        assert any("no kernel containment" in w for w in preflight.reasons(problem))
    finally:
        box.support.cache_clear()
