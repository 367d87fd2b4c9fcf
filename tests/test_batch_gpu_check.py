"""scripts/batch_gpu_check.py's compare, the rule behind the "batch = single" claim (issue 19): every row but a
performance row identical, performance rows the same verdict and within CREDIT_NOISE of their points; and its
one-file results (batch.json, single.json), which are what comes back from a device run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "batch_gpu_check.py"


def row(name: str, score: float, top: float, kind: str, flags: list[str] | None = None) -> dict:
    return {"name": name, "score": score, "max_score": top, "status": "passed" if score > 0 else "failed",
            "extra_data": {"kind": kind, "flags": flags or []}}  # fmt: skip


def results(perf: float, corr: float = 1.0, flags: list[str] | None = None) -> dict:
    tests = [row("triton / correctness / a", corr, 1.0, "correctness"),
             row("triton / performance / big", perf, 4.0, "performance", flags)]  # fmt: skip
    return {"score": sum(t["score"] for t in tests), "tests": tests}


def compare(tmp_path: Path, batch: dict[str, dict], single: dict[str, dict]) -> subprocess.CompletedProcess:
    summary = {"gpu_models": {"NVIDIA H200": len(batch)}, "warnings": [], "submissions_per_gpu_hour": 111.3}
    (tmp_path / "batch.json").write_text(json.dumps({"results": batch, "summary": summary}))
    (tmp_path / "single.json").write_text(json.dumps({"results": single, "summary": None}))
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--phase", "compare",
                           "--single", ",".join(batch)], capture_output=True, text=True, check=False)  # fmt: skip


def test_timing_noise_on_a_partial_speed_credit_agrees(tmp_path):
    r = compare(tmp_path, {"a": results(3.60), "b": results(4.0)}, {"a": results(3.70), "b": results(4.0)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "same within timing noise" in r.stdout and "identical" in r.stdout and "111.3" in r.stdout


def test_a_correctness_row_a_flag_or_more_than_the_noise_differs(tmp_path):
    for single in (results(3.6, corr=0.0), results(3.6, flags=["FLAG"]), results(3.0)):
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        out.mkdir()
        r = compare(out, {"a": results(3.6)}, {"a": single})
        assert r.returncode == 1 and "DIFFERENT" in r.stdout, r.stdout + r.stderr


def test_a_submission_missing_from_one_phase_differs(tmp_path):
    r = compare(tmp_path, {"a": results(4.0), "b": results(4.0)}, {"a": results(4.0)})
    assert r.returncode == 1 and "b: missing (single)" in r.stdout, r.stdout
