"""Try Triton GLU kernel variants against torch.compile on the grader's own timing method (issue 3, part 6).

Every variant is timed with grader.timing.Timer exactly as the grader times a submission: fresh inputs and an
L2 flush before every call, a whole-device sleep while the host launches, CUDA events. Variants and the
compiled baseline are interleaved round-robin, one round (5 calls) each in turn, so drift hits them alike.

    python scripts/tune_triton.py [--rounds 30] [--out DIR]   # on a GPU machine, from the repository root

Prints, per case, each variant's median event time, its ratio to torch.compile and its share of the copy
figure; writes the Inductor kernel source for each case under --out, to compare designs.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path
from typing import Callable

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.spec import Case  # noqa: E402
from grader.timing import Timer  # noqa: E402

CASES = [
    ("lecture_16k", (16384, 16384), "float32"),
    ("llama3_8b_mlp", (8192, 28672), "bfloat16"),
    ("fp16_4k", (4096, 8192), "float16"),
    ("fp16_8k", (8192, 16384), "float16"),
]


@triton.jit
def flat_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr, WIDE: tl.constexpr, EVICT: tl.constexpr, EVEN: tl.constexpr = False):
    # The current staff design: 1-D grid over output elements, per-element row = offs // h.
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = None if EVEN else offs < n_out
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    if EVICT:
        a = tl.load(x_ptr + a_off, mask=mask, eviction_policy="evict_first").to(tl.float32)
        b = tl.load(x_ptr + a_off + h, mask=mask, eviction_policy="evict_first").to(tl.float32)
    else:
        a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
        b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def row_kernel(x_ptr, y_ptr, h, row_stride, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    # Valid when h % BLOCK == 0: every program lies inside one row, so the row is one scalar division per
    # program and the columns are one contiguous run; no mask (n_out is a multiple of BLOCK too).
    start = tl.program_id(0).to(tl.int64) * BLOCK
    row = start // h
    col = start - row * h
    cols = col + tl.arange(0, BLOCK)
    a_ptrs = x_ptr + row * row_stride + cols
    if EVICT:
        a = tl.load(a_ptrs, eviction_policy="evict_first").to(tl.float32)
        b = tl.load(a_ptrs + h, eviction_policy="evict_first").to(tl.float32)
    else:
        a = tl.load(a_ptrs).to(tl.float32)
        b = tl.load(a_ptrs + h).to(tl.float32)
    tl.store(y_ptr + start + tl.arange(0, BLOCK), (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty))


@triton.jit
def grid2d_kernel(x_ptr, y_ptr, h, row_stride, BLOCK: tl.constexpr):
    # 2-D grid: axis 0 over column blocks, axis 1 over rows; no division at all.
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < h
    a_ptrs = x_ptr + row * row_stride + cols
    a = tl.load(a_ptrs, mask=mask).to(tl.float32)
    b = tl.load(a_ptrs + h, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * h + cols, (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((1024, 4), (2048, 8), (2048, 4), (1024, 8), (4096, 8))],
    key=["n_out", "h", "row_stride"],
)
@triton.jit
def tuned_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty), mask=mask)


def tuned(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    n = y.numel()
    tuned_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n, h, x.stride(0))
    return y


def flat(block2: int, block4: int, warps: int, wide: bool = True, evict: bool = False, even: bool = False) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        n = y.numel()
        flat_kernel[(triton.cdiv(n, block),)](x, y, n, h, x.stride(0), BLOCK=block, WIDE=wide, EVICT=evict, EVEN=even and n % block == 0, num_warps=warps)
        return y
    return fn


def rowwise(block2: int, block4: int, warps: int, evict: bool = False) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        assert h % block == 0
        row_kernel[(y.numel() // block,)](x, y, h, x.stride(0), BLOCK=block, EVICT=evict, num_warps=warps)
        return y
    return fn


def grid2d(block2: int, block4: int, warps: int) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        grid2d_kernel[(triton.cdiv(h, block), x.shape[0])](x, y, h, x.stride(0), BLOCK=block, num_warps=warps)
        return y
    return fn


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("tune-out"))
    ap.add_argument("--cases", nargs="*", default=[c[0] for c in CASES])
    ap.add_argument("--only", nargs="*", default=None, help="variant names to time (default: all)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)

    spec = importlib.util.spec_from_file_location("staff_triton", ROOT / "reference" / "glu" / "solution_triton.py")
    staff = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(staff)
    ref_spec = importlib.util.spec_from_file_location("glu_ref", ROOT / "reference" / "glu" / "reference.py")
    ref = importlib.util.module_from_spec(ref_spec)
    ref_spec.loader.exec_module(ref)

    variants: dict[str, Callable] = {
        "staff": staff.glu_triton,
        "flat_i32": flat(2048, 1024, 4, wide=False),
        "flat_w8": flat(2048, 1024, 8),
        "flat_i32_w8": flat(2048, 1024, 8, wide=False),
        "flat_even_w8": flat(2048, 1024, 8, even=True),
        "flat_i32_even_w8": flat(2048, 1024, 8, wide=False, even=True),
        "autotune": tuned,
        "flat_1024_w4": flat(1024, 1024, 4),
        "flat_4096_w8": flat(4096, 2048, 8),
        "row_1024_w4": rowwise(1024, 1024, 4),
        "row_2048_w4": rowwise(2048, 1024, 4),
        "row_1024_w8": rowwise(1024, 1024, 8),
        "row_2048_w8": rowwise(2048, 2048, 8),
        "row_4096_w8": rowwise(4096, 2048, 8),
        "2d_2048_w4": grid2d(2048, 1024, 4),
        "2d_4096_w8": grid2d(4096, 2048, 8),
    }

    if a.only:
        variants = {k: v for k, v in variants.items() if k in a.only}
    timer = Timer(torch.device("cuda"))
    print("pre_call_sleep:", timer.sleep_kind, flush=True)
    bw = timer.copy_bandwidth()
    print(f"copy: {bw['bytes_per_s'] / 1e12:.3f} TB/s, read2_write1: {bw['read2_write1_bytes_per_s'] / 1e12:.3f} TB/s", flush=True)

    for name, shape, dtype in CASES:
        if name not in a.cases:
            continue
        torch._dynamo.reset()
        compiled = torch.compile(ref.manual, dynamic=False)
        # A plain copy moving the same bytes (half read, half written): the floor for this size, launch and
        # ramp-up included, which the 1 GiB copy figure amortizes away.
        elem = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
        src = torch.empty(3 * shape[0] * shape[1] * elem // 4, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        fns = {"compiled": compiled, "eager": ref.eager, **variants, "copy_same_bytes": lambda x: dst.copy_(src)}
        case = Case(name=name, shape=shape, dtype=dtype)
        p = {"case": case.__dict__, "seeds": [11, 12, 13], "warmup_ms": 100}
        timer.setup({}, p)  # the input sets only
        try:
            from torch._inductor.utils import run_and_get_code
            torch._dynamo.reset()
            compiled = torch.compile(ref.manual, dynamic=False)
            fns["compiled"] = compiled
            _, codes = run_and_get_code(compiled, timer.work[0])
            (a.out / f"inductor_{name}.py").write_text("\n\n".join(codes))
        except Exception as e:  # the source dump is a nicety; the timing does not depend on it
            print(f"  (no inductor source: {type(e).__name__}: {e})")
        x = timer.work[0]
        want = ref.eager(x)
        bad = []
        for vn, fn in list(fns.items()):
            if vn == "copy_same_bytes":
                continue
            try:
                got = fn(x)
                torch.testing.assert_close(got, want, rtol=2e-2, atol=1e-3)
            except Exception as e:
                bad.append(vn)
                print(f"  {vn}: skipped ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:100]})")
        for vn in bad:
            fns.pop(vn)
        timer.setup(fns, p)
        plan = [(k % 3, 1.0) for k in range(5)]
        times: dict[str, list[float]] = {vn: [] for vn in fns}
        for _ in range(a.rounds):
            for vn in fns:
                r = timer.round({vn: fns[vn]}, {"names": [vn], "plan": plan})
                times[vn] += r[vn]["event_ms"]
            timer.kept = {}
        nbytes = 1.5 * torch.tensor([], dtype=getattr(torch, dtype)).element_size() * shape[0] * shape[1]
        comp = statistics.median(times["compiled"])
        print(f"\n{name} {shape} {dtype}: {len(times['compiled'])} calls each")
        print(f"  {'variant':<16} {'median ms':>10} {'min ms':>9} {'vs compiled':>12} {'% copy':>7}")
        for vn, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
            med = statistics.median(ts)
            print(f"  {vn:<16} {med:10.4f} {min(ts):9.4f} {med / comp:11.4f}x {100 * nbytes / (med * 1e-3) / bw['bytes_per_s']:6.1f}%", flush=True)
        del fns, compiled, src, dst
        timer.pristine, timer.work = [], []
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
