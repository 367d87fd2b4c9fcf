"""Staff Triton solution for GeLU, tanh approximation (same contract as assignment/gelu/gelu_triton.py).

Design: one flat 1-D grid over the output elements, BLOCK per program, sized in 16-byte vectors per thread:
one per thread over 8 warps for fp32 (1024 elements), two per thread over 4 warps for fp16/bf16 (2048 elements).
A 16-bit element carries twice fp32's math per byte moved (the exp and the division are per element), and two
vectors in flight per thread hide it: on the H200 (`python3 scripts/gelu_variants.py`) fp16 8192x16384 went from
97.2% to 98.8% of a same-size copy, bf16 16384^2 from 98.5% to 100.6%; fp32 stays at one (100.8%, 99.5% with two). Element i of the output
sits in row r = i // cols and reads x at r * row_stride + (i - r * cols); when the rows are packed
(row_stride == cols, every graded performance case) that is just i, so the kernel has a CONTIGUOUS switch that
drops the division and the index arithmetic altogether. Math in fp32, cast once on store.

The formula, rewritten without the cancellation of 1 + tanh(u) near tanh(u) = -1:

    0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),    u = sqrt(2/pi) (x + 0.044715 x^3)

It saturates at the extremes like PyTorch's: x -> +inf gives x / 1 = inf; x = -100 gives -100 / inf = -0;
x = -inf gives -inf / inf = NaN (PyTorch's NaN too, see reference.py); NaN stays NaN. tl.exp works in the CPU
interpreter as well (no libdevice there).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # a global a @triton.jit function may read


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, cols, row_stride, BLOCK: tl.constexpr, CONTIGUOUS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # 64-bit offsets: inputs past 2^31 elements work
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if CONTIGUOUS:
        x_off = offs
    else:
        row = offs // cols
        x_off = row * row_stride + (offs - row * cols)
    x = tl.load(x_ptr + x_off, mask=mask).to(tl.float32)
    u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def gelu_triton(x: torch.Tensor) -> torch.Tensor:
    if x.dim() == 0:
        return gelu_triton(x.reshape(1)).reshape(())
    cols = x.shape[-1]
    if x.stride(-1) != 1:
        x = x.contiguous()
    try:  # leading dims collapsed to rows without a copy where the view allows (padded 2-D/3-D views do)
        x2 = x.view(-1, cols)
    except RuntimeError:
        x2 = x.reshape(-1, cols).contiguous()
    rows = x2.shape[0]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = rows * cols
    if n == 0:
        return y
    row_stride = x2.stride(0) if rows > 1 else cols
    # fp32: one 16-byte vector per thread over 8 warps; 16-bit types: two per thread over 4 warps (see above)
    num_warps, vectors = (8, 1) if x.element_size() == 4 else (4, 2)
    block = 32 * num_warps * vectors * (16 // x.element_size())
    grid = (triton.cdiv(n, block),)
    gelu_kernel[grid](
        x2, y, n, cols, row_stride, BLOCK=block, CONTIGUOUS=row_stride == cols, num_warps=num_warps
    )
    return y
