"""CORRECT, other design: a flat grid with a branch-free, numerically stable sigmoid, exp of -|b| only (it never
overflows), picked with tl.where; the NaN in b propagates. Small blocks, 4 warps, inputs collapsed by hand."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def glu_flat(x_ptr, y_ptr, n_out, h, x_row_stride, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n_out
    r = i // h
    a = tl.load(x_ptr + r * x_row_stride + (i - r * h), mask=m).to(tl.float32)
    b = tl.load(x_ptr + r * x_row_stride + (i - r * h) + h, mask=m).to(tl.float32)
    e = tl.exp(-tl.abs(b))  # in (0, 1]
    s = tl.where(b >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(y_ptr + i, (a * s).to(y_ptr.dtype.element_ty), mask=m)


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    rows = math.prod(x.shape[:-1])
    y = torch.empty(x.shape[:-1] + (h,), dtype=x.dtype, device=x.device)
    if rows * h == 0:
        return y
    # Rows are x.stride(-2) apart when the leading dims collapse into one row stride (they do for a padded view
    # of a contiguous buffer); otherwise, copy first.
    if x.dim() > 2 and any(x.stride(d) != x.stride(d + 1) * x.shape[d + 1] for d in range(x.dim() - 2)):
        x = x.contiguous()
    row_stride = x.stride(-2) if x.dim() > 1 else cols
    BLOCK = 256
    glu_flat[(triton.cdiv(rows * h, BLOCK),)](x, y, rows * h, h, row_stride, BLOCK=BLOCK, num_warps=4)
    return y
