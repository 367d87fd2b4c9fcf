"""A stand-in for `python -m grader grade` in the batch tests (GRADER_BATCH_GRADE_COMMAND): fast, and able to fail
on purpose. It takes grade's arguments, and

- writes a results.json whose score is the number in the submission's `score` file (default 1), signed when a
  --secret-file is given (as an official grade is), plus a report.html;
- logs one JSON line per call to $FAKE_GRADE_LOG/calls.jsonl: the submission, CUDA_VISIBLE_DEVICES,
  GRADER_BATCH_SLOT, TMPDIR, and its start and end times (so a test can check pinning and overlaps);
- sleeps $FAKE_GRADE_SLEEP seconds (default 0.2) while "grading";
- with FAKE_GRADE_REAL=1, runs the real `python -m grader grade` with the same arguments once no fault is due
  (the Slurm test: real grades, and one injected grader fault);
- logs GRADER_BASELINE_RECORD too, and removes that file when the submission has a `refuse_record` file (as a
  grade whose control baseline drifted does);
- injects faults from the submission's `faults` file: one word per attempt, in order: an exit code ("3": a grader
  fault, "2": a refusal), "kill" (SIGKILL its own task wrapper, as a node's OOM killer would) or "ok".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

p = argparse.ArgumentParser(fromfile_prefix_chars="@")  # the batch passes @FILE (grader/batch/task.py)
p.add_argument("--submission", type=Path, required=True)
p.add_argument("--out", type=Path, required=True)
p.add_argument("--secret-file", default=None)
p.add_argument("--allow-advisory", action="store_true")  # the batch checked officialness once (grader/preflight.py)
p.add_argument("--problem")
p.add_argument("--device")
p.add_argument("--only", action="append")
p.add_argument("--no-perf", action="store_true")
p.add_argument("--student-id", default=None)
a = p.parse_args()

log = Path(os.environ["FAKE_GRADE_LOG"])
log.mkdir(parents=True, exist_ok=True)
sub = a.submission
name = sub.name
counter = log / f"{name}.count"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
faults = (sub / "faults").read_text().split() if (sub / "faults").exists() else []
fault = faults[n] if n < len(faults) else "ok"
t0 = time.time()
real = os.environ.get("FAKE_GRADE_REAL") == "1"
spans: dict[str, float | str | bool | None] = {"lock": os.environ.get("GRADER_GPU_LOCK")}
if not real and os.environ.get("FAKE_GRADE_LOCKED") == "1":
    # As grader/pipeline.py: the GPU's lock shared for the first half ("correctness"), alone for the second ("timing").
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from grader.performance import gpulock

    half = float(os.environ.get("FAKE_GRADE_SLEEP", "0.2")) / 2
    with gpulock.phase(False):
        spans["shared_start"] = time.time()
        record = os.environ.get("GRADER_BASELINE_RECORD")
        spans["record_seen"] = bool(record) and os.path.exists(record)  # as the pipeline asks in its shared hold
        time.sleep(half)
        spans["shared_end"] = time.time()
    with gpulock.phase(True):
        spans["timing_start"] = time.time()
        time.sleep(half)
        spans["timing_end"] = time.time()
elif not real:
    time.sleep(float(os.environ.get("FAKE_GRADE_SLEEP", "0.2")))
entry = {
    **spans,
    "submission": str(sub),
    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "slot": os.environ.get("GRADER_BATCH_SLOT"),
    "tmpdir": os.environ.get("TMPDIR"),
    "start": t0,
    "end": time.time(),
    "fault": fault,
    "record": os.environ.get("GRADER_BASELINE_RECORD"),
}
if (sub / "refuse_record").exists() and os.environ.get("GRADER_BASELINE_RECORD"):
    # as a grade whose control baseline drifted past the bound (grader/performance/stage.py _refuse_record)
    Path(os.environ["GRADER_BASELINE_RECORD"]).unlink(missing_ok=True)
with open(log / "calls.jsonl", "a") as f:
    f.write(json.dumps(entry) + "\n")
if fault == "kill":
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(5)
    sys.exit(1)
if fault != "ok":
    print(f"fake grade: injected exit {fault}", file=sys.stderr)
    sys.exit(int(fault))
if real:
    os.execv(sys.executable, [sys.executable, "-m", "grader", "grade", *sys.argv[1:]])
score = float((sub / "score").read_text()) if (sub / "score").exists() else 1.0
doc = {
    "score": score,
    "max_score": 2.0,
    "output": "",
    "tests": [
        {"name": "triton / correctness / a", "score": score, "max_score": 2.0, "status": "passed",
         "tags": ["triton", "correctness"], "output": "", "extra_data": {"state": "passed", "case": "a"}}
    ],
    "extra_data": {"problem": "glu", "submission": str(sub), "device": "cpu", "official": bool(a.secret_file),
                   "not_official_because": [] if a.secret_file else ["no key file"]},
}
if a.secret_file:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from grader import keyfile, signing

    doc = signing.sign(doc, keyfile.load(Path(a.secret_file)).signing)
a.out.mkdir(parents=True, exist_ok=True)
(a.out / "results.json").write_text(json.dumps(doc))
(a.out / "report.html").write_text("<p>fake</p>")
print(f"fake grade of {name}: {score}")
