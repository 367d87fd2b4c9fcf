"""The batch's GPU check (issue 19): ~10 submissions (the staff kernels, the stubs, correct kernels of other designs,
broken ones, exploits) graded by `python -m grader batch --engine local` on this host's GPUs, then each graded once
more by a single `python -m grader grade`; the scores must agree. Every row but a performance row (build,
correctness, kernel check, sanitizer) must be identical, and so must each performance row's verdict (passed,
flagged or not); a performance row's points may differ by the timing noise of two runs, at most CREDIT_NOISE of
its points (a case's median moves < 2% between grades on the H200, docs/performance.md, and 2% of the time moves
the credit by ~0.03 between the thresholds). Prints the throughput in submissions per GPU-hour (the batch's own
figure: task wall time summed over GPU slots) and the wall-clock figure.

    python scripts/batch_gpu_check.py --out DIR [--gpus 0,1] [--phase batch|single|compare|all] [--secret-file KEY]

Each phase also writes DIR/batch.json or DIR/single.json, all of its results in one file: bring those back from a
machine that returns few files (`--out /tmp/bc`, then `cp /tmp/bc/*.json "$OUT"`), and `--phase compare --out D`
with them in D reads them.

Each phase fits in one 10-minute device command on an H200 (10 grades of ~42 s; the batch phase is faster with more
GPUs); `--phase all` runs the three in a row. Exit 0 when every score matches, 1 when one differs, 2 on bad use.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T = ROOT / "tests"
CREDIT_NOISE = 0.05  # of a performance row's points: two grades' timing noise (see the docstring)
CLASS = {  # id -> files (target name -> source)
    "staff": {"glu_triton.py": ROOT / "reference/glu/solution_triton.py", "glu_cuda.cu": ROOT / "reference/glu/solution_cuda.cu"},
    "stubs": {"glu_triton.py": ROOT / "assignment/glu/glu_triton.py", "glu_cuda.cu": ROOT / "assignment/glu/glu_cuda.cu"},
    "correct_rows_2d_grid": {"glu_triton.py": T / "correct/rows_2d_grid/glu_triton.py"},
    "correct_persistent_row_loop": {"glu_triton.py": T / "correct/persistent_row_loop/glu_triton.py"},
    "correct_cuda_pairs": {"glu_cuda.cu": T / "correct/cuda_pairs/glu_cuda.cu"},
    "broken_swapped_halves": {"glu_triton.py": T / "broken/swapped_halves/glu_triton.py"},
    "broken_missing_mask": {"glu_triton.py": T / "broken/missing_mask/glu_triton.py"},
    "exploit_numpy_compute": {"glu_triton.py": T / "exploits/numpy_compute/glu_triton.py"},
    "exploit_cache_by_ptr": {"glu_triton.py": T / "exploits/cache_by_ptr/glu_triton.py"},
    "exploit_gpu_side_stream": {"glu_triton.py": T / "exploits/gpu_side_stream/glu_triton.py"},
}  # fmt: skip


def make_class(d: Path) -> Path:
    for sid, files in CLASS.items():
        (d / sid).mkdir(parents=True, exist_ok=True)
        for name, src in files.items():
            shutil.copyfile(src, d / sid / name)
    return d


def rows(p: Path) -> tuple[float, list[dict]]:
    r = json.loads(p.read_text())
    return float(r["score"]), r["tests"]


def pack(out: Path, phase: str) -> None:
    """OUT/<phase>.json: every results.json of the phase (and the batch's summary) in one file, the one file to
    bring back from a machine that returns few files (the device tool's count limit cut a whole phase once);
    `--phase compare` reads a phase's folder back from it (`unpack`) when the folder is not there."""
    d = out / phase
    got = {x.name: json.loads((x / "results.json").read_text()) for x in sorted(d.glob("*/")) if (x / "results.json").is_file()}
    summary = d / "batch_summary.json"
    doc = {"results": got, "summary": json.loads(summary.read_text()) if summary.is_file() else None}
    (out / f"{phase}.json").write_text(json.dumps(doc))


def unpack(out: Path, phase: str) -> None:
    packed = out / f"{phase}.json"
    if (out / phase).is_dir() or not packed.is_file():
        return
    doc = json.loads(packed.read_text())
    for sid, r in doc["results"].items():
        (out / phase / sid).mkdir(parents=True, exist_ok=True)
        (out / phase / sid / "results.json").write_text(json.dumps(r))
    if doc.get("summary") is not None:
        (out / phase / "batch_summary.json").write_text(json.dumps(doc["summary"]))


def differences(batch: list[dict], single: list[dict]) -> list[str]:
    """What differs between two grades' rows beyond timing noise (see the module's docstring)."""
    if [t["name"] for t in batch] != [t["name"] for t in single]:
        return ["not the same rows"]
    out = []
    for b, s in zip(batch, single, strict=True):
        perf = b.get("extra_data", {}).get("kind") == "performance" or "/ performance /" in b["name"]
        if not perf and (b["score"], b["status"]) != (s["score"], s["status"]):
            out.append(f"{b['name']}: batch {b['score']:g} ({b['status']}), single {s['score']:g} ({s['status']})")
        elif perf:
            bf, sf = bool(b.get("extra_data", {}).get("flags")), bool(s.get("extra_data", {}).get("flags"))
            noise = CREDIT_NOISE * float(b.get("max_score") or 0)
            if b["status"] != s["status"] or bf != sf or abs(b["score"] - s["score"]) > noise + 1e-9:
                out.append(f"{b['name']}: batch {b['score']:.3f} ({b['status']}, flagged {bf}), single "
                           f"{s['score']:.3f} ({s['status']}, flagged {sf}); noise allowed {noise:.3f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", default=None, help="default: every GPU")
    ap.add_argument("--phase", choices=("batch", "single", "compare", "all"), default="all")
    ap.add_argument("--secret-file", default=None)
    ap.add_argument("--per-gpu", default=None, help="batch --per-gpu N (default: the batch's own, 2)")
    ap.add_argument("--single", default=None, help="the single phase for these ids only (comma-separated)")
    a = ap.parse_args()
    singles = [x for x in a.single.split(",") if x] if a.single else list(CLASS)
    out = a.out.resolve()
    cls = make_class(out / "class")
    key = ["--secret-file", a.secret_file, "--allow-advisory"] if a.secret_file else []  # a measurement
    if a.phase in ("batch", "all"):
        cmd = [sys.executable, "-m", "grader", "batch", str(cls), "--out", str(out / "batch"), "--engine", "local"]
        cmd += (["--gpus", a.gpus] if a.gpus else []) + (["--per-gpu", a.per_gpu] if a.per_gpu else []) + key
        t0 = time.monotonic()
        rc = subprocess.run(cmd, cwd=ROOT, check=False).returncode
        wall = time.monotonic() - t0
        n = len(CLASS)
        print(f"batch: exit {rc}, {n} submissions in {wall:.0f} s wall: {n / (wall / 3600):.0f} per hour on this host")
        (out / "batch_wall_s").write_text(f"{wall}\n")
        pack(out, "batch")
    if a.phase in ("single", "all"):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": (a.gpus or "0").split(",")[0]}
        for sid in singles:
            dest = out / "single" / sid
            if (dest / "results.json").is_file():
                continue
            cmd = [sys.executable, "-m", "grader", "grade", "--submission", str(cls / sid), "--out", str(dest), *key]
            t0 = time.monotonic()
            rc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False).returncode
            print(f"single grade of {sid}: exit {rc} in {time.monotonic() - t0:.0f} s", flush=True)
            pack(out, "single")  # after each grade: a time limit that cuts the phase keeps what was graded
    if a.phase in ("compare", "all"):
        for phase in ("batch", "single"):
            unpack(out, phase)
        bad = 0
        for sid in singles:
            b, s = out / "batch" / sid / "results.json", out / "single" / sid / "results.json"
            if not (b.is_file() and s.is_file()):
                print(f"{sid}: missing ({'batch' if not b.is_file() else 'single'})")
                bad += 1
                continue
            (bt, btests), (st, stests) = rows(b), rows(s)
            diff = differences(btests, stests)
            bad += bool(diff)
            exact = bt == st and [t["score"] for t in btests] == [t["score"] for t in stests]
            verdict = "DIFFERENT" if diff else "identical" if exact else "same within timing noise"
            print(f"{sid:32s} batch {bt:7.3f}  single {st:7.3f}  {verdict}")
            for line in diff[:5]:
                print(f"    {line}")
        sp = out / "batch" / "batch_summary.json"
        summary = json.loads(sp.read_text()) if sp.is_file() else None
        if summary is None:
            print("no batch_summary.json: the batch did not finish")
        else:
            print(f"GPU models: {summary['gpu_models']}; warnings: {summary['warnings'] or 'none'}")
            print(f"submissions per GPU-hour (task time on GPU slots): {summary['submissions_per_gpu_hour']}")
        print(f"{'every submission agrees' if not bad else f'{bad} submission(s) differ'}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
