"""
Part 1: GLU in Triton
=====================

You will write a fused GLU kernel:

    x   has shape (..., 2h)
    a = x[..., :h]      b = x[..., h:]
    out = a * sigmoid(b)            shape (..., h)

which is exactly ``torch.nn.functional.glu(x, dim=-1)``.

Why bother? In eager PyTorch, ``a * torch.sigmoid(b)`` is several kernels, and each one reads and writes the
whole tensor from GPU memory (lecture 6: "fuse memory-bound ops"). GLU does almost no arithmetic per byte, so
its speed is set by memory traffic alone. A fused kernel reads a and b once and writes out once:
1.5 x N x element_size bytes for N input elements. That is the floor you are racing against.

The contract (the grader checks every point; see assignment/README.md, "Part 1: the Triton kernel"):

* dtypes float32, float16 and bfloat16. Compute in float32, store in the input's dtype.
* The last dimension is contiguous, but rows may be further apart than 2h: ``x = big[:, :2 * h]`` must work
  *without a copy*. So take the row stride as a kernel argument.
* Any number of leading dimensions, any size, including 0 rows.
* Return a new contiguous tensor of shape (..., h) with x's dtype and device.
* The tensors may live on the CPU: the grader runs your kernel in Triton's interpreter (TRITON_INTERPRET=1)
  on machines without a GPU. Don't hard-code ``device="cuda"``; use ``x.device``.

Run ``nox -s grade -- --only triton`` to see which cases pass.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def glu_kernel(
    x_ptr,  # pointer to x[0, 0]; rows are `row_stride` elements apart
    y_ptr,  # pointer to the output, contiguous (rows, h)
    n_out,  # number of output elements = rows * h
    h,  # half the input's last dimension
    row_stride,  # distance in elements between x[r, 0] and x[r + 1, 0]
    BLOCK: tl.constexpr,  # output elements handled by one program; a power of 2
):
    # Each program (think: one CUDA thread block) handles BLOCK consecutive *output* elements.
    #
    # TODO 1. Which output elements are mine?
    #   pid = tl.program_id(0)
    #   offs = pid * BLOCK + tl.arange(0, BLOCK)
    #   Use 64-bit math. The lecture's 16384 x 16384 input has 2.7e8 elements, still under 2**31, but one
    #   more doubling (a 32768 x 65536 activation is ordinary in an LLM) passes it, and an int32 offset then
    #   silently wraps around. `tl.program_id(0).to(tl.int64)` makes every offset derived from it 64-bit.
    #
    # TODO 2. The last program usually runs past n_out. Build `mask = offs < n_out` and pass it to every load
    #   and store. (On CPU the grader checks every access and names the line of an unmasked one.)
    #
    # TODO 3. Output element i is in row r = i // h, column c = i - r * h.
    #   a is at x_ptr + r * row_stride + c, and b is h elements further on.
    #
    # TODO 4. Load a and b, convert to float32 with `.to(tl.float32)`, and compute a * sigmoid(b).
    #   Careful: exp(b) / (1 + exp(b)) overflows to inf/inf = NaN for large b. 1 / (1 + exp(-b)), or
    #   tl.sigmoid, saturates correctly to 0 and 1.
    #
    # TODO 5. Store with `.to(y_ptr.dtype.element_ty)`, so the output keeps the input's dtype.
    pass


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    """GLU along the last dimension: x[..., :h] * sigmoid(x[..., h:])."""
    # TODO: delete the next line once your kernel and this wrapper are written.
    raise NotImplementedError(
        "glu_triton is not implemented yet: see assignment/README.md, section 'Part 1: the Triton kernel'"
    )

    # TODO 6. The wrapper. Roughly:
    #   cols = x.shape[-1]; h = cols // 2
    #   View x as (rows, cols) *without copying* (x.view(-1, cols) works for padded rows too);
    #   row_stride = that view's stride(0).
    #   y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    #   If there is nothing to do (0 rows), return y (a grid of 0 programs launches nothing).
    #   grid = (triton.cdiv(n_out, BLOCK),)
    #   glu_kernel[grid](x2d, y, n_out, h, row_stride, BLOCK=1024)
    #   return y
