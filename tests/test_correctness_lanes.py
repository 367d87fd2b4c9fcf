"""The student's CPU loop (issue 32 item 4) and a hang's cost (item 3), on the correctness side
(grader/correctness/partrun.py, grader/child/worker.py, grader/sandbox.py):
- a Triton part's cases in two worker processes give the results of one, in the same order, with the same
  messages, kernel check and GPU compile check (whose launch records are merged in spec order);
- a correctness worker's profiler does not import torch._inductor (0.8-1.1 s before each worker's first answer);
- an idle worker closes at once when asked to (no wait for Python's teardown);
- a watch grade that stopped at its first failure does not run the GPU compile check;
- a case that hangs costs its limit and a bounded restart, and the cases after it still run."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.correctness import partrun, tally
from grader.pipeline import Options, grade
from grader.results import FAILED, PASSED, SKIPPED, Grade, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
SECRET = 20261204  # the same inputs in every grade of this file


def _grade(problem, sub: Path, out: Path, workers: int, monkeypatch, **kw: Any) -> Grade:
    monkeypatch.setenv(partrun.WORKERS_ENV, str(workers))
    return grade(
        problem, Options(submission=sub, out=out, only=("triton",), device="cpu", secret=SECRET, perf=False, **kw)
    )


def _seconds(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? s\b", "N s", text)


def _comparable(g: Grade) -> list[tuple[Any, ...]]:
    """Every test as the grade reports it, times left out (the only thing allowed to differ)."""
    return [
        (
            t.name,
            t.state,
            t.score,
            t.max_score,
            t.reason,
            _seconds(t.output),
            {k: v for k, v in t.extra.items() if k != "seconds"},
            [f.to_json() for f in t.findings],
        )
        for t in g.tests
    ]


@pytest.mark.slow  # four CPU grades of the Triton part: ~30-60 s on 2 cores
@pytest.mark.parametrize("sub", [f"tests/data/problems/glu/{s}" for s in ("correct/tiles_2d", "broken/forgets_gate",
                                                                          "broken/sys_exit")])
def test_two_correctness_workers_give_the_results_of_one(problem, tmp_path, monkeypatch, sub):
    lanes: list[int] = []
    second_lane = partrun.PartRun.second_lane

    def counted(self):
        lanes.append(1)
        return second_lane(self)

    monkeypatch.setattr(partrun.PartRun, "second_lane", counted)
    one = _grade(problem, ROOT / sub, tmp_path / "one", 1, monkeypatch)
    assert lanes == []
    two = _grade(problem, ROOT / sub, tmp_path / "two", 2, monkeypatch)
    assert lanes == [1]  # the second worker ran
    assert _comparable(one) == _comparable(two)
    ran = [t for t in one.tests if t.kind == Kind.CORRECTNESS and t.state in (PASSED, FAILED)]
    assert len(ran) > 20
    if "correct" in sub:  # launch records of both workers, merged (fp32, fp16, bf16 launches)
        compile_row = next(t for t in two.tests if t.kind == Kind.COMPILE_CHECK)
        signatures = [line for line in compile_row.output.splitlines() if line.startswith("  glu_tile_kernel(")]
        assert compile_row.state == PASSED and len(signatures) == 3, compile_row.output


def test_records_of_two_lanes_merge_in_the_order_one_worker_records_them():
    """Each case's launch records (lane A ran cases 0 and 2, lane B 1 and 3), merged as one worker would have
    recorded them: first occurrences in spec order, then the kernel check's; after a case that took its worker
    down, only the cases after it (one worker restarts with no records)."""

    class C:
        def __init__(self, name: str):
            self.name = name

    counts = tally.Tally.__new__(tally.Tally)
    runnable = [C(f"c{i}") for i in range(4)]
    r = [{"kernel": f"k{i}", "args": []} for i in range(6)]
    counts.records = {"c0": [r[1]], "c1": [r[2], r[1]], "c2": [r[3], r[2]], "c3": [r[4]]}
    counts.outcome = {}
    assert counts.merged_records(runnable, [r[1], r[5]]) == [r[1], r[2], r[3], r[4], r[5]]
    counts.outcome = {"c1": "crash"}
    assert counts.merged_records(runnable, [r[1], r[5]]) == [r[3], r[2], r[4], r[1], r[5]]


def test_a_cpu_correctness_worker_s_profiler_does_not_import_inductor():
    """torch.profiler's first use imports torch._inductor (0.8-1.1 s); the worker's host profiler sees the same
    ATen ops without it."""
    code = (
        "import os, sys\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "import torch\n"
        "from grader.child.worker import Worker\n"
        "w = Worker('cpu')\n"
        "with w._host_ops() as (seen, snapshot, device):\n"
        "    torch.ones(8).sigmoid().mul(2)\n"
        "print(sorted(seen), 'torch._inductor' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    ops, inductor = r.stdout.strip().rsplit(" ", 1)
    assert "'sigmoid'" in ops and "'mul'" in ops, ops
    assert inductor == "False", r.stdout


def test_an_idle_worker_closes_at_once_without_a_grace_period():
    from grader.sandbox import Sandbox

    box = Sandbox("cpu")
    pid = box.proc.pid
    t0 = time.monotonic()
    box.close(grace_s=0)
    took = time.monotonic() - t0
    assert not box.alive and box.proc.exitcode is not None and box.proc.exitcode < 0  # killed, not exited
    assert took < 5.0, took  # (a graceful close waits for the interpreter's teardown; this one does not)
    assert pid is not None


@pytest.mark.slow  # one CPU grade of the Triton stub
def test_a_watch_grade_that_stopped_does_not_run_the_gpu_compile_check(problem, tmp_path, monkeypatch):
    sub = ROOT / "tests/data/problems/glu/broken/forgets_gate"
    g = _grade(problem, sub, tmp_path, 1, monkeypatch, stop_at_failure=True)
    assert any(t.extra.get("stopped") for t in g.tests)
    row = next(t for t in g.tests if t.kind == Kind.COMPILE_CHECK)
    assert (row.state, row.reason, row.output) == (SKIPPED, Reason.NOT_RUN, partrun.COMPILE_STOPPED)


@pytest.mark.slow  # a grade with a hanging case: its limit (~20 s after the first passed cases) and a restart
def test_a_hanging_case_costs_its_limit_and_a_bounded_restart(problem, tmp_path, monkeypatch):
    """tests/exploits/hang_one_case hangs on rows_127 only. Its cost is the grade's extra time over a grade of the
    same kernel that does not hang; it must stay within the case's limit plus a worker's restart (bounded loosely
    here: 30 s on a shared CPU)."""
    t0 = time.monotonic()
    honest = _grade(problem, ROOT / "reference" / "glu", tmp_path / "honest", 1, monkeypatch, staff=True)
    honest_s = time.monotonic() - t0
    t0 = time.monotonic()
    g = _grade(problem, ROOT / "tests" / "exploits" / "hang_one_case", tmp_path / "hang", 1, monkeypatch)
    hang_s = time.monotonic() - t0
    cases = {t.extra["case"]: t for t in g.tests if t.kind == Kind.CORRECTNESS}
    hung = [t for t in cases.values() if t.reason == Reason.TIMEOUT]
    assert [t.extra["case"] for t in hung] == ["rows_127/float32"], {n: t.output for n, t in cases.items()}
    limit = float(re.search(r"timed out after (\d+) s", hung[0].output).group(1))  # type: ignore[union-attr]
    ran = [t for t in cases.values() if t.state in (PASSED, FAILED)]
    assert sum(t.state == PASSED for t in ran) == len(ran) - 1  # every other case ran, in a fresh worker
    assert sum(t.state == PASSED for t in honest.tests if t.kind == Kind.CORRECTNESS) == len(ran)
    cost = hang_s - honest_s
    print(f"hang: limit {limit:.0f} s, cost {cost:.1f} s (grade {hang_s:.1f} s, without the hang {honest_s:.1f} s)")
    assert cost < limit + 30.0, (cost, limit)
