"""Whose grade it is, and what a file may decide (issue 28, classes 5 and 6; docs/SECURITY.md, "Signed results").

Class 5: an official grade signs its identity (grader/signing.py new_identity: the student id as graded, the graded
files' hash, the problem and its spec, the grader's version, when, a nonce). The TA report, with the key, counts a
file only in the row it was signed for: a classmate's signed results.json copied into one's own folder is
`replayed` and not imported; the classmate's own grade is untouched.

Class 6: class-wide values (points possible, columns, the problem, Canvas's column name) come from the problem's
spec (grader/report/assignment.py), never from a results.json; a file that does not count has its own row and
nothing else; every CSV cell, headers included, is formula-safe (grader/report/cells.py).

Each test below was checked to fail with its defence removed (see the report of the change that added them).
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import time
from pathlib import Path

import pytest

from grader import cli, keyfile, signing
from grader import results as gr
from grader.app import grade as app_grade
from grader.publish import gradescope
from grader.report import cells, tareport
from grader.results import Grade

# The spec the grades here were made against (the report flags a valid grade signed over another version of it).
GLU_SPEC_SHA256 = hashlib.sha256((Path(__file__).resolve().parent.parent / "reference" / "glu" / "spec.yaml").read_bytes()).hexdigest()

KEY_HEX = "5eed" * 16
KEY = keyfile.derive(KEY_HEX.encode())

ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section
"Lovelace, Ada",1001,S1001,alice,L01
"Babbage, Charles",1002,S1002,bob,L01
"Hopper, Grace",1003,S1003,grace,L02
"""


def result(triton: float = 26.0, cuda: float = 26.0, perf: float = 12.0) -> dict:
    """A results.json of the grader's shape for GLU (76 points: triton and cuda, 26 correctness + 12 performance)."""
    tests = []
    for part, corr in (("triton", triton), ("cuda", cuda)):
        for stage, score, top in (("correctness", corr, 26.0), ("performance", perf, 12.0)):
            tests.append(
                {
                    "name": f"{part} / {stage} / all",
                    "score": score,
                    "max_score": top,
                    "status": "passed" if score == top else "failed",
                    "tags": [part, stage],
                    "output": "",
                    "extra_data": {"state": "passed" if score == top else "failed", "case": "all"},
                }
            )
    doc = {
        "score": sum(t["score"] for t in tests),
        "max_score": 76.0,
        "output": "",
        "tests": tests,
        "extra_data": {
            "problem": "glu",
            "submission": "assignment",
            "device": "cuda",
            "official": True,
            "not_official_because": [],
            "performance": {"device": {"name": "NVIDIA H200"}},
        },
    }
    tareport.parse_results(json.dumps(doc).encode())  # the report's own check, schema included
    return doc


def graded_for(student: str | None, doc: dict | None = None, files: str | None = None) -> dict:
    """A signed results.json as an official grade of `student` writes it (identity block, then the HMAC)."""
    doc = copy.deepcopy(doc or result())
    doc["extra_data"]["identity"] = signing.new_identity(
        student_id=student,
        files_sha256=files or hashlib.sha256(f"files of {student}".encode()).hexdigest(),
        problem="glu",
        spec_sha256=GLU_SPEC_SHA256,
    )
    signed = signing.sign(doc, KEY.signing)
    tareport.parse_results(json.dumps(signed).encode())  # the identity block passes the report's schema
    return signed


def put(root: Path, folder: str, doc: dict | str) -> Path:
    p = root / folder / "results.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return p


def csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def canvas(path: Path) -> tuple[list[str], str, dict[str, str]]:
    """(header, points possible, SIS Login ID -> score) of grades_canvas.csv."""
    rows = csv_rows(path)
    return rows[0], rows[1][5], {r[3]: r[5] for r in rows[2:]}


def report(root: Path, out: Path, key: bool = True, **kw) -> tuple[dict[str, tareport.Submission], Path]:
    roster = tareport.read_roster(_roster(out.parent))
    _, html, subs, _ = tareport.write_ta_report(root, out, key=KEY.signing if key else None, roster=roster, **kw)
    return {s.student: s for s in subs}, html


def _roster(where: Path) -> Path:
    p = where / "roster.csv"
    p.write_text(ROSTER, encoding="utf-8")
    return p


# ----------------------------------------------------------------------------------------------------------------
# Class 5: a signature says whose grade it is


def test_a_copied_classmates_signed_results_json_is_replayed_and_not_imported(tmp_path):
    root, out = tmp_path / "class", tmp_path / "ta"
    alice = graded_for("alice", result())
    put(root, "alice", alice)
    put(root, "bob", alice)  # bob copies alice's signed file, byte for byte, into his own folder
    put(root, "grace", graded_for("grace", result(cuda=0.0)))
    assert signing.verify(alice, KEY.signing) == signing.VALID  # the HMAC alone cannot tell the copy apart
    subs, html = report(root, out)
    assert subs["bob"].signature == signing.REPLAYED and not subs["bob"].counted
    assert any(f.startswith("REPLAYED: signed for alice") for f in subs["bob"].flags), subs["bob"].flags
    # The original is untouched: copying it cannot erase alice's grade.
    assert subs["alice"].signature == signing.VALID and subs["alice"].flags == []
    _, points, scores = canvas(out / "grades_canvas.csv")
    assert scores == {"alice": "76", "bob": "", "grace": "50"} and points == "76"
    grades = {r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert grades["bob"]["signature"] == "replayed" and grades["bob"]["flags"].startswith("REPLAYED")
    page = html.read_text(encoding="utf-8")
    assert "Replayed (1)" in page and "replayed: another row" in page
    assert "2 of 3 grade(s) count" in page


def test_the_cli_says_how_many_were_replayed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GRADER_SECRET_SEED", raising=False)
    root = tmp_path / "class"
    put(root, "alice", graded_for("alice"))
    put(root, "bob", graded_for("alice"))  # a fresh grade of alice's, in bob's folder: not bob's either
    put(root, "grace", graded_for(None))  # a grade made without --student-id
    key = tmp_path / "key"
    key.write_text(KEY_HEX + "\n")
    key.chmod(0o600)
    assert cli.main(["report", str(root), "--out", str(tmp_path / "ta"), "--secret-file", str(key)]) == 0
    out = capsys.readouterr().out
    assert (
        "signatures: 1 valid, 0 not written by the grader with this key; 1 replayed: bob; 1 identity not "
        "signed: grace (not imported; listed in the summary)"
    ) in out
    assert "problem glu (76 points), from reference/glu/spec.yaml, named by 1 valid file(s)" in out


def test_one_signature_in_two_rows_that_both_claim_it_is_replayed_in_both(tmp_path):
    """Two folders whose ids both match the signed identity (here 'alice' and 'ALICE': ids are compared
    casefolded): no single row owns the grade, so neither copy is imported until a person picks one."""
    root = tmp_path / "class"
    doc = graded_for("alice")
    put(root, "alice", doc)
    put(root, "ALICE", doc)
    put(root, "grace", graded_for("grace"))
    subs, _ = report(root, tmp_path / "ta")
    assert subs["ALICE"].signature == subs["alice"].signature == signing.REPLAYED
    assert any("the same signed grade is in 2 rows" in f for f in subs["alice"].flags)
    assert subs["grace"].signature == signing.VALID


def test_identical_graded_files_of_two_students_are_two_real_grades_with_a_note(tmp_path):
    """The files hash is signed together with each student's own id: two grades of byte-identical submissions are
    two real grades (copied code, or both unchanged stubs), not a replayed file. Both count; both are flagged."""
    root, out = tmp_path / "class", tmp_path / "ta"
    same = "ab" * 32
    put(root, "alice", graded_for("alice", result(), files=same))
    put(root, "bob", graded_for("bob", result(), files=same))
    subs, html = report(root, out)
    assert subs["alice"].signature == subs["bob"].signature == signing.VALID
    assert any(f.startswith("same files:") and "bob" in f for f in subs["alice"].flags)
    assert any(f.startswith("same files:") and "alice" in f for f in subs["bob"].flags)
    assert canvas(out / "grades_canvas.csv")[2] == {"alice": "76", "bob": "76", "grace": ""}
    assert "Same graded files as another student (2, counted)" in html.read_text(encoding="utf-8")


def test_an_old_signed_file_without_identity_is_read_and_says_identity_not_signed(tmp_path):
    root, out = tmp_path / "class", tmp_path / "ta"
    put(root, "alice", signing.sign(result(), KEY.signing))  # signed before identities were signed
    put(root, "grace", graded_for("grace"))
    subs, html = report(root, out)
    assert subs["alice"].signature == signing.NO_IDENTITY and subs["alice"].total == 76.0
    assert subs["alice"].flags[0].startswith("IDENTITY NOT SIGNED")
    assert canvas(out / "grades_canvas.csv")[2]["alice"] == ""
    assert "identity not signed (regrade with --student-id): alice" in html.read_text(encoding="utf-8")
    # Without the key nothing is checked: the old file is read as before, and imported.
    subs, _ = report(root, tmp_path / "nokey", key=False)
    assert subs["alice"].signature == signing.NOT_CHECKED and subs["alice"].counted


def test_an_edited_identity_breaks_the_signature(tmp_path):
    doc = graded_for("alice")
    doc["extra_data"]["identity"]["student_id"] = "bob"  # re-label alice's grade as bob's
    assert signing.verify(doc, KEY.signing) == signing.INVALID


def test_a_gradescope_export_row_is_matched_by_its_submission_and_members(tmp_path):
    """On Gradescope the identity is the submission's id and its members (submission_metadata.json); the export's
    row is the folder submission_<id> and its submitters (submission_metadata.yml)."""
    root = tmp_path / "export"
    meta = (
        "submission_111:\n  :submitters:\n  - :name: Ada\n    :sid: S1001\n    :email: ada@uni.edu\n"
        "submission_222:\n  :submitters:\n  - :name: Bob\n    :sid: S1002\n    :email: bob@uni.edu\n"
    )
    (root).mkdir()
    (root / "submission_metadata.yml").write_text(meta)
    doc = copy.deepcopy(result())
    doc["extra_data"]["identity"] = signing.new_identity(
        student_id="S1001",
        files_sha256="ab" * 32,
        problem="glu",
        spec_sha256=GLU_SPEC_SHA256,
        submission_id="111",
        users=[{"sid": "S1001", "email": "ada@uni.edu"}],
    )
    signed = signing.sign(doc, KEY.signing)
    put(root, "submission_111", signed)
    put(root, "submission_222", signed)  # Ada's grade under Bob's submission
    subs, _ = tareport.collect(root, key=KEY.signing)
    standing = {s.key: s.signature for s in subs}
    assert standing == {"submission_111": signing.VALID, "submission_222": signing.REPLAYED}


def test_files_digest_binds_names_and_bytes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (a, b, c):
        d.mkdir()
    (a / "glu_triton.py").write_bytes(b"x = 1\n")
    (b / "glu_triton.py").write_bytes(b"x = 2\n")
    (c / "glu_triton.p").write_bytes(b"yx = 1\n")  # a byte moved from the name into the content
    digests = {signing.files_digest(d) for d in (a, b, c)}
    assert len(digests) == 3
    (a / "sub").mkdir()  # folders (and links) are not graded: not hashed
    assert signing.files_digest(a) in digests


def test_the_identity_block_is_in_the_grade_and_its_schema(tmp_path):
    from grader import report as results_report

    g = Grade(problem="glu", submission="assignment", device="cpu", official=True)
    g.tests.append(gr.TestResult("triton / correctness / all", "triton", "correctness", 1.0, 1.0, "passed", ""))
    g.identity = signing.new_identity(student_id="alice", files_sha256="ab" * 32, problem="glu", spec_sha256="cd" * 32)
    path = results_report.write_results(g, tmp_path, key=KEY.signing)
    data = tareport.parse_results(path.read_bytes())
    ident = signing.identity_of(data)
    assert ident is not None and ident.student_id == "alice" and ident.keys() == {"alice"}
    assert len(data["extra_data"]["identity"]["nonce"]) == 32 and data["extra_data"]["identity"]["graded_at"].endswith(
        "Z"
    )
    assert "+" in data["extra_data"]["identity"]["grader_version"]
    # Two grades of the same files by the same student still differ (nonce, time): a signature is never reused.
    other = signing.new_identity(student_id="alice", files_sha256="ab" * 32, problem="glu", spec_sha256="cd" * 32)
    assert other["nonce"] != g.identity["nonce"]


def test_student_id_and_gradescope_metadata_are_checked_before_grading(tmp_path):
    def whose(**kw):
        ns = type("NS", (), {"student_id": None, "submission_metadata": None, **kw})()
        return app_grade._whose(ns)

    assert whose(student_id="alice") == ("alice", None, ())
    for bad in ("", " alice", "a\nb", "x" * 201):
        with pytest.raises(app_grade.GraderError, match="--student-id"):
            whose(student_id=bad)
    meta = tmp_path / "submission_metadata.json"
    meta.write_text(
        json.dumps(
            {
                "id": 4242,
                "users": [
                    {"email": "ada@uni.edu", "id": 7, "name": "Ada", "sid": "S1001"},
                    {"email": "bob@uni.edu", "id": 8, "name": "Bob", "sid": ""},
                ],
            }
        )
    )
    sid, sub_id, users = whose(submission_metadata=meta)
    assert (sid, sub_id) == ("S1001", "4242") and [u["email"] for u in users] == ["ada@uni.edu", "bob@uni.edu"]
    assert whose(submission_metadata=tmp_path / "absent.json") == (None, None, ())  # not on Gradescope
    for raw, why in (
        (b"x" * (gradescope.MAX_METADATA_BYTES + 1), "over"),
        (b"[" * 100000, "not JSON"),
        (b'{"id": NaN}', "not JSON"),
        (b"[1]", "not Gradescope's metadata"),
    ):
        meta.write_bytes(raw)
        t0 = time.monotonic()
        with pytest.raises(app_grade.GraderError, match=why):
            whose(submission_metadata=meta)
        assert time.monotonic() - t0 < 10


# ----------------------------------------------------------------------------------------------------------------
# Class 6: class-wide values come from the course, not from results


def _poison() -> dict:
    """An unsigned file that claims 5000 points, a part named like a formula, and another problem."""
    doc = result()
    doc["tests"].append(
        {
            "name": '=HYPERLINK("http://x.invalid","click") / correctness / all',
            "score": 4924.0,
            "max_score": 4924.0,
            "status": "passed",
            "tags": ['=HYPERLINK("http://x.invalid","click")', "correctness"],
            "output": "",
            "extra_data": {"state": "passed", "case": "all"},
        }
    )
    doc["score"], doc["max_score"] = 5000.0, 5000.0
    doc["extra_data"]["problem"] = "=1+1"
    return doc


def _class_wide(out: Path) -> tuple:
    head_csv = csv_rows(out / "grades.csv")[0]
    head, points, _ = canvas(out / "grades_canvas.csv")
    page = (out / "class_summary.html").read_text(encoding="utf-8")
    out_of = page.split("<th>out of</th>", 1)[1].split("</table>", 1)[0] if "<th>out of</th>" in page else ""
    return head_csv, head, points, out_of.count("<td>76</td>")


@pytest.mark.parametrize("key", [True, False], ids=["with-key", "without-key"])
def test_a_flagged_file_changes_no_class_wide_value(tmp_path, key):
    root = tmp_path / "class"
    put(root, "alice", graded_for("alice"))
    put(root, "grace", graded_for("grace", result(cuda=0.0)))
    report(root, tmp_path / "before", key=key)
    before = _class_wide(tmp_path / "before")
    put(root, "mallory", _poison())
    subs, html = report(root, tmp_path / "after", key=key)
    after = _class_wide(tmp_path / "after")
    assert after == before
    head_csv, head, points, _ = after
    assert head_csv[1:5] == ["triton_correctness", "triton_performance", "cuda_correctness", "cuda_performance"]
    assert head[5] == "GLU kernels" and points == "76"
    assert not any("HYPERLINK" in c for c in head_csv + head)
    m = subs["mallory"]
    assert not m.counted and m.total == 5000.0  # its own row keeps its own (flagged) numbers
    page = html.read_text(encoding="utf-8")
    assert (
        "columns triton_correctness, triton_performance, cuda_correctness, cuda_performance: from reference/glu" in page
    )


def test_class_wide_values_come_from_the_problem_argument(tmp_path, capsys):
    root = tmp_path / "class"
    put(root, "mallory", _poison())  # the only file: unsigned, and naming no known problem
    out = tmp_path / "ta"
    assert cli.main(["report", str(root), "--out", str(out), "--problem", "gelu"]) == 0
    assert "problem gelu (80 points), from --problem gelu" in capsys.readouterr().out
    assert csv_rows(out / "grades.csv")[0][1] == "triton_correctness"
    assert cli.main(["report", str(root), "--out", str(out), "--problem", "nope"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("grader error: --problem nope: no such problem (known under reference/: ")
        and err.count("\n") == 1
    )
    # No --problem, and no counted file names a known problem: no columns, points possible unknown.
    for name in ("../../etc/passwd", "glu/../gelu", "GLU", "=glu"):
        doc = result()
        doc["extra_data"]["problem"] = name
        put(root, "mallory", doc)
        assert cli.main(["report", str(root), "--out", str(out)]) == 0
        assert "problem unknown (unknown points)" in capsys.readouterr().out
        assert csv_rows(out / "grades.csv")[0] == ["student_id", "device", "containment", "final", "total", "max", "flags"]


def test_every_csv_cell_is_formula_safe(tmp_path):
    root, out = tmp_path / "class", tmp_path / "ta"
    put(root, "=cmd|' -C calc'!A0", graded_for("x"))
    put(root, "@SUM(1+1)", _poison())
    put(root, "alice", graded_for("alice"))
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER + '"=HYPERLINK(""http://x.invalid"")",1004,+S1004,-dave,\t@L03\n', encoding="utf-8")
    tareport.write_ta_report(root, out, key=KEY.signing, roster=tareport.read_roster(roster), canvas_column_name="=2+3")
    cells_seen = [c for name in ("grades.csv", "grades_canvas.csv") for r in csv_rows(out / name) for c in r]
    assert "'=cmd|' -C calc'!A0" in cells_seen and "'=2+3" in cells_seen and "'+S1004" in cells_seen
    for c in cells_seen:
        assert c[:1] not in cells.FORMULA_START or cells._NUMBER.fullmatch(c), c


@pytest.mark.parametrize(
    "raw,safe",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1+1", "'-1+1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-3", "-3"),
        ("-1.5e-05", "-1.5e-05"),
        ("alice", "alice"),
        ("", ""),
        (None, ""),
        (76.0, "76.0"),
    ],
)
def test_safe_cell(raw, safe):
    assert cells.safe_cell(raw) == safe


def test_safe_cell_is_linear_on_a_long_cell():
    t0 = time.monotonic()
    assert cells.safe_cell("-" + "1" * 2_000_000 + "x").startswith("'-")
    assert time.monotonic() - t0 < 10
