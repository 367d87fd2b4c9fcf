"""BROKEN on purpose (tests/test_correctness.py): returns a non-contiguous view.

The output is computed into a (..., 2h) buffer ("same layout as x") and the wrapper returns buf[..., :h]:
right shape, dtype and values, but row stride 2h. Single-row and empty outputs are still contiguous.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, out_stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    y = a * tl.sigmoid(b)
    tl.store(y_ptr + row * out_stride + col, y.to(y_ptr.dtype.element_ty), mask=mask)


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
    buf = torch.empty((*x.shape[:-1], cols), dtype=x.dtype, device=x.device)
    y = buf[..., :h]  # BUG: a strided view; the kernel writes rows 2h apart below
    n_out = rows * h
    out_stride = cols
    if n_out == 0:
        return y
    row_stride = x2.stride(0) if rows > 1 else cols
    # 2-byte dtypes: twice the elements per program keeps bytes in flight per program the same.
    block = 2048 if x.element_size() == 2 else 1024
    grid = (triton.cdiv(n_out, block),)
    glu_kernel[grid](x2, buf, n_out, h, row_stride, out_stride, BLOCK=block, num_warps=4)
    return y
