"""COMPILES ONLY IN THE INTERPRETER (tests/test_gpucompile.py): a plain Python float global read in a kernel.

The interpreter reads LOG2E like any Python code. The compiler refuses every global that is not a
tl.constexpr: "Cannot access global variable LOG2E from within @jit'ed function". The fix is
`LOG2E = tl.constexpr(1.4426950408889634)`.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    a_off = row * row_stride + offs - row * h
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    y = a / (1.0 + tl.exp2(-b * LOG2E))  # BUG: LOG2E is not a tl.constexpr
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    x2 = x.view(-1, cols)
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    n = x2.shape[0] * h
    if n:
        glu_kernel[(triton.cdiv(n, 512),)](x2, y, n, h, x2.stride(0), BLOCK=512)
    return y
