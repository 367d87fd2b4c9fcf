"""BROKEN on purpose (tests/test_hints.py): the row stride passed in bytes, not elements.

x2.stride(0) * x.element_size() is a byte count; Triton's pointer arithmetic counts elements. Row 0 is right and
every later row reads element_size times too far: past the end of x, with every lane inside the mask. The
diagnosis must say "a wrong address inside the mask" and name row_stride, not "add a mask".
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


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
    row_stride = x2.stride(0) * x.element_size()  # BUG: bytes; Triton offsets count elements
    # 2-byte dtypes: twice the elements per program keeps bytes in flight per program the same.
    block = 2048 if x.element_size() == 2 else 1024
    grid = (triton.cdiv(n_out, block),)
    glu_kernel[grid](x2, y, n_out, h, row_stride, BLOCK=block, num_warps=4)
    return y
