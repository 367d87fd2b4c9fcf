"""
Part 1: GLU backward in Triton (the first problem with two inputs)
==================================================================

    x  has shape (..., 2h), a = x[..., :h], b = x[..., h:];   dy has shape (..., h), the gradient of y = a * sigmoid(b)
    dx = [da | db]  shape (..., 2h):   da = dy * s,   db = dy * a * s * (1 - s),   s = sigmoid(b)

which is what autograd computes for F.glu (``torch.ops.aten.glu_backward(dy, x, -1)``). The contract is GLU's
(assignment/README.md, Part 1) for *both* inputs: float32/float16/bfloat16 computed in float32; x and dy may each
have padded rows (read in place with each one's own row stride); any leading dims and 0 rows; a new contiguous
output shaped like x, of x's dtype and device; never write into x or dy.

Run ``nox -s grade -- --problem glu_backward --only triton``.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def glu_bwd_kernel(x_ptr, dy_ptr, dx_ptr, n, h, x_stride, dy_stride, BLOCK: tl.constexpr):
    # TODO 1. offs over the n = rows * h half-row positions (64-bit: tl.program_id(0).to(tl.int64)), mask = offs < n.
    # TODO 2. row r = offs // h, column c = offs - r * h: a at x_ptr + r * x_stride + c, b at h further on,
    #   dy at dy_ptr + r * dy_stride + c.
    # TODO 3. In float32: s = sigmoid(b), da = dy * s, db = da * a * (1 - s).
    # TODO 4. Store da at dx_ptr + r * 2h + c and db h further on, cast to dx_ptr.dtype.element_ty.
    pass


def glu_backward_triton(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx of y = F.glu(x, dim=-1), given dy."""
    # TODO: delete the next line once your kernel and this wrapper are written.
    raise NotImplementedError(
        "glu_backward_triton is not implemented yet: see assignment/glu_backward/README.md, 'Part 1: the Triton kernel'"
    )
    # TODO 5. x2 = x.view(-1, 2h), dy2 = dy.view(-1, h) (no copies); dx = torch.empty(x.shape, ...); return dx early
    #   when there is nothing to do; launch over triton.cdiv(rows * h, BLOCK) programs with both row strides.
