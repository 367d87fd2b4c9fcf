"""gelu's staff Triton kernel in variants (vectors per thread, warps, streaming loads/stores), each against a
same-size copy, on the large cases: which one keeps fp16_8k above 95% of the copy with margin.

On a CUDA GPU (the figures are from an H200), from the repository root:

    python3 scripts/gelu_variants.py [--reps 5]

Times with triton.testing.do_bench (L2 flushed, median), interleaving variants each repetition so that drift hits
them all alike. Prints ms and % of the copy's time (copy ms / variant ms) per case and variant, median over reps.
Backs the variant table in docs/performance.md "Other problems: the staff kernels on the H200" (`--reps 3`) and the
design comment of reference/gelu/solution_triton.py (two 16-byte vectors per thread over 4 warps for 16-bit types).
"""

from __future__ import annotations

import argparse
import statistics

import torch
import triton
import triton.language as tl


@triton.jit
def gelu_v(x_ptr, y_ptr, n, BLOCK: tl.constexpr, STREAM: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STREAM:
        x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first").to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    if STREAM:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")
    else:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


VARIANTS = {  # name -> (vectors per thread, warps, streaming)
    "v1w8": (1, 8, False),
    "v1w8s": (1, 8, True),
    "v2w8": (2, 8, False),
    "v2w8s": (2, 8, True),
    "v2w4": (2, 4, False),
    "v4w4": (4, 4, False),
    "v4w8s": (4, 8, True),
}
CASES = {"fp16_8k": ((8192, 16384), torch.float16), "bf16_16k": ((16384, 16384), torch.bfloat16),
         "lecture_16k": ((16384, 16384), torch.float32)}  # fmt: skip


def run(x: torch.Tensor, y: torch.Tensor, vec: int, warps: int, stream: bool) -> None:
    block = 32 * warps * vec * (16 // x.element_size())
    gelu_v[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, STREAM=stream, num_warps=warps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    for cname, (shape, dt) in CASES.items():
        x = torch.randn(shape, device="cuda", dtype=dt)
        y = torch.empty_like(x)
        ref = torch.nn.functional.gelu(x.float(), approximate="tanh").to(dt)
        for v in VARIANTS.values():
            run(x, y, *v)
            torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
        ms: dict[str, list[float]] = {k: [] for k in ["copy", *VARIANTS]}
        for _ in range(a.reps):
            ms["copy"].append(triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=200))
            for k, v in VARIANTS.items():
                ms[k].append(triton.testing.do_bench(lambda v=v: run(x, y, *v), warmup=25, rep=200))
        copy = statistics.median(ms["copy"])
        row = [f"{cname}: copy {copy:.4f} ms"]
        for k in VARIANTS:
            m = statistics.median(ms[k])
            row.append(f"{k} {m:.4f} ({100 * copy / m:.1f}%, spread {100 * (max(ms[k]) - min(ms[k])) / m:.1f}%)")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
