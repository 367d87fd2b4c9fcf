"""BROKEN on purpose (tests/test_correctness.py): no mask, and no tail.

The bug: the loads and the store have no `mask=`. On the CPU interpreter a truly unmasked tail store used to
write past the end of the output into the worker's malloc heap and corrupt the process at random (we saw
SIGSEGV, SIGABRT, garbage TypeErrors from later cases and a hang until the 600 s stage deadline). The grader
now bounds-checks the interpreter (grader/child/interpcheck.py; see ../unmasked_store). This submission is the
realistic "fix" a student makes for those crashes without understanding them: round the grid *down*
(n_out // BLOCK) so every program is fully in bounds.
The last n_out % BLOCK outputs are then never written (they keep the NaN the grader poisoned the
allocation with), and outputs smaller than one block are not written at all.

Distinct from partial_output/ (which skips the last *row*): here exactly the last n_out % BLOCK *elements*
are wrong, wherever they fall.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def glu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    a = tl.load(x_ptr + a_off).to(tl.float32)  # BUG: no mask
    b = tl.load(x_ptr + a_off + h).to(tl.float32)  # BUG: no mask
    y = a * tl.sigmoid(b)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty))  # BUG: no mask


def glu_triton(x: torch.Tensor) -> torch.Tensor:
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
    block = 2048 if x.element_size() == 2 else 1024
    grid = (n_out // block,)  # BUG: floor instead of triton.cdiv, "because the last block crashed"
    if grid[0] > 0:
        glu_kernel[grid](x2, y, n_out, h, row_stride, BLOCK=block, num_warps=4)
    return y
