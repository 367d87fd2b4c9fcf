"""The TA report survives any results.json (attack class 11): fuzzed with hypothesis.

One malformed file (a number with 5000 digits, say) used to crash `python -m grader report` for the whole class.
Every file now goes through tareport.parse_results (strict JSON, bounded sizes, grader/results.schema.json) before
anything reads it. Here, random JSON documents, adversarial edits of a real results.json and random bytes sit next to
a good student's file: write_ta_report never raises, always writes grades.csv with the good student in it, and the
fuzzed file is either read as a submission or listed as unusable with a reason. Charts are left out of the fuzzed
runs (they are slow, and a chart failure already falls back to tables); the last test draws them for the nastiest
files that pass validation.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

# hypothesis: a test dependency (noxfile TEST_DEPS, constraints.txt)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.report import classstats, tareport

FIXTURE = Path(__file__).resolve().parent / "data" / "h200_staff_results.json"
GOOD = json.loads(FIXTURE.read_text())
FUZZ = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# Values chosen to break readers: huge and tiny numbers, wrong types, long strings, deep nesting.
NASTY: list[Any] = [
    None, True, False, 0, -1, 2**53 + 1, 10**25, -(10**25), 1e308, -1e308, 5e-324, 1e-300, -0.0, 1e6, 1e6 + 1, -1e6 - 1,
    "", "x" * 5000, "=cmd|' /C calc'!A0", "\x00\x1b[31m", "é" * 100, [], {}, [[[[[]]]]], {"a": {"b": {"c": {}}}},
    [1, "2", None], {"tests": []}, {"": None},
]
json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40), st.sampled_from(NASTY),
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(st.text(max_size=12), children, max_size=5)),
    max_leaves=25,
)


def _paths(v: Any, here: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) into a JSON value, the root included."""
    out = [here]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*here, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*here, i))
    return out


# The fixture is big (63 tests with perf data): edit a sample of its paths, plus every path of one test and of the
# perf section's first case, which is where the reader looks.
PATHS = [p for p in _paths(GOOD) if not p or p[0] != "tests" or len(p) < 2 or p[1] in (0, 5, 62)]


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return doc


@st.composite
def edited_results(draw) -> bytes:
    """A real results.json with one to three values replaced by random or nasty ones."""
    doc = copy.deepcopy(GOOD)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc) if not isinstance(doc, dict) else [p for p in _paths(doc) if p in PATHS or len(p) <= 2]
        path = draw(st.sampled_from(paths or [()]))
        value = draw(st.one_of(st.sampled_from(NASTY), json_values))
        try:
            doc = _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            pass
    return json.dumps(doc, allow_nan=True).encode()


@st.composite
def random_documents(draw) -> bytes:
    """A random JSON document, often shaped like a results.json (score, tests, extra_data)."""
    if draw(st.booleans()):
        doc: Any = draw(json_values)
    else:
        doc = {"score": draw(json_leaves), "tests": draw(st.lists(json_values, max_size=4))}
        if draw(st.booleans()):
            doc["extra_data"] = draw(json_values)
        if draw(st.booleans()):
            doc["max_score"] = draw(json_leaves)
    return json.dumps(doc, allow_nan=True).encode()


@st.composite
def adversarial_bytes(draw) -> bytes:
    raw = json.dumps(GOOD).encode()
    kind = draw(st.sampled_from(["random", "truncated", "spliced", "huge_int", "huge_float", "constant", "deep", "bom"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "truncated":
        return raw[: draw(st.integers(0, len(raw)))]
    if kind == "spliced":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=20)) + raw[at:]
    if kind == "huge_int":
        return raw.replace(b'"score": 75.0716', b'"score": ' + b"9" * draw(st.integers(20, 6000)), 1)
    if kind == "huge_float":
        return raw.replace(b'"score": 75.0716', b'"score": 1e' + str(draw(st.integers(300, 100000))).encode(), 1)
    if kind == "constant":
        return raw.replace(b'"score": 75.0716', b'"score": ' + draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])), 1)
    if kind == "deep":
        n = draw(st.integers(30, 3000))
        return b'{"score": 1, "tests": [], "extra_data": {"x": ' + b"[" * n + b"]" * n + b"}}"
    return b"\xef\xbb\xbf" + raw


def _check_report(raw: bytes, alone: bool = False, charts: bool = False) -> tuple[list, list]:
    """A class of the fuzzed file and (unless alone) a good student's: report it, and check what came out."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "class"
        if not alone:
            (root / "good").mkdir(parents=True)
            (root / "good" / "results.json").write_text(json.dumps(GOOD))
        (root / "fuzzed").mkdir(parents=True)
        (root / "fuzzed" / "results.json").write_bytes(raw)
        out = Path(tmp) / "ta"
        if charts:
            csv_path, html_path, subs, bad = tareport.write_ta_report(root, out)
        else:
            with mock.patch.object(classstats, "charts", lambda subs, top: None):
                csv_path, html_path, subs, bad = tareport.write_ta_report(root, out)
        rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
        assert html_path.is_file()
        if not alone:
            good = [r for r in rows if r["student_id"] == "good"]
            assert len(good) == 1 and math.isclose(float(good[0]["total"]), GOOD["score"], abs_tol=1e-3), rows
        fuzzed = [s for s in subs if s.path == "fuzzed/results.json"]
        unusable = [b for b in bad if b.path == "fuzzed/results.json"]
        assert len(fuzzed) + len(unusable) == 1, (fuzzed, unusable)
        for b in unusable:
            assert b.reason and len(b.reason) <= 400 and "\n" not in b.reason, b.reason
        for s in fuzzed:
            assert all(math.isfinite(v) for v in (s.total, s.max)), (s.total, s.max)
        return fuzzed, unusable


@FUZZ
@given(edited_results(), st.booleans())
def test_fuzz_edited_results_never_break_the_report(raw, alone):
    _check_report(raw, alone)


@FUZZ
@given(random_documents(), st.booleans())
def test_fuzz_random_documents_never_break_the_report(raw, alone):
    _check_report(raw, alone)


@FUZZ
@given(adversarial_bytes(), st.booleans())
def test_fuzz_adversarial_bytes_never_break_the_report(raw, alone):
    _check_report(raw, alone)


def test_the_nastiest_valid_files_still_get_charts():
    """Extremes the schema allows (points at 1e6 and at 1e-300, speedups at 1e18, a max_score of 5e-324): read,
    charted (where matplotlib is installed) and written, alone and beside a good student. Found a bug, since fixed:
    a class whose largest max_score was 5e-324 made the score histogram divide by zero."""
    for score, mx, speedup, alone in (
        (1e6, 1e6, 1e18, True), (-1e6, 1e-300, 5e-324, True), (0.0, 5e-324, 1e-300, True), (0.0, 5e-324, 1e-300, False),
        (3.0, -5.0, 0.0, True),
    ):
        doc = copy.deepcopy(GOOD)
        doc["score"], doc["max_score"] = score, mx
        for c in doc["extra_data"]["performance"]["cases"].values():
            for v in c["impls"].values():
                v["speedup_vs_eager"] = speedup
        fuzzed, unusable = _check_report(json.dumps(doc).encode(), alone, charts=True)
        assert fuzzed and not unusable, unusable


def test_an_overlong_tests_list_is_refused_by_its_count_before_the_schema():
    """The schema checks every item of a list before its length: a crafted file of a million small tests cost the
    TA report ~12 s per MiB. The count is checked first, and the file may be 2 MiB, not 8."""
    raw = json.dumps({"tests": [{"name": 1}] * 100_000}, separators=(",", ":")).encode()
    try:
        tareport.parse_results(raw, len(raw))
    except tareport.BadResults as e:
        assert str(e) == "100000 tests, over the 5000 a results.json may have"
    else:
        raise AssertionError("accepted")
    big = json.dumps({"tests": [], "output": "x" * (3 * 2**20)}).encode()
    try:
        tareport.parse_results(big, len(big))
    except tareport.BadResults as e:
        assert "over the 2 MiB" in str(e)
    else:
        raise AssertionError("accepted")
