"""Typed results (issue 17, item 1): every decision reads a result's kind, reason and findings, never its name or
output text, and the student report's advice is chosen from those fields on live grades of broken submissions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from grader.problem import hints
from grader.report import advice, failures, records, results_json, student
from grader.results import Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "data" / "problems" / "glu" / "broken"

# Text-matching that decides: a result's name or output compared with a literal. The grader's trusted side must
# have none (names and outputs are for people; grader/results.py has the fields to decide by).
DECIDES_BY_TEXT = re.compile(
    r"\bt\.name\.(endswith|startswith)\(|\b(t\.output|out|low|first|text)\.(startswith|endswith)\(|"
    r"\"[A-Za-z][^\"]{2,}\" in (out|low|first|text|t\.output|t\.name)\b|\"[A-Za-z][^\"]* [^\"]{6,}\" in [a-z_.]+\b|"
    r"\.(startswith|endswith)\(\(?\"(forfeit|FLAG|VIOLATION|warning|not run|not timed|could not|PyTorch|no kernel)")


def test_no_decision_in_the_grader_reads_a_result_s_name_or_text():
    hits = []
    for f in sorted((ROOT / "grader").rglob("*.py")):  # the report package (grader/report/) included
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if DECIDES_BY_TEXT.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "decisions by text:\n" + "\n".join(hits)


def _lost(grade_dir, name: str) -> dict[str, failures.Failure]:
    g = grade_dir(BROKEN / name)
    return {lo.title: lo for lo in failures.failures(results_json(g))}


def _advice_for(grade_dir, name: str, case: str) -> tuple[records.Test, list[str]]:
    g = grade_dir(BROKEN / name)
    data = results_json(g)
    t = next(t for t in records.tests_of(data) if t.name == f"triton / correctness / {case}")
    lo = next(lo for lo in failures.failures(data) if t.name in {x.name for x in lo.tests})
    return t, lo.tips


@pytest.mark.parametrize("name, case, reason, words", [
    ("ignores_row_stride", "strided_rows/float32", Reason.WRONG_VALUES, "row stride"),
    ("overflowing_sigmoid", "saturating_gates/float32", Reason.NAN_COMPUTED, "1 / (1 + exp(-b))"),
    # each a live grade of ~8 s on 2 cores: the full tier
    pytest.param("mutates_input_inplace", "odd_h_1001/float32", Reason.INPUT_MODIFIED, "Never store into the input",
                 marks=pytest.mark.slow),
    pytest.param("returns_view", "odd_h_1001/float32", Reason.WRONG_TENSOR, "contiguous", marks=pytest.mark.slow),
    ("import_error", "odd_h_1001/float32", Reason.LOAD_FAILED, "does not load"),
])
def test_advice_is_chosen_by_the_live_grade_s_typed_fields(grade_dir, name, case, reason, words):
    t, tips = _advice_for(grade_dir, name, case)
    assert t.kind == Kind.CORRECTNESS and t.state == "failed"
    if reason is not None:
        assert t.reason == reason, (t.reason, t.output)
    assert any(words in tip for tip in tips), (t.reason, tips)


def test_the_problem_s_words_come_from_its_hints_file():
    h = hints.load("glu")
    assert "row stride" in hints.text(h, "later_rows") and hints.text(h, "dist", "saturating")
    assert hints.load("no_such_problem") == {} and hints.load("../glu") == {}
    # Without the problem's words, advice is still given, in the grader's generic terms.
    t = records.Test("triton / correctness / x", "triton", "correctness", 0.0, 1.0, "failed", "", {},
                     Kind.CORRECTNESS, Reason.WRONG_VALUES)
    assert advice.advice(t, hints={}) == [advice.GENERIC[Reason.WRONG_VALUES]]


def test_results_json_carries_the_typed_fields_and_old_files_still_read(grade_dir):
    data = results_json(grade_dir(BROKEN / "ignores_row_stride"))
    kinds = {t["extra_data"]["kind"] for t in data["tests"]}
    assert {"static warnings", "correctness", "kernel check"} <= kinds
    old = {"tests": [{"name": "triton / correctness / a", "tags": ["triton", "correctness"], "score": 0, "max_score": 1,
                      "output": "wrong values", "extra_data": {"state": "failed", "reason": "bogus", "findings": [1, {}]}}]}
    (t,) = records.tests_of(old)
    assert t.kind == Kind.UNKNOWN and t.reason == Reason.UNKNOWN and t.findings == []
    assert advice.advice(t)  # generic words, no crash


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_poison_and_a_computed_nan_are_told_apart(dtype):
    """The workers fill outputs with all-ones bytes (a NaN no arithmetic produces) before each call: an element still
    holding it was never written; any other NaN where the answer is finite was computed (an overflow: inf/inf)."""
    from grader.correctness import check
    from grader.problem.spec import Tolerance

    truth = torch.ones(4, 8, dtype=torch.float64)
    out = torch.ones(4, 8, dtype=dtype)
    tol = Tolerance(rtol=1e-2, atol=1e-2)
    unwritten = out.clone()
    unwritten[3].view(torch.uint8).fill_(255)
    v = check.check_output(unwritten, truth, tol=tol, dtype=dtype)
    assert not v.ok and v.reason == Reason.UNWRITTEN and "never written" in v.text()
    computed = out.clone()
    computed[3] = float("inf") / float("inf")
    v = check.check_output(computed, truth, tol=tol, dtype=dtype)
    assert not v.ok and v.reason == Reason.NAN_COMPUTED and "overflow" in v.text()
    v = check.check_output(out * 2, truth, tol=tol, dtype=dtype)
    assert not v.ok and v.reason == Reason.WRONG_VALUES


def test_the_terminal_names_grouped_failures_and_counts_the_details_it_leaves_out():
    """Issue 18: a grouped row "correctness (N cases) failed" says which cases, one failure of many cases is detailed
    once, and failures past the first six detailed ones are counted, with where to read them."""
    import io

    from rich.console import Console

    from grader.report import print_summary
    from grader.results import FAILED, Grade, TestResult

    def case(name: str, reason: Reason) -> TestResult:
        return TestResult(f"triton / correctness / {name}", "triton", "correctness", 0.0, 1.0, FAILED,
                          f"{reason}: 1 of 2 elements outside tolerance\n  at index (0, 0)", {"case": name},
                          Kind.CORRECTNESS, reason)

    g = Grade(problem="glu", submission="sub", device="cpu")
    g.tests = [case(f"c{i}", Reason.WRONG_VALUES) for i in range(9)]  # one failure, nine cases
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=200))
    out = buf.getvalue()
    assert "(9 cases)" in out and "(cases: c0, c1, c2, c3, c4, c5, +3 more)" in out
    assert out.count("at index (0, 0)") == 1 and "more failures" not in out  # detailed once
    distinct = [Reason.WRONG_VALUES, Reason.UNWRITTEN, Reason.NAN_COMPUTED, Reason.INPUT_MODIFIED,
                Reason.NOT_DETERMINISTIC, Reason.RAISED, Reason.CRASHED, Reason.TIMEOUT, Reason.WRONG_TENSOR]
    g.tests = [case(f"d{i}", r) for i, r in enumerate(distinct)]  # nine distinct failures
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=200))
    out = buf.getvalue()
    assert out.count("at index (0, 0)") == 6
    assert "... and 3 more failures with details: see report.md" in out


def test_the_html_report_expands_a_cut_reason_to_the_whole_output(grade_dir, tmp_path):
    """Issue 18: report.html quoted the first lines of a failure and cut the rest (where the hints are) with no way
    to read it; now the whole output is one click away (<details>), escaped like the rest of the page."""
    g = grade_dir(BROKEN / "ignores_row_stride")
    _, page_path = student.write_student_report(g, tmp_path)
    page = page_path.read_text()
    assert "more lines)" in page  # a cut quote ...
    assert "<details><summary>the whole output</summary><pre>" in page  # ... with the whole output behind it
    assert "hint: strided_rows/float32: row 0 is right, 32 of the 33 rows are wrong" in page.split("<details>", 1)[1]
