"""
Part 1: SwiGLU in Triton (the gate of Llama's MLP)
==================================================

    x   has shape (..., 2h)           a = x[..., :h] (the gate)      b = x[..., h:] (the "up" projection)
    out = silu(a) * b                 silu(a) = a * sigmoid(a)       shape (..., h)

In PyTorch this is ``F.silu(a) * b``: two kernels and an intermediate tensor. A fused kernel reads a and b once
and writes out once. The contract is GLU's (assignment/README.md, Part 1): float32/float16/bfloat16 computed in
float32; padded rows read in place with the row stride; any leading dims and 0 rows; a new contiguous (..., h)
output of x's dtype and device; ``x.device``, never ``"cuda"``.

Run ``nox -s grade -- --problem swiglu --only triton``.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, y_ptr, n_out, h, row_stride, BLOCK: tl.constexpr):
    # TODO 1. offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK); mask = offs < n_out.
    # TODO 2. Row r = offs // h, column c = offs - r * h; a at x_ptr + r * row_stride + c, b at h further on.
    # TODO 3. Load both as float32; y = a * b / (1 + exp(-a)) (saturates: never exp(a) / (1 + exp(a))).
    # TODO 4. tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask).
    pass


def swiglu_triton(x: torch.Tensor) -> torch.Tensor:
    """silu(x[..., :h]) * x[..., h:]."""
    # TODO: delete the next line once your kernel and this wrapper are written.
    raise NotImplementedError(
        "swiglu_triton is not implemented yet: see assignment/swiglu/README.md, section 'Part 1: the Triton kernel'"
    )
    # TODO 5. As GLU's wrapper: x2 = x.view(-1, cols); row_stride = x2.stride(0); y = torch.empty((*x.shape[:-1], h),
    #   ...); return y early when there is no output; launch over triton.cdiv(n_out, BLOCK) programs; return y.
