"""scripts/bench_grading.py (issue 32 item 5): the class it builds (a fixed order, a mix of honest and broken kernels
for any size), the agreement rule between a batch grade and a single grade (every row but a performance row equal,
performance rows within CREDIT_NOISE of their points and the same verdict), the figures' arithmetic, its nox
session, and (slow) one tiny end-to-end run on CPU."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_grading.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_grading", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_grading"] = mod
    spec.loader.exec_module(mod)
    return mod


B = _load()


def row(name: str, score: float, top: float, kind: str, flags: list[str] | None = None) -> dict:
    return {"name": name, "score": score, "max_score": top, "status": "passed" if score > 0 else "failed",
            "extra_data": {"kind": kind, "flags": flags or []}}  # fmt: skip


def results(perf: float, corr: float = 1.0, flags: list[str] | None = None) -> dict:
    tests = [row("triton / correctness / a", corr, 1.0, "correctness"),
             row("triton / performance / big", perf, 4.0, "performance", flags)]  # fmt: skip
    return {"score": sum(t["score"] for t in tests), "tests": tests}


# The class


def test_the_class_starts_with_the_staff_kernels_and_mixes_honest_and_broken_ones():
    order = [sid for sid, _ in B.class_order("glu", "cpu")]
    assert order[:2] == ["staff", "broken_chained_error"]  # --size 2: one honest, one broken
    six = order[:6]
    assert {s.split("_")[0] for s in six} >= {"staff", "broken", "correct", "cuda", "exploit", "stubs"}, six
    assert len(order) == len(set(order))
    assert order == [sid for sid, _ in B.class_order("glu", "cpu")]  # the same order every time


def test_every_submission_of_the_class_has_the_problems_files():
    for device in ("cpu", "cuda"):
        for sid, files in B.class_order("glu", device):
            assert files and set(files) <= {"glu_triton.py", "glu_cuda.cu"}, sid
            assert all(src.is_file() for src in files.values()), sid


def test_gpu_exploits_only_on_a_gpu_and_the_cpu_ones_everywhere():
    cpu = dict(B.class_order("glu", "cpu"))
    cuda = dict(B.class_order("glu", "cuda"))
    assert "exploit_gpu_side_stream" in cuda and "exploit_gpu_side_stream" not in cpu
    assert "exploit_negated_output" in cpu and "exploit_negated_output" in cuda
    assert set(cuda) - set(cpu) == {f"exploit_{x}" for x in B.GPU_EXPLOITS}


def test_size_ids_and_another_problem():
    assert list(B.select("glu", "cpu", 3)) == [sid for sid, _ in B.class_order("glu", "cpu")][:3]
    assert list(B.select("glu", "cpu", 10**6)) == [sid for sid, _ in B.class_order("glu", "cpu")]
    assert list(B.select("glu", "cuda", None, ["stubs", "staff"])) == ["stubs", "staff"]
    with pytest.raises(ValueError, match="no_such"):
        B.select("glu", "cpu", None, ["no_such"])
    back = B.select("glu_backward", "cpu", None)
    assert list(back)[0] == "staff" and {"cuda_cpu_correct", "broken_forgets_a", "correct_two_pass_rows"} <= set(back)
    assert set(back["staff"]) == {"glu_backward_triton.py", "glu_backward_cuda.cu"}


def test_make_class_copies_each_submission_under_its_target_names(tmp_path):
    cls = B.make_class(tmp_path / "class", B.select("glu", "cpu", 2))
    assert sorted(p.name for p in (cls / "staff").iterdir()) == ["glu_cuda.cu", "glu_triton.py"]
    staff_src = (ROOT / "reference" / "glu" / "solution_triton.py").read_bytes()
    assert (cls / "staff" / "glu_triton.py").read_bytes() == staff_src


# The agreement rule


def test_timing_noise_within_the_bound_agrees_and_says_so():
    assert B.agreement("a", results(4.0), results(4.0))["verdict"] == "identical"
    r = B.agreement("a", results(3.60), results(3.70))  # 0.10 <= 0.05 * 4 points
    assert r["ok"] and r["verdict"] == "same within timing noise"


def test_a_correctness_row_a_flag_or_more_than_the_noise_differs():
    for single in (results(3.6, corr=0.0), results(3.6, flags=["FLAG"]), results(3.0)):
        r = B.agreement("a", results(3.6), single)
        assert not r["ok"] and r["verdict"] == "DIFFERENT" and r["differences"], single


def test_a_missing_grade_or_other_rows_differ():
    assert B.agreement("a", results(4.0), None)["verdict"] == "missing (single)"
    assert B.agreement("a", None, results(4.0))["verdict"] == "missing (batch)"
    other = results(4.0)
    other["tests"] = other["tests"][:1]
    assert B.differences(results(4.0)["tests"], other["tests"]) == ["not the same rows"]


def test_a_non_performance_rows_max_score_must_match_too():
    a, b = results(4.0), results(4.0)
    b["tests"][0]["max_score"] = 2.0
    assert not B.agreement("a", a, b)["ok"]


# The figures


def test_phase_sums_and_throughput():
    res = {"a": {"extra_data": {"phases_s": {"build": 2.0, "correctness": 3.0}}},
           "b": {"extra_data": {"phases_s": {"correctness": 4.5, "performance": 1.0}}}, "c": {}}  # fmt: skip
    sums = B.phase_sums(res)
    assert sums == {"correctness": 7.5, "build": 2.0, "performance": 1.0} and list(sums)[0] == "correctness"
    assert B.throughput(6, 360.0, "cpu", 0) == 60.0  # 6 in 6 minutes: 60 an hour here
    assert B.throughput(6, 360.0, "cuda", 2) == 30.0  # per GPU
    assert B.throughput(0, 360.0, "cpu", 0) is None


def test_compare_reads_bench_json_and_exits_1_on_a_difference(tmp_path):
    doc = {
        "batch": {"results": {"a": results(3.6), "b": results(4.0)}, "summary": None, "wall_s": 100.0},
        "single": {"results": {"a": results(3.7), "b": results(2.0)}, "walls_s": {"a": 50.0, "b": 50.0}},
    }
    (tmp_path / "bench.json").write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--phase", "compare", "--device", "cpu",
                        "--single", "a,b"], capture_output=True, text=True, check=False)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "same within timing noise" in r.stdout and "DIFFERENT" in r.stdout and "1 submission(s) differ" in r.stdout
    figures = json.loads((tmp_path / "bench.json").read_text())["figures"]
    assert figures["per_hour"] == 72.0 and figures["single_mean_s"] == 50.0 and figures["disagreeing"] == 1


def test_compare_alone_judges_what_the_single_phase_regraded_not_the_whole_class(tmp_path):
    """A device session runs the phases as separate commands: `--phase single --single a` after a batch of a, b,
    then `--phase compare`. The compare judges a (the single phase's list, kept in bench.json), not b, which was
    never meant to be regraded (it used to report b 'missing' and exit 1)."""
    ids = "staff,stubs"
    doc = {
        "batch": {"results": {"staff": results(4.0), "stubs": results(0.0)}, "summary": None, "wall_s": 100.0},
        "single": {"results": {"staff": results(4.0)}, "walls_s": {"staff": 50.0}},
        "single_ids": ["staff"],
    }
    (tmp_path / "bench.json").write_text(json.dumps(doc))

    def compare(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--phase", "compare", "--device",
                               "cpu", "--ids", ids, *extra], capture_output=True, text=True, check=False)  # fmt: skip

    r = compare()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical" in r.stdout and "stubs" not in r.stdout and "missing" not in r.stdout
    # Asked for explicitly, a submission without a single grade is still reported missing.
    r = compare("--single", "staff,stubs")
    assert r.returncode == 1 and "stubs: missing (single)" in r.stdout


def test_the_nox_session_runs_the_script_with_its_arguments():
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "bench_grading")
    deco = ast.unparse(fn.decorator_list[0])
    assert "name='bench-grading'" in deco
    body = ast.unparse(fn)
    assert "scripts/bench_grading.py" in body and "session.posargs" in body and "_env(session)" in body


# End to end


@pytest.mark.slow  # two CPU grades in the batch and two single ones: ~30-60 s on 2 cores
def test_a_tiny_class_on_cpu_agrees_and_writes_its_figures(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--size", "2", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads((tmp_path / "bench.json").read_text())
    f = doc["figures"]
    assert f["batch_graded"] == 2 and f["single_graded"] == 2 and f["disagreeing"] == 0
    assert 0 < f["batch_tasks_s"] <= f["batch_wall_s"]
    assert f["per_hour"] > 0 and "correctness" in f["phases_batch_s"] and "correctness" in f["phases_single_s"]
    assert [a["sid"] for a in f["agreement"]] == ["staff", "broken_chained_error"]
    assert set(doc["batch"]["results"]) == set(doc["single"]["results"]) == {"staff", "broken_chained_error"}
    assert "every submission agrees" in r.stdout and "submissions per hour here" in r.stdout
