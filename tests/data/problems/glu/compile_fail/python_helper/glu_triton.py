"""COMPILES ONLY IN THE INTERPRETER (tests/test_gpucompile.py): a kernel calls a plain Python helper.

`sigmoid` has no @triton.jit. The interpreter calls it like any Python function. The compiler refuses it, because
a kernel can only call @triton.jit functions and triton.language. The fix is to decorate it with @triton.jit.
"""

import torch
import triton
import triton.language as tl


def sigmoid(t):
    return 1.0 / (1.0 + tl.exp(-t))


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    row = offs // h
    a_off = row * row_stride + offs - row * h
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a * sigmoid(b)).to(y_ptr.dtype.element_ty), mask=mask)  # BUG: sigmoid is not @triton.jit


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    x2 = x.view(-1, cols)
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    n = x2.shape[0] * h
    if n:
        glu_kernel[(triton.cdiv(n, 256),)](x2, y, n, h, x2.stride(0), BLOCK=256)
    return y
