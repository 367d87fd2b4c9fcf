"""GLU kernel variants (Triton, and with --cuda the staff CUDA kernel and its compile-time variants) against
torch.compile, timed the way the grader times a submission (issue 3, part 6).

Measures, per perf case, each variant's median CUDA-event time, its ratio to torch.compile and its share of the copy
ceiling; with `--cupti N`, each variant's own kernels' device time (CUPTI through torch.profiler) without the event
interval's launch edges; with `--flush read`, the same with a clean L2 instead of the grader's dirty one. Every
variant is timed with grader.child.timing.Timer exactly as the grader times a submission: fresh inputs and an L2
flush before every call, a whole-device sleep while the host launches, CUDA events. Variants and the compiled
baseline are interleaved round-robin, one round (5 calls) each in turn, so drift hits them alike. Writes the
Inductor kernel source for each case under --out, to compare designs.

On a CUDA GPU (the figures are from an H200), from the repository root:

    python3 scripts/tune_triton.py [--rounds 30] [--out DIR] [--cases NAME ...] [--only VARIANT ...] [--cuda] [--cupti N]

Backs docs/performance.md: the L2-flush paragraph under "Floors" (run 16: `--cases llama3_8b_mlp fp16_4k --cuda
--cupti 200`, then `--flush read`), and "Staff kernels": bytes per thread (run 10, `--rounds 40`), the exp (run 17),
the literal h (runs 18-19) and the "Where they ended" table (run 21: `--rounds 120 --cases lecture_16k llama3_8b_mlp
fp16_4k fp16_8k --cuda --cupti 250`; `--only staff_cuda cuda_fast_expf` for the `__expf` row).
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

from grader.problem.spec import Case
from grader.child.timing import Timer  # noqa: E402

CASES = [
    ("lecture_16k", (16384, 16384), "float32"),
    ("llama3_8b_mlp", (8192, 28672), "bfloat16"),
    ("fp16_4k", (4096, 8192), "float16"),
    ("fp16_8k", (8192, 16384), "float16"),
]


try:  # Inductor's exp (libdevice's accurate expf); the CPU interpreter has no libdevice
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover
    libdevice = None


@triton.jit
def flat_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr, WIDE: tl.constexpr, EVICT: tl.constexpr, EVEN: tl.constexpr = False, LD: tl.constexpr = False):
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
    if LD:
        g = 1.0 / (1.0 + libdevice.exp(-b))
    else:
        g = tl.sigmoid(b)
    tl.store(y_ptr + offs, (a * g).to(y_ptr.dtype.element_ty), mask=mask)


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


@triton.jit
def const_kernel(x_ptr, y_ptr, n_out, H: tl.constexpr, ROW_STRIDE: tl.constexpr, BLOCK: tl.constexpr, WIDE: tl.constexpr, EVEN: tl.constexpr, LD: tl.constexpr = False):
    # Inductor's design for a static shape: the row length and stride are compile-time literals, so the
    # division by H is a multiply-high and a shift; one compile per shape.
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = None if EVEN else offs < n_out
    row = offs // H
    col = offs - row * H
    a_off = row * ROW_STRIDE + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + H, mask=mask).to(tl.float32)
    if LD:
        g = 1.0 / (1.0 + libdevice.exp(-b))
    else:
        g = tl.sigmoid(b)
    tl.store(y_ptr + offs, (a * g).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def persistent_kernel(x_ptr, y_ptr, n_out, h, row_stride, n_blocks, BLOCK: tl.constexpr):
    # A fixed grid (a few programs per SM) that strides over the blocks: no block launch or tail per tile.
    for blk in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        offs = blk * BLOCK + tl.arange(0, BLOCK)  # int32: fine for the tuning cases (< 2^31 elements)
        mask = offs < n_out
        row = offs // h
        col = offs - row * h
        a_off = row * row_stride + col
        a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
        b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def exact_kernel(x_ptr, y_ptr, H: tl.constexpr, ROW_STRIDE: tl.constexpr, BLOCK: tl.constexpr, LIBDEVICE: tl.constexpr):
    # Inductor's kernel for the manual GLU, line for line: int32 index, % and // by literals, no mask,
    # 1 / (exp(-b) + 1) with libdevice's exp (or tl.exp).
    xindex = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = xindex % H
    x1 = xindex // H
    a = tl.load(x_ptr + (x0 + ROW_STRIDE * x1), None).to(tl.float32)
    b = tl.load(x_ptr + (H + x0 + ROW_STRIDE * x1), None).to(tl.float32)
    if LIBDEVICE:
        e = libdevice.exp(-b)
    else:
        e = tl.exp(-b)
    y = a * (1 / (e + 1.0))
    tl.store(y_ptr + xindex, y.to(y_ptr.dtype.element_ty), None)


def exact(block2: int, block4: int, warps: int, stages: int, use_libdevice: bool) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        n = y.numel()
        assert n % block == 0 and n < 2**31
        exact_kernel[(n // block,)](x, y, H=h, ROW_STRIDE=x.stride(0), BLOCK=block, LIBDEVICE=use_libdevice, num_warps=warps, num_stages=stages)
        return y
    return fn


def const(block2: int, block4: int, warps: int, wide: bool, ld: bool = False, even: bool = True) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        n = y.numel()
        const_kernel[(triton.cdiv(n, block),)](x, y, n, H=h, ROW_STRIDE=x.stride(0), BLOCK=block, WIDE=wide, EVEN=even and n % block == 0, LD=ld, num_warps=warps)
        return y
    return fn


def persistent(block2: int, block4: int, warps: int, per_sm: int) -> Callable:
    sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1

    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        n = y.numel()
        nb = triton.cdiv(n, block)
        persistent_kernel[(min(nb, sms * per_sm),)](x, y, n, h, x.stride(0), nb, BLOCK=block, num_warps=warps)
        return y
    return fn


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


def flat(block2: int, block4: int, warps: int, wide: bool = True, evict: bool = False, even: bool = False, ld: bool = False) -> Callable:
    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
        block = block2 if x.element_size() == 2 else block4
        n = y.numel()
        flat_kernel[(triton.cdiv(n, block),)](x, y, n, h, x.stride(0), BLOCK=block, WIDE=wide, EVICT=evict, EVEN=even and n % block == 0, LD=ld, num_warps=warps)
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


def kernel_us(timer: Timer, fn: Callable, calls: int) -> tuple[float, set[str]]:
    """Mean device time per call of fn's own kernels (CUPTI, through torch.profiler), each call made as the
    grader makes it (fresh input, L2 flush, whole-device sleep): the kernel alone, without the event interval's
    launch edges."""
    from torch.profiler import ProfilerActivity, profile

    def dev_us(e) -> float:
        return float(getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0))

    x = timer._view(timer.work[0])
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages() if dev_us(e) > 0}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for k in range(calls):
            timer._mul(timer.pristine[k % len(timer.pristine)], 1.0, out=timer.work[k % len(timer.work)])
            x = timer._view(timer.work[k % len(timer.work)])
            timer._zero(timer.flush)
            timer._occupy(1000)
            fn(x)
        torch.cuda.synchronize()
    total = sum(dev_us(e) for e in prof.key_averages() if e.key in names)
    return total / calls, names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("tune-out"))
    ap.add_argument("--cases", nargs="*", default=[c[0] for c in CASES])
    ap.add_argument("--only", nargs="*", default=None, help="variant names to time (default: all)")
    ap.add_argument("--cuda", action="store_true", help="also time the staff CUDA kernel (built with grader.cuda.build)")
    ap.add_argument("--cupti", type=int, default=0, metavar="N",
                    help="also measure each variant's own kernels with torch.profiler (CUPTI) over N calls")
    ap.add_argument("--flush", choices=["zero", "read"], default="zero",
                    help="L2 flush: zero the buffer (the grader's way, leaves dirty lines) or read it (clean lines)")
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
        "v2": flat(2048, 1024, 8),  # the previous staff kernel: tl.sigmoid, runtime h, int64, masked
        # libdevice's exp (run 16), crossed with the index choices: int64/int32, masked/even, runtime/literal h.
        "ld_i64_mask": flat(2048, 1024, 8, ld=True),
        "ld_i32_mask": flat(2048, 1024, 8, wide=False, ld=True),
        "ld_i32_even": flat(2048, 1024, 8, wide=False, even=True, ld=True),
        "ld_i64_even": flat(2048, 1024, 8, even=True, ld=True),
        "ld_const_i32_even": const(2048, 1024, 8, wide=False, ld=True),
        "ld_const_i64_mask": const(2048, 1024, 8, wide=True, ld=True, even=False),
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
        # Inductor's own kernel shape: int32, no mask, literal row length, 4 warps of 8 elements (16 B) each.
        "inductor_clone": const(1024, 1024, 4, wide=False),
        "const_w8": const(2048, 1024, 8, wide=True),
        "const_i32_w8": const(2048, 1024, 8, wide=False),
        "persist_w8_x8": persistent(2048, 1024, 8, 8),
        "persist_w8_x4": persistent(2048, 1024, 8, 4),
        # Inductor's kernel verbatim (num_stages=1 as Inductor launches pointwise kernels), then one change each.
        "exact_ld_w4_s1": exact(1024, 1024, 4, 1, True),
        "exact_ld_w4_s3": exact(1024, 1024, 4, 3, True),
        "exact_fast_w4_s1": exact(1024, 1024, 4, 1, False),
        "exact_ld_w8_s1": exact(2048, 1024, 8, 1, True),
        "exact_fast_w8_s1": exact(2048, 1024, 8, 1, False),
    }

    if a.only:
        variants = {k: v for k, v in variants.items() if k in a.only}
    if a.cuda:
        from grader.cuda import build
        from grader.child.cuda_binding import CudaRowKernel
        res = build.build_cuda(ROOT / "reference" / "glu" / "solution_cuda.cu", cache_dir=build.default_cache_dir(), arch=build.gpu_arch())
        if not res.ok:
            print(res.log)
            return 1
        cuda = CudaRowKernel(res.lib, "glu_cuda_forward", lambda c: c // 2, "assignment/README.md", "Part 2")
        cuda.poison = False
        variants["staff_cuda"] = cuda
        # The staff kernel with its compile-time knobs changed (a #define ahead of the source).
        import tempfile
        src = (ROOT / "reference" / "glu" / "solution_cuda.cu").read_text()
        tmp = Path(tempfile.mkdtemp())
        for vn, define in (("cuda_plain_store", "#define GLU_STREAMING_STORE 0"), ("cuda_t128", "#define GLU_THREADS 128"),
                           ("cuda_t512", "#define GLU_THREADS 512"), ("cuda_exp_ftz", "#define GLU_EXP 1"),
                           ("cuda_expf", "#define GLU_EXP 2"), ("cuda_fast_expf", "#define GLU_EXP 0"), ("cuda_exp_ftz_t512", "#define GLU_EXP 1\n#define GLU_THREADS 512"),
                           ("cuda_exp_ftz_plain", "#define GLU_EXP 1\n#define GLU_STREAMING_STORE 0"),
                           ("cuda_expf_plain", "#define GLU_EXP 2\n#define GLU_STREAMING_STORE 0"),
                           ("cuda_ldcg", "#define GLU_LOAD 1"), ("cuda_ldcs", "#define GLU_LOAD 2"), ("cuda_ld", "#define GLU_LOAD 3"),
                           ("cuda_expf_ld", "#define GLU_EXP 2\n#define GLU_LOAD 3"), ("cuda_expf_ld_plain", "#define GLU_EXP 2\n#define GLU_LOAD 3\n#define GLU_STREAMING_STORE 0")):
            if a.only is not None and vn not in a.only:
                continue
            (tmp / f"{vn}.cu").write_text(define + "\n" + src)
            r = build.build_cuda(tmp / f"{vn}.cu", cache_dir=build.default_cache_dir(), arch=build.gpu_arch())
            if not r.ok:
                print(f"  {vn}: build failed: {r.log[-300:]}")
                continue
            k = CudaRowKernel(r.lib, "glu_cuda_forward", lambda c: c // 2, "assignment/README.md", "Part 2")
            k.poison = False
            variants[vn] = k
    timer = Timer(torch.device("cuda"))
    if a.flush == "read":
        # Reading the buffer fills L2 with clean lines: the timed kernel then pays no write-back for them.
        timer._zero = lambda buf: torch.sum(buf.view(torch.int64))
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
        if a.cupti:
            print(f"  CUPTI (torch.profiler), the variant's own kernels, mean over {a.cupti} calls:")
            cupti = {vn: kernel_us(timer, fn, a.cupti) for vn, fn in fns.items() if vn != "manual"}
            comp_k = cupti["compiled"][0]
            for vn, (us, names) in sorted(cupti.items(), key=lambda kv: kv[1][0]):
                print(f"  {vn:<16} {us:9.2f} us {us / comp_k:8.4f}x  {', '.join(sorted(names))[:80]}", flush=True)
        del fns, compiled, src, dst
        timer.pristine, timer.work = [], []
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
