"""A course file (grader/problem/course.py): which problems a term grades and their points, validated like a spec; the
combined student report has one section per problem and the total scaled to the course's points."""

from __future__ import annotations

import argparse
import html
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.problem.course import PARTIAL, CourseError, load_course, submission_dir, summarize
from grader.report.coursereport import run, student_page, student_report
from grader.problem.layout import Located

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
    text = "problems:\n  - {problem: glu, points: 1}\n  - {problem: gelu, points: 1}\n"
    c = load_course(_course(tmp_path, text), ROOT)
    glu, gelu = c.problems
    assert (glu.folder, gelu.folder) == ("glu", "gelu") and glu.files == ("glu_triton.py", "glu_cuda.cu")
    sub = tmp_path / "sub"
    (sub / "glu").mkdir(parents=True)
    (sub / "glu" / "glu_triton.py").write_text("x")
    assert submission_dir(sub, glu) == Located(sub / "glu") and submission_dir(sub, gelu) == Located(sub / "gelu")
    # A problem whose stubs live outside assignment/ is read from <name>/.
    assert submission_dir(sub, replace(gelu, folder="")).path == sub / "gelu"


def test_a_submission_in_the_old_layout_grades_its_files_at_the_top_with_a_note(tmp_path):
    """Courses that published the handout before GLU had its own folder have submissions with glu_triton.py at the
    top, beside gelu/: GLU is graded from the top, and the course's report and course.json say so; gelu from gelu/."""
    c = _course(tmp_path, "name: T\nproblems:\n  - {problem: glu, points: 60}\n  - {problem: gelu, points: 40}\n")
    sub = tmp_path / "sub"
    (sub / "gelu").mkdir(parents=True)
    (sub / "glu_triton.py").write_text("x")
    seen = {}

    def grade_one(ns):
        seen[Path(ns.problem).parent.name] = ns.submission
        (ns.out).mkdir(parents=True)
        (ns.out / "results.json").write_text(json.dumps({"score": 1, "max_score": 2}))
        return 0

    args = argparse.Namespace(course=str(c), submission=str(sub), out=str(tmp_path / "out"), problem=None)
    assert run(args, ROOT, grade_one) == 0
    assert seen == {"glu": sub, "gelu": sub / "gelu"}
    summary = json.loads((tmp_path / "out" / "course.json").read_text())
    glu, gelu = summary["problems"]
    assert "glu's files were found at the top of the submission, not in its folder glu/" in glu["note"], glu
    assert glu["earned"] == 30 and not gelu["note"] and not gelu["layout"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert f"> glu: {glu['layout']}" in md and "> gelu" not in md
    assert glu["layout"] in html.unescape((tmp_path / "out" / "report.html").read_text())
    # Files at the top and no folder of a problem whose files are not there: its (missing) folder, no note.
    assert submission_dir(sub, load_course(c, ROOT).problems[1]) == Located(sub / "gelu")
    (sub / "gelu").rmdir()
    assert submission_dir(sub, load_course(c, ROOT).problems[1]) == Located(sub / "gelu")


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


def test_a_partial_course_grade_is_read_from_each_problems_partial_folder_and_says_so(tmp_path):
    """`grade --course C --case NAME` writes each problem's (partial) grade to OUT/<problem>/partial/ (grader/app/grade.py):
    the course total is made from those, never 0 from a missing OUT/<problem>/results.json, nor from an earlier full
    grade left there, and course.json, report.md, report.html and the printed total say the grade is partial."""
    from grader.app import grade as app_grade

    assert app_grade.PARTIAL == PARTIAL  # where the CLI writes a partial grade is where the course reads it
    c = _course(tmp_path, "name: T\nproblems:\n  - {problem: glu, points: 60}\n  - {problem: gelu, points: 40}\n")
    out = tmp_path / "out"
    (out / "glu").mkdir(parents=True)  # an earlier full grade: not this run's
    (out / "glu" / "results.json").write_text(json.dumps({"score": 120, "max_score": 120}))
    (out / "glu" / "report.md").write_text("# glu report: the earlier full grade\n")

    def grade_one(ns):  # as the CLI's grade: a --case grade goes to OUT/<problem>/partial/
        assert ns.cases == ["tiny_1x*/float32"]
        where = ns.out / PARTIAL
        where.mkdir(parents=True)
        (where / "results.json").write_text(json.dumps({"score": 1, "max_score": 2}))
        (where / "report.md").write_text(f"# {ns.out.name} report: 1 / 2 points (partial)\n")
        (where / "report.html").write_text("<html></html>")
        return 0

    args = argparse.Namespace(course=str(c), submission=str(tmp_path / "sub"), out=str(out), problem=None,
                              cases=["tiny_1x*/float32"])
    assert run(args, ROOT, grade_one) == 0
    summary = json.loads((out / "course.json").read_text())
    glu, gelu = summary["problems"]
    assert summary["earned"] == pytest.approx(50.0) and (glu["earned"], gelu["earned"]) == (30, 20)
    assert summary["partial"] == ["tiny_1x*/float32"] and glu["results"] == "glu/partial/results.json"
    assert glu["note"] == "a partial grade: only the cases matching --case tiny_1x*/float32 were graded", glu
    md = (out / "report.md").read_text()
    assert "> partial grade: only the cases matching --case tiny_1x*/float32 were graded; this total is not" in md
    assert "## glu report: 1 / 2 points (partial)" in md and "earlier full grade" not in md
    page = html.unescape((out / "report.html").read_text())
    assert 'href="glu/partial/report.html"' in page and "this total is not the course grade" in page
    # A full grade's course.json has no "partial" key and reads OUT/<problem>/results.json, as before.
    full = summarize(load_course(c, ROOT), out)
    assert "partial" not in full and full["problems"][0]["earned"] == 60 and full["problems"][0]["note"] == ""


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


def test_a_grade_pointed_at_a_folder_laid_out_like_assignment_finds_the_problems_folder(tmp_path):
    """grader/problem/layout.py resolve: for `--submission DIR` (a CI job that mounts a student's assignment/, a
    Gradescope upload of files): DIR when the problem's files are at its top, else DIR/<problem>/ when it is there."""
    from grader.problem.layout import resolve
    from grader.problem.spec import load_problem

    glu = load_problem(ROOT / "reference" / "glu" / "spec.yaml")
    sub = tmp_path / "assignment"
    (sub / "glu").mkdir(parents=True)
    (sub / "gelu").mkdir()
    assert resolve(sub, glu) == Located(sub / "glu")  # the current layout
    (sub / "glu_cuda.cu").write_text("x")
    assert resolve(sub, glu) == Located(sub)  # files at the top: that folder (a plain upload, or the old layout)
    assert resolve(tmp_path / "none", glu) == Located(tmp_path / "none")
    assert resolve(ROOT / "assignment", glu) == Located(ROOT / "assignment" / "glu")


@pytest.mark.slow  # a CLI course grade of two problems, one case each, on the CPU: ~15 s
def test_the_cli_grades_an_old_layout_course_submission_as_glu_with_a_note(tmp_path):
    """End to end: a submission of the old layout (GLU's kernel at the top, gelu/ beside it) graded by `grade
    --course`: GLU's kernel earns its case (graded from the top), gelu's from gelu/, the note is in the course's
    report, and gelu/ is not reported as a skipped folder of GLU's grade."""
    import shutil

    course = _course(tmp_path, "name: T\nproblems:\n  - {problem: glu, points: 60}\n  - {problem: gelu, points: 40}\n")
    sub = tmp_path / "sub"
    (sub / "gelu").mkdir(parents=True)
    shutil.copy(ROOT / "reference" / "glu" / "solution_triton.py", sub / "glu_triton.py")
    shutil.copy(ROOT / "reference" / "gelu" / "solution_triton.py", sub / "gelu" / "gelu_triton.py")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "grader", "grade", "--course", str(course), "--submission", str(sub),
                        "--device", "cpu", "--only", "triton", "--no-perf", "--case", "tiny_1x*/float32",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "glu: glu's files were found at the top of the submission" in r.stdout
    glu = json.loads((out / "glu" / "partial" / "results.json").read_text())  # --case: a partial grade's folder
    gelu = json.loads((out / "gelu" / "partial" / "results.json").read_text())
    assert Path(glu["extra_data"]["submission"]) == sub and Path(gelu["extra_data"]["submission"]) == sub / "gelu"
    assert glu["score"] == 1 and gelu["score"] == 1, (glu["score"], gelu["score"])
    assert "partial grade" in glu["output"] and "not graded" not in glu["output"], glu["output"]  # gelu/: no mistake
    assert "> glu: glu's files were found at the top" in (out / "report.md").read_text()
    course_doc = json.loads((out / "course.json").read_text())  # made from the partial grades, and says so
    assert course_doc["partial"] == ["tiny_1x*/float32"], course_doc
    assert course_doc["earned"] == pytest.approx(60 * glu["score"] / glu["max_score"] + 40 * gelu["score"] / gelu[
        "max_score"]) and course_doc["earned"] > 0
    assert "this total is not the course grade" in r.stdout
