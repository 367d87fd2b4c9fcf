"""Call a built CUDA kernel of several inputs (spec `inputs:`) through ctypes; the signature follows the spec.

The rule, for inputs in0 .. in(k-1) (in the spec's order) and one output:

    int entry(const void* in0, ..., const void* in(k-1), void* y, int64_t rows, int64_t out_cols,
              int64_t in0_row_stride, ..., int64_t in(k-1)_row_stride, int dtype, cudaStream_t stream);

Why: docs/architecture.md, "Modules: the why", grader/child/cuda_abi.py.
"""

from __future__ import annotations

import ctypes
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .cuda_binding import (
    DTYPE_CODES,
    KernelCallError,
    _lookup_cuda_error_name,
    describe_return_code,
    missing_symbol_message,
)


def signature(inputs: Sequence[str]) -> str:
    """The C declaration the grader expects, for messages and the handout."""
    ins = ", ".join(f"const void* {n}" for n in inputs)
    strides = ", ".join(f"int64_t {n}_row_stride" for n in inputs)
    return f"int entry({ins}, void* y, int64_t rows, int64_t out_cols, {strides}, int dtype, cudaStream_t stream)"


def _rows_view(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """t as (rows, cols) without a copy where the strides allow, and its row stride (cols for one row)."""
    if t.stride(-1) != 1:
        t = t.contiguous()
    *lead, cols = t.shape
    rows = math.prod(lead)
    try:
        t2 = t.view(rows, cols)
    except RuntimeError:
        t2 = t.contiguous().view(rows, cols)
    if rows > 1 and t2.stride(0) < cols:
        t2 = t2.contiguous()
    return t2, (t2.stride(0) if rows > 1 else cols)


class CudaMultiKernel:
    """inputs (each (..., cols_k), same leading dims) -> y (..., out_cols(cols of the first))."""

    def __init__(
        self,
        lib_path: Path | str,
        symbol: str,
        inputs: Sequence[Any],
        out_cols: Callable[[int], int],
        handout: str,
        section: str,
    ):
        self.symbol = symbol
        self.names = [str(i[0]) if isinstance(i, (list, tuple)) else str(i) for i in inputs]
        self.out_cols = out_cols
        self.handout = handout
        self.section = section
        self.poison = True  # as CudaRowKernel: NaN (all bits set) in y before each correctness call
        try:
            self._lib = ctypes.CDLL(str(lib_path), mode=os.RTLD_LOCAL)
        except OSError as e:
            raise KernelCallError(f"could not load the built library {Path(lib_path).name}: {e}") from None
        try:
            fn = getattr(self._lib, symbol)
        except AttributeError:
            raise KernelCallError(missing_symbol_message(symbol)) from None
        k = len(self.names)
        fn.argtypes = [ctypes.c_void_p] * (k + 1) + [ctypes.c_int64] * (2 + k) + [ctypes.c_int, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self._fn = fn

    def __call__(self, *xs: torch.Tensor) -> torch.Tensor:
        if len(xs) != len(self.names):
            raise KernelCallError(f"{self.symbol} takes {len(self.names)} inputs ({', '.join(self.names)})")
        first = xs[0]
        for n, x in zip(self.names, xs, strict=True):
            if not isinstance(x, torch.Tensor) or not x.is_cuda:
                raise KernelCallError(f"{self.symbol}: {n} must be a CUDA tensor")
            if x.dtype != first.dtype or x.dtype not in DTYPE_CODES:
                raise KernelCallError(f"{self.symbol}: every input must be float32, float16 or bfloat16, the same")
            if x.dim() == 0 or x.shape[:-1] != first.shape[:-1]:
                raise KernelCallError(f"{self.symbol}: {n} must have the leading dimensions of {self.names[0]}")
        views = [_rows_view(x) for x in xs]
        rows = views[0][0].shape[0]
        *lead, cols = first.shape
        out_cols = int(self.out_cols(cols))
        y = torch.empty((rows, out_cols), dtype=first.dtype, device=first.device)
        if self.poison:
            y.view(torch.uint8).fill_(255)
        with torch.cuda.device(first.device):
            stream = torch.cuda.current_stream(first.device).cuda_stream
            code = self._fn(
                *(ctypes.c_void_p(v.data_ptr()) for v, _ in views),
                ctypes.c_void_p(y.data_ptr()),
                ctypes.c_int64(rows),
                ctypes.c_int64(out_cols),
                *(ctypes.c_int64(s) for _, s in views),
                ctypes.c_int(DTYPE_CODES[first.dtype]),
                ctypes.c_void_p(stream),
            )
        if code != 0:
            raise KernelCallError(
                describe_return_code(
                    code, self.symbol, self.handout, self.section, lambda c: _lookup_cuda_error_name(c, self._lib)
                )
            )
        return y.view(*lead, out_cols)
