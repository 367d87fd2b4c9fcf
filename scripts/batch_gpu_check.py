"""The batch's GPU check (issue 19), now scripts/bench_grading.py on a fixed class: the 10 submissions below (the
staff kernels, the stubs, correct kernels of other designs, broken ones, GPU exploits) graded by
`python -m grader batch --engine local` on this host's GPUs, then each once more by a single
`python -m grader grade`; the scores must agree (bench_grading's rule: every row but a performance row identical,
performance rows the same verdict and within CREDIT_NOISE of their points). Prints the throughput in submissions
per GPU-hour. Kept so that the commands of docs/performance.md's device calls 11-12 still run as written; for new
figures use bench_grading.py.

    python scripts/batch_gpu_check.py --out DIR [--gpus 0,1] [--phase batch|single|compare|all] [--secret-file KEY]

Same options as before (--per-gpu N, --single ID,ID); DIR/bench.json holds both phases' results (older DIR/batch.json
and DIR/single.json are still read by `--phase compare`). Each phase fits in one 10-minute device command on an
H200 (10 grades of ~42 s). Exit 0 when every score matches, 1 when one differs, 2 on bad use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_grading  # noqa: E402  (a script beside this one, not a package)

CREDIT_NOISE = bench_grading.CREDIT_NOISE
differences = bench_grading.differences
CLASS = ("staff", "stubs", "correct_rows_2d_grid", "correct_persistent_row_loop", "correct_cuda_pairs",
         "broken_swapped_halves", "broken_missing_mask", "exploit_numpy_compute", "exploit_cache_by_ptr",
         "exploit_gpu_side_stream")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpus", default=None, help="default: every GPU")
    ap.add_argument("--phase", choices=("batch", "single", "compare", "all"), default="all")
    ap.add_argument("--secret-file", default=None)
    ap.add_argument("--per-gpu", default=None, help="batch --per-gpu N (default: the batch's own, 2)")
    ap.add_argument("--single", default=None, help="the single phase for these ids only (comma-separated)")
    a = ap.parse_args(argv)
    args = ["--out", a.out, "--device", "cuda", "--problem", "glu", "--ids", ",".join(CLASS), "--phase", a.phase]
    for flag, value in (("--gpus", a.gpus), ("--secret-file", a.secret_file), ("--per-gpu", a.per_gpu),
                        ("--single", a.single)):  # fmt: skip
        args += [flag, value] if value else []
    return bench_grading.main(args)


if __name__ == "__main__":
    sys.exit(main())
