"""Staff Triton solution for SwiGLU: y = silu(a) * b, x = [a | b] (same contract as assignment/swiglu/swiglu_triton.py).

Design (as GLU's staff kernel, reference/glu/solution_triton.py): one flat 1-D grid over the output elements;
output element i sits in row r = i // h, column c = i - r * h, and reads a at r * row_stride + c and b at h
further on. BLOCK is sized so that each thread moves one 16-byte vector of a, of b and of y (Triton specializes
h and the row stride on divisibility by 16, so the loads vectorize when the shape allows). The large-shape kernel
takes h, the row stride and the element count as compile-time constants: the division by h becomes a
multiply-high and a shift, and offsets are int32 (checked on the host), as in the kernel torch.compile generates
for a static shape. Math in fp32, rounded once on store:

    silu(a) * b = a * b / (1 + exp(-a))

a = +inf gives inf * b; a = -100 gives -100 b / inf = -0 (or +0); a = -inf gives -inf / inf = NaN (PyTorch's NaN).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

SPECIALIZE_MIN = 1 << 20  # output elements from which a shape gets its own compiled kernel


@triton.jit
def swiglu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    a_off = row * row_stride + (offs - row * h)
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    y = a * b / (1.0 + tl.exp(-a))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_kernel_fixed(x_ptr, y_ptr, N_OUT: tl.constexpr, H: tl.constexpr, ROW_STRIDE: tl.constexpr,
                        BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # int32: the host checked every offset fits
    if N_OUT % BLOCK == 0:
        mask = None
    else:
        mask = offs < N_OUT
    row = offs // H
    a_off = row * ROW_STRIDE + (offs - row * H)
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + H, mask=mask).to(tl.float32)
    y = a * b / (1.0 + tl.exp(-a))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def swiglu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    if x.stride(-1) != 1:
        x = x.contiguous()
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
    num_warps = 8
    block = 32 * num_warps * (16 // x.element_size())
    grid = (triton.cdiv(n_out, block),)
    fits_int32 = (rows - 1) * row_stride + cols < 2**31 and grid[0] * block < 2**31
    if n_out >= SPECIALIZE_MIN and fits_int32:
        swiglu_kernel_fixed[grid](x2, y, N_OUT=n_out, H=h, ROW_STRIDE=row_stride, BLOCK=block, num_warps=num_warps)
    else:
        swiglu_kernel[grid](x2, y, n_out, h, row_stride, BLOCK=block, num_warps=num_warps)
    return y
