"""LMS-ready grades: `python -m grader report DIR --roster roster.csv [--canvas-column NAME]` (grader/report/tareport.py).

Results folders are joined to a roster (Canvas's gradebook export, or any CSV with an id column) and written as
grades_canvas.csv, which Canvas's gradebook import reads; Gradescope's export layout (submission_metadata.yml)
names each submission folder's students. grades.csv gets a device column, class_summary.html a banner for grades
made without a GPU and a link to each student's report.html.

The results.json files here are small and synthetic (four tests, one per part and stage, 76 points in all), each
checked against grader/results.schema.json before use, as the report itself checks them.
"""

from __future__ import annotations

import hashlib

import csv
import io
import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from grader import cli, keyfile, signing
from grader.report import tareport

# The spec the grades here were made against (the report flags a valid grade signed over another version of it).
GLU_SPEC_SHA256 = hashlib.sha256((Path(__file__).resolve().parent.parent / "reference" / "glu" / "spec.yaml").read_bytes()).hexdigest()

KEY = keyfile.derive(("7a11" * 16).encode())

CANVAS_ROSTER = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Current Score,Final Score
    Points Possible,,,,,,
,,,,,Muted,
"Lovelace, Ada",1001,S1001,alice,CS336 L01,,
"Babbage, Charles",1002,S1002,cbabbage,CS336 L01,,
"Hopper, Grace",1003,S1003,ghopper,CS336 L02,,
"Turing, Alan",1004,S1004,aturing,CS336 L02,,
"Student, Test",1099,,,CS336 L01,,
"""


def result(triton: float = 26.0, cuda: float = 26.0, perf: tuple[float, float] = (12.0, 12.0), *, device: str = "cuda",
           gpu: str | None = "NVIDIA H200", student: str | None = None) -> dict:
    """A results.json of the grader's shape: triton/cuda x correctness/performance, 26 + 12 points each part.
    device "cpu": the performance tests are skipped (0 points, as a CPU grade writes them)."""
    tests = []
    for part, corr in (("triton", triton), ("cuda", cuda)):
        tests.append({"name": f"{part} / correctness / all cases", "score": corr, "max_score": 26.0,
                      "status": "passed" if corr == 26.0 else "failed", "tags": [part, "correctness"], "output": "",
                      "extra_data": {"state": "passed" if corr == 26.0 else "failed", "case": "all cases"}})
        p = perf[0] if part == "triton" else perf[1]
        state = "skipped" if device == "cpu" else ("passed" if p == 12.0 else "failed")
        tests.append({"name": f"{part} / performance / lecture_16k", "score": 0.0 if device == "cpu" else p,
                      "max_score": 12.0, "status": "passed" if state == "passed" else "failed",
                      "tags": [part, "performance", *(["skipped"] if state == "skipped" else [])], "output": "",
                      "extra_data": {"state": state, "case": "lecture_16k"}})
    extra: dict = {"problem": "glu", "submission": "assignment", "device": device,
                   "points_not_earnable_here": 24.0 if device == "cpu" else 0.0, "performance": {}}
    if device == "cuda" and gpu:
        extra["performance"] = {"device": {"name": gpu}, "cases": {}}
    if student is not None:
        extra["student_id"] = student
    doc = {"score": round(sum(t["score"] for t in tests), 4), "max_score": 76.0, "output": "", "tests": tests,
           "extra_data": extra}
    tareport.parse_results(json.dumps(doc).encode())  # the report's own check (schema included): must pass
    return doc


def signed(doc: dict, student: str | None, files: str | None = None) -> dict:
    """doc as an official grade of `student` writes it: an identity block (grader/signing.py), then the signature.
    files: the graded files' hash (default: one of the student's own)."""
    import hashlib

    doc = json.loads(json.dumps(doc))
    doc["extra_data"]["identity"] = signing.new_identity(
        student_id=student, files_sha256=files or hashlib.sha256(str(student).encode()).hexdigest(), problem="glu",
        spec_sha256=GLU_SPEC_SHA256)
    return signing.sign(doc, KEY.signing)


def write(p: Path, doc: dict | str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return p


def rows_of(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def canvas_reads(path: Path) -> tuple[str, float | None, dict[str, str]]:
    """What Canvas's gradebook importer takes from the file (app/models/gradebook_importer.rb): the header must
    start Student, ID, then SIS User ID and SIS Login ID, with Section the last student column; a "Title (123)"
    header is assignment 123; a row whose first cell holds "Points Possible" gives the points. Returns the column,
    its points possible, and SIS Login ID (or ID) -> score for every student row."""
    rows = rows_of(path)
    head = rows[0]
    assert "Student" in head[0] and "ID" in head[1], head
    assert re.fullmatch(r"SIS\s+User\s+ID", head[2]) and re.fullmatch(r"SIS\s+Login\s+ID", head[3]), head
    assert head[4] == "Section" and len(head) == 6, head
    points = None
    scores = {}
    for r in rows[1:]:
        assert len(r) == 6, r
        if "Points Possible" in r[0]:
            points = float(r[5])
            continue
        scores[r[3] or r[1]] = r[5]
    return head[5], points, scores


def class_dir(root: Path) -> None:
    write(root / "alice" / "results.json", result())                                    # SIS Login ID, an H200 grade
    write(root / "S1002" / "results" / "results.json", result(device="cpu", cuda=20.0))   # SIS User ID, graded on CPU
    write(root / "carol" / "results.json", result(triton=20.0, student="1003"))           # Canvas ID via extra_data
    write(root / "zed" / "results.json", result(triton=0.0, cuda=0.0))                     # not on the roster


# ----------------------------------------------------------------------------------------------------------------
# Rosters


def test_a_canvas_export_roster_reads_its_students_only(tmp_path):
    r = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    assert r.columns == {f: f for f in tareport.CANVAS_HEADER}
    assert [x["SIS Login ID"] for x in r.rows] == ["alice", "cbabbage", "ghopper", "aturing", ""]
    assert r.rows[0] == {"Student": "Lovelace, Ada", "ID": "1001", "SIS User ID": "S1001", "SIS Login ID": "alice",
                         "Section": "CS336 L01"}
    assert r.keys[0] == {"1001", "s1001", "alice"} and r.skipped == 0


def test_a_plain_roster_with_other_header_spellings(tmp_path):
    text = "student_id;Name;E-mail;section\n9001;Ada Lovelace;ada@uni.edu;A\n9002;Alan Turing;alan@uni.edu;B\n;nobody;;A\n"
    r = tareport.read_roster(write(tmp_path / "r.csv", text))
    assert r.columns == {"SIS User ID": "student_id", "Student": "Name", "SIS Login ID": "E-mail", "Section": "section"}
    assert r.rows[1] == {"Student": "Alan Turing", "ID": "", "SIS User ID": "9002", "SIS Login ID": "alan@uni.edu", "Section": "B"}
    assert r.skipped == 1  # a row with no id at all


@pytest.mark.parametrize("text, why", [
    ("name,section\nAda,A\n", "no id column"),
    ("", "empty"),
    (b"ID,Student\n1,Ren\xe9\n", "not UTF-8"),
])
def test_an_unusable_roster_is_one_line_and_exit_2(tmp_path, capsys, text, why):
    p = tmp_path / "roster.csv"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(tareport.RosterError, match=why):
        tareport.read_roster(p)
    root = tmp_path / "class"
    class_dir(root)
    assert cli.main(["report", str(root), "--roster", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader error: --roster ") and why in err and len(err.strip().splitlines()) == 1
    assert not (root / "grades.csv").exists()  # nothing written


# ----------------------------------------------------------------------------------------------------------------
# grades_canvas.csv


def test_canvas_csv_from_a_canvas_roster(tmp_path, capsys):
    root, out = tmp_path / "class", tmp_path / "ta"
    class_dir(root)
    roster = write(tmp_path / "roster.csv", CANVAS_ROSTER)
    # S1002's CPU grade is not final: imported only with --allow-partial (test_a_canvas_import_that_is_not_final_*)
    assert cli.main(["report", str(root), "--out", str(out), "--roster", str(roster), "--allow-partial"]) == 0
    printed = capsys.readouterr().out
    column, points, scores = canvas_reads(out / "grades_canvas.csv")
    # Not "GLU kernels (76)": Canvas would read 76 as an assignment id, and make a new assignment at every import.
    assert column == "GLU kernels" and points == 76.0
    assert scores == {"alice": "76", "cbabbage": "46", "ghopper": "70", "aturing": "", "1099": ""}
    rows = rows_of(out / "grades_canvas.csv")
    assert rows[0][:5] == list(tareport.CANVAS_HEADER) and rows[1][0] == "Points Possible"
    assert [r[0] for r in rows[2:]] == ["Lovelace, Ada", "Babbage, Charles", "Hopper, Grace", "Turing, Alan", "Student, Test"]
    assert "grades_canvas.csv: 3 of 5 roster student(s) with a score in column 'GLU kernels' (points possible 76); " \
           "2 without one, 1 result(s) matched to no one" in printed
    page = (out / "class_summary.html").read_text(encoding="utf-8")
    section = page.split("Roster: grades_canvas.csv", 1)[1].split("<h2>", 1)[0]
    assert "(3 of 5 students with a score)" in section
    missing = section.split("Roster students without a score (2)", 1)[1].split("<h3>", 1)[0]
    assert "Turing, Alan" in missing and "Student, Test" in missing and "no results" in missing
    unmatched = section.split("Results not in grades_canvas.csv (1)", 1)[1]
    assert "<td>zed</td>" in unmatched and "matches no roster student" in unmatched


def only_triton_no_perf(doc: dict) -> dict:
    """doc as `grade --only triton --no-perf` writes it: the Triton part's correctness rows only."""
    doc = json.loads(json.dumps(doc))
    doc["tests"] = [t for t in doc["tests"] if t["tags"][:2] == ["triton", "correctness"]]
    doc["score"] = doc["max_score"] = sum(t["score"] for t in doc["tests"])
    return doc


def test_a_canvas_import_that_is_not_final_is_refused_unless_allow_partial(tmp_path, capsys):
    """Issue 40 item 4: a CPU grade (48/76 for a perfect student), an --only triton --no-perf grade and a --case
    grade are true grades of what ran, not of the assignment: grades_canvas.csv under "Points Possible 76" is not
    written while it would import one. The terminal names the rows, why, and --allow-partial (one line, exit 2);
    grades.csv's `final` column and class_summary.html say which rows and why. Decided from typed fields: a note
    that says "final" changes nothing."""
    root, out = tmp_path / "class", tmp_path / "ta"
    write(root / "alice" / "results.json", result())                                    # final: an H200 grade
    write(root / "S1002" / "results" / "results.json", result(device="cpu"))            # perfect, on a CPU: 52/76
    write(root / "ghopper" / "results.json", only_triton_no_perf(result()))             # 26 of one part
    partial = result()
    partial["extra_data"]["partial_cases"] = ["tiny_*"]
    partial["output"] = "final grade: every case ran"                                   # hostile text: not read
    write(root / "S1004" / "results.json", partial)
    roster = write(tmp_path / "roster.csv", CANVAS_ROSTER)
    write(out / "grades_canvas.csv", "an older import\n")
    assert cli.main(["report", str(root), "--out", str(out), "--roster", str(roster)]) == 2
    printed = capsys.readouterr()
    err = [line for line in printed.err.splitlines() if line.startswith("grader error:")]
    assert len(err) == 1, printed.err
    assert "grades_canvas.csv not written" in err[0] and "--allow-partial" in err[0], err
    assert "S1002 (graded without a GPU" in err[0] and "ghopper (triton: no performance results " \
        "(--no-perf); part cuda not graded (--only))" in err[0] and "S1004 (a partial grade" in err[0], err
    assert "alice" not in err[0]
    assert not (out / "grades_canvas.csv").exists(), "an older import must not be left to be imported by mistake"
    final = {r["student_id"]: r["final"] for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert final["alice"] == "yes" and final["S1002"].startswith("no: graded without a GPU")
    assert final["ghopper"] == "no: triton: no performance results (--no-perf); part cuda not graded (--only)"
    assert final["S1004"].startswith("no: a partial grade")
    page = (out / "class_summary.html").read_text(encoding="utf-8")
    assert "Grades that are not final (3)" in page and "grades_canvas.csv NOT WRITTEN (3 score(s) not final)" in page
    # --allow-partial: written, and the summary says which imported scores are not final
    assert cli.main(["report", str(root), "--out", str(out), "--roster", str(roster), "--allow-partial"]) == 0
    _, points, scores = canvas_reads(out / "grades_canvas.csv")
    assert points == 76.0 and scores["alice"] == "76" and scores["cbabbage"] == "52" and scores["ghopper"] == "26"
    page = (out / "class_summary.html").read_text(encoding="utf-8")
    assert "3 imported score(s) are not final grades, written with --allow-partial" in page
    # every score final: written without the flag
    for sid in ("S1002/results", "ghopper", "S1004"):
        write(root / sid / "results.json", result())
    assert cli.main(["report", str(root), "--out", str(tmp_path / "ok"), "--roster", str(roster)]) == 0
    assert canvas_reads(tmp_path / "ok" / "grades_canvas.csv")[2]["ghopper"] == "76"


def test_allow_partial_needs_a_roster(tmp_path, capsys):
    root = tmp_path / "class"
    class_dir(root)
    assert cli.main(["report", str(root), "--allow-partial"]) == 2
    assert "--allow-partial needs --roster" in capsys.readouterr().err


def test_the_canvas_exports_own_assignment_column_is_reused(tmp_path):
    root = tmp_path / "class"
    class_dir(root)
    head, rest = CANVAS_ROSTER.split("\n", 1)
    roster = tareport.read_roster(write(tmp_path / "roster.csv", head + ",GLU kernels (48213)\n" + rest.replace(",,\n", ",,,\n")))
    tareport.write_ta_report(root, tmp_path / "a", roster=roster, allow_partial=True)  # S1002's is a CPU grade
    assert canvas_reads(tmp_path / "a" / "grades_canvas.csv")[0] == "GLU kernels (48213)"
    tareport.write_ta_report(root, tmp_path / "b", roster=roster, canvas_column_name="Lab 3: fused GLU", allow_partial=True)
    column, points, scores = canvas_reads(tmp_path / "b" / "grades_canvas.csv")
    assert column == "Lab 3: fused GLU" and points == 76.0 and scores["alice"] == "76"


def test_a_plain_roster_matches_ids_and_emails(tmp_path):
    root = tmp_path / "class"
    write(root / "9001" / "results.json", result())  # student_id column
    write(root / "alan@uni.edu" / "results.json", result(cuda=0.0))  # the email itself
    write(root / "grace" / "results.json", result(triton=0.0))  # an email's local part (no full match)
    roster = tareport.read_roster(write(tmp_path / "r.csv", "student_id,name,email\n9001,Ada,ada@uni.edu\n"
                                        "9002,Alan,alan@uni.edu\n9003,Grace,grace@uni.edu\n9004,Edsger,edsger@uni.edu\n"))
    tareport.write_ta_report(root, tmp_path / "ta", roster=roster)
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores == {"ada@uni.edu": "76", "alan@uni.edu": "50", "grace@uni.edu": "50", "edsger@uni.edu": ""}


def test_two_results_for_one_student_or_unsigned_results_leave_the_score_empty(tmp_path):
    root = tmp_path / "class"
    write(root / "alice" / "results.json", signed(result(), "alice"))
    write(root / "S1001" / "results.json", signed(result(triton=1.0), "S1001"))  # Ada again, by her SIS User ID
    write(root / "cbabbage" / "results.json", result())  # not signed: the grader did not write it
    write(root / "ghopper" / "results.json", signed(result(cuda=3.0), "ghopper"))
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing, roster=roster)
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores == {"alice": "", "cbabbage": "", "ghopper": "53", "aturing": "", "1099": ""}
    page = (tmp_path / "ta" / "class_summary.html").read_text(encoding="utf-8")
    assert "several results: S1001, alice (choose one by hand)" in page
    assert "results not signed by the grader (unsigned): cbabbage" in page
    # Without the key the signatures are not checked, and the unsigned file's score goes in.
    tareport.write_ta_report(root, tmp_path / "nokey", roster=roster)
    assert canvas_reads(tmp_path / "nokey" / "grades_canvas.csv")[2]["cbabbage"] == "76"


def test_canvas_column_needs_a_roster(tmp_path, capsys):
    root = tmp_path / "class"
    class_dir(root)
    assert cli.main(["report", str(root), "--canvas-column", "GLU"]) == 2
    assert "--canvas-column needs --roster" in capsys.readouterr().err
    assert cli.main(["report", str(root), "--roster", str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().err.startswith("grader error: --roster ")


def test_a_column_named_like_its_points_gets_a_note(tmp_path, capsys):
    root = tmp_path / "class"
    class_dir(root)
    roster = write(tmp_path / "roster.csv", CANVAS_ROSTER)
    assert cli.main(["report", str(root), "--roster", str(roster), "--canvas-column", "GLU kernels (76)",
                     "--allow-partial"]) == 0  # class_dir has a CPU grade
    assert "note: Canvas reads '(76)' in 'GLU kernels (76)' as the id of a Canvas assignment" in capsys.readouterr().out
    assert canvas_reads(root / "grades_canvas.csv")[0] == "GLU kernels (76)"  # as asked


# ----------------------------------------------------------------------------------------------------------------
# Gradescope's export layout

METADATA = """---
:submission_1234567:
  :submitters:
  - :name: Ada Lovelace
    :sid: S1001
    :email: ada@uni.edu
  :created_at: 2026-03-01 10:15:00.123456789 -08:00
  :score: !ruby/object:BigDecimal 18:0.76e2
  :status: processed
:submission_2345678:
  :submitters:
  - :name: Grace Hopper
    :sid: S1003
    :email: grace@uni.edu
  - :name: Alan Turing
    :sid: S1004
    :email: alan@uni.edu
  :created_at: 2026-03-02 11:00:00.000000000 -08:00
:submission_3456789:
  :submitters:
  - :name: Someone Else
    :sid: X999
    :email: else@other.edu
"""


def test_gradescope_export_layout_names_the_students(tmp_path):
    root = tmp_path / "assignment_987_export"
    write(root / "submission_metadata.yml", METADATA)
    write(root / "submission_1234567" / "results" / "results.json", result())
    write(root / "submission_2345678" / "results.json", result(cuda=10.0))
    write(root / "submission_3456789" / "results.json", result(triton=0.0))
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    csv_path, html_path, _, bad = tareport.write_ta_report(root, tmp_path / "ta", roster=roster)
    assert not bad
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(csv_path.read_text(encoding="utf-8")))}
    head = list(next(iter(rows.values())))
    assert head[:4] == ["student_id", "name", "email", "sid"] and head[-6:] == ["device", "containment", "final", "total", "max", "flags"]
    assert rows["submission_1234567"]["name"] == "Ada Lovelace" and rows["submission_1234567"]["sid"] == "S1001"
    assert rows["submission_2345678"]["name"] == "Grace Hopper; Alan Turing"
    assert rows["submission_2345678"]["email"] == "grace@uni.edu; alan@uni.edu"
    # A group's score goes to every member; SIDs match the roster's SIS User ID.
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores == {"alice": "76", "cbabbage": "", "ghopper": "60", "aturing": "60", "1099": ""}
    page = html_path.read_text(encoding="utf-8")
    assert "submission_1234567 (Ada Lovelace)" in page
    assert "submission_3456789" in page.split("Results not in grades_canvas.csv", 1)[1]


def test_a_broken_metadata_file_is_listed_not_fatal(tmp_path):
    root = tmp_path / "export"
    write(root / "submission_metadata.yml", ":submission_1: [unclosed\n")
    write(root / "submission_1" / "results.json", result())
    csv_path, _, subs, bad = tareport.write_ta_report(root)
    assert [b.path for b in bad] == ["submission_metadata.yml"] and "not YAML" in bad[0].reason
    assert [s.student for s in subs] == ["submission_1"] and "name" not in csv_path.read_text().splitlines()[0]


# ----------------------------------------------------------------------------------------------------------------
# grades.csv's device column, the no-GPU banner, links to the students' reports


def test_device_column_and_the_no_gpu_banner(tmp_path, capsys):
    root = tmp_path / "class"
    write(root / "a" / "results.json", result())
    write(root / "b" / "results.json", result(device="cpu"))
    write(root / "c" / "results.json", result(gpu=None))  # a GPU grade with --no-perf: no model recorded
    assert cli.main(["report", str(root)]) == 0
    assert "warning: 1 grade(s) made without a GPU" in capsys.readouterr().out
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO((root / "grades.csv").read_text()))}
    assert {k: r["device"] for k, r in rows.items()} == {"a": "NVIDIA H200", "b": "CPU", "c": "GPU (model not recorded)"}
    assert rows["b"]["total"] == "52" and rows["b"]["triton_performance"] == "0"
    page = (root / "class_summary.html").read_text(encoding="utf-8")
    banner = re.search(r'<p class="note"><b>1 of 3 grade\(s\) were made without a GPU</b>.*?</p>', page)
    assert banner and "performance points" in banner.group(0) and "Regrade them on a GPU: b." in banner.group(0)
    # No banner when every grade had a GPU.
    (root / "b" / "results.json").unlink()
    (root / "b").rmdir()
    tareport.write_ta_report(root)
    assert "without a GPU" not in (root / "class_summary.html").read_text(encoding="utf-8")


def test_links_to_each_students_report_are_relative(tmp_path):
    root = tmp_path / "class"
    for name in ("alice", "bob smith#2"):
        write(root / name / "results" / "results.json", result())
        write(root / name / "results" / "report.html", f"<html>{name}</html>")
    write(root / "carol" / "results.json", result())  # no report.html: no link
    for out in (root, tmp_path / "elsewhere" / "ta"):
        _, html_path, _, _ = tareport.write_ta_report(root, out)
        page = html_path.read_text(encoding="utf-8")
        hrefs = re.findall(r'<a href="([^"]+)">([^<]+)</a>', page)
        linked = {text: href for href, text in hrefs}
        assert set(linked) == {"alice", "bob smith#2"}, hrefs
        for text, href in linked.items():
            assert not href.startswith("/") and "://" not in href and " " not in href and "#" not in href
            target = (html_path.parent / unquote(href)).resolve()
            assert target == (root / text / "results" / "report.html").resolve()
        assert "<td>carol</td>" in page


def test_the_class_report_without_a_roster_is_unchanged_in_shape(tmp_path):
    """No roster: no grades_canvas.csv, no roster section; the columns are the ones grades.csv always had, plus
    device, containment and final (just before total)."""
    root = tmp_path / "class"
    class_dir(root)
    csv_path, html_path, _, _ = tareport.write_ta_report(root)
    assert not (root / "grades_canvas.csv").exists() and "Roster:" not in html_path.read_text(encoding="utf-8")
    assert csv_path.read_text().splitlines()[0] == ("student_id,triton_correctness,triton_performance,cuda_correctness,"
                                                    "cuda_performance,device,containment,final,total,max,flags")


# ----------------------------------------------------------------------------------------------------------------
# What a student's own folder can hold: never another student's row, submitters or score


@pytest.mark.parametrize("entry", ["../submission_2", ".", ".."])
def test_metadata_a_student_uploaded_names_nobody(tmp_path, entry):
    """A Gradescope submission may hold any file, a submission_metadata.yml too: only the export's own file (at the
    class root) names submitters. Before, one in a submission folder was read as well and overrode the export's:
    '../submission_2' gave Charles's folder to Ada, moving his signed 76 into her Canvas cell; '.' made Ada's own
    folder Charles's (a copy of his grade there would then have been his, in her row)."""
    root = tmp_path / "assignment_987_export"
    write(root / "submission_metadata.yml",
          ":submission_1:\n  :submitters:\n  - :name: Ada\n    :sid: S1001\n"
          ":submission_2:\n  :submitters:\n  - :name: Charles\n    :sid: S1002\n")
    write(root / "submission_1" / "results" / "results.json", signed(result(triton=0.0, cuda=0.0, perf=(0.0, 0.0)),
                                                                     "submission_1"))
    write(root / "submission_2" / "results" / "results.json", signed(result(), "submission_2"))
    # Ada's upload: her own metadata file.
    who = {"../submission_2": "Ada\n    :sid: S1001", ".": "Charles\n    :sid: S1002", "..": "Ada\n    :sid: S1001"}
    write(root / "submission_1" / "submission_metadata.yml", f"'{entry}':\n  :submitters:\n  - :name: {who[entry]}\n")
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    _, _, subs, _ = tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing, roster=roster)
    assert {s.key: [p["sid"] for p in s.submitters] for s in subs} == {"submission_1": ["S1001"],
                                                                       "submission_2": ["S1002"]}
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores["alice"] == "0" and scores["cbabbage"] == "76", scores


def test_the_exports_own_metadata_may_not_point_outside_its_folders(tmp_path):
    root = tmp_path / "export"
    write(root / "submission_metadata.yml",
          "'../elsewhere':\n  :submitters:\n  - :name: Ada\n    :sid: S1001\n"
          ":submission_1:\n  :submitters:\n  - :name: Charles\n    :sid: S1002\n")
    write(root / "submission_1" / "results.json", result())
    _, _, subs, bad = tareport.write_ta_report(root)
    assert [s.submitters for s in subs] == [[{"name": "Charles", "sid": "S1002", "email": ""}]]
    assert any("'../elsewhere'" in b.reason and "ignored" in b.reason for b in bad), bad


def test_a_file_deep_in_a_students_folder_is_that_students_row(tmp_path):
    """A classmate's signed file copied to alice/cbabbage/results.json is alice's row (replayed there), not a second
    result in Charles's row that would withhold his own (several results for one student)."""
    root = tmp_path / "class"
    write(root / "alice" / "results.json", signed(result(triton=0.0), "alice"))
    write(root / "cbabbage" / "results.json", signed(result(), "cbabbage"))
    write(root / "alice" / "cbabbage" / "results.json", signed(result(), "cbabbage"))
    write(root / "ghopper" / "grade-results" / "glu" / "results.json", signed(result(cuda=3.0), "ghopper"))  # as kept
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    _, _, subs, _ = tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing, roster=roster)
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores["cbabbage"] == "76" and scores["ghopper"] == "53", scores
    copy = next(s for s in subs if s.path == "alice/cbabbage/results.json")
    assert copy.key == "alice" and copy.signature == signing.REPLAYED


def test_with_the_key_an_unsigned_file_cannot_name_another_students_row(tmp_path):
    """extra_data.student_id (the row of a file from before identities were signed) is read only without the key:
    with it, an unsigned file in alice's folder claiming 'cbabbage' stays in alice's row, and Charles keeps his."""
    root = tmp_path / "class"
    write(root / "alice" / "results.json", result(student="cbabbage"))
    write(root / "cbabbage" / "results.json", signed(result(), "cbabbage"))
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    _, _, subs, _ = tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing, roster=roster)
    assert canvas_reads(tmp_path / "ta" / "grades_canvas.csv")[2]["cbabbage"] == "76"
    assert {s.path: s.key for s in subs} == {"alice/results.json": "alice", "cbabbage/results.json": "cbabbage"}


def test_a_folder_nested_1100_deep_in_the_class_folder_is_listed_and_the_class_reported(tmp_path):
    """Path.rglob recursed: a submission folder nested 1,100 deep stopped the TA report with RecursionError."""
    import os

    root = tmp_path / "class"
    write(root / "alice" / "results.json", result())
    write(root / "cbabbage" / "results.json", result(triton=0.0))
    here = os.getcwd()
    levels = 1100
    try:
        os.chdir(root / "cbabbage")
        for _ in range(levels):
            os.mkdir("d")
            os.chdir("d")
        os.chdir(here)
        _, _, subs, bad = tareport.write_ta_report(root, tmp_path / "ta")
        assert sorted(s.key for s in subs) == ["alice", "cbabbage"]
        assert [b.reason for b in bad] == ["folders nested over 32 deep: not read below"]
    finally:  # from the bottom up: shutil.rmtree (and pytest's clean-up of old temporary folders) recurse
        os.chdir(root / "cbabbage")
        for _ in range(levels - 1):
            os.chdir("d")
        for _ in range(levels):
            os.rmdir("d")
            os.chdir("..")
        os.chdir(here)


def test_a_valid_grade_made_against_another_version_of_the_spec_is_counted_and_flagged(tmp_path):
    """A student's own earlier signed grade (another term's, or from before a spec fix) is still theirs and valid,
    but not comparable with the class's: the signed spec hash differs from the class's spec, and the row says so."""
    import hashlib as _h

    root = tmp_path / "class"
    write(root / "alice" / "results.json", signed(result(), "alice"))
    old = json.loads(json.dumps(result(triton=20.0)))
    old["extra_data"]["identity"] = signing.new_identity(
        student_id="ghopper", files_sha256=_h.sha256(b"g").hexdigest(), problem="glu", spec_sha256="ee" * 32)
    write(root / "ghopper" / "results.json", signing.sign(old, KEY.signing))
    _, _, subs, _ = tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing)
    by = {s.key: s for s in subs}
    assert by["ghopper"].counted and any("another version of glu's spec.yaml" in f for f in by["ghopper"].flags)
    assert not any("another version" in f for f in by["alice"].flags)


def test_of_several_results_the_one_that_counts_is_imported_and_the_others_listed(tmp_path):
    """A Gradescope submission holds the autograder's results/results.json and may hold a results.json the student
    uploaded (their own local grade, unsigned): the signed one is imported, the other listed, not a blank cell.
    Two that count are still a conflict for a person."""
    root = tmp_path / "class"
    write(root / "alice" / "results" / "results.json", signed(result(cuda=20.0), "alice"))
    write(root / "alice" / "results.json", result())  # uploaded beside it: unsigned, 76
    write(root / "ghopper" / "results.json", signed(result(), "ghopper"))
    write(root / "S1003" / "results.json", signed(result(triton=0.0), "S1003"))  # Grace again, valid too
    roster = tareport.read_roster(write(tmp_path / "roster.csv", CANVAS_ROSTER))
    tareport.write_ta_report(root, tmp_path / "ta", key=KEY.signing, roster=roster)
    _, _, scores = canvas_reads(tmp_path / "ta" / "grades_canvas.csv")
    assert scores["alice"] == "70" and scores["ghopper"] == "", scores
    page = (tmp_path / "ta" / "class_summary.html").read_text(encoding="utf-8")
    assert "imported instead: results not signed by the grader (unsigned)" in page
    assert "several results: " in page
