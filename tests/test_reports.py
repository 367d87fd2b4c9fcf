"""Delivery: Gradescope's results.json schema and leaderboard, the student's report, the TA's reports, progress output.

Fixture: tests/data/h200_staff_results.json, a full staff grade on an H200 (with perf data). The schema is checked
with a small validator of the JSON Schema keywords it uses (no new dependency); when the `jsonschema` package
happens to be installed, it checks the schema and the documents too.
"""

from __future__ import annotations

import hashlib

import base64
import builtins
import copy
import csv
import io
import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from grader import cli, keyfile, report, results, signing
from grader.app import grade as app_grade
from grader.report import charts, output, perf, student, studentreport, tareport
from grader.results import Grade

# The spec the grades here were made against (the report flags a valid grade signed over another version of it).
GLU_SPEC_SHA256 = hashlib.sha256((Path(__file__).resolve().parent.parent / "reference" / "glu" / "spec.yaml").read_bytes()).hexdigest()

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "h200_staff_results.json"
SCHEMA_PATH = Path(__file__).resolve().parent / "gradescope_results.schema.json"
IMPLS = ("manual", "eager", "compiled", "triton", "cuda")
ANSI = re.compile(r"\x1b|\x9b")
CHROMIUM = Path("/usr/bin/chromium")


# ----------------------------------------------------------------------------------------------------------------
# A validator for the subset of JSON Schema (draft 2020-12) that the schema file uses


KEYWORDS = {"type", "required", "properties", "items", "enum", "additionalProperties"}
ANNOTATIONS = {"$schema", "$id", "title", "description"}


def _is_type(v, t: str) -> bool:
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}[t])


def schema_errors(v, schema: dict, path: str = "$") -> list[str]:
    """Every violation, as 'path: what'. Supports type (name or list), required, properties, items, enum and
    additionalProperties (false or a schema)."""
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(v, t) for t in types):
            return [f"{path}: {type(v).__name__} {v!r:.40} is not {' or '.join(types)}"]
    errs = []
    if "enum" in schema and not any(v == e and type(v) is type(e) for e in schema["enum"]):
        errs.append(f"{path}: {v!r} is not one of {schema['enum']}")
    if isinstance(v, dict):
        errs += [f"{path}: '{k}' is required" for k in schema.get("required", []) if k not in v]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, sub in v.items():
            if k in props:
                errs += schema_errors(sub, props[k], f"{path}.{k}")
            elif extra is False:
                errs.append(f"{path}: '{k}' is not allowed")
            elif isinstance(extra, dict):
                errs += schema_errors(sub, extra, f"{path}.{k}")
    if isinstance(v, list) and "items" in schema:
        for i, x in enumerate(v):
            errs += schema_errors(x, schema["items"], f"{path}[{i}]")
    return errs


def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def assert_valid(doc: dict) -> None:
    errs = schema_errors(doc, _schema())
    assert not errs, "\n".join(errs[:20])
    try:
        import jsonschema  # optional: a second opinion where it is installed
    except ImportError:
        return
    jsonschema.Draft202012Validator(_schema()).validate(doc)


def strict_json(path: Path) -> dict:
    """Parse as Gradescope would: NaN/Infinity are not JSON."""

    def bad(c):
        raise ValueError(f"non-JSON constant {c} in {path.name}")

    return json.loads(path.read_text(), parse_constant=bad)


def fixture() -> dict:
    return json.loads(FIXTURE.read_text())


def grade_from_results(d: dict) -> Grade:
    """Rebuild a Grade from a results.json dict (the grader's own shape)."""
    ex = d["extra_data"]
    g = Grade(problem=ex["problem"], submission=ex["submission"], device=ex["device"], notes=d["output"].splitlines(),
              phases=dict(ex.get("phases_s") or {}), perf=results.PerfSummary.from_json(copy.deepcopy(ex.get("performance") or {})))
    for t in d["tests"]:
        e = dict(t["extra_data"])
        state = e.pop("state")
        kind, reason = results.Kind(e.pop("kind")), results.Reason(e.pop("reason"))
        findings = [results.Finding(results.Code(f["code"]), f["text"], f["severity"]) for f in e.pop("findings")]
        g.tests.append(results.TestResult(t["name"], t["tags"][0], t["tags"][1], t["score"], t["max_score"], state, t["output"], e,
                                          kind, reason, findings))
    return g


def _have_matplotlib() -> bool:
    return charts.matplotlib() is not None


# ----------------------------------------------------------------------------------------------------------------
# 1. The schema, and results.json against it


def test_schema_uses_only_the_keywords_the_validator_knows():
    def walk(s, where="$"):
        assert isinstance(s, dict), where
        unknown = set(s) - KEYWORDS - ANNOTATIONS
        assert not unknown, f"{where}: keywords {unknown} are not checked by schema_errors"
        for k, sub in (s.get("properties") or {}).items():
            walk(sub, f"{where}.{k}")
        if isinstance(s.get("items"), dict):
            walk(s["items"], f"{where}[]")
        if isinstance(s.get("additionalProperties"), dict):
            walk(s["additionalProperties"], f"{where}.*")

    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    walk(schema)
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.Draft202012Validator.check_schema(schema)


def test_validator_rejects_what_gradescope_would():
    good = {"score": 1.0, "tests": [{"name": "a", "score": 1, "max_score": 1, "status": "passed", "tags": ["x"]}],
            "leaderboard": [{"name": "t", "value": 0.5, "order": "asc"}]}
    schema = _schema()
    assert schema_errors(good, schema) == []
    bad = [
        ({k: v for k, v in good.items() if k != "score"}, "'score' is required"),
        ({**good, "tests": [{**good["tests"][0], "status": "skipped"}]}, "status"),
        ({**good, "tests": [{**good["tests"][0], "score": "1"}]}, "score"),
        ({**good, "tests": [{**good["tests"][0], "score": True}]}, "score"),
        ({**good, "tests": [{**good["tests"][0], "tags": ["x", 3]}]}, "tags[1]"),
        ({**good, "leaderboard": [{"name": "t", "value": 1, "order": "up"}]}, "order"),
        ({**good, "leaderboard": [{"name": "t", "value": None}]}, "value"),
        ({**good, "visibility": "sometimes"}, "visibility"),
        ({**good, "leaderbaord": []}, "'leaderbaord' is not allowed"),
        ({**good, "score": float("nan")}, "score"),
    ]
    for doc, what in bad:
        errs = schema_errors(doc, schema)
        assert errs and any(what in e for e in errs), (what, errs)


def test_h200_fixture_validates_and_gains_a_leaderboard(tmp_path):
    raw = fixture()
    assert_valid(raw)
    path = report.write_results(grade_from_results(raw), tmp_path)
    doc = strict_json(path)
    assert_valid(doc)
    board = doc["leaderboard"]
    cases = raw["extra_data"]["performance"]["cases"]
    assert len(board) == 2 * sum(len(c["impls"]) for c in cases.values()) == 12
    by_name = {e["name"]: e for e in board}
    for case, c in cases.items():
        for impl, d in c["impls"].items():
            ms = by_name[f"{impl} {case} (ms)"]
            pct = by_name[f"{impl} {case} (% of copy roofline)"]
            assert ms["order"] == "asc" and pct["order"] == "desc"
            assert ms["value"] == pytest.approx(d["effective_ms"], rel=1e-4)
            assert pct["value"] == pytest.approx(d["pct_roofline"], abs=0.01)


def test_leaderboard_leaves_off_times_that_are_not_real_work(tmp_path):
    raw = fixture()
    g = grade_from_results(raw)
    wrong = next(t for t in g.tests if t.name == "triton / performance / lecture_16k")
    wrong.findings = [results.Finding(results.Code.TIMED_WRONG, "timed outputs are wrong: 3 of 100 elements", results.FLAG)]
    perf = g.perf.to_json()
    perf["cases"]["fp16_4k"]["impls"]["triton"]["effective_ms"] = 1e-6  # under the physical floor
    next(t for t in g.tests if t.name == "cuda / kernel check").extra["forfeit"] = True
    perf["cases"]["llama3_8b_mlp"]["impls"]["triton"]["pct_roofline"] = float("nan")
    g.perf = results.PerfSummary.from_json(perf)
    doc = strict_json(report.write_results(g, tmp_path))  # NaN in the perf data is written as null, not NaN
    assert_valid(doc)
    names = [e["name"] for e in doc["leaderboard"]]
    assert not any(n.startswith("cuda ") for n in names)
    assert "triton lecture_16k (ms)" not in names and "triton fp16_4k (ms)" not in names
    assert names == ["triton llama3_8b_mlp (ms)"]
    assert doc["extra_data"]["performance"]["cases"]["llama3_8b_mlp"]["impls"]["triton"]["pct_roofline"] is None


def test_a_grade_full_of_a_submissions_text_is_still_a_results_json_the_ta_report_reads(tmp_path):
    """Text a submission influenced reaches a grade (a worker's error line and frames, up to 64 KiB each; its
    prints): a forged error reply made a results.json over the schema's caps, which the TA report refused (the
    student's row lost). write_results cuts what is over a cap, with a mark, before it signs."""
    g = grade_from_results(fixture())
    t = g.tests[0]
    t.output = "x" * 300_000  # over the schema's 200,000 for a test's output
    t.extra["own_frames"] = "f" * 130_001  # over 100,000 for any other string
    t.extra["k" * 2000] = 1  # a key over 1,000
    g.tests += [copy.deepcopy(t) for _ in range(60)]  # 61 of them: ~26 MB before, over the file's 2 MiB
    path = report.write_results(g, tmp_path)
    raw = path.read_bytes()
    doc = tareport.parse_results(raw, len(raw))  # the TA report's own reader: schema, size; raises if refused
    assert doc["tests"][0]["output"].endswith(output.CUT) and len(raw) < 2 * 2**20
    assert doc["tests"][0]["extra_data"]["own_frames"].startswith("fff")


def test_no_perf_data_means_no_leaderboard_key():
    g = grade_from_results(fixture())
    g.perf = results.PerfSummary()
    doc = report.results_json(g)
    assert "leaderboard" not in doc
    assert_valid(doc)


def test_cpu_grade_results_validate_and_get_a_report(grade_dir, repo_root, tmp_path):
    """A real grade (the Triton part on the CPU interpreter; the session's grade is shared with
    test_correctness.py): results.json validates, and the report beside it shows the CPU's skips."""
    g = grade_dir(repo_root / "assignment" / "glu", staff=True)
    doc = strict_json(report.write_results(g, tmp_path))
    assert_valid(doc)
    assert "leaderboard" not in doc  # no perf on a CPU
    md_path, html_path = studentreport.write_student_report(g, tmp_path)
    md = md_path.read_text()
    assert "| tiny_1x2/float32 | pass |" in md
    assert "not earnable on this machine" in md and "need a CUDA GPU" in md
    assert "No performance data" in md and "<h2>Correctness</h2>" in html_path.read_text()


# ----------------------------------------------------------------------------------------------------------------
# 2. The student's report


def _perf_row(md: str, case_title: str, name: str) -> bool:
    section = md.split(f"### {case_title}", 1)[1].split("###", 1)[0]
    return re.search(rf"^\| {name} \| \d+\.\d{{4}} \| \d+ \| \d+\.\d% \| \d+\.\d\dx \| ", section, re.M) is not None


def test_student_report_from_the_h200_fixture(tmp_path):
    raw = fixture()
    md_path, html_path = studentreport.write_student_report(raw, tmp_path)
    assert (md_path, html_path) == (tmp_path / "report.md", tmp_path / "report.html")
    md, page = md_path.read_text(), html_path.read_text()
    cases = raw["extra_data"]["performance"]["cases"]
    for name, c in cases.items():
        title = perf.case_title(name, results.PerfCase.from_json(c))
        for impl in IMPLS:
            assert _perf_row(md, title, impl), f"no {impl} row for {name} in report.md"
        html_section = page.split(f"<h3>{title}</h3>", 1)[1].split("<h3>", 1)[0]
        for impl in IMPLS:
            assert re.search(rf'<tr class="(baseline|impl)"><td>{impl}</td><td[^>]*>\d', html_section), f"no {impl} row for {name} in report.html"
    # The lecture numbers, e.g. eager on lecture_16k: 0.6168 ms, 61.1% of the roofline.
    assert "| eager | 0.6168 | 2611 | 61.1% | 1.00x | baseline |" in md
    # Correctness matrix: every case x part cell, colored by class in the HTML.
    assert md.count("| pass | pass |") == 26
    assert page.count('<td class="passed">pass</td>') == 52
    # Lost points, with their reason and advice (fp16_4k lost credit on both parts).
    lost = md.split("## Lost points", 1)[1]
    for part in ("triton", "cuda"):
        assert f"### {part} / performance / fp16_4k:" in lost
    assert "credit 85%" in lost and "16 bytes" in lost and "of the copy roofline" in lost and "one pass over memory" in lost
    # Images: embedded PNGs only, nothing loaded from elsewhere.
    srcs = re.findall(r'<img[^>]*\ssrc="([^"]*)"', page)
    assert len(srcs) == len(re.findall(r"<img", page))
    assert not re.search(r'\b(href|src)="(?!data:)', page)
    if _have_matplotlib():
        assert len(srcs) == len(cases) + 1  # one time chart per case, one bandwidth chart
        for s in srcs:
            assert s.startswith("data:image/png;base64,")
            assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        assert "plots need matplotlib" not in page
    else:
        assert srcs == [] and "plots need matplotlib" in page and "plots need matplotlib" in md


def test_student_report_without_matplotlib_still_writes_tables(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r} (simulated)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    md_path, html_path = studentreport.write_student_report(fixture(), tmp_path)
    md, page = md_path.read_text(), html_path.read_text()
    assert "plots need matplotlib" in md and "plots need matplotlib" in page
    assert "<img" not in page
    assert "| triton | 0.3743 |" in md and "<td>triton</td>" in page


def test_a_broken_plotting_stack_costs_only_the_charts(tmp_path, monkeypatch):
    def boom(data):
        raise RuntimeError("font cache\nexploded")

    monkeypatch.setattr(student, "charts", boom)
    md_path, html_path = studentreport.write_student_report(fixture(), tmp_path)
    assert "plots failed (RuntimeError: font cache exploded)" in md_path.read_text()
    assert "<img" not in html_path.read_text()


def _failing(fx: dict) -> dict:
    """The fixture with the failure classes the advice knows about."""
    d = copy.deepcopy(fx)
    # (output, the typed fields the grader writes with it: reason, and the case's own data)
    outputs = {
        "triton / correctness / strided_rows/float32": ("wrong values: 6336 of 6600 elements outside tolerance\n  bad rows: 32 of 33 (first: 1)\n  hint: row 0 is right but later rows are wrong; check the row stride and row offsets",
                                                        {"reason": "wrong values", "padded": True, "later_rows_only": True}),
        "triton / correctness / odd_h_1001/float32": ("wrong values: 3 of 3003 elements outside tolerance\n  hint: 3 outputs are NaN where a finite value was expected; the output buffer is poisoned with NaN before each call, so these were probably never written (mask, grid size or tail handling)",
                                                      {"reason": "unwritten outputs"}),
        "triton / correctness / rows_127/float32": ("not deterministic: two runs on the same input differ in 17 elements (a race, or reading unwritten memory?)",
                                                    {"reason": "not deterministic"}),
        "triton / correctness / rows_129/float32": ("the input was modified: a kernel must not write into x", {"reason": "input modified"}),
        "triton / correctness / saturating_gates/float32": ("wrong values: 40 of 5100 elements outside tolerance\n  at index (0, 1): expected 98.1, got nan",
                                                            {"reason": "wrong values", "dist": "saturating", "dtype": "float32"}),
    }
    violation = "PyTorch computed part of the result: aten::sigmoid"
    for t in d["tests"]:
        if t["name"] in outputs:
            out, typed = outputs[t["name"]]
            t.update(score=0.0, status="failed", output=out)
            t["extra_data"].update(state="failed", **typed)
        if t["name"].startswith("cuda / ") and t["max_score"] and t["score"]:
            t.update(score=0.0, status="failed", output="forfeit: the 'cuda / kernel check' found PyTorch doing the work\n" + t["output"])
            t["extra_data"].update(state="failed", reason="forfeit")
        if t["name"] == "cuda / kernel check":
            t.update(status="failed", output=f"VIOLATION: {violation}\n" + t["output"])
            t["extra_data"].update(state="failed", forfeit=True, violations=[violation], reason="violation",
                                   findings=[{"code": "torch-compute", "severity": "violation", "text": violation}])
    d["output"] += "\ncuda: all points forfeit, see 'cuda / kernel check'"
    d["score"] = round(sum(t["score"] for t in d["tests"]), 4)
    return d


def test_lost_points_come_with_reasons_and_advice(tmp_path):
    d = _failing(fixture())
    md = studentreport.write_student_report(d, tmp_path)[0].read_text()
    lost = md.split("## Lost points", 1)[1]
    expect = {
        "triton / correctness / strided_rows/float32": "row stride",
        "triton / correctness / odd_h_1001/float32": "never written",
        "triton / correctness / rows_127/float32": "race",
        "triton / correctness / rows_129/float32": "Never store into the input",
        "triton / correctness / saturating_gates/float32": "stable form",
        "cuda / correctness": "forfeit",
        "triton / performance / fp16_4k": "16 bytes",
    }
    for title, tip in expect.items():
        assert f"### {title}" in lost, title
        entry = lost.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
        assert "What to try:" in entry and tip in entry, (title, entry)
    # The forfeit's 26 correctness points are one entry that names them all, with its reason quoted.
    assert "### cuda / correctness: 26 cases" in lost and "26 points lost" in lost
    page = (tmp_path / "report.html").read_text()
    assert page.count('<td class="failed">FAIL</td>') == 5 + 26


def test_student_output_is_escaped_in_the_html(tmp_path):
    d = fixture()
    t = next(t for t in d["tests"] if t["name"] == "triton / correctness / tiny_1x2/float32")
    t.update(score=0.0, status="failed", output='importing glu_triton.py failed: <script>alert(1)</script><img src="http://x/y.png">')
    t["extra_data"]["state"] = "failed"
    page = studentreport.write_student_report(d, tmp_path)[1].read_text()
    assert "<script>alert(1)" not in page and '<img src="http' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_report_failure_in_the_cli_keeps_results_json_and_exit_0(tmp_path, monkeypatch, capsys):
    g = grade_from_results(fixture())
    def fake_grade(problem, opts, progress, beside=None):
        for msg in ("cuda: building solution_cuda.cu with nvcc", "triton: tiny_1x2/float32", "performance: lecture_16k"):
            progress(msg)
        return g

    monkeypatch.setattr(app_grade, "grade", fake_grade)

    def boom(*a, **k):
        raise OSError("disk\nfull")

    monkeypatch.setattr(studentreport, "write_student_report", boom)
    out = tmp_path / "out"
    rc = cli.main(["grade", "--staff", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0
    assert_valid(strict_json(out / "results.json"))
    assert not (out / "report.html").exists()
    lines = [ln for ln in cap.err.splitlines() if ln.startswith("report:")]
    assert lines == ["report: not written (OSError: disk full); results.json is unaffected"]
    # Progress off a TTY (pytest captures stderr): plain one-line messages, no ANSI codes, no spinner.
    progress_lines = [ln for ln in cap.err.splitlines() if "grading:" in ln]
    assert [ln.split("] ", 1)[1] for ln in progress_lines] == [
        "grading: cuda: building solution_cuda.cu with nvcc", "grading: triton: tiny_1x2/float32",
        "grading: performance: lecture_16k",
    ]
    assert not ANSI.search(cap.err + cap.out)
    assert "results written to" in cap.out


def test_autograde_writes_the_report_too(tmp_path, monkeypatch, capsys):
    g = grade_from_results(fixture())
    monkeypatch.setattr(app_grade, "grade", lambda problem, opts, progress, beside=None: g)
    sub = tmp_path / "submission"
    sub.mkdir()
    out = tmp_path / "results"
    rc = cli.main(["autograde", "--submission", str(sub), "--out", str(out), "--secret-file", str(tmp_path / "none")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    doc = strict_json(out / "results.json")
    assert_valid(doc)
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    # No key file: a local grade, unsigned and advisory, saying why (results.json, terminal, report.md).
    assert doc["extra_data"]["official"] is False and "signature" not in doc["extra_data"]
    assert any("no key file" in w for w in doc["extra_data"]["not_official_because"])
    # the student's terminal and report say once, briefly, that it is a practice grade (issue 40 item 8)
    assert cap.out.count("practice grade") == 1 and "advisory" not in cap.out
    assert (out / "report.md").read_text().count("practice grade") == 1


# ----------------------------------------------------------------------------------------------------------------
# 3. The TA's reports


def _clean(d: dict, student: str | None = None, lose: int = 0) -> dict:
    """A copy without FLAG lines; `lose` triton correctness points failed; optional extra_data.student_id."""
    d = copy.deepcopy(d)
    for t in d["tests"]:
        t["output"] = "\n".join(ln for ln in t["output"].splitlines() if not ln.startswith("FLAG: "))
        if "flags" in t["extra_data"]:
            t["extra_data"]["flags"] = []
        t["extra_data"]["findings"] = [f for f in t["extra_data"].get("findings", []) if f["severity"] != "flag"]
    for t in [t for t in d["tests"] if t["name"].startswith("triton / correctness /")][:lose]:
        t.update(score=0.0, status="failed", output="wrong values: 1 of 2 elements outside tolerance")
        t["extra_data"].update(state="failed", reason="wrong values")
    if student:
        d["extra_data"]["student_id"] = student
    d["score"] = round(sum(t["score"] for t in d["tests"]), 4)
    for c in d["extra_data"]["performance"]["cases"].values():
        for v in c["impls"].values():
            v["flags"] = []
    return d


def _write(p: Path, d: dict | str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(d if isinstance(d, str) else json.dumps(d))


def _class_dir(root: Path) -> dict[str, float]:
    fx = fixture()
    good = {"alice": _clean(fx), "bob": _clean(fx, lose=3), "s-1003": _clean(fx, student="s-1003", lose=26)}
    _write(root / "alice" / "results.json", good["alice"])
    _write(root / "bob" / "results" / "results.json", good["bob"])  # Gradescope layout: id from the folder above
    _write(root / "carol" / "results.json", good["s-1003"])  # extra_data.student_id wins over the folder name
    _write(root / "dave" / "results.json", '{"score": 3, "tests": [')  # corrupt
    (root / "erin").mkdir()  # no results at all
    return {k: v["score"] for k, v in good.items()}


def test_ta_report_csv_totals_and_unusable_files(tmp_path):
    root = tmp_path / "class"
    totals = _class_dir(root)
    csv_path, html_path, subs, bad = tareport.write_ta_report(root, tmp_path / "ta")
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert [r["student_id"] for r in rows] == ["alice", "bob", "s-1003"]
    head = list(rows[0])
    assert head[:5] == ["student_id", "triton_correctness", "triton_performance", "cuda_correctness", "cuda_performance"]
    assert head[-3:] == ["total", "max", "flags"]
    fx_perf = {p: sum(t["score"] for t in fixture()["tests"] if t["name"].startswith(f"{p} / performance")) for p in ("triton", "cuda")}
    for r in rows:
        assert float(r["total"]) == pytest.approx(totals[r["student_id"]], abs=1e-3)
        parts = sum(float(r[c]) for c in head[1:5])
        assert parts == pytest.approx(float(r["total"]), abs=1e-3)
        assert float(r["max"]) == 76.0 and r["flags"] == ""
        assert float(r["triton_performance"]) == pytest.approx(fx_perf["triton"], abs=1e-3)
    assert [float(r["triton_correctness"]) for r in rows] == [26.0, 23.0, 0.0]
    page = html_path.read_text()
    assert "dave/results.json" in page and "corrupt JSON" in page
    assert "erin/" in page and "no results.json" in page
    assert {b.path for b in bad} == {"dave/results.json", "erin/"}
    assert "Flagged submissions (0)" in page
    # Self-contained: nothing loaded from elsewhere.
    assert not re.search(r'\b(href|src)="(?!data:)', page)
    if _have_matplotlib():
        assert len(re.findall(r'<img[^>]*src="data:image/png;base64,', page)) == 3
    else:
        assert "plots need matplotlib" in page
    # Pass rate per correctness case: bob and s-1003 failed tiny_1x2/float32, alice passed it.
    assert "33% (1/3)" in page


def test_ta_report_flags_flagged_submissions(tmp_path):
    root = tmp_path / "class"
    fx = fixture()
    _write(root / "clean" / "results.json", _clean(fx))
    _write(root / "as_graded" / "results.json", fx)  # the fixture's own FLAG lines (host clock on fp16_4k)
    _write(root / "cheat" / "results.json", _failing(fx))  # a kernel-check violation, cuda forfeit
    tampered = _clean(fx)
    tampered["score"] = 76.0
    _write(root / "tampered" / "results.json", tampered)
    csv_path, html_path, subs, bad = tareport.write_ta_report(root)
    assert csv_path.parent == root and not bad
    flagged = {s.student: s.flags for s in subs if s.flags}
    assert set(flagged) == {"as_graded", "cheat", "tampered"}
    assert any(f.startswith("FLAG triton / fp16_4k: host clock") for f in flagged["as_graded"])
    assert any(f.startswith("kernel check violation (cuda)") for f in flagged["cheat"])
    assert any(f.startswith("forfeit (cuda)") for f in flagged["cheat"])
    assert any("differs from the sum" in f for f in flagged["tampered"])
    page = html_path.read_text()
    flagged_section = page.split("Flagged submissions", 1)[1].split("<h2>", 1)[0]
    for sid in flagged:
        assert f"<td>{sid}</td>" in flagged_section
    assert "<td>clean</td>" not in flagged_section
    assert "host clock shows 1.026 ms" in flagged_section
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(csv_path.read_text()))}
    assert "FLAG triton / fp16_4k" in rows["as_graded"]["flags"] and rows["clean"]["flags"] == ""


def test_ta_report_cli_plain_progress_and_exit_codes(tmp_path, capsys):
    root = tmp_path / "class"
    _class_dir(root)
    out = tmp_path / "ta"
    assert cli.main(["report", str(root), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert (out / "grades.csv").is_file() and (out / "class_summary.html").is_file()
    assert "3 submission(s) read, 0 flagged, 2 file(s) or folder(s) unusable" in cap.out
    assert "report: reading 1/4: alice/results.json" in cap.err and not ANSI.search(cap.err + cap.out)
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith("grader error: ")


def test_ta_report_on_an_empty_folder(tmp_path):
    csv_path, html_path, subs, bad = tareport.write_ta_report(tmp_path)
    assert csv_path.read_text().splitlines() == ["student_id,total,max,flags"]
    assert "0 graded submission(s)" in html_path.read_text()


KEY_HEX = "5ec7e7" * 11  # a fixed, test-only key (66 hex digits)
KEY = keyfile.derive(KEY_HEX.encode())  # its derived values
OTHER = keyfile.derive(("0dd" * 22).encode())


def test_results_written_with_a_secret_verify_and_edits_do_not(tmp_path):
    g = grade_from_results(fixture())
    g.official = True  # set by the trusted side's process-identity checks in a real grade
    path = report.write_results(g, tmp_path, key=KEY.signing)
    d = strict_json(path)  # what a reader gets back from disk
    assert_valid(d)
    assert d["extra_data"]["official"] is True and d["extra_data"]["not_official_because"] == []
    assert signing.verify(d, KEY.signing) == signing.VALID
    assert signing.verify(d, OTHER.signing) == signing.INVALID
    for edit in (
        lambda x: x.update(score=x["score"] + 1),
        lambda x: x["tests"][0].update(score=x["tests"][0]["score"] + 0.5),
        lambda x: x["extra_data"].update(student_id="someone-else"),
        lambda x: x["tests"].pop(),
    ):
        e = copy.deepcopy(d)
        edit(e)
        assert signing.verify(e, KEY.signing) == signing.INVALID
    e = copy.deepcopy(d)
    del e["extra_data"]["signature"]
    assert signing.verify(e, KEY.signing) == signing.UNSIGNED
    # Without a key (local grading) nothing is signed: a known key would prove nothing.
    local = tmp_path / "local"
    local.mkdir()
    assert "signature" not in strict_json(report.write_results(g, local))["extra_data"]
    # With a key, but a grade the trusted side did not call official: never signed, and says why.
    g.official, g.official_why = False, ["student code ran as the grader's own user"]
    d = strict_json(report.write_results(g, local, key=KEY.signing))
    assert "signature" not in d["extra_data"] and d["extra_data"]["official"] is False
    assert d["extra_data"]["not_official_because"] == ["student code ran as the grader's own user"]


def _as_graded_for(doc: dict, student: str) -> dict:
    """doc with the identity block an official grade of `student` signs (grader/signing.py new_identity)."""
    doc = copy.deepcopy(doc)
    doc["extra_data"]["identity"] = signing.new_identity(
        student_id=student, files_sha256="ab" * 32, problem="glu", spec_sha256=GLU_SPEC_SHA256)
    return doc


def _signed_class(root: Path) -> None:
    fx = _clean(fixture())
    _write(root / "alice" / "results.json", signing.sign(_as_graded_for(fx, "alice"), KEY.signing))
    edited = signing.sign(_as_graded_for(_clean(fixture(), lose=3), "bob"), KEY.signing)
    edited["score"] = 76.0  # bob "restores" his lost points by hand
    for t in edited["tests"]:
        t["score"] = t["max_score"]
    _write(root / "bob" / "results.json", edited)
    _write(root / "carol" / "results.json", fx)  # never signed: written by something else


def test_ta_report_with_the_secret_flags_files_the_grader_did_not_write(tmp_path):
    root = tmp_path / "class"
    _signed_class(root)
    csv_path, _, subs, _ = tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing)
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(csv_path.read_text()))}
    assert {k: r["signature"] for k, r in rows.items()} == {"alice": "valid", "bob": "INVALID", "carol": "unsigned"}
    assert rows["alice"]["flags"] == ""
    assert rows["bob"]["flags"].startswith("NOT WRITTEN BY THE GRADER") and "does not match" in rows["bob"]["flags"]
    assert rows["carol"]["flags"].startswith("NOT WRITTEN BY THE GRADER") and "no signature" in rows["carol"]["flags"]
    assert "NOT WRITTEN BY THE GRADER" in (tmp_path / "ta" / "class_summary.html").read_text()
    # Without the key nothing is checked, and the CSV keeps its usual columns.
    csv_path, _, _, _ = tareport.write_ta_report(root, tmp_path / "ta2")
    head = csv_path.read_text().splitlines()[0]
    assert "signature" not in head and "NOT WRITTEN" not in csv_path.read_text()


def test_ta_report_cli_checks_signatures_with_a_secret_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GRADER_SECRET_SEED", raising=False)
    root = tmp_path / "class"
    _signed_class(root)
    key = tmp_path / "grader_key"
    key.write_text(KEY_HEX + "\n")  # the key whose derived values are KEY
    key.chmod(0o600)
    assert cli.main(["report", str(root), "--out", str(tmp_path / "ta"), "--secret-file", str(key)]) == 0
    out = capsys.readouterr().out
    assert "signatures: 1 valid, 2 not written by the grader with this key: bob, carol" in out
    assert cli.main(["report", str(root), "--out", str(tmp_path / "ta")]) == 0
    assert "signatures: not checked" in capsys.readouterr().out
    assert cli.main(["report", str(root), "--secret-file", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader error: --secret-file") and err.count("\n") == 1
    seed = tmp_path / "seed"
    seed.write_text("271828182845\n")
    seed.chmod(0o600)
    assert cli.main(["report", str(root), "--secret-file", str(seed)]) == 2
    err = capsys.readouterr().err
    assert "holds an integer" in err and "python -m grader keygen --out FILE" in err and err.count("\n") == 1
    monkeypatch.setenv("GRADER_SECRET_SEED", "271828182845")
    assert cli.main(["report", str(root), "--secret-file", str(key)]) == 2
    err = capsys.readouterr().err
    assert "GRADER_SECRET_SEED" in err and "--secret-file" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------------
# 4. Progress output


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_plain_text_off_a_tty():
    buf = io.StringIO()
    with report.progress("grading", stream=buf) as update:
        update("triton: tiny_1x2/float32")
        update("triton: tiny_1x2/float32")  # repeats are dropped
        update("cuda: \x1b[31mred\x1b[0m\nsecond line")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert all(re.fullmatch(r"\[ *\d+\.\d s\] grading: .+", ln) for ln in lines), lines
    assert lines[0].endswith("grading: triton: tiny_1x2/float32")
    assert lines[1].endswith("grading: cuda: red second line")
    assert not ANSI.search(buf.getvalue())


def test_progress_throttles_when_asked():
    buf = io.StringIO()
    with report.progress("report", stream=buf, min_interval_s=3600) as update:
        for i in range(100):
            update(f"reading {i}/100")
    assert buf.getvalue().splitlines() == [buf.getvalue().splitlines()[0]]  # the first, then nothing within the hour
    assert buf.getvalue().endswith("report: reading 0/100\n")


def test_progress_on_a_tty_uses_rich_and_ends_cleanly():
    buf = _FakeTTY()
    with report.progress("grading", stream=buf) as update:
        update("triton: tiny_1x2/float32")
        update("a file named [/] or [bold]: not rich markup")  # must not raise MarkupError
    # rich draws on a terminal (escape codes allowed there); the point is that it runs and finishes.
    assert isinstance(buf.getvalue(), str)


# ----------------------------------------------------------------------------------------------------------------
# 5. A real browser, where there is one


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True, timeout=120, text=True,
    )


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium on this machine: the headless-browser check needs it")
def test_report_html_renders_in_headless_chromium(tmp_path):
    html_path = studentreport.write_student_report(fixture(), tmp_path / "r")[1]
    url = html_path.resolve().as_uri()
    shot = tmp_path / "s.png"
    r = _chromium([f"--screenshot={shot}", "--window-size=1200,2000", url], tmp_path)
    assert shot.is_file(), r.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000, len(png)
    r = _chromium(["--dump-dom", url], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<h2>Lost points</h2>" in dom
    srcs = re.findall(r'<img[^>]*\ssrc="([^"]*)"', dom)
    assert len(srcs) == html_path.read_text().count("<img")
    assert all(s.startswith("data:image/png;base64,") for s in srcs), [s[:40] for s in srcs]
    if _have_matplotlib():
        assert len(srcs) == 4


def test_fixture_has_no_paths_of_a_machine():
    text = FIXTURE.read_text()
    assert not re.search(r'"/(work|home|root|tmp)/', text)


def test_huge_numbers_a_wrong_kernel_produces_are_written_within_the_schema(tmp_path):
    # A wrong kernel's max relative error can be 1e32 (a NaN-free garbage output) and an int can be as large: the
    # writer clamps them to the schema's bound, so the TA report reads the file instead of listing it unusable.
    from grader.report.output import NUMBER_BOUND
    from grader.report.validate import parse_results

    g = grade_from_results(fixture())
    t = next(t for t in g.tests if t.stage == "correctness")
    t.extra.update(max_rel_err=1.2e32, worst_index=10**30, neg=-7.5e58, ok=True)
    path = report.write_results(g, tmp_path)
    doc = parse_results(path.read_bytes())  # the TA report's own reader: raises BadResults if the file fails
    found = json.dumps(doc)
    assert "1.2e+32" not in found and str(10**30) not in found
    # written, as the bound itself (the sign kept): the values are there, clamped
    assert "1e+18" in found and "-1e+18" in found and str(10**18) in found, found[:2000]
    schema = json.loads((Path(report.__file__).parent.parent / "results.schema.json").read_text())
    assert NUMBER_BOUND == schema["$defs"]["number"]["maximum"]
