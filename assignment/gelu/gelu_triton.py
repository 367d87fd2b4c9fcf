"""
Part 1: GeLU in Triton (lecture 6's own example)
================================================

You will write a fused GeLU kernel, the tanh approximation, elementwise:

    out = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))       same shape as x

which is exactly ``torch.nn.functional.gelu(x, approximate="tanh")``. In eager PyTorch the formula written out
is eight kernels (each *, +, tanh reads and writes the whole tensor); a fused kernel reads x once and writes
the output once: 2 x N x element_size bytes. That is the floor you race against.

The contract (see assignment/gelu/README.md, "Part 1: the Triton kernel"):

* dtypes float32, float16 and bfloat16. Compute in float32, store in the input's dtype.
* The last dimension is contiguous, but rows may be further apart than their length: ``x = big[:, :cols]``
  must work *without a copy*. Take the row stride as a kernel argument.
* Any number of leading dimensions, any size, including 0 rows.
* Return a new contiguous tensor shaped like x, with x's dtype and device. Never write into x.
* Use ``x.device``, never ``"cuda"``: on CPU the grader runs your kernel in Triton's interpreter.

Run ``nox -s grade -- --problem gelu --only triton`` to see which cases pass.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(
    x_ptr,  # pointer to x[0, 0]; rows are `row_stride` elements apart
    y_ptr,  # pointer to the output, contiguous (rows, cols)
    n,  # number of elements = rows * cols
    cols,  # the last dimension
    row_stride,  # distance in elements between x[r, 0] and x[r + 1, 0]
    BLOCK: tl.constexpr,  # elements handled by one program; a power of 2
):
    # TODO 1. Which elements are mine? offs = pid * BLOCK + tl.arange(0, BLOCK), with
    #   pid = tl.program_id(0).to(tl.int64) so that offsets past 2**31 do not wrap around.
    # TODO 2. mask = offs < n, on every load and store.
    # TODO 3. Element i is in row r = i // cols, column c = i - r * cols; x is at x_ptr + r * row_stride + c.
    # TODO 4. Load, .to(tl.float32), compute. There is no tl.tanh: tanh(u) = 1 - 2 / (1 + exp(2u)), or better,
    #   0.5 * x * (1 + tanh(u)) = x / (1 + exp(-2u)), which never subtracts nearly equal numbers.
    # TODO 5. tl.store(y_ptr + offs, out.to(y_ptr.dtype.element_ty), mask=mask).
    pass


def gelu_triton(x: torch.Tensor) -> torch.Tensor:
    """GeLU, tanh approximation, elementwise."""
    # TODO: delete the next line once your kernel and this wrapper are written.
    raise NotImplementedError(
        "gelu_triton is not implemented yet: see assignment/gelu/README.md, section 'Part 1: the Triton kernel'"
    )

    # TODO 6. The wrapper: cols = x.shape[-1]; x2 = x.view(-1, cols) (no copy, padded rows too);
    #   row_stride = x2.stride(0); y = torch.empty(x.shape, dtype=x.dtype, device=x.device);
    #   return y when there is nothing to do (a grid of 0 programs launches nothing);
    #   gelu_kernel[(triton.cdiv(n, BLOCK),)](x2, y, n, cols, row_stride, BLOCK=1024); return y
