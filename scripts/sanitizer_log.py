"""Print compute-sanitizer's own log for one CUDA submission on one input: how the installed CUDA words its
reports, which is what grader/child/cudacpu_binding.py's explain_sanitizer parses. Rerun it after a CUDA upgrade.

On a GPU host with compute-sanitizer (CUDA 13.0 on the H200 for the wording quoted in the tests), from the
repository root:

    python3 scripts/sanitizer_log.py tests/data/problems/glu/cuda_cpu/misaligned_float4 --shape 3 2002 \
        [--tool memcheck] [--dtype float32]

Backs the wording tests/test_cuda_cpu.py expects ("Access to ... is misaligned"); listed in docs/performance.md,
"Reproducing the figures".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from grader.correctness import sanitizer
from grader.cuda import build
from grader.child.cudacpu_binding import CpuRowKernel, KernelCallError  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("sub", type=Path)
ap.add_argument("--shape", type=int, nargs="+", default=[3, 2002])
ap.add_argument("--tool", default="memcheck", choices=sorted(sanitizer.TOOLS))
ap.add_argument("--dtype", default="float32")
a = ap.parse_args()
tmp = Path(tempfile.mkdtemp())
harness, why = sanitizer.build_harness(
    a.sub / "glu_cuda.cu", entry="glu_cuda_forward", arch=build.gpu_arch(), scratch=None, timeout_s=180,
    out_name="h", build_dir=tmp,
)
assert harness is not None, why
tool = sanitizer.find_compute_sanitizer()
assert tool is not None
k = CpuRowKernel(harness, "glu_cuda_forward", lambda c: c // 2, "README.md", "Part 2", "glu_cuda.cu",
                 [tool, *sanitizer.TOOLS[a.tool]])
x = torch.randn(*a.shape).to(getattr(torch, a.dtype))
try:
    k(x)
    print("no error reported")
except KernelCallError as e:
    print("LINE:", e)
    print("CATEGORY:", getattr(e, "category", ""))
    print("DETAIL:\n" + str(getattr(e, "detail", ""))[-6000:])
