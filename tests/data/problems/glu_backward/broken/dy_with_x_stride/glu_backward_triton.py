"""BROKEN on purpose (tests/test_hints.py): dy is read with x's row stride (about twice dy's).

Every lane is inside the mask; from the middle row on, dy_ptr + row * x_stride runs past the end of dy. The
diagnosis must say "a wrong address inside the mask" and name dy_ptr and x_stride, not "add a mask".
"""

import torch
import triton
import triton.language as tl


@triton.jit
def glu_bwd_kernel(x_ptr, dy_ptr, dx_ptr, n, h, x_stride, dy_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // h
    col = offs - row * h
    a_off = row * x_stride + col
    a = tl.load(x_ptr + a_off, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + a_off + h, mask=mask).to(tl.float32)
    g = tl.load(dy_ptr + row * x_stride + col, mask=mask)  # BUG: x's stride.to(tl.float32)
    e = tl.exp(-tl.abs(b))
    r = 1.0 / (1.0 + e)
    s = tl.where(b >= 0, r, e * r)  # sigmoid(b)
    t = tl.where(b >= 0, e * r, r)  # 1 - sigmoid(b) = sigmoid(-b)
    da = g * s
    db = da * a * t
    out = dx_ptr + row * (2 * h) + col
    tl.store(out, da.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(out + h, db.to(dx_ptr.dtype.element_ty), mask=mask)


def _rows(t: torch.Tensor) -> torch.Tensor:
    if t.stride(-1) != 1:
        t = t.contiguous()
    try:
        return t.view(-1, t.shape[-1])
    except RuntimeError:
        return t.reshape(-1, t.shape[-1]).contiguous()


def glu_backward_triton(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    h = cols // 2
    x2, dy2 = _rows(x), _rows(dy)
    rows = x2.shape[0]
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = rows * h
    if n == 0:
        return dx
    x_stride = x2.stride(0) if rows > 1 else cols
    dy_stride = dy2.stride(0) if rows > 1 else h
    num_warps = 8
    block = 32 * num_warps * (16 // x.element_size())
    glu_bwd_kernel[(triton.cdiv(n, block),)](x2, dy2, dx, n, h, x_stride, dy_stride, BLOCK=block, num_warps=num_warps)
    return dx
