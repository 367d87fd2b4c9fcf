"""Staff Triton solution for GLU (same contract as assignment/glu/glu_triton.py).

Design: one flat 1-D grid over the *output* elements. Output element i sits in row r = i // h, column
c = i - r*h, and reads a at r*row_stride + c and b at h further on. Each program handles BLOCK elements, so
every load/store is a coalesced run except at row boundaries, in 16-byte vectors where h and the row stride are
multiples of 16 elements (Triton specializes integer arguments on that divisibility). Math is in fp32, cast
once on store.

Two kernels, chosen by size (measured on an H200, docs/performance.md#staff-kernels):
- glu_kernel_fixed, for large tensors: the row length, row stride and element count are compile-time
  constants, as in the kernel torch.compile generates for a static shape. Dividing by a literal h is a
  multiply-high and a shift; offsets fit in int32 (checked here); with n_out a multiple of BLOCK there is no
  mask. The sigmoid's exp comes from libdevice: with a literal h that was 0.1-0.3% faster than tl.exp, which
  lowers to ex2.approx.f32 and its denormal fix-ups (libdevice's expf uses the flush-to-zero form). One
  compile per shape (~0.3 s), paid back on a tensor this size; this is what ties or beats torch.compile.
- glu_kernel, for everything else: h and the row stride are runtime values and offsets are int64, so one
  compiled kernel serves every small shape, and inputs past 2^31 elements work.
The CPU interpreter has no libdevice, so there the fixed kernel uses tl.exp: same formula, same saturation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # an older Triton without the dispatching module: the tl.exp path still works
    libdevice = None

# Output elements from which a shape gets its own compiled kernel (4 MB of fp32 output; the graded perf cases
# have 16-117 M). Tests lower it to run the fixed kernel on small shapes.
SPECIALIZE_MIN = 1 << 20


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    y = a * tl.sigmoid(b)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def glu_kernel_fixed(x_ptr, y_ptr, N_OUT: tl.constexpr, H: tl.constexpr, ROW_STRIDE: tl.constexpr,
                     BLOCK: tl.constexpr, LIBDEVICE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # int32: the host checked every offset fits
    if N_OUT % BLOCK == 0:
        mask = None  # every program is full
    else:
        mask = offs < N_OUT
    row = offs // H  # a literal divisor: multiply-high and shift
    col = offs - row * H
    a_off = row * ROW_STRIDE + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + H, mask=mask).to(tl.float32)
    # sigmoid(b) = 1 / (1 + e^-b): e^-b = inf for b -> -inf gives 0, and e^-b = 0 for b -> +inf gives 1.
    if LIBDEVICE:
        e = libdevice.exp(-b)
    else:
        e = tl.exp(-b)
    y = a * (1.0 / (1.0 + e))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    if x.stride(-1) != 1:
        x = x.contiguous()
    # Collapse leading dims to rows without copying when the view allows (padded 2-D/3-D views do).
    try:
        x2 = x.view(-1, cols)
    except RuntimeError:
        x2 = x.reshape(-1, cols).contiguous()
    rows = x2.shape[0]
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    n_out = rows * h
    if n_out == 0:
        return y
    row_stride = x2.stride(0) if rows > 1 else cols
    # 8 warps, and BLOCK sized so that each thread loads exactly one 16-byte vector of a and one of b
    # (1024 fp32 or 2048 fp16/bf16 elements). Measured on the H200 (docs/performance.md#staff-kernels) against 4 warps
    # with 32 bytes per thread: 0.4-0.6% faster on the large perf cases.
    num_warps = 8
    block = 32 * num_warps * (16 // x.element_size())
    grid = (triton.cdiv(n_out, block),)
    # The largest input offset read is (rows - 1) * row_stride + 2h - 1; the last program's offsets reach
    # grid * block - 1 (masked, but computed): both must fit in int32 for the fixed kernel.
    fits_int32 = (rows - 1) * row_stride + cols < 2**31 and grid[0] * block < 2**31
    if n_out >= SPECIALIZE_MIN and fits_int32:
        use_libdevice = x.is_cuda and libdevice is not None
        glu_kernel_fixed[grid](x2, y, N_OUT=n_out, H=h, ROW_STRIDE=row_stride, BLOCK=block,
                               LIBDEVICE=use_libdevice, num_warps=num_warps)
    else:
        glu_kernel[grid](x2, y, n_out, h, row_stride, BLOCK=block, num_warps=num_warps)
    return y
