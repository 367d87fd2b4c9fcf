"""A course file (grader/problem/course.py): which problems a term grades and their points, validated like a spec; the
combined student report has one section per problem and the total scaled to the course's points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.problem.course import CourseError, load_course, student_page, student_report, submission_dir, summarize

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT / "tests" / "data" / "problems" / "scale" / "spec.yaml"


def _course(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "course.yaml"
    p.write_text(text)
    return p


def test_a_course_lists_problems_by_name_or_path_with_points(tmp_path):
    c = load_course(_course(tmp_path, f"name: T\nproblems:\n  - {{problem: glu, points: 60}}\n"
                                      f"  - {{problem: gelu, points: 40}}\n  - {{problem: {SCALE}, points: 5}}\n"), ROOT)
    assert c.name == "T" and [(p.name, p.points) for p in c.problems] == [("glu", 60), ("gelu", 40), ("scale", 5)]
    assert c.problems[1].stubs == "assignment/gelu"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("problems: []\n", "key 'problems'"),
        ("problems:\n  - {problem: glu}\n", "problems[0]"),
        ("problems:\n  - {problem: glu, points: -1}\n", "problems[0].points"),
        ("problems:\n  - {problem: nosuch, points: 1}\n", "problems[0].problem"),
        ("problems:\n  - {problem: glu, points: 1}\n  - {problem: glu, points: 2}\n", "listed twice"),
        ("nmae: x\nproblems:\n  - {problem: glu, points: 1}\n", "unknown key 'nmae'"),
    ],
)
def test_a_bad_course_file_is_one_clear_error(tmp_path, text, says):
    with pytest.raises(CourseError) as e:
        load_course(_course(tmp_path, text), ROOT)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_each_problem_is_read_from_its_own_folder_of_the_submission(tmp_path):
    assert submission_dir(tmp_path, "assignment", "glu") == tmp_path
    assert submission_dir(tmp_path, "assignment/gelu", "gelu") == tmp_path / "gelu"
    assert submission_dir(tmp_path, "elsewhere/x", "x") == tmp_path / "x"


def test_the_summary_scales_each_problem_to_its_points_and_reports_a_section_each(tmp_path):
    c = load_course(_course(tmp_path, "name: T\nproblems:\n  - {problem: glu, points: 60}\n"
                                      "  - {problem: gelu, points: 40}\n"), ROOT)
    (tmp_path / "glu").mkdir()
    (tmp_path / "glu" / "results.json").write_text(json.dumps({"score": 30, "max_score": 120}))
    (tmp_path / "glu" / "report.md").write_text("# glu report: 30 / 120 points\n\n## Score\nrow\n")
    s = summarize(c, tmp_path)  # gelu has no results: 0 of its points, and a note
    assert s["earned"] == pytest.approx(15.0) and s["points"] == 100
    gelu = s["problems"][1]
    assert gelu["earned"] == 0 and gelu["note"].startswith("no results")
    md = student_report(c, s, tmp_path)
    assert "## glu report: 30 / 120 points" in md and "### Score" in md and "## gelu" in md
    assert "| glu | 30 / 120 | 15.00 / 60 |" in md and "**15.00 / 100**" in md
    (tmp_path / "glu" / "report.html").write_text("<html></html>")
    page = student_page(c, s, tmp_path)  # the same table as HTML, each problem linked to its own report.html
    assert '<a href="glu/report.html">glu</a>' in page and "15.00 / 100" in page and "gelu: no results" in page
    assert 'href="gelu/' not in page  # no report there: no link


@pytest.mark.slow
def test_the_cli_grades_a_course(tmp_path):
    course = _course(tmp_path, f"name: T\nproblems:\n  - {{problem: {SCALE}, points: 10}}\n")
    r = subprocess.run([sys.executable, "-m", "grader", "grade", "--course", str(course), "--staff", "--device", "cpu",
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "out" / "course.json").read_text())
    assert doc["earned"] == doc["points"] == 10
    assert json.loads((tmp_path / "out" / "scale" / "results.json").read_text())["score"] == 6
    assert "## scale report" in (tmp_path / "out" / "report.md").read_text()
    assert 'href="scale/report.html"' in (tmp_path / "out" / "report.html").read_text()
