"""The grade's steps on a GPU (grader/pipeline.py `_grade`), with the stages themselves replaced by fakes: this
machine has no GPU, so this is what checks the order the pipeline gives them there. The shared GPU hold covers the
timing workers' start and the correctness stage (with a CUDA part's compute-sanitizer pass beside it); timing runs
after it under the exclusive hold, with the workers started early; a kernel-check violation forfeits the part; a
--watch grade that stopped is not timed; baselines that cannot be timed leave no speed grade."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import grader.pipeline as pl
from grader.correctness import sanitizer
from grader.cuda import part
from grader.cuda.build import BuildFor, PartBuild, State
from grader.performance import gpulock, stage
from grader.problem.spec import find_problem, load_problem
from grader.results import FAILED, PASSED, SKIPPED, Kind, Reason
from grader.results import TestResult as Row  # (not "Test*": pytest would try to collect it)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """A pretend GPU: every stage a fake that logs its call; `state` switches what the fakes do."""
    log: list[str] = []
    state: dict[str, Any] = {}
    lib = tmp_path / "glu_cuda.so"
    lib.write_bytes(b"fake")

    @contextlib.contextmanager
    def phase(exclusive: bool, progress: Any = None) -> Iterator[float]:
        log.append(f"hold {'exclusive' if exclusive else 'shared'}")
        try:
            yield 0.0
        finally:
            log.append(f"release {'exclusive' if exclusive else 'shared'}")

    def correctness(problem: Any, t: Any, ref: Any, **kw: Any) -> list[Row]:
        log.append(f"correctness {t.impl.name}")
        rows = []
        for i, c in enumerate(problem.cases):
            stopped = state.get("stop") and i >= 1
            rows.append(
                Row(
                    f"{t.impl.name} / correctness / {c.name}",
                    t.impl.name,
                    "correctness",
                    0.0 if stopped else c.points,
                    c.points,
                    SKIPPED if stopped else PASSED,
                    "ok",
                    {"case": c.name, **({"stopped": True} if stopped else {})},
                    kind=Kind.CORRECTNESS,
                    reason=Reason.NOT_RUN if stopped else Reason.OK,
                )
            )
        bad = state.get("violate") == t.impl.name
        rows.append(
            Row(
                f"{t.impl.name} / kernel check",
                t.impl.name,
                "checks",
                0.0,
                0.0,
                FAILED if bad else PASSED,
                "kc",
                {"forfeit": bad},
                kind=Kind.KERNEL_CHECK,
                reason=Reason.VIOLATION if bad else Reason.OK,
            )
        )
        return rows

    def performance(problem: Any, targets: Any, ref: Any, **kw: Any) -> tuple[list[Row], dict[str, Any]]:
        log.append(f"timing started={sorted(kw['started'] or {})}")
        if state.get("perf_fail"):
            raise RuntimeError("baseline died")
        rows = stage.skipped_tests(problem, targets, "timed", Reason.OK)
        for r in rows:
            r.state, r.score = PASSED, r.max_score
        return rows, {"cases": {}}

    class Box:
        def close(self) -> None:
            log.append("close worker")

    monkeypatch.setattr(pl, "resolve_device", lambda d: "cuda")
    monkeypatch.setattr(gpulock, "phase", phase)
    monkeypatch.setattr(pl, "run_correctness", correctness)
    monkeypatch.setattr(pl, "run_performance", performance)
    monkeypatch.setattr(
        pl,
        "start_workers",
        lambda p, ts, d, recorded: log.append(f"start workers{' recorded' if recorded else ''}") or {"w": Box()},
    )
    monkeypatch.setattr(
        part,
        "build_part",
        lambda req, what: PartBuild(BuildFor.LIBRARY, State.OK, lib, "", 1.0, "nvcc"),
    )
    monkeypatch.setattr(
        sanitizer,
        "run_pass",
        lambda problem, impl, *a, **kw: (
            log.append("sanitizer")
            or Row(f"{impl.name} / sanitizer", impl.name, "checks", 0.0, 0.0, PASSED, "clean", {}, kind=Kind.SANITIZER)
        ),
    )
    monkeypatch.setattr(pl.availability, "triton_missing", lambda: None)
    problem = load_problem(find_problem("glu", ROOT))

    def grade(**opts: Any) -> Any:
        log.clear()
        return pl.grade(problem, pl.Options(submission=ROOT, out=tmp_path / "o", staff=True, **opts))

    return {"log": log, "state": state, "grade": grade, "out": tmp_path / "o"}


def test_correctness_and_the_sanitizer_run_under_the_shared_hold_then_timing_alone(gpu: dict[str, Any]) -> None:
    g = gpu["grade"]()
    log = gpu["log"]
    assert log[:2] == ["hold shared", "start workers"]
    checks = log[2 : log.index("release shared")]
    assert sorted(checks) == ["correctness cuda", "correctness triton", "sanitizer"]
    assert log[log.index("release shared") + 1 :] == ["hold exclusive", "timing started=['w']", "release exclusive"]
    assert g.score == g.max_score and any(t.kind == Kind.PERFORMANCE for t in g.tests)
    assert [t.part for t in g.tests] == sorted((t.part for t in g.tests), key=["triton", "cuda"].index)


@pytest.mark.parametrize("made", [False, True])
def test_a_batch_s_record_file_tells_the_workers_to_prepare_the_control_only(
    gpu: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, made: bool
) -> None:
    """The batch names the GPU's record (GRADER_BASELINE_RECORD); only a file that is there changes what the
    baselines' workers prepare (a missing one: every baseline is timed, so every one is prepared)."""
    from grader.performance import baselinerecord

    rec = tmp_path / "gpu0.glu.json"
    if made:
        rec.write_text("{}")
    monkeypatch.setenv(baselinerecord.ENV, str(rec))
    gpu["grade"]()
    assert ("start workers recorded" if made else "start workers") in gpu["log"], gpu["log"]


def test_a_kernel_check_violation_forfeits_the_part(gpu: dict[str, Any]) -> None:
    gpu["state"]["violate"] = "triton"
    g = gpu["grade"]()
    triton = [t for t in g.tests if t.part == "triton" and t.max_score]
    assert triton and all(t.score == 0 and t.reason == Reason.FORFEIT for t in triton)
    assert all(t.score == t.max_score for t in g.tests if t.part == "cuda")
    assert "triton: all points forfeit, see 'triton / kernel check'" in g.notes


def test_a_stopped_watch_grade_is_partial_and_not_timed(gpu: dict[str, Any]) -> None:
    gpu["state"]["stop"] = True
    g = gpu["grade"](stop_at_failure=True)
    assert not any(e.startswith("timing") for e in gpu["log"]) and not g.official and g.partial
    perf = [t for t in g.tests if t.kind == Kind.PERFORMANCE]
    assert perf and all(t.state == SKIPPED and t.reason == Reason.NOT_RUN for t in perf)


def test_baselines_that_cannot_be_timed_leave_no_speed_grade(gpu: dict[str, Any]) -> None:
    gpu["state"]["perf_fail"] = True
    g = gpu["grade"]()
    perf = [t for t in g.tests if t.kind == Kind.PERFORMANCE]
    assert perf and all(t.reason == Reason.NOT_TIMED and t.score == 0 for t in perf)
    assert "performance: not graded this run (baseline died); re-run the grader" in g.notes


def test_in_a_batch_baselines_that_cannot_be_timed_are_a_grader_fault_not_a_grade(gpu: dict[str, Any], monkeypatch) -> None:
    """On a GPU shared by a batch's grades, another grade's workers can leave the trusted baselines without memory
    (--per-gpu 3 on an 80 GB H100 did): the batch must retry the task, not keep a grade without speed points."""
    from grader.performance import gpulock
    from grader.sandbox import GraderFault

    monkeypatch.setenv(gpulock.ENV, "lock")
    monkeypatch.setattr(pl, "settle", lambda *a, **k: None)
    gpu["state"]["perf_fail"] = True
    with pytest.raises(GraderFault, match="trusted side.*baseline died"):
        gpu["grade"]()


def test_the_callers_work_beside_runs_during_correctness_and_ends_before_timing(gpu: dict[str, Any], monkeypatch) -> None:
    """grade(beside=...): the CLI's report imports run while the parent waits on the correctness workers, and are
    over before the exclusive hold: nothing of the parent's own runs beside a timed call. What it raises is dropped."""
    import threading

    log = gpu["log"]
    started, release = threading.Event(), threading.Event()

    def beside() -> None:
        started.set()
        release.wait(5)  # still running when correctness ends: the timing stage must wait for it
        log.append("beside done")
        raise RuntimeError("optional work failed")

    real = pl.run_correctness

    def correctness(*a: Any, **kw: Any) -> list[Row]:
        assert started.wait(5)  # under way beside the correctness stage
        threading.Timer(0.2, release.set).start()
        return real(*a, **kw)

    monkeypatch.setattr(pl, "run_correctness", correctness)
    problem = load_problem(find_problem("glu", ROOT))
    g = pl.grade(problem, pl.Options(submission=ROOT, out=gpu["out"], staff=True), beside=beside)
    assert log.index("beside done") < log.index("hold exclusive")
    assert g.score == g.max_score


def test_an_interrupted_correctness_stage_closes_the_early_workers(gpu: dict[str, Any], monkeypatch) -> None:
    def interrupted(*a: Any, **kw: Any) -> list[Row]:
        raise KeyboardInterrupt

    monkeypatch.setattr(pl, "run_correctness", interrupted)
    with pytest.raises(KeyboardInterrupt):
        gpu["grade"]()
    assert gpu["log"][-2:] == ["close worker", "release shared"]
