"""The CPU-vs-GPU verdict table of issue 18: every CUDA submission of tests/cuda_cpu/ (and tests/correct/'s CUDA
designs) graded for correctness on the CPU layer and on the GPU, side by side, with the GPU's compute-sanitizer row.

    python3 lab/cuda_verdicts.py --jobs 6 [--out DIR]

Correctness grades only (no timing), so several run at once on one GPU. Prints one Markdown row per submission:
the CPU and GPU verdict per runnable case (passed / failed with its reason / skipped), whether they agree, and the
sanitizer row. tests/test_cuda_cpu.py::test_gpu_the_same_submissions_get_the_same_verdicts_as_on_cpu asserts the same
agreement one submission at a time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _grade(sub: str, device: str, out: str) -> dict[str, object]:
    from grader.pipeline import Options, grade
    from grader.results import Kind
    from grader.spec import load_problem

    problem = load_problem(ROOT / "reference" / "glu" / "spec.yaml")
    runnable = {c.name for c in problem.cases if not c.gpu_only}
    g = grade(problem, Options(Path(sub), Path(out), only=("cuda",), device=device, perf=False))
    cases = {
        t.extra["case"]: (t.state, str(t.reason))
        for t in g.tests
        if t.part == "cuda" and t.kind == Kind.CORRECTNESS and t.extra.get("case") in runnable
    }
    san = next((t for t in g.tests if t.part == "cuda" and t.kind == Kind.SANITIZER), None)
    first = {
        n: t.output.splitlines()[0][:160]
        for n, t in (
            (t.extra.get("case"), t)
            for t in g.tests
            if t.part == "cuda" and t.kind == Kind.CORRECTNESS and t.state == "failed"
        )
        if n
    }
    return {
        "cases": cases,
        "sanitizer": f"{san.state} ({san.reason}): {san.output.splitlines()[0][:200]}" if san else "-",
        "first_failure": next(iter(first.items()), None),
    }


def _summary(cases: dict[str, tuple[str, str]]) -> str:
    c = Counter(f"{s}" + (f" {r}" if s == "failed" else "") for s, r in cases.values())
    return ", ".join(f"{n} {k}" for k, n in sorted(c.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="", help="comma-separated submission folder names (default: all)")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="verdicts-"))
    subs = sorted(p for p in (ROOT / "tests" / "cuda_cpu").iterdir() if p.is_dir() and p.name != "hangs")
    subs += sorted(p for p in (ROOT / "tests" / "correct").iterdir() if (p / "glu_cuda.cu").is_file())
    if a.only:
        subs = [s for s in subs if s.name in a.only.split(",")]
    ctx = multiprocessing.get_context("spawn")  # the parent never touches CUDA; each grade is its own process
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx) as pool:
        futs = {
            (s.name, d): pool.submit(_grade, str(s), d, str(out / f"{s.name}-{d}"))
            for s in subs
            for d in ("cpu", "cuda")
        }
        print("| submission | CPU | GPU | same | GPU compute-sanitizer |")
        print("|---|---|---|---|---|")
        for s in subs:
            try:
                cpu, gpu = futs[(s.name, "cpu")].result(), futs[(s.name, "cuda")].result()
            except Exception as e:  # a crash is a row, not the end of the table
                print(f"| {s.name} | grade raised {type(e).__name__}: {e} | | | |")
                continue
            same = (
                "yes"
                if {n: v[0] for n, v in cpu["cases"].items()} == {n: v[0] for n, v in gpu["cases"].items()}
                else "NO"
            )
            print(f"| {s.name} | {_summary(cpu['cases'])} | {_summary(gpu['cases'])} | {same} | {gpu['sanitizer']} |")
            for dev, r in (("cpu", cpu), ("gpu", gpu)):
                if r["first_failure"]:
                    print(f"  {s.name} {dev} first failure: {r['first_failure']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
