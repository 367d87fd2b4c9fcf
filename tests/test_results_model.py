"""One results model, read once (issue 31 step 2): Grade.from_json reads a results.json back into the typed Grade
(tolerant of older files), Grade.to_json writes the same file again, and the reports render from that Grade.

tests/data/h200_staff_results_untyped.json is tests/data/h200_staff_results.json as it was at commit 52e760e
(2026-12-01), before results carried kind, reason and findings: an older results.json the reports must still read."""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

from rich.console import Console

from grader.report import advice, print_summary, results_json, student, tareport
from grader.report.records import flags_of, grade_of, part_scores
from grader.results import (
    FAILED,
    PASSED,
    SKIPPED,
    VIOLATION,
    Code,
    Finding,
    Forfeit,
    Grade,
    Kind,
    PerfSummary,
    Reason,
    Severity,
    Stage,
    State,
)
from grader.results import TestResult as Result  # not collected as a test class

DATA = Path(__file__).resolve().parent / "data"
UNTYPED = DATA / "h200_staff_results_untyped.json"
FIXTURE = DATA / "h200_staff_results.json"


def _load(p: Path) -> dict:
    return json.loads(p.read_text(encoding="utf-8"))


def _grade() -> Grade:
    """A small grade with every shape a result takes: passed, failed with findings, pending (skipped with points),
    a forfeit part, perf data with a NaN."""
    g = Grade("glu", "sub", "cuda", notes=["a note"], phases={"build": 1.234}, official_why=["no key file"])
    g.tests += [
        Result("triton / correctness / a", "triton", "correctness", 1.0, 1.0, "passed", "ok", {"case": "a"}),
        Result(
            "triton / correctness / b",
            "triton",
            Stage.CORRECTNESS,
            0.0,
            2.0,
            FAILED,
            "wrong values: 3 of 8",
            {"case": "b", "dist": "normal"},
            Kind.CORRECTNESS,
            Reason.WRONG_VALUES,
            [Finding(Code.HINT_TAIL, "wrong only at the end", Severity.HINT)],
        ),
        Result(
            "triton / performance / big", "triton", "performance", 0.0, 4.0, SKIPPED, "", {"case": "big"},
            Kind.PERFORMANCE, Reason.NEEDS_GPU,
        ),
        Result("cuda / correctness / a", "cuda", "correctness", 1.0, 1.0, PASSED, "ok", {"case": "a"}),
        Result(
            "cuda / kernel check", "cuda", "checks", 0.0, 0.0, FAILED, "VIOLATION: torch did it",
            {"forfeit": True, "violations": ["torch did it"], "warnings": []}, Kind.KERNEL_CHECK, Reason.VIOLATION,
            [Finding(Code.TORCH_COMPUTE, "torch did it", VIOLATION)],
        ),
    ]
    g.perf = PerfSummary.from_json({"cases": {"big": {"impls": {"cuda": {"effective_ms": 1.5, "pct_roofline": float("nan")}}}}})
    return g


def test_the_enums_are_their_strings():
    assert State.PASSED == "passed" and PASSED is State.PASSED and f"{Stage.CHECKS}" == "checks"
    assert VIOLATION is Severity.VIOLATION and str(Severity.HINT) == "hint"
    t = Result("x / build", "x", "build", 0.0, 0.0, "skipped", "")
    assert t.stage is Stage.BUILD and t.state is State.SKIPPED  # a string given is stored as its member
    doc = _grade().to_json()
    # the JSON form holds plain strings, never an enum member (a strict schema check compares types)
    states = {type(t["extra_data"]["state"]) for t in doc["tests"]} | {type(t["status"]) for t in doc["tests"]}
    assert states == {str}
    assert {type(x) for t in doc["tests"] for x in t["tags"]} == {str}


def test_a_grade_read_back_writes_the_same_results_json():
    g = _grade()
    data = results_json(g)
    back = Grade.from_json(data)
    assert json.dumps(results_json(back)) == json.dumps(data)  # byte for byte, the pending line not doubled
    pending = next(t for t in back.tests if t.name == "triton / performance / big")
    assert pending.max_score == 4.0 and pending.state == SKIPPED and pending.pending
    assert pending.output.startswith("pending: 4 points, graded on a GPU later")
    assert back.stated is not None and back.stated.score == 2.0 and back.stated.says_official
    # the file's own fixture too: every test and field (its keys were ordered by hand in places), and the perf data
    # in its order
    fx = _load(FIXTURE)
    again = Grade.from_json(fx).to_json()
    assert again["tests"] == fx["tests"]
    assert json.dumps(again["extra_data"]["performance"]) == json.dumps(fx["extra_data"]["performance"])
    unsaid = {"official": False, "not_official_because": [], "partial_cases": []}  # the fixture predates them
    assert again["extra_data"] == {**fx["extra_data"], **unsaid}


def test_an_older_results_json_reads_and_renders(tmp_path):
    old = _load(UNTYPED)
    assert "kind" not in old["tests"][0]["extra_data"]  # really from before results were typed
    g = Grade.from_json(old)
    assert len(g.tests) == 63 and {t.kind for t in g.tests} == {Kind.UNKNOWN}
    assert {t.reason for t in g.tests} == {Reason.UNKNOWN}
    assert g.parts == ["triton", "cuda"] and g.problem == "glu"
    assert set(part_scores(g)) == {"triton", "cuda"}
    assert g.perf.device_name == "NVIDIA H200" and g.perf.cases
    assert g.forfeits == {}  # its kernel checks say forfeit: false
    md, page = (p.read_text() for p in student.write_student_report(old, tmp_path))
    assert md.startswith(f"# glu report: {g.stated.score:.4g} / ") and "## Performance" in md, md[:300]
    assert "## Correctness" in md and "<html" in page
    # the TA report reads it too (validated against the schema first)
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "alice" / "results.json").write_text(UNTYPED.read_text())
    csv_path, _, subs, bad = tareport.write_ta_report(tmp_path / "class", tmp_path / "out")
    assert not bad and [s.student for s in subs] == ["alice"] and subs[0].device_label == "NVIDIA H200"
    assert "alice" in csv_path.read_text()


def test_from_json_tolerates_missing_and_malformed_fields():
    assert Grade.from_json({}).tests == [] and Grade.from_json({"tests": None}).problem == ""
    g = Grade.from_json(
        {
            "score": "x",
            "output": 5,
            "tests": [
                7,
                {"name": "a / b / c", "score": None, "extra_data": {"state": "odd", "kind": 3, "findings": "no"}},
                {"tags": ["p", "nonsense"], "status": "passed", "extra_data": []},
            ],
            "extra_data": {"performance": {"cases": {"x": 1, "y": {"shape": ["a", 2], "impls": {"p": None}}}}},
        }
    )
    a, b = g.tests
    assert (a.part, a.stage, a.state, a.kind, a.score, a.case) == ("a", Stage.CHECKS, FAILED, Kind.UNKNOWN, 0.0, "c")
    assert (b.part, b.stage, b.state, b.name) == ("p", Stage.CHECKS, PASSED, "?")
    assert g.notes == [] and g.stated is not None and g.stated.score is None
    perf = g.perf
    assert list(perf.cases) == ["y"] and perf.cases["y"].shape == (2,) and perf.cases["y"].impls["p"].credit is None


def test_one_record_of_a_forfeit():
    g = _grade()
    (f,) = g.forfeits.values()
    assert f == Forfeit("cuda", "cuda / kernel check", (Finding(Code.TORCH_COMPUTE, "torch did it", VIOLATION),))
    assert f.note == "cuda: all points forfeit, see 'cuda / kernel check'"
    f.charge(g.tests)
    cuda = next(t for t in g.tests if t.name == "cuda / correctness / a")
    assert (cuda.score, cuda.state, cuda.reason) == (0.0, FAILED, Reason.FORFEIT)
    assert cuda.output.startswith("forfeit: the 'cuda / kernel check' found the work done outside your own kernel\n")
    assert "forfeit (cuda): all its points, see 'cuda / kernel check'" in flags_of(g)
    assert not [e for e in results_json(g).get("leaderboard", []) if e["name"].startswith("cuda ")]
    # an older file says it only in the kernel check's extra_data
    old = {"tests": [{"name": "cuda / kernel check", "tags": ["cuda", "checks"], "status": "failed",
                      "extra_data": {"state": "failed", "forfeit": True}}]}
    assert list(Grade.from_json(old).forfeits) == ["cuda"]


def test_the_typed_performance_summary_keeps_its_json():
    raw = _load(FIXTURE)["extra_data"]["performance"]
    perf = PerfSummary.from_json(copy.deepcopy(raw))
    assert json.dumps(perf.to_json()) == json.dumps(raw)
    case = perf.cases["lecture_16k"]
    assert case.thresholds is not None and case.thresholds.partial_credit == 0.5 and case.impls["triton"].n
    # what the pipeline's _first_calls computes by key paths, from the typed data
    early = {"lecture_16k": {"compiled": 1.0}}
    first = sum(
        float(d.get("compile_s") or 0.0)
        for name, ci in raw["cases"].items()
        for d in (*([] if name in early else ci["baselines"].values()), *ci["impls"].values())
    )
    done = PerfSummary.from_json({**copy.deepcopy(raw), "baseline_first_calls_s": early}).with_first_calls()
    assert math.isclose(done.first_call_s or 0.0, first) and done.first_call_overlapped_s == 1.0
    assert list(done.to_json())[-2:] == ["first_call_s", "first_call_overlapped_s"]
    # the typed fields and the JSON form were updated together: reading the JSON back gives the same summary
    assert PerfSummary.from_json(done.to_json()) == done


def test_a_live_grade_is_read_once_as_its_file_reads():
    g = _grade()
    read = grade_of(g)
    assert read is not g and read.stated is not None and grade_of(read) is read  # a read grade is not read again
    assert next(t for t in read.tests if t.pending).output.startswith("pending:")
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=160))
    assert "score: 2/4 points earnable on this machine (8 in all)" in buf.getvalue(), buf.getvalue()


def test_the_speed_tip_reads_the_credit_from_the_typed_timing():
    """The credit's one source is the producer's Timing (grader/performance/stage.py); the reports read its copy in
    the perf record (TimingView.credit), not the row's extra_data copy."""
    raw = copy.deepcopy(_load(FIXTURE))
    g = Grade.from_json(raw)
    t = next(t for t in g.tests if t.kind == Kind.PERFORMANCE and t.part in g.perf.cases[t.case].impls)
    t.reason = Reason.SLOW
    case = raw["extra_data"]["performance"]["cases"][t.case]
    for credit, tipped in ((0.5, True), (1.0, False)):
        case["impls"][t.part]["credit"] = credit
        perf = PerfSummary.from_json(raw["extra_data"]["performance"])
        assert any("full credit needs" in w for w in advice.advice(t, perf)) == tipped, credit
