"""What is the same for the whole class is said once (issue 40 item 5a): a grading host where the grade's uid could
not start the grader's Python made every grade advisory with the same sentence, and it was each row's first flag: 9
times in the batch output, in both HTML pages and in grades.csv, so that a real flag drowned."""

from __future__ import annotations

import csv
import io
import json

from test_roster import result, write

from grader import cli
from grader.batch import collect
from grader.report import tareport

HOST = "the unprivileged uid could not start this Python (PermissionError: [Errno 13] Permission denied)"


def advisory(doc: dict, *why: str) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["extra_data"]["official"] = False
    doc["extra_data"]["not_official_because"] = list(why)
    return doc


def flagged_performance(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    t = next(t for t in doc["tests"] if t["tags"][:2] == ["triton", "performance"])
    t["extra_data"]["findings"] = [{"code": "hidden-work", "severity": "flag", "text": "work hidden off the clock"}]
    return doc


def test_a_reason_every_grade_gives_is_a_class_note_not_a_flag_in_every_row(tmp_path, capsys):
    root, out = tmp_path / "class", tmp_path / "ta"
    for sid in ("s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"):
        write(root / sid / "results.json", advisory(result(), HOST))
    write(root / "s9" / "results.json", advisory(flagged_performance(result()), HOST, "--staff grades the staff solutions"))
    assert cli.main(["report", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count(HOST) == 1 and "the whole class: all 9 grades are advisory" in printed, printed
    assert "9 submission(s) read, 1 flagged" in printed
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    by = {r["student_id"]: r for r in rows}
    assert all(by[f"s{i}"]["flags"] == "" for i in range(1, 9))
    assert by["s9"]["flags"].startswith("advisory: not an official grade (unsigned): --staff grades the staff")
    assert HOST not in by["s9"]["flags"] and "FLAG triton" in by["s9"]["flags"]
    assert sorted(by) == [f"s{i}" for i in range(1, 10)]  # every row a submission: an LMS import relies on it
    assert HOST not in (out / "grades.csv").read_text(encoding="utf-8")
    assert (out / "class_notes.txt").read_text(encoding="utf-8").count(HOST) == 1 and "class_notes.txt" in printed
    page = (out / "class_summary.html").read_text(encoding="utf-8")
    assert page.count("could not start this Python") == 1 and "Flagged submissions (1)" in page


def test_one_grade_cannot_make_a_class_note_nor_hide_its_own_advisory_line(tmp_path):
    """A reason counts as the class's only when every row states it: one official grade beside advisory ones, or a
    single file, leaves every advisory row its own flag."""
    root = tmp_path / "class"
    write(root / "a" / "results.json", advisory(result(), HOST))
    write(root / "b" / "results.json", advisory(result(), HOST))
    official = result()
    official["extra_data"]["official"] = True
    write(root / "c" / "results.json", official)
    (tmp_path / "ta").mkdir()
    (tmp_path / "ta" / "class_notes.txt").write_text("last run's note\n", encoding="utf-8")
    r = tareport.write_class_report(root, tmp_path / "ta")
    assert r.cls.notes == [] and not (tmp_path / "ta" / "class_notes.txt").exists()  # no stale note outlives a run
    assert all(HOST in s.flags[0] for s in r.cls.subs if s.student in ("a", "b"))
    alone = tmp_path / "alone"
    write(alone / "a" / "results.json", advisory(result(), HOST))
    r = tareport.write_class_report(alone, tmp_path / "ta2")
    assert r.cls.notes == [] and HOST in r.cls.subs[0].flags[0]


def test_the_batch_says_a_class_note_once(capsys):
    s = collect.Summary([], {str(st): 0 for st in collect.Status}, notes=["all 9 grades are advisory: " + HOST],
                        flagged=[("s9", "FLAG triton / lecture_16k: work hidden off the clock")])
    collect.print_summary(s)
    printed = capsys.readouterr().out
    assert printed.count(HOST) == 1 and "flagged (1):" in printed
