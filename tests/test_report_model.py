"""One report model, rendered three times (issue 17 item 2; issue 18 item 3's report side): grader/report/.

The student's Page is built once from a results.json and rendered as report.md, report.html and (its failures) the
terminal. Checked here on live CPU grades of the broken submissions in tests/data/problems/glu/broken/ and on the stored
H200 grade: both renderings carry the same sections and rows, every failure is one section listing the cases it covers,
the whole output stays in report.md and one click away in report.html, the terminal shows an error's own frames only,
the CPU headline says what this machine can earn, and text a submission controls is escaped."""

from __future__ import annotations

import copy
import html as htmllib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from grader.report import blocks, failures, html, markdown, print_summary, records, results_json, student
from grader.results import FAILED, WARNING, Code, Finding, Grade, Kind, Reason
from grader.results import TestResult as Result  # not collected as a test class

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "data" / "problems" / "glu" / "broken"
FIXTURE = ROOT / "tests" / "data" / "h200_staff_results.json"


def _headings_md(md: str) -> list[str]:
    return [ln.lstrip("#").strip() for ln in md.splitlines() if re.match(r"#{2,6} ", ln)]


def _headings_html(page: str) -> list[str]:
    return [htmllib.unescape(m) for m in re.findall(r"<h[2-6]>(.*?)</h[2-6]>", page, re.S)]


class _Balance(HTMLParser):
    """Every element the templates open is closed, in order (void elements aside)."""

    VOID = {"meta", "img", "br"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.errors.append(f"</{tag}> closes {self.stack[-3:]}")


def _balanced(page: str) -> None:
    b = _Balance()
    b.feed(page)
    assert not b.errors and not b.stack, (b.errors[:5], b.stack)


def _same_sections_and_rows(page: blocks.Page) -> None:
    md, page_html = markdown.render(page), html.render(page)
    _balanced(page_html)
    titles = [s.title for s in page.walk()]
    assert _headings_md(md) == titles
    assert _headings_html(page_html) == titles
    text = htmllib.unescape(page_html)
    for s in page.walk():
        for b in s.blocks:
            if isinstance(b, blocks.Table):
                for r in b.rows:  # every row of every table, in both renderings
                    assert markdown.table(blocks.Table(b.head, [r]))[-1] in md, r.texts
                    assert all(c.text in text for c in r.cells), r.texts
            elif isinstance(b, blocks.Bullets):
                for item in b.items:
                    assert markdown.cell(item) in md and item in text, item
            elif isinstance(b, blocks.Cases):
                for c in b.cases:
                    assert c.case in md and c.case in text


def test_md_and_html_carry_the_same_sections_and_rows_for_the_h200_grade():
    data = json.loads(FIXTURE.read_text())
    page = student.build(data, None)
    assert [s.title for s in page.sections][:4] == ["Score", "Performance", "Correctness", "Lost points"]
    _same_sections_and_rows(page)


@pytest.mark.parametrize(
    "name", ["ignores_row_stride", pytest.param("overflowing_sigmoid", marks=pytest.mark.slow), "import_error"]
)
def test_md_and_html_carry_the_same_sections_and_rows_for_live_grades(grade_dir, name):
    _same_sections_and_rows(student.build(results_json(grade_dir(BROKEN / name)), None))


def _by_case(lost: list[failures.Failure]) -> dict[str, failures.Failure]:
    out: dict[str, failures.Failure] = {}
    for f in lost:
        for c in f.cases:
            assert c not in out, f"{c} is in two sections"
            out[c] = f
    return out


@pytest.mark.parametrize("name, cases, reason, words", [
    # one bug, several cases: one section each, naming them all, with the advice the typed fields choose
    ("ignores_row_stride", {"strided_rows/float32", "strided_rows/float16", "strided_rows/bfloat16", "strided_3d/float32"},
     Reason.WRONG_VALUES, "row stride"),
    ("overflowing_sigmoid", {f"{c}/{d}" for c in ("saturating_gates", "inf_nan") for d in ("float32", "float16", "bfloat16")},
     Reason.NAN_COMPUTED, "1 / (1 + exp(-b))"),
])
def test_one_section_per_distinct_failure_on_a_live_grade(grade_dir, tmp_path, name, cases, reason, words):
    data = results_json(grade_dir(BROKEN / name))
    lost = [f for f in failures.failures(data) if f.state == FAILED and f.first.kind == Kind.CORRECTNESS]
    assert len(lost) == 1, [f.title for f in lost]
    (f,) = lost
    assert set(f.cases) == cases and f.first.reason == reason
    assert any(words in tip for tip in f.tips), f.tips
    assert f.title == f"triton / correctness: {len(cases)} cases, {reason}"
    md, page = (p.read_text() for p in student.write_student_report(data, tmp_path))
    lost_md = md.split("## Lost points", 1)[1]
    assert lost_md.count(f"\n### {f.title}: ") == 1
    for c in cases:
        assert f"### triton / correctness / {c}" not in lost_md  # no section of its own  # each case listed with its own first line, and in the HTML its whole output behind <details>
        # cases with the same line are one entry, "N cases (a, b, ...)": each case is still named (issue 40 item 11)
        assert any(ln.startswith("- ") and c in ln.split(": ", 1)[0] for ln in lost_md.splitlines()), c
        assert any(c in summary.split("</summary>", 1)[0] for summary in page.split("<details><summary>")[1:]), c


@pytest.mark.parametrize("name", ["ignores_row_stride", pytest.param("missing_mask", marks=pytest.mark.slow)])
def test_every_lost_point_is_in_exactly_one_section_and_sections_differ(grade_dir, name):
    """missing_mask fails many ways (wrong values, unwritten outputs, computed NaNs, in several dtypes): every case
    that lost points is in exactly one section, and no two sections share a typed pattern and its advice."""
    data = results_json(grade_dir(BROKEN / name))
    lost = failures.failures(data)
    assert {t.case for t in records.tests_of(data) if t.lost > 0} == set(_by_case(lost))
    keys = {(f.first.part, f.first.kind, f.first.reason, tuple(f.tips)) for f in lost}
    assert len(keys) == len(lost), [f.title for f in lost]


def test_the_cpu_headline_says_what_this_machine_can_earn(grade_dir, repo_root, tmp_path):
    g = grade_dir(repo_root / "assignment" / "glu", staff=True)
    data = results_json(g)
    earnable = g.max_score - g.unearnable
    assert g.unearnable > 0 and g.score == pytest.approx(earnable)
    want = f"{g.score:.4g}/{earnable:g} points earnable on this machine ({g.max_score:g} in all)"
    assert student.headline(data) == want
    md, page = (p.read_text() for p in student.write_student_report(data, tmp_path))
    assert md.splitlines()[0] == f"# glu report: {want}" and f"<h1>glu report: {want}</h1>" in page
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=200))
    assert f"score: {want}" in buf.getvalue()
    # On a machine that can earn everything, the plain form.
    full = copy.deepcopy(data)
    full["extra_data"]["points_not_earnable_here"] = 0
    assert student.headline(full) == f"{g.score:.4g} / {g.max_score:g} points"


TRACEBACK = """RuntimeError: launch failed (caused by ValueError: h=1: needs h a multiple of 4096), at glu_triton.py line 16
  File "grader/child/worker.py", line 276, in run
    out = self._call(x)
          ^^^^^^^^^^^^^
  File "grader/child/worker.py", line 439, in _call
    return self.fn(x)
           ^^^^^^^^^^
  File "glu_triton.py", line 28, in glu_triton
    return _launch(x)
           ^^^^^^^^^^
  File "/usr/lib/python3/site-packages/triton/runtime/jit.py", line 330, in <lambda>
    return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)
  File "glu_triton.py", line 23, in _launch
    raise RuntimeError("launch failed") from e
RuntimeError: launch failed"""


def _raised_grade(n: int = 3) -> Grade:
    g = Grade(problem="glu", submission="sub", device="cpu")
    for i in range(n):
        g.tests.append(Result(f"triton / correctness / c{i}", "triton", "correctness", 0.0, 1.0, FAILED, TRACEBACK,
                                  {"case": f"c{i}"}, Kind.CORRECTNESS, Reason.RAISED))
    return g


def _terminal(g: Grade) -> str:
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=200))
    return buf.getvalue()


def test_the_terminal_shows_an_error_s_own_frames_and_report_md_the_whole_traceback(tmp_path):
    g = _raised_grade()
    out = _terminal(g)
    assert out.count('File "glu_triton.py", line 28') == 1 and 'File "glu_triton.py", line 23' in out
    assert "grader/child/worker.py" not in out and "triton/runtime/jit.py" not in out
    assert "the full traceback is in report.md" in out
    md, page = (p.read_text() for p in student.write_student_report(g, tmp_path))
    assert TRACEBACK in md  # whole, in its fence
    details = page.split("<details><summary>the whole output</summary>", 1)[1].split("</details>", 1)[0]
    assert htmllib.escape(TRACEBACK, quote=False) in details or TRACEBACK in htmllib.unescape(details)


@pytest.mark.slow  # chained_error's grade (~10 s on 2 loaded cores)
def test_a_live_chained_error_is_one_section_with_its_whole_traceback(grade_dir, tmp_path):
    g = grade_dir(BROKEN / "chained_error")
    data = results_json(g)
    raised = [f for f in failures.failures(data) if f.first.reason == Reason.RAISED]
    assert len(raised) == 1 and len(raised[0].cases) >= 20
    md = student.write_student_report(data, tmp_path)[0].read_text()
    assert 'File "grader/child/worker.py"' in md and 'File "glu_triton.py"' in md
    out = _terminal(g)
    assert 'File "glu_triton.py"' in out and 'File "grader/child/worker.py"' not in out


def test_findings_are_rendered_by_code_severity_and_text_whatever_the_code():
    """A finding on a lost point is shown in its section, generically: a code the report has no words for still
    shows, in both renderings, and does not repeat under the warnings."""
    g = _raised_grade(2)
    for i, t in enumerate(g.tests):
        t.findings = [Finding(Code.EXTRA_COPY, f"case c{i}: a <copy> at index ({i}, 0)", WARNING)]
    page = student.build(results_json(g), None)
    md, page_html = markdown.render(page), html.render(page)
    for i in range(2):
        # in words: the severity, never the internal code (issue 29 item 10: no "hint hint-overflow" labels)
        assert f"- {WARNING}: case c{i}: a <copy> at index ({i}, 0)" in md
        assert f"{WARNING}: case c{i}: a &lt;copy&gt; at index ({i}, 0)" in page_html
        assert str(Code.EXTRA_COPY) not in md
    assert "Warnings and flags" not in md


HOSTILE = '<script>alert(1)</script><img src="http://x/y.png" onerror="z()">'


def test_text_a_submission_controls_is_escaped_in_report_html(tmp_path):
    """Test names, case names, outputs, findings and notes come from the submission's run: none is markup."""
    g = _raised_grade(2)
    g.tests[0].name = f"triton / correctness / {HOSTILE}"
    g.tests[0].extra["case"] = HOSTILE
    g.tests[1].output = f"{HOSTILE}\n" + "\n".join(f"line {i} {HOSTILE}" for i in range(10))
    g.tests[1].findings = [Finding(Code.STATIC, HOSTILE)]
    g.tests.append(Result(f"triton / static warnings {HOSTILE}", "triton", "checks", 0.0, 0.0, "passed", HOSTILE,
                              {}, Kind.STATIC, Reason.OK, [Finding(Code.STATIC, HOSTILE)]))
    g.notes.append(HOSTILE)
    g.submission = HOSTILE
    page = student.write_student_report(g, tmp_path)[1].read_text()
    assert "<script" not in page and "<img" not in page and "onerror=" not in page.replace("onerror=&#34;", "")
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8
    md = (tmp_path / "report.md").read_text()
    assert HOSTILE in md  # the Markdown keeps it as text: outputs are fenced, cells have their pipes escaped


def test_the_class_summary_escapes_student_ids_and_flags(tmp_path):
    from grader.report import tareport

    data = json.loads(FIXTURE.read_text())
    data["extra_data"]["student_id"] = HOSTILE
    data["score"] = 1.0  # differs from the sum of the tests: a flag, with the id beside it
    (tmp_path / "class" / "s").mkdir(parents=True)
    (tmp_path / "class" / "s" / "results.json").write_text(json.dumps(data))
    _, page_path, subs, bad = tareport.write_ta_report(tmp_path / "class", tmp_path / "ta")
    assert [s.student for s in subs] == [HOSTILE] and not bad
    page = page_path.read_text()
    _balanced(page)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "differs from the sum" in page.split("Flagged submissions (1)", 1)[1]


def test_a_failure_pattern_s_hint_reaches_the_report_read_back_from_results_json(grade_dir):
    """A hint (severity HINT, grader/correctness/patterns.py) survives results.json: the reader keeps it, its section's advice
    carries the pattern's words, and the section is keyed by the hint's code, not its per-case text."""
    data = json.loads(json.dumps(results_json(grade_dir(BROKEN / "swapped_halves", cases=("rows_127/float32",)))))
    t = next(t for t in records.tests_of(data) if t.case == "rows_127/float32")
    assert [f.code for f in t.findings if f.severity == "hint"] == [Code.HINT_FORMULA]
    lost = [f for f in failures.failures(data) if t.name in {x.name for x in f.tests}]
    assert len(lost) == 1 and any("which half is which" in tip for tip in lost[0].tips), lost[0].tips
