"""`python -m grader batch --engine slurm` on a real single-node Slurm (tests/slurm_cluster.py: Debian's slurm-wlm
and munge, installed in the test's setup when missing, with two fake GPU gres entries).

Four small submissions graded on CPU, one GPU (gres) per array task and at most two at once: the stubs, the staff
Triton kernel, a broken kernel, and one whose first grade is an injected grader fault (exit 3). One task is killed
mid-grade with scancel. The collect job then retries the grader fault by itself; `batch status` reports the killed
one missing and prints the command that resubmits only it; that command grades it (and nothing else), and its
collect job writes the TA report with all four. Skips, saying why, where Slurm cannot be started (not root, no
apt-get or mirror); slow (CI runs it: CI=true selects the full tier). ~1.5 minutes on 2 cores.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster  # tests/slurm_cluster.py (tests/ is on sys.path: pytest's rootdir-less import mode)

from grader import cli
from grader.batch import EXIT_INCOMPLETE, EXIT_OK
from grader.classfiles import state

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
FAKE = Path(__file__).resolve().parent / "batch_fake_grade.py"


@pytest.fixture(scope="module")  # the daemons end with this module, before any other test runs
def slurm(tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("Slurm runs on Linux only")
    try:
        c = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as e:
        pytest.skip(f"no Slurm here: {e}")
    try:
        yield c
    finally:
        c.stop()  # no daemon outlives the module


def _wait_running(out: Path, sid: str, timeout: float = 120) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        m = state.running_marker(out, sid)
        if m is not None:
            return m
        time.sleep(0.2)
    raise TimeoutError(f"{sid} never started")


def _calls(log: Path) -> list[str]:
    p = log / "calls.jsonl"
    return [Path(json.loads(x)["submission"]).name for x in p.read_text().splitlines()] if p.exists() else []


def test_slurm_batch_kill_status_resubmit_and_report(slurm, tmp_path, monkeypatch, capsys):
    for k, v in slurm.env.items():
        monkeypatch.setenv(k, v)  # SLURM_CONF, for this process and (through sbatch) every task
    log = tmp_path / "calls"
    monkeypatch.setenv("GRADER_BATCH_GRADE_COMMAND", json.dumps([sys.executable, str(FAKE)]))
    monkeypatch.setenv("FAKE_GRADE_LOG", str(log))
    monkeypatch.setenv("FAKE_GRADE_REAL", "1")  # the real grade, after any injected fault
    subs = tmp_path / "class"
    for sid, src in (("alice", ROOT / "assignment" / "glu" / "glu_triton.py"),
                     ("bob", ROOT / "reference" / "glu" / "solution_triton.py"),
                     ("carol", ROOT / "tests/data/problems/glu/broken/swapped_halves/glu_triton.py"),
                     ("dave", ROOT / "assignment" / "glu" / "glu_triton.py")):  # fmt: skip
        (subs / sid).mkdir(parents=True)
        shutil.copy(src, subs / sid / "glu_triton.py")
    (subs / "dave" / "faults").write_text("3")  # its first grade: a grader fault
    out = tmp_path / "out"
    args = ["batch", str(subs), "--out", str(out), "--engine", "slurm", "--device", "cpu", "--no-perf",
            "--only", "triton", "--cpus-per-task", "1", "--mem", "1G", "--max-parallel", "2", "--retries", "1"]  # fmt: skip
    assert cli.main(args) == EXIT_OK
    first = capsys.readouterr().out
    assert "submitted array job" in first, first
    task = (out / ".batch" / "slurm" / "task.sbatch").read_text()
    assert "#SBATCH --gres=gpu:1" in task and "#SBATCH --mem=1G" in task

    # Kill bob's task mid-grade.
    marker = _wait_running(out, "bob")
    time.sleep(1.0)
    r = slurm.run("scancel", str(marker["task_id"]))
    assert r.returncode == 0, r.stderr
    slurm.wait_idle()  # the array, its collect job, the collect's retry of dave and that retry's collect job

    jobs = json.loads((out / ".batch" / "slurm" / "jobs.json").read_text())["jobs"]
    why = (jobs, {s: state.attempts(out, s) for s in ("bob", "dave")})  # what to read when this fails
    assert [j["why"] for j in jobs] == ["batch", "retry of infrastructure faults"], why
    assert jobs[1]["indices"] == [3], why  # only dave was retried by the collect job
    collect_logs = sorted((out / ".batch" / "slurm" / "logs").glob("collect-*.out"))
    assert len(collect_logs) == 2 and "retrying 1 infrastructure fault" in collect_logs[0].read_text()
    dave = [a["outcome"] for a in state.attempts(out, "dave") if a.get("event") is None]
    assert dave == ["infrastructure", "graded"]
    bob = [a for a in state.attempts(out, "bob") if a.get("event") is None]
    assert [a["outcome"] for a in bob] == ["killed"] and not (out / "bob" / "results.json").exists()

    capsys.readouterr()
    assert cli.main(["batch", "status", str(out)]) == EXIT_INCOMPLETE
    text = capsys.readouterr().out
    assert "3 done" in text and "1 missing" in text and "[1] bob: missing" in text, text
    m = re.search(r"resubmit only the 1 missing task\(s\) \(1: bob\):\n  (.+)\n", text)
    assert m, text
    command = m.group(1)
    assert command.endswith("--indices 1"), command
    before = _calls(log)
    r = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=dict(os.environ), timeout=120, check=False)
    assert r.returncode == 0 and "submitted array job" in r.stdout, r.stdout + r.stderr
    slurm.wait_idle()
    assert _calls(log)[len(before):] == ["bob"]  # the resubmission graded bob and nothing else

    capsys.readouterr()
    assert cli.main(["batch", "status", str(out)]) == EXIT_OK, capsys.readouterr().out
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    summary = json.loads((out / "batch_summary.json").read_text())
    assert {"alice", "bob", "dave"} <= set(rows)
    # carol is graded (batch.json, results.json); the TA report lists her row, or her file as unusable with why.
    assert state.read_record(out, "carol")["outcome"] == "graded"
    assert "carol" in rows or any(u["path"].startswith("carol/") for u in summary["unusable_in_report"])
    assert summary["counts"]["done"] == 4 and summary["resubmit"] is None
    last_collect = sorted((out / ".batch" / "slurm" / "logs").glob("collect-*.out"))[-1].read_text()
    assert "batch: 4 graded" in last_collect, last_collect
    on = json.loads((out / "bob" / "results.json").read_text())["extra_data"]["graded_on"]
    assert on["engine"] == "slurm" and re.fullmatch(r"\d+_1", on["task_id"]) and on["slot"] in ("0", "1")  # its gres GPU
    assert float(rows["bob"]["total"]) > float(rows["alice"]["total"])
