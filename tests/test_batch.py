"""`python -m grader batch` on CPU (grader/batch/): the local engine with fake GPU slots, resumability, faults.

Most tests replace the grade itself with tests/batch_fake_grade.py (GRADER_BATCH_GRADE_COMMAND), which is quick,
logs what each task saw (CUDA_VISIBLE_DEVICES, its slot, its scratch, its start and end) and fails on purpose
where a submission's `faults` file says so; a fake nvidia-smi on PATH plays the GPUs. Everything else (discovery,
keys, the task wrapper, the engine, the install of results, the TA report) is the real code. The tests marked slow
grade real submissions on CPU and compare each score with a single `grade` of the same submission.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import cli, keyfile, signing
from grader.batch import EXIT_INFRA, EXIT_NOT_GRADABLE, EXIT_OK, EXIT_USAGE, engines, progress
from grader.classfiles import discover, state
from grader.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
FAKE = Path(__file__).resolve().parent / "batch_fake_grade.py"

FAKE_SMI = """#!/bin/sh
# A fake nvidia-smi: GPU 0 an H200 at 40 C, GPU 1 an H100 at 88 C slowing its clocks (hw thermal, 0x40).
id=""; prev=""
for a in "$@"; do [ "$prev" = "-i" ] && id="$a"; prev="$a"; done
case "$1" in --query-gpu=index,uuid) printf '0, GPU-0000\n1, GPU-1111\n'; exit 0 ;; esac
[ -n "$FAKE_SMI_FAIL" ] && exit 6
case "$id" in
  0) echo "0, NVIDIA H200, GPU-0000, 580.65.06, P0, 1980, 3201, 1980, 40, 120.50, 0x0000000000000000" ;;
  1) echo "1, NVIDIA H100 80GB HBM3, GPU-1111, 580.65.06, P0, 1410, 2619, 1980, 88, 650.00, 0x0000000000000040" ;;
  *) echo "No devices were found" >&2; exit 6 ;;
esac
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """The fake grade (and its log folder) for every task of this test."""
    log = tmp_path / "fakelog"
    monkeypatch.setenv("GRADER_BATCH_GRADE_COMMAND", json.dumps([sys.executable, str(FAKE)]))
    monkeypatch.setenv("FAKE_GRADE_LOG", str(log))
    monkeypatch.setenv("FAKE_GRADE_SLEEP", "0.3")
    return log


@pytest.fixture
def smi(tmp_path, monkeypatch):
    b = tmp_path / "bin"
    b.mkdir()
    (b / "nvidia-smi").write_text(FAKE_SMI)
    (b / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{os.environ['PATH']}")
    return b


def make_class(root: Path, students: dict[str, dict[str, str]]) -> Path:
    for sid, files in students.items():
        d = root / sid
        d.mkdir(parents=True)
        (d / "glu_triton.py").write_text(files.pop("glu_triton.py", f"# {sid}'s kernel\n"))
        for name, text in files.items():
            (d / name).write_text(text)
    return root


def calls(log: Path) -> list[dict]:
    p = log / "calls.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def batch(*args: str | Path) -> int:
    return cli.main(["batch", *map(str, args)])


def results(out: Path, sid: str) -> dict:
    return json.loads((out / sid / "results.json").read_text())


def attempts(out: Path, sid: str) -> list[dict]:
    return [a for a in state.attempts(out, sid) if a.get("event") is None]


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_each_task_is_pinned_to_its_own_slot_and_no_slot_runs_two(tmp_path, fake, capsys):
    subs = make_class(tmp_path / "class", {f"s{i}": {"score": str(i)} for i in range(6)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "3,5", "--per-gpu", "1", "--device", "cpu", "--no-perf") == EXIT_OK
    got = calls(fake)
    assert len(got) == 6
    for c in got:  # pinned: the GPU the slot owns, and the slot's name says which
        assert c["cuda"] in ("3", "5") and c["slot"] == f"gpu{c['cuda']}", c
    assert {c["cuda"] for c in got} == {"3", "5"}  # both slots were used
    for gpu in ("3", "5"):
        spans = sorted((c["start"], c["end"]) for c in got if c["cuda"] == gpu)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), f"two grades at once on {gpu}"
    assert len({c["tmpdir"] for c in got}) == 6  # every grade its own scratch
    for i in range(6):
        r = results(out, f"s{i}")
        assert r["score"] == float(i)
        on = r["extra_data"]["graded_on"]
        assert on["engine"] == "local" and on["slot"] in ("gpu3", "gpu5") and on["gpu"] is None  # no nvidia-smi
        assert on["result_key"] == state.read_record(out, f"s{i}")["key"]
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    assert sorted(r["student_id"] for r in rows) == [f"s{i}" for i in range(6)]
    assert (out / "batch_summary.json").is_file() and (out / "class_summary.html").is_file()


def test_without_jsonschema_every_grade_is_kept_and_the_missing_report_is_said_at_start_and_end(
    tmp_path, fake, monkeypatch, capsys
):
    # A GPU host with torch but not the report's jsonschema: the class is graded, nothing crashes at the end,
    # and the TA is told before grading starts and again after it, with the command that makes the report later.
    from grader.report import validate

    monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` raises ImportError
    monkeypatch.setattr(validate, "_VALIDATOR", None)
    subs = make_class(tmp_path / "class", {f"s{i}": {"score": str(i)} for i in range(3)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "0", "--device", "cpu", "--no-perf") == EXIT_OK
    assert [results(out, f"s{i}")["score"] for i in range(3)] == [0.0, 1.0, 2.0]
    assert not (out / "grades.csv").exists()
    said = capsys.readouterr()
    assert "jsonschema package is not installed" in said.err
    summary = json.loads((out / "batch_summary.json").read_text())
    assert "jsonschema" in summary["report_error"] and f"grader report {out.resolve()}" in summary["report_error"]
    assert "warning: the TA report was not written" in said.out


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_two_grades_share_a_gpu_but_never_its_timing(tmp_path, fake, monkeypatch):
    """--per-gpu 2: two slots per GPU, one lock file per GPU; the fake grade holds the lock shared for its first half
    (correctness) and alone for its second (timing), as grader/pipeline.py does."""
    monkeypatch.setenv("FAKE_GRADE_LOCKED", "1")
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(8)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "3,5", "--per-gpu", "2", "--device", "cpu", "--no-perf") == EXIT_OK
    got = calls(fake)
    assert len(got) == 8 and {c["slot"] for c in got} == {"gpu3.0", "gpu3.1", "gpu5.0", "gpu5.1"}
    locks = {c["cuda"]: {x["lock"] for x in got if x["cuda"] == c["cuda"]} for c in got}
    assert all(len(v) == 1 for v in locks.values()) and locks["3"] != locks["5"]  # one lock per GPU, its slots share it
    for gpu in ("3", "5"):
        mine = [c for c in got if c["cuda"] == gpu]
        grades = sorted((c["start"], c["end"]) for c in mine)
        assert any(a[1] > b[0] for a, b in zip(grades, grades[1:], strict=False)), f"no two grades overlapped on {gpu}"
        timings = sorted((c["timing_start"], c["timing_end"]) for c in mine)
        assert all(a[1] <= b[0] for a, b in zip(timings, timings[1:], strict=False)), f"two timings at once on {gpu}"
        for c in mine:  # nobody else's correctness ran inside a timing either
            others = [o for o in mine if o is not c]
            assert not any(o["shared_start"] < c["timing_end"] and c["timing_start"] < o["shared_end"] for o in others)
    assert all(results(out, f"s{i}")["score"] == 1.0 for i in range(8))


def test_the_gpu_lock_is_shared_by_stages_and_taken_alone_by_timing(tmp_path, monkeypatch):
    fcntl = pytest.importorskip("fcntl")
    from grader.performance import gpulock

    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv(gpulock.ENV, str(lock))
    other = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with gpulock.phase(False):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a second shared holder: allowed
            fcntl.flock(other, fcntl.LOCK_UN)
            with pytest.raises(BlockingIOError):  # an exclusive one (another grade's timing): not while we hold it
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with gpulock.phase(True):
            with pytest.raises(BlockingIOError):  # while timing, nobody else holds it, even shared
                fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on leaving the phase
    finally:
        os.close(other)
    assert lock.stat().st_mode & 0o777 == 0o600  # the grade's untrusted uid cannot open it
    monkeypatch.delenv(gpulock.ENV)
    with gpulock.phase(True) as waited:  # no lock file named: a single grade, nothing to share
        assert waited == 0.0


def test_the_batch_sees_when_a_gpu_s_lock_is_held_alone(tmp_path):
    """What the engine asks of a GPU being calibrated (gpulock.held_alone): held alone by another process, not when
    it is free or only shared."""
    fcntl = pytest.importorskip("fcntl")
    from grader.performance import gpulock

    lock = str(tmp_path / "gpu0.lock")
    assert not gpulock.held_alone(lock)
    other = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(other, fcntl.LOCK_SH)
        assert not gpulock.held_alone(lock)  # a grade's correctness stage: shared
        fcntl.flock(other, fcntl.LOCK_EX)
        assert gpulock.held_alone(lock)  # a calibration (or a grade's timing)
        fcntl.flock(other, fcntl.LOCK_UN)
        assert not gpulock.held_alone(lock)
    finally:
        os.close(other)


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_a_rerun_grades_only_what_changed_or_broke(tmp_path, fake):
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(5)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    assert len(calls(fake)) == 5
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    assert len(calls(fake)) == 5  # all done: nothing graded again
    (subs / "s1" / "glu_triton.py").write_text("# changed\n")  # a new submission
    (out / "s2" / "results.json").write_text('{"score": 1, "tes')  # a corrupt result
    shutil.rmtree(out / "s3")  # a lost result
    (out / "s4" / "batch.json").unlink()  # a result without its record
    before = {sid: attempts(out, sid) for sid in ("s0", "s1")}
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    again = sorted(Path(c["submission"]).name for c in calls(fake)[5:])
    assert again == ["s1", "s2", "s3", "s4"]
    assert attempts(out, "s0") == before["s0"]  # untouched
    assert results(out, "s2")["score"] == 1.0 and results(out, "s3")["score"] == 1.0
    # Changing an option that changes the grade (here --only) regrades everyone.
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf", "--only", "triton") == EXIT_OK
    assert len(calls(fake)) == 9 + 5


def test_an_infrastructure_fault_is_retried_on_another_slot(tmp_path, fake):
    subs = make_class(tmp_path / "class", {"flaky": {"faults": "3", "score": "2"}, "ok": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    a = attempts(out, "flaky")
    assert [x["outcome"] for x in a] == ["infrastructure", "graded"]
    assert a[0]["slot"] != a[1]["slot"]  # retried elsewhere
    assert results(out, "flaky")["score"] == 2.0  # the grade, made on the second try
    assert results(out, "flaky")["extra_data"]["graded_on"]["attempt"] == 2


def test_a_killed_task_is_retried_and_its_death_recorded(tmp_path, fake):
    subs = make_class(tmp_path / "class", {"oom": {"faults": "kill"}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    a = attempts(out, "oom")
    assert [x["outcome"] for x in a] == ["infrastructure", "graded"]
    assert a[0]["why"] == "task killed by signal 9"
    assert not list((out / ".staging").glob("*")) if (out / ".staging").exists() else True


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_faults_past_the_retries_are_not_graded_never_a_zero(tmp_path, fake, capsys):
    subs = make_class(tmp_path / "class", {"broken_node": {"faults": "3 3 3 3"}, "fine": {}})
    out = tmp_path / "out"
    code = batch(subs, "--out", out, "--slots", "2", "--no-perf", "--retries", "2")
    assert code == EXIT_INFRA
    assert len(attempts(out, "broken_node")) == 3  # the first try and two retries
    assert not (out / "broken_node" / "results.json").exists()
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    assert [r["student_id"] for r in rows] == ["fine"]  # no zero for it in the grades
    summary = json.loads((out / "batch_summary.json").read_text())
    st = {x["sid"]: x for x in summary["submissions"]}
    assert st["broken_node"]["status"] == "not graded: infrastructure" and "exit 3" in st["broken_node"]["why"]
    assert "broken_node: not graded: infrastructure" in capsys.readouterr().out
    # batch status agrees, and says how to go on (run the batch again: infrastructure faults get a new budget).
    capsys.readouterr()
    assert cli.main(["batch", "status", str(out)]) == EXIT_INFRA
    status = capsys.readouterr().out
    assert "1 done" in status and "1 not graded: infrastructure" in status and "[0] broken_node" in status
    # The next run retries it (a fresh budget), and the fault is gone now.
    (subs / "broken_node" / "faults").write_text("3 3 3 3")  # same content: same key
    (fake / "broken_node.count").write_text("4")  # its fifth call on: ok
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    assert results(out, "broken_node")["score"] == 1.0


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_one_submission_that_always_faults_retires_no_slot(tmp_path, fake):
    subs = make_class(tmp_path / "class", {"a_bug": {"faults": "3 3 3 3 3"}, "b": {}, "c": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "1", "--no-perf", "--retries", "3") == EXIT_INFRA
    assert len(attempts(out, "a_bug")) == 4  # four faults on the one slot, in a row
    assert results(out, "b")["score"] == 1.0 and results(out, "c")["score"] == 1.0  # the slot kept grading


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_a_slot_failing_every_submission_is_retired(tmp_path, fake, smi, monkeypatch):
    # GPU 7 is not there (the fake nvidia-smi knows 0 and 1): every task on it fails its GPU check.
    monkeypatch.setattr(engines, "host_gpus", lambda with_uuids=False: [])  # --gpus is not checked against the host
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(6)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "0,7", "--per-gpu", "1", "--no-perf") == EXIT_OK  # all on GPU 0
    on_7 = [a for i in range(6) for a in attempts(out, f"s{i}") if a["slot"] == "gpu7"]
    assert 1 <= len(on_7) <= 3 and all("no GPU visible" in a["why"] for a in on_7)
    assert all(results(out, f"s{i}")["extra_data"]["graded_on"]["slot"] == "gpu0" for i in range(6))


def test_a_refused_submission_is_not_retried(tmp_path, fake):
    subs = make_class(tmp_path / "class", {"empty": {"faults": "2 2 2"}, "fine": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "1", "--no-perf") == EXIT_NOT_GRADABLE
    assert [x["outcome"] for x in attempts(out, "empty")] == ["refused"]
    assert state.read_record(out, "empty")["outcome"] == "refused"
    assert "injected exit 2" in (out / "empty" / "grade.log").read_text()
    assert batch(subs, "--out", out, "--slots", "1", "--no-perf") == EXIT_NOT_GRADABLE
    assert len(attempts(out, "empty")) == 1  # the same submission is not tried again


def test_no_gpu_visible_is_an_infrastructure_fault_before_any_grade(tmp_path, fake, smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_FAIL", "1")
    subs = make_class(tmp_path / "class", {"a": {}, "b": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "0,1", "--no-perf") == EXIT_INFRA
    assert calls(fake) == []  # nothing was graded on a machine without its GPU
    for sid in ("a", "b"):
        assert not (out / sid / "results.json").exists()
        assert all(x["outcome"] == "infrastructure" for x in attempts(out, sid))
        assert any("no GPU visible" in x["why"] for x in attempts(out, sid))


def test_gpus_must_be_this_host_s(tmp_path, fake, smi, capsys):
    subs = make_class(tmp_path / "class", {"a": {}})
    assert batch(subs, "--out", tmp_path / "out", "--gpus", "0,7", "--no-perf") == 2
    assert "no GPU 7 on this host (nvidia-smi lists 0, GPU-0000, 1, GPU-1111)" in capsys.readouterr().err
    assert calls(fake) == []


def test_out_of_disk_is_an_infrastructure_fault_before_any_grade(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("GRADER_BATCH_MIN_FREE_BYTES", str(2**62))  # more than any disk has free
    subs = make_class(tmp_path / "class", {"a": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf", "--retries", "1") == EXIT_INFRA
    assert calls(fake) == [] and not (out / "a" / "results.json").exists()
    a = attempts(out, "a")
    assert len(a) == 2 and all(x["why"].startswith("out of disk:") for x in a) and a[0]["slot"] != a[1]["slot"]


def test_graded_on_records_the_gpu_and_the_report_warns_on_mixed_and_hot_gpus(tmp_path, fake, smi, capsys):
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(4)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "0,1", "--per-gpu", "1", "--no-perf") == EXIT_OK
    seen = set()
    for i in range(4):
        on = results(out, f"s{i}")["extra_data"]["graded_on"]
        start, end = on["gpu"]["start"], on["gpu"]["end"]
        assert start["uuid"] == end["uuid"] and start["driver"] == "580.65.06"
        if on["slot"] == "gpu1":
            assert start["name"] == "NVIDIA H100 80GB HBM3" and start["temperature_c"] == 88.0
            assert start["throttled"] == ["hw_thermal"] and start["throttle_reasons"] == 0x40
        else:
            assert start["name"] == "NVIDIA H200" and start["throttled"] == [] and start["sm_clock_mhz"] == 1980.0
        seen.add(on["slot"])
    assert seen == {"gpu0", "gpu1"}
    summary = json.loads((out / "batch_summary.json").read_text())
    assert set(summary["gpu_models"]) == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    text = capsys.readouterr().out
    assert "more than one kind of device" in text and "hot or slowing its clocks" in text
    # The TA report groups the class by GPU model and carries the same warnings.
    page = (out / "class_summary.html").read_text()
    assert "Graded on" in page and "NVIDIA H200" in page and "NVIDIA H100 80GB HBM3" in page
    assert "more than one kind of device" in page and "hot or slowing its clocks" in page
    assert summary["submissions_per_gpu_hour"] and summary["submissions_per_gpu_hour"] > 0


def test_a_signed_grade_stays_valid_with_graded_on_added(tmp_path, fake):
    key = tmp_path / "key"
    keyfile.keygen(key)
    subs = make_class(tmp_path / "class", {"a": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "1", "--no-perf", "--secret-file", key,
                 "--allow-advisory") == EXIT_OK  # this machine's grades are advisory (grader/preflight.py)
    r = results(out, "a")
    assert "graded_on" in r["extra_data"]
    assert signing.verify(r, keyfile.load(key).signing) == signing.VALID
    r["extra_data"]["graded_on"]["host"] = "elsewhere"  # the record is covered by the signature
    assert signing.verify(r, keyfile.load(key).signing) == signing.INVALID


def test_gradescope_export_zip_names_the_submitters(tmp_path, fake):
    exp = tmp_path / "export"
    for n, (sid, email) in enumerate([("1001", "ada@x.edu"), ("1002", "cb@x.edu")]):
        d = exp / f"submission_{n}"
        d.mkdir(parents=True)
        (d / "glu_triton.py").write_text(f"# {sid}\n")
    (exp / "submission_1" / "results.json").write_text('{"score": 999, "tests": []}')  # a student's own file
    (exp / "submission_metadata.yml").write_text(
        "submission_0:\n  :submitters:\n  - :name: Ada\n    :sid: '1001'\n    :email: ada@x.edu\n"
        "submission_1:\n  :submitters:\n  - :name: Charles\n    :sid: '1002'\n    :email: cb@x.edu\n"
    )
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for p in sorted(exp.rglob("*")):
            if p.is_file():
                zf.write(p, f"assignment_123_export/{p.relative_to(exp)}")
    out = tmp_path / "out"
    assert batch(z, "--out", out, "--slots", "2", "--no-perf") == EXIT_OK
    assert (out / "submission_0" / "results.json").is_file() and (out / "submission_metadata.yml").is_file()
    text = (out / "grades.csv").read_text()
    assert "Ada" in text and "1002" in text and "cb@x.edu" in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 2 and "999" not in text  # the unpacked export is outside OUT: its files are not grades
    assert not list(out.rglob("*.yml"))[1:] and not (out / ".batch" / "inputs").exists()


def _commit(repo: Path, text: str, when: str) -> str:
    (repo / "assignment").mkdir(exist_ok=True)
    (repo / "assignment" / "glu_triton.py").write_text(text)
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "s",
           "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@x"}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", text], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, env=env, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_list_grades_the_last_commit_before_the_deadline(tmp_path, fake):
    repos = {}
    for name in ("glu-alice", "glu-bob"):
        r = tmp_path / "repos" / name
        r.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=r, check=True)
        repos[name] = r
    on_time = _commit(repos["glu-alice"], "# on time\n", "2026-12-01T20:00:00+00:00")
    _commit(repos["glu-alice"], "# late\n", "2026-12-02T09:00:00+00:00")
    _commit(repos["glu-bob"], "# only late\n", "2026-12-03T09:00:00+00:00")
    lst = tmp_path / "repos.txt"
    lst.write_text(f"# GitHub Classroom\n{repos['glu-alice']}\nbobby {repos['glu-bob']}\n")
    out = tmp_path / "out"
    code = batch(lst, "--out", out, "--slots", "1", "--no-perf", "--deadline", "2026-12-01T23:59:59Z")
    assert code == EXIT_NOT_GRADABLE  # bob has no commit before the deadline: listed, not graded
    (c,) = calls(fake)
    assert Path(c["submission"]).joinpath("glu_triton.py").read_text() == "# on time\n"
    on = results(out, "glu-alice")["extra_data"]["graded_on"]
    assert on["source"]["commit"] == on_time and on["source"]["source"] == "git"
    m = state.read_manifest(out)
    assert [s["sid"] for s in m["skipped"]] == ["bobby"] and "no commit before the deadline" in m["skipped"][0]["why"]
    assert batch(lst, "--out", out, "--slots", "1", "--no-perf") == 2  # a list without --deadline: one clear error


def test_discovery_finds_nested_files_and_unique_ids(tmp_path):
    root = tmp_path / "c"
    (root / "alice" / "repo" / "assignment").mkdir(parents=True)
    (root / "alice" / "repo" / "assignment" / "glu_triton.py").write_text("x")
    (root / "b o b").mkdir()
    (root / "b o b" / "glu_cuda.cu").write_text("y")
    (root / ".hidden").mkdir()
    f = discover.discover(root, ("glu_triton.py", "glu_cuda.cu"), tmp_path / "work")
    assert [(i.sid, i.path.name) for i in f.items] == [("alice", "assignment"), ("b_o_b", "b o b")]
    h = f.items[0].content
    (root / "alice" / "repo" / "assignment" / "glu_triton.py").write_text("x ")
    assert discover.content_hash(f.items[0].path) != h
    with pytest.raises(discover.DiscoverError, match="no such file"):
        discover.discover(tmp_path / "nope", ("glu_triton.py",), tmp_path / "work")


@pytest.fixture
def deep():
    """deep(folder, levels): `levels` folders named d, one inside the next, under folder (made from inside: the
    path stays short); removed again from the bottom up at the end (shutil.rmtree and pytest's clean-up of old
    temporary folders recurse, and fail on such a tree in Python 3.11)."""
    made: list[tuple[Path, int]] = []

    def make(folder: Path, levels: int) -> None:
        here = os.getcwd()
        try:
            os.chdir(folder)
            for _ in range(levels):
                os.mkdir("d")
                os.chdir("d")
        finally:
            os.chdir(here)
        made.append((folder, levels))

    yield make
    here = os.getcwd()
    for folder, levels in made:
        try:
            os.chdir(folder)
            for _ in range(levels - 1):
                os.chdir("d")
            for _ in range(levels):
                os.rmdir("d")
                os.chdir("..")
        finally:
            os.chdir(here)


def test_a_folder_nested_1100_deep_in_one_submission_does_not_stop_the_class(tmp_path, deep):
    """Path.rglob recursed: one student's 1,100-deep folder raised RecursionError out of discovery and the batch
    graded nobody. The content hash walks with its own stack, counts a folder past MAX_TREE_DEPTH by name, and
    still sees a change above it."""
    root = tmp_path / "c"
    for sid in ("alice", "bob"):
        (root / sid).mkdir(parents=True)
        (root / sid / "glu_triton.py").write_text(f"# {sid}\n")
    deep(root / "bob", 1100)
    f = discover.discover(root, ("glu_triton.py",), tmp_path / "work")
    assert [i.sid for i in f.items] == ["alice", "bob"] and not f.skipped
    h = f.items[1].content
    (root / "bob" / "glu_triton.py").write_text("# bob, changed\n")
    assert discover.content_hash(root / "bob") != h


def test_a_submission_too_big_to_hash_is_skipped_not_the_class(tmp_path, monkeypatch):
    root = tmp_path / "c"
    for sid in ("alice", "bob"):
        (root / sid).mkdir(parents=True)
        (root / sid / "glu_triton.py").write_text(f"# {sid}\n")
    for i in range(30):
        (root / "bob" / f"junk{i}").write_text("")
    monkeypatch.setattr(discover, "MAX_REPO_MEMBERS", 10)
    f = discover.discover(root, ("glu_triton.py",), tmp_path / "work")
    assert [i.sid for i in f.items] == ["alice"]
    assert [s.sid for s in f.skipped] == ["bob"] and "over 10 files and folders" in f.skipped[0].why


def test_a_students_own_metadata_file_does_not_make_the_class_an_export(tmp_path):
    """A submission_metadata.yml in one student's folder made discovery read the class as a Gradescope export of
    that file's entries: the others were silently not graded. Only the class root's (or its one wrapper folder's)
    file is the export's."""
    root = tmp_path / "c"
    for sid in ("alice", "bob", "carol"):
        (root / sid).mkdir(parents=True)
        (root / sid / "glu_triton.py").write_text(f"# {sid}\n")
    (root / "bob" / "submission_metadata.yml").write_text("'.':\n  :submitters:\n  - :name: Bob\n    :sid: '1'\n")
    f = discover.discover(root, ("glu_triton.py",), tmp_path / "work")
    assert f.kind == "folders" and [i.sid for i in f.items] == ["alice", "bob", "carol"]
    # The export's own file, one folder down, is still read; an entry outside its folders is refused.
    exp = tmp_path / "e" / "assignment_1_export"
    (exp / "submission_1").mkdir(parents=True)
    (exp / "submission_1" / "glu_triton.py").write_text("# 1\n")
    (exp / "submission_metadata.yml").write_text(":submission_1:\n  :submitters:\n  - :name: A\n    :sid: '1'\n")
    f = discover.discover(tmp_path / "e", ("glu_triton.py",), tmp_path / "work2")
    assert f.kind == "gradescope" and [i.sid for i in f.items] == ["submission_1"]
    (exp / "submission_metadata.yml").write_text("'../x':\n  :submitters:\n  - :name: A\n    :sid: '1'\n")
    with pytest.raises(discover.DiscoverError, match="not a folder of the export"):
        discover.discover(tmp_path / "e", ("glu_triton.py",), tmp_path / "work3")


def test_slurm_scripts_array_and_containers(tmp_path, fake, capsys):
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(5)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--engine", "slurm", "--dry-run", "--max-parallel", "2",
                 "--partition", "gpu", "--sbatch-arg=--constraint=h200") == EXIT_OK  # fmt: skip
    text = capsys.readouterr().out
    assert "--array=0-4%2" in text and "--dependency=afterany:JOBID" in text
    task = (out / ".batch" / "slurm" / "task.sbatch").read_text()
    assert "#SBATCH --gres=gpu:1" in task and "#SBATCH --partition=gpu" in task and "#SBATCH --constraint=h200" in task
    # The time limit is the spec's stage limits (180 + 600 + 600 s) plus the grade's start and the task's margin.
    assert "#SBATCH --time=33" in task and '--index "$SLURM_ARRAY_TASK_ID" --engine slurm' in task
    m = state.read_manifest(out)
    m["slurm"].update(image="registry/kernel-grader@sha256:abc", runtime="pyxis")
    t, _ = engines.write_scripts(out, m)
    assert "srun --ntasks=1 --container-image=registry/kernel-grader@sha256:abc" in t.read_text()
    assert f"{out}:{out}" in t.read_text() and f"{subs}:{subs}" in t.read_text()
    assert "--container-workdir=/grader python -m grader.batch task" in t.read_text()
    m["slurm"].update(image="/images/glu.sif", runtime="apptainer")
    t, c = engines.write_scripts(out, m)
    assert "apptainer exec --nv --bind" in t.read_text() and "--nv" not in c.read_text()
    assert engines.array_spec([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and engines.array_spec([4]) == "4"
    assert state.image_digest("registry/kernel-grader@sha256:abc") == "sha256:abc"


def test_without_problem_the_batch_grades_the_spec_marked_default(tmp_path, fake):
    """No --problem: the spec marked `default: true` (grader/problem/spec.py default_problem), as `grade` does; the
    batch names no problem of its own."""
    from grader.problem.spec import default_problem

    subs = make_class(tmp_path / "class", {"s0": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--engine", "slurm", "--dry-run") == EXIT_OK
    assert state.read_manifest(out)["options"]["problem"] == str(load_problem(default_problem(ROOT)).path)


def test_a_manifest_that_is_not_an_object_is_one_usage_error(tmp_path, capsys):
    out = tmp_path / "out"
    state.batch_dir(out).mkdir(parents=True)
    (state.batch_dir(out) / "manifest.json").write_text("[1, 2]")
    assert batch("status", out) == EXIT_USAGE
    assert "not a batch manifest (a JSON object), got list" in capsys.readouterr().err


def _task(out: Path, index: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader.batch", "task", str(out), "--index", str(index)], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=120)  # fmt: skip


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_a_task_over_its_time_limit_is_an_infrastructure_fault_and_a_done_one_is_skipped(tmp_path, fake, monkeypatch):
    subs = make_class(tmp_path / "class", {"slow": {}, "quick": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--engine", "slurm", "--dry-run", "--device", "cpu") == EXIT_OK  # the manifest
    m = json.loads((out / ".batch" / "manifest.json").read_text())
    m["options"]["grade_timeout_s"] = 1.0
    (out / ".batch" / "manifest.json").write_text(json.dumps(m))
    monkeypatch.setenv("FAKE_GRADE_SLEEP", "30")
    r = _task(out, 1)
    assert r.returncode == 3, r.stderr  # the task's exit code for an infrastructure fault
    (a,) = attempts(out, "slow")
    assert a["outcome"] == "infrastructure" and a["why"] == "the grade ran past the task's time limit"
    assert state.running_marker(out, "slow") is None  # its marker is gone with it
    monkeypatch.setenv("FAKE_GRADE_SLEEP", "0")
    assert _task(out, 0).returncode == 0 and results(out, "quick")["score"] == 1.0
    r = _task(out, 0)  # a resubmission that overlaps a finished task: nothing graded again
    assert r.returncode == 0 and "already graded" in r.stdout and len(attempts(out, "quick")) == 1
    assert _task(out, 9).returncode == 2  # no such index


FAKE_SBATCH = """#!/bin/sh
# A fake sbatch: logs its arguments, one line a call, and answers a new job id (--parsable).
echo "$*" >> "$FAKE_SLURM_LOG"
n=$(wc -l < "$FAKE_SLURM_LOG")
echo $((100 + n))
"""


def test_slurm_collect_retries_infrastructure_faults_away_from_their_node(tmp_path, fake, monkeypatch, capsys):
    b = tmp_path / "slurmbin"
    b.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", "#!/bin/sh\nexit 0\n"),
                       ("sinfo", "#!/bin/sh\nprintf 'nodeA\\nnodeB\\n'\n")):  # fmt: skip
        (b / name).write_text(text)
        (b / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "sbatch.log"
    monkeypatch.setenv("FAKE_SLURM_LOG", str(log))
    subs = make_class(tmp_path / "class", {"a": {}, "b": {}, "c": {}})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--engine", "slurm", "--retries", "1", "--device", "cpu") == EXIT_OK
    first = log.read_text().splitlines()
    assert first[0].startswith("--parsable --array=0-2%16 ") and "--dependency=afterany:101" in first[1]
    keys = {it["sid"]: it["key"] for it in state.read_manifest(out)["items"]}
    # What the array's tasks would have recorded: a hit a fault on nodeA, b hit two (past --retries 1), c was killed.
    state.append_attempt(out, "a", {"key": keys["a"], "outcome": "infrastructure", "host": "nodeA", "why": "exit 3"})
    for _ in range(2):
        state.append_attempt(out, "b", {"key": keys["b"], "outcome": "infrastructure", "host": "nodeB", "why": "x"})
    state.append_attempt(out, "c", {"key": keys["c"], "outcome": "killed", "host": "nodeA", "why": "signal 15"})
    capsys.readouterr()
    assert cli.main(["batch", "collect", str(out)]) == 5  # still missing: a (retrying) and c
    text = capsys.readouterr().out
    calls_ = log.read_text().splitlines()[2:]
    assert calls_[0] == f"--parsable --array=0%16 --exclude=nodeA {out / '.batch' / 'slurm' / 'task.sbatch'}"
    assert "--dependency=afterany:103" in calls_[1] and len(calls_) == 2
    assert "retrying 1 infrastructure fault(s) (tasks 0, not on nodeA)" in text
    assert "b: not graded: infrastructure" in text and "resubmit only the missing tasks" in text
    # batch resubmit (the command status prints): the missing ones, a and c; not b, whose retries are spent.
    capsys.readouterr()
    assert cli.main(["batch", "resubmit", str(out)]) == EXIT_OK
    assert log.read_text().splitlines()[4].startswith("--parsable --array=0,2%16 ")
    jobs = json.loads((out / ".batch" / "slurm" / "jobs.json").read_text())["jobs"]
    assert [j["indices"] for j in jobs] == [[0, 1, 2], [0], [0, 2]]


def test_progress_prints_plain_lines_off_a_terminal():
    buf = io.StringIO()
    c = progress.Counts(total=4, skipped=1)
    with progress.Progress(c, stream=buf, every_s=0.0) as p:
        c.running = 1
        p.update()
        c.running, c.done = 0, 3
        p.event("x: retried")
    lines = buf.getvalue().splitlines()
    assert "x: retried" in lines and all("\x1b" not in ln for ln in lines)
    assert lines[-1].startswith("batch: done 4/4 (1 already graded) · running 0 · failed 0 · left 0")
    assert "ETA" in lines[-1] and "/min" in lines[-1]


def test_progress_on_a_terminal_draws_a_live_line():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    buf = Tty()
    c = progress.Counts(total=2)
    with progress.Progress(c, stream=buf) as p:
        c.done = 1
        p.event("a: retried")
        c.done = 2
    text = buf.getvalue()
    assert "a: retried" in text and "done 2/2" in text


# --- real grades -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_batch_scores_equal_single_grades_on_cpu(tmp_path):
    """The stubs, the staff Triton kernel as a submission and a broken one, graded by the batch (two CPU slots) and
    one by one with `grade`: the same scores."""
    subs = tmp_path / "class"
    for sid, src in (("stub", ROOT / "assignment" / "glu" / "glu_triton.py"),
                     ("staff", ROOT / "reference" / "glu" / "solution_triton.py"),
                     ("swapped", ROOT / "tests/data/problems/glu/broken/swapped_halves/glu_triton.py")):  # fmt: skip
        (subs / sid).mkdir(parents=True)
        shutil.copy(src, subs / sid / "glu_triton.py")
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--slots", "2", "--no-perf", "--only", "triton") == EXIT_OK
    for sid in ("stub", "staff", "swapped"):
        single = tmp_path / f"single-{sid}"
        # In a process of its own: `grade` makes its caller a subreaper and kills the caller's other children.
        r = subprocess.run([sys.executable, "-m", "grader", "grade", "--submission", str(subs / sid), "--out",
                            str(single), "--no-perf", "--only", "triton", "--device", "cpu"], cwd=ROOT,
                           capture_output=True, text=True, check=False)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        one = json.loads((single / "results.json").read_text())
        got = results(out, sid)
        assert got["score"] == one["score"], sid
        assert [t["score"] for t in got["tests"]] == [t["score"] for t in one["tests"]], sid
    assert results(out, "staff")["score"] > results(out, "swapped")["score"] >= results(out, "stub")["score"]


def test_gpu_hours_count_a_shared_gpu_once(tmp_path):
    from grader.batch import collect

    out = tmp_path / "out"
    items = [{"sid": f"s{i}", "key": "k"} for i in range(4)]
    runs = [  # (sid, GPU, end, wall): s0 and s1 overlap 5 s on GPU 0; s2 alone on GPU 1; s3 an old record
        ("s0", "h:0", 110.0, 10.0), ("s1", "h:0", 115.0, 10.0), ("s2", "h:1", 110.0, 10.0),
    ]  # fmt: skip
    for sid, gpu, end, wall in runs:
        state.append_attempt(out, sid, {"key": "k", "outcome": "graded", "wall_s": wall, "ended_at_s": end,
                                        "gpu_slot": gpu})  # fmt: skip
    state.append_attempt(out, "s3", {"key": "k", "outcome": "graded", "wall_s": 7.0})  # before ended_at_s existed
    state.append_attempt(out, "s3", {"key": "old", "outcome": "graded", "wall_s": 99.0})  # another key: not counted
    assert collect.gpu_seconds(out, {"items": items}) == pytest.approx(15.0 + 10.0 + 7.0)


FAKE_CALIBRATE = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, os.environ["FAKE_CALIBRATE_ROOT"])
from grader.performance import gpulock
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
log = os.environ["FAKE_CALIBRATE_LOG"]
time.sleep(float(os.environ.get("FAKE_CALIBRATE_START", "0")))  # the interpreter's and torch's imports
with gpulock.phase(True):  # as grader/performance/calibrate.py: alone on the GPU, the record written inside
    t0 = time.time()
    time.sleep(float(os.environ.get("FAKE_CALIBRATE_SLEEP", "0.3")))
    # hold on until this many fake grades have started (each writes its count file first), or 30 s
    want, deadline = int(os.environ.get("FAKE_CALIBRATE_WAIT_GRADES", "0")), time.time() + 30
    while want and time.time() < deadline and len(list(Path(os.environ["FAKE_GRADE_LOG"]).glob("*.count"))) < want:
        time.sleep(0.05)
    if os.environ.get("FAKE_CALIBRATE_FAIL") == "1":
        sys.exit(1)
    fd = os.open(args["--out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"{}")
    os.close(fd)
    t1 = time.time()
with open(log, "a") as f:
    f.write(json.dumps({"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "lock": os.environ.get("GRADER_GPU_LOCK"),
                        "problem": args["--problem"], "out": args["--out"], "start": t0, "end": t1}) + "\\n")
"""


@pytest.fixture
def fake_calibrate(tmp_path, monkeypatch):
    script = tmp_path / "fake_calibrate.py"
    script.write_text(FAKE_CALIBRATE)
    log = tmp_path / "calibrations.jsonl"
    monkeypatch.setenv("GRADER_BATCH_CALIBRATE_COMMAND", json.dumps([sys.executable, str(script)]))
    monkeypatch.setenv("FAKE_CALIBRATE_LOG", str(log))
    monkeypatch.setenv("FAKE_CALIBRATE_ROOT", str(Path(__file__).resolve().parent.parent))
    return log


def _overlaps(g: dict, c: dict) -> bool:
    """Whether a fake grade's GPU work (its shared and its exclusive span) overlapped a calibration's hold."""
    spans = [(g["shared_start"], g["shared_end"]), (g["timing_start"], g["timing_end"])]
    return any(a < c["end"] and c["start"] < b for a, b in spans)


@pytest.mark.slow  # ~11 s: ten fake grades and three calibrations
def test_shared_baselines_calibrate_each_gpu_drained_and_again_after_a_refused_record(
    tmp_path, fake, fake_calibrate, monkeypatch
):
    """--shared-baselines: each GPU's record is measured before its first task, with none of its slots busy; every
    grade is told the record's file; a grade that refuses the record (removes it) makes the engine drain that GPU
    and measure it again before its next task."""
    monkeypatch.setenv("FAKE_GRADE_LOCKED", "1")  # the fake grades hold the GPU's lock as real ones do
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(10)})
    # the first task refuses: its GPU is re-measured while most of the class is still queued (a refusal near the
    # end, with nothing left to grade, needs no new record)
    (subs / "s0" / "refuse_record").write_text("")
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "3,5", "--per-gpu", "2", "--device", "cpu", "--shared-baselines") == 0
    cal = [json.loads(x) for x in fake_calibrate.read_text().splitlines()]
    got = calls(fake)
    assert len(got) == 10
    refused_on = next(c["cuda"] for c in got if c["submission"].endswith("s0"))
    assert sorted(c["cuda"] for c in cal) == sorted(["3", "5", refused_on]), cal
    for c in cal:
        assert c["out"].endswith(f"gpu{c['cuda']}.json") and c["lock"].endswith(f"gpu{c['cuda']}.lock")
        mine = [g for g in got if g["cuda"] == c["cuda"]]
        assert not any(_overlaps(g, c) for g in mine), "a grade used the GPU during its calibration"
    assert all(g["record"] and g["record"].endswith(f"gpu{g['cuda']}.json") for g in got), got
    first = {gpu: min(c["end"] for c in cal if c["cuda"] == gpu) for gpu in ("3", "5")}
    assert all(g["shared_start"] > first[g["cuda"]] for g in got)  # no GPU work before its GPU's first record
    assert json.loads((out / ".batch" / "manifest.json").read_text())["options"]["shared_baselines"] is True


@pytest.mark.slow  # ~13 s: four fake grades and a calibration
def test_grades_start_while_their_gpu_is_calibrated_and_wait_for_it_at_the_lock(
    tmp_path, fake, fake_calibrate, monkeypatch
):
    """A grade's start (interpreter, imports, build, static checks) needs no GPU: the batch starts the first grades
    once the calibration holds the GPU's lock, and they wait for it there. Their GPU work (the lock's spans) never
    overlaps the calibration, and each finds the record written when it gets the lock. On an H100 a calibration
    took 17 s during which the class waited (docs/performance.md)."""
    monkeypatch.setenv("FAKE_GRADE_LOCKED", "1")
    monkeypatch.setenv("FAKE_CALIBRATE_START", "0.5")  # the lock taken only after the imports, as for real
    monkeypatch.setenv("FAKE_CALIBRATE_WAIT_GRADES", "2")  # it holds the lock until two grades started (or 30 s)
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(4)})
    out = tmp_path / "out"
    assert batch(subs, "--out", out, "--gpus", "3", "--per-gpu", "2", "--device", "cpu", "--shared-baselines") == 0
    (c,) = [json.loads(x) for x in fake_calibrate.read_text().splitlines()]
    got = calls(fake)
    assert len(got) == 4
    assert sum(g["start"] < c["end"] for g in got) == 2, (c, got)  # both slots' first grades started during it
    assert all(g["start"] > c["start"] for g in got)  # but only once it held the lock
    assert not any(_overlaps(g, c) for g in got), (c, got)
    assert all(g["record_seen"] for g in got), got


@pytest.mark.slow  # ~6 s
def test_a_gpu_whose_calibration_fails_grades_without_a_record(tmp_path, fake, fake_calibrate, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_CALIBRATE_FAIL", "1")
    subs = make_class(tmp_path / "class", {f"s{i}": {} for i in range(3)})
    out = tmp_path / "out"
    monkeypatch.setenv("FAKE_GRADE_LOCKED", "1")
    assert batch(subs, "--out", out, "--gpus", "3", "--device", "cpu", "--shared-baselines") == 0
    got = calls(fake)
    # a grade started while the calibration held the GPU is told the record's file, which never came
    assert len(got) == 3 and not any(g["record_seen"] for g in got), got
    told = max((x["end"] for x in got if x["record"]), default=0.0)
    assert not any(g["record"] for g in got if g["start"] > told), got  # once it failed, none is told the file
    said = capsys.readouterr()
    assert "GPU 3: its baselines could not be measured" in " ".join((said.out + said.err).split())


def test_an_aged_record_is_measured_again_without_limit_and_refused_ones_up_to_the_cap(tmp_path, fake_calibrate):
    """The engine's cadence: a record that aged out is re-measured every time (a long batch, not a drifting GPU);
    only records a grade removed (refused) count, and after MAX_REFUSALS of them the GPU grades without one."""
    from grader.performance import baselinerecord

    rec = tmp_path / "gpu3.json"
    slot = engines.Slot("gpu3", "3", lock=str(tmp_path / "gpu3.lock"), record=str(rec))
    out = tmp_path / "out"
    (state.batch_dir(out) / "logs").mkdir(parents=True)
    run = engines._LocalRun(out, 0, [slot], progress.Progress(progress.Counts(1), io.StringIO()), [])

    def calibrate() -> None:
        assert not run.record_ready(slot)  # no usable record: the calibration starts, no task may
        run.calibrating["3"][0].wait()
        run.reap_calibrations()
        assert run.record_ready(slot) and "3" not in run.no_record

    calibrate()
    old = rec.stat().st_mtime - baselinerecord.MAX_AGE_S
    for _ in range(engines.MAX_REFUSALS + 2):
        os.utime(rec, (old, old))
        calibrate()
    assert run.refusals["3"] == 0
    for _ in range(engines.MAX_REFUSALS - 1):
        rec.unlink()  # what a grade does with a record whose control drifted (performance/stage._refuse_record)
        calibrate()
    rec.unlink()
    assert run.record_ready(slot) and "3" in run.no_record and "3" not in run.calibrating
    assert run.calibrations["3"] == 1 + (engines.MAX_REFUSALS + 2) + (engines.MAX_REFUSALS - 1)
    assert len(fake_calibrate.read_text().splitlines()) == run.calibrations["3"]


@pytest.mark.slow  # ~9 s: two batches
def test_shared_baselines_are_the_default_and_no_shared_baselines_names_no_record(tmp_path, fake, fake_calibrate):
    """On by default since every score of a 12-submission class on an H100 agreed with its single grade
    (docs/performance.md); --no-shared-baselines: no calibration, every grade times every baseline."""
    subs = make_class(tmp_path / "class", {"s0": {}})
    assert batch(subs, "--out", tmp_path / "off", "--gpus", "3", "--device", "cpu", "--no-shared-baselines") == 0
    assert not calls(fake)[0]["record"] and not fake_calibrate.exists()
    assert batch(subs, "--out", tmp_path / "on", "--gpus", "3", "--device", "cpu") == 0
    assert calls(fake)[1]["record"] and len(fake_calibrate.read_text().splitlines()) == 1


def test_a_grades_results_json_that_cannot_be_read_is_left_out_of_the_summary(tmp_path):
    """The batch's summary read OUT/<id>/results.json whole and caught only OSError and ValueError: a file nested
    100,000 deep raised RecursionError out of it. It is now read as the TA report reads one."""
    from grader.batch import collect

    for sid, text in (("deep", "[" * 100_000 + "]" * 100_000), ("huge", " " * (3 * 2**20) + "{}"), ("list", "[]")):
        (tmp_path / sid).mkdir()
        (tmp_path / sid / state.RESULTS).write_text(text)
        assert collect._results(tmp_path, sid) is None
