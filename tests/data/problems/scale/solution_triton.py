"""Staff solution for scale: y = 2 x over rows that may be padded (row stride >= cols)."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, cols, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // cols
    x = tl.load(x_ptr + row * row_stride + (offs - row * cols), mask=mask)
    tl.store(y_ptr + offs, (x.to(tl.float32) * 2).to(y_ptr.dtype.element_ty), mask=mask)


def scale_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    x2 = x.reshape(-1, cols) if x.stride(-1) == 1 else x.contiguous().reshape(-1, cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = y.numel()
    if n:
        stride = x2.stride(0) if x2.shape[0] > 1 else cols
        scale_kernel[(triton.cdiv(n, 1024),)](x2, y, n, cols, stride, BLOCK=1024)
    return y
