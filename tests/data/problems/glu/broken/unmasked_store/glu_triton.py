"""BROKEN on purpose (tests/test_correctness.py): no mask at all; the grid is rounded up, so the last program's
lanes past n_out load past the end of x and store past the end of y.

In Triton's interpreter that store used to write into the worker's heap and crash it later, at random. The
grader checks the interpreter's accesses, so every case whose n_out is not a multiple of BLOCK now fails with an
out-of-bounds error that names the kernel and the argument. On a GPU it is the same bug: memory corruption or a
fault.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row = offs // h
    a_off = row * row_stride + offs - row * h
    a = tl.load(x_ptr + a_off).to(tl.float32)  # BUG: no mask=offs < n_out on the loads or the store
    b = tl.load(x_ptr + a_off + h).to(tl.float32)
    tl.store(y_ptr + offs, (a * tl.sigmoid(b)).to(y_ptr.dtype.element_ty))


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    x2 = x.view(-1, cols)
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    n_out = x2.shape[0] * h
    if n_out:
        glu_kernel[(triton.cdiv(n_out, BLOCK),)](x2, y, n_out, h, x2.stride(0), BLOCK=BLOCK)
    return y
