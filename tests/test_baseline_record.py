"""The batch's shared baseline record (grader/performance/baselinerecord.py): what makes a record usable, and
the drift bound that makes a grade time every baseline itself."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from grader.performance import baselinerecord as br

KEY = br.RecordKey(
    gpu_uuid="GPU-1234", problem="glu", spec_sha256="ab" * 32, grader_code="c0ffee", torch="2.11", triton="3.6"
)


def _record(**over: object) -> br.BaselineRecord:
    rec = br.BaselineRecord(
        key=KEY,
        control="eager",
        made_at=time.time(),
        copy={"bytes_per_s": 4.27e12, "read2_write1_bytes_per_s": 4.4e12},
        cases={
            "fp32_16k": br.CaseRecord({"manual": 1.852, "eager": 0.617, "compiled": 0.374}, 0.021),
            "fp16_4k": br.CaseRecord({"manual": 0.166, "eager": 0.057, "compiled": 0.065}, 0.019),
        },
    )
    for k, v in over.items():
        setattr(rec, k, v)
    return rec


def test_a_saved_record_loads_back_equal_and_private(tmp_path: Path) -> None:
    p = tmp_path / "gpu0.glu.json"
    br.save(p, _record())
    assert p.stat().st_mode & 0o777 == 0o600
    got = br.load(p, KEY)
    assert got.cases["fp32_16k"].medians_ms["compiled"] == 0.374
    assert got.control == "eager" and got.copy["bytes_per_s"] == 4.27e12


@pytest.mark.parametrize("field", list(br.RecordKey.__dataclass_fields__))
def test_a_record_for_anything_else_is_refused_naming_what_differs(tmp_path: Path, field: str) -> None:
    p = tmp_path / "r.json"
    br.save(p, _record())
    other = br.RecordKey(**{**KEY.__dict__, field: "other"})
    with pytest.raises(br.RecordError, match=f"another {field}"):
        br.load(p, other)


def test_an_old_record_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    br.save(p, _record(made_at=time.time() - br.MAX_AGE_S - 5))
    with pytest.raises(br.RecordError, match="old"):
        br.load(p, KEY)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="file modes are POSIX")
def test_a_record_others_could_write_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    br.save(p, _record())
    p.chmod(0o644)
    with pytest.raises(br.RecordError, match="0600"):
        br.load(p, KEY)


@pytest.mark.parametrize(
    "mutate, why",
    [
        (lambda d: d.update(version=99), "version"),
        (lambda d: d["cases"]["fp32_16k"]["medians_ms"].update(manual=-1.0), "positive"),
        (lambda d: d["cases"]["fp32_16k"]["medians_ms"].update(manual=float("nan")), "positive"),
        (lambda d: d["cases"]["fp32_16k"]["medians_ms"].update(manual=True), "positive"),
        (lambda d: d["cases"]["fp32_16k"]["medians_ms"].pop("eager"), "control"),
        (lambda d: d.update(cases={}), "no cases"),
        (lambda d: d["key"].pop("gpu_uuid"), "key"),
        (lambda d: d.update(copy=[]), "copy"),
    ],
)
def test_a_malformed_record_is_one_error(mutate, why: str) -> None:
    d = json.loads(_record().as_json())
    mutate(d)
    with pytest.raises(br.RecordError, match=why):
        br.parse(json.dumps(d))


def test_an_oversized_record_is_not_read(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b" " * (br.MAX_BYTES + 10))
    os.close(fd)
    with pytest.raises(br.RecordError, match="larger"):
        br.load(p, KEY)


def test_the_drift_bound_separates_noise_from_a_changed_gpu() -> None:
    """Inside the bound: the medians' measured grade-to-grade spread (<= 1.2% for eager, docs/performance.md);
    outside it: a change no two grades on one GPU showed. The bound is half the spec's 3% margin or less, so a
    recorded threshold is never off by more than the margin a single grade already allows for."""
    rec = _record()
    eager = rec.cases["fp32_16k"].medians_ms["eager"]
    assert br.DRIFT_BOUND <= 0.03 / 2
    assert br.usable(rec, "fp32_16k", eager * 1.012)  # eager's worst spread between grades (run 29)
    assert br.usable(rec, "fp32_16k", eager * 0.988)
    assert not br.usable(rec, "fp32_16k", eager * 1.02)
    assert not br.usable(rec, "fp32_16k", eager * 0.97)
    assert not br.usable(rec, "no_such_case", eager)


def _info(problem, missing: str | None = None) -> dict:
    """A performance stage's info as run_performance returns it, for a stage that timed every baseline."""
    cases = {}
    for i, c in enumerate(problem.performance.cases):
        base = {
            b: {"event": {"median": 0.1 * (i + 1) * (j + 1)}} for j, b in enumerate(problem.baselines) if b != missing
        }
        cases[c.name] = {"baselines": base, "baseline_overhead_ms": 0.02}
    return {
        "cases": cases,
        "copy_bytes_per_s": 4.27e12,
        "read2_write1_bytes_per_s": 4.4e12,
        "device": {"uuid": "GPU-abcd", "name": "NVIDIA H200"},
    }


def test_a_calibration_becomes_a_record_bound_to_its_gpu_and_problem(tmp_path: Path) -> None:
    from grader.performance import calibrate
    from grader.problem.spec import find_problem, load_problem

    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    rec = calibrate.record_from_info(problem, _info(problem))
    assert rec.key.gpu_uuid == "GPU-abcd" and rec.key.problem == problem.name
    assert rec.control == br.control_baseline(problem) and rec.control in problem.baselines
    assert set(rec.cases) == {c.name for c in problem.performance.cases}
    p = tmp_path / "r.json"
    br.save(p, rec)
    assert br.load(p, br.record_key(problem, {"uuid": "GPU-abcd"})).cases == rec.cases
    with pytest.raises(br.RecordError, match="another gpu_uuid"):
        br.load(p, br.record_key(problem, {"uuid": "GPU-other"}))


def test_a_calibration_that_missed_a_baseline_makes_no_record() -> None:
    from grader.performance import calibrate
    from grader.problem.spec import find_problem, load_problem

    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    with pytest.raises(RuntimeError, match="lacks a baseline"):
        calibrate.record_from_info(problem, _info(problem, missing=next(iter(problem.baselines))))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the no-GPU refusal")
def test_calibrating_without_a_gpu_is_one_line_and_exit_1(tmp_path: Path, capsys) -> None:
    from grader.performance import calibrate

    assert calibrate.main(["--out", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["calibration failed: calibration needs a CUDA GPU"] and not (tmp_path / "r.json").exists()


def test_a_megabyte_of_nesting_is_one_record_error_in_linear_time() -> None:
    with pytest.raises(br.RecordError, match="nested too deeply"):
        br.parse("[" * (br.MAX_BYTES - 1))


class _Spawned:
    """A timing worker as start_workers spawns it: records what it is sent, starts nothing."""

    made: list[_Spawned] = []

    def __init__(self, device: str, *, wait: bool, timing: bool, trusted: bool) -> None:
        self.trusted, self.sent = trusted, []
        _Spawned.made.append(self)

    def send(self, cmd: str, payload: dict, *, what: str) -> None:
        self.sent.append((cmd, payload))


@pytest.mark.parametrize("recorded", [False, True])
def test_with_a_record_the_baselines_workers_prepare_only_the_control(monkeypatch, recorded: bool) -> None:
    """torch.compile's first calls are made during correctness only for baselines that will be timed: with a
    record, the control alone (the others' medians come from the record)."""
    from types import SimpleNamespace

    from grader.performance import workers
    from grader.problem.spec import find_problem, load_problem

    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    monkeypatch.setattr(workers, "Sandbox", _Spawned)
    _Spawned.made = []
    targets = [SimpleNamespace(impl=SimpleNamespace(name=n)) for n in ("triton", "cuda")]  # all it reads of them
    workers.start_workers(problem, targets, "cuda", recorded=recorded)
    prepared = [p for w in _Spawned.made for cmd, p in w.sent if cmd == "prepare"]
    assert len(prepared) == 2 and all(w.trusted for w in _Spawned.made if w.sent)  # the baselines and their spare
    want = {br.control_baseline(problem)} if recorded else set(problem.baselines)
    assert all(set(p["baselines"]) == want for p in prepared)
    assert len(want) == (1 if recorded else 3)


def test_a_worker_that_prepared_the_control_loads_every_baseline_after(monkeypatch) -> None:
    """The worker's side (grader/child/worker.py Submission): `prepare` with the control only, then the timing
    stage's `load` with every baseline (a refused record times them all): each is there, the control's function
    object is the prepared one (its compiled code kept)."""
    import torch

    from grader.child.worker import Submission
    from grader.performance import workers
    from grader.problem.spec import find_problem, load_problem

    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    control = br.control_baseline(problem)
    monkeypatch.setattr(torch, "compile", lambda fn, dynamic: ("compiled", fn))  # the wrapper only, no Dynamo
    sub = Submission(torch, torch.device("cpu"))
    full = workers.baseline_payload(problem)
    sub._load_reference({**full, "baselines": {control: problem.baselines[control]}})
    prepared = sub.fns[control]
    assert sub.load(full) == "loaded"
    assert set(sub.fns) == set(problem.baselines) and sub.fns[control] is prepared


def test_a_compiled_baseline_is_compiled_at_its_first_call_not_at_load(monkeypatch) -> None:
    """With a record only the control is timed, so `load` must not make the other baselines' torch.compile (its
    Dynamo import was 1.6-2.6 s of every batch grade's exclusive hold on an H100, 2026-12-08): the compiled baseline
    is made at its first call (a warm-up), and from then on `fns` holds the compiled function itself."""
    import torch

    from grader.child.worker import Submission
    from grader.performance import workers
    from grader.problem.spec import find_problem, load_problem

    problem = load_problem(find_problem(None, Path(__file__).resolve().parent.parent))
    compiled_names = [n for n, b in problem.baselines.items() if "compile" in b]
    assert compiled_names, problem.baselines  # GLU's spec has one: the test would prove nothing without it
    made: list[object] = []

    def compile_(fn, dynamic):
        made.append(fn)
        return lambda *a: ("compiled", fn(*a))

    monkeypatch.setattr(torch, "compile", compile_)
    sub = Submission(torch, torch.device("cpu"))
    assert sub.load(workers.baseline_payload(problem)) == "loaded"
    assert set(sub.fns) == set(problem.baselines) and made == [], made  # nothing compiled by the load
    x = torch.randn(4, 8)
    for name in compiled_names:
        lazy = sub.fns[name]
        tag, y = lazy(x)
        assert tag == "compiled" and torch.allclose(y, torch.nn.functional.glu(x, -1), atol=1e-6)
        assert lazy(x)[0] == "compiled"  # called again through the same object (a warm-up loop): not compiled again
        assert sub.fns[name] is not lazy and sub.fns[name](x)[0] == "compiled"  # replaced: no wrapper when timed
    assert len(made) == len(compiled_names)  # once each
