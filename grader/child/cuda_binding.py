"""Call a built CUDA row kernel (e.g. glu_cuda_forward) on torch tensors through ctypes.

Runs in the grader's worker process. No torch C++ extension is involved: the student's library exports a
plain C function

    int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t out_cols, int64_t x_row_stride,
                         int dtype, cudaStream_t stream);

Why: docs/architecture.md, "Modules: the why", grader/child/cuda_binding.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import math
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import torch

DTYPE_CODES: dict[torch.dtype, int] = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}

# The library's own error codes. Every problem's stub defines the same three values under its own prefix
# (GLU_ERR_ARGS, GELU_ERR_ARGS, GATED_ERR_ARGS, ...); only the value crosses the ABI, so a message names the part
# that every stub shares.
ERROR_NAMES: dict[int, str] = {-1: "ERR_DTYPE", -2: "ERR_NOT_IMPLEMENTED", -3: "ERR_ARGS"}
ERROR_TEXT: dict[int, str] = {
    -1: "unsupported dtype code",
    -2: "not implemented yet",
    -3: "bad arguments (negative sizes, or a row stride smaller than the row)",
}

# Names for the cudaError_t values a launch most often returns, for when libcudart cannot be asked.
_CUDA_ERROR_FALLBACK: dict[int, str] = {
    1: "cudaErrorInvalidValue",
    2: "cudaErrorMemoryAllocation",
    9: "cudaErrorInvalidConfiguration",
    35: "cudaErrorInsufficientDriver",
    98: "cudaErrorInvalidDeviceFunction",
    100: "cudaErrorNoDevice",
    209: "cudaErrorNoKernelImageForDevice",
    222: "cudaErrorUnsupportedPtxVersion",
    400: "cudaErrorInvalidResourceHandle",
    700: "cudaErrorIllegalAddress",
    701: "cudaErrorLaunchOutOfResources",
    719: "cudaErrorLaunchFailure",
}


class KernelCallError(RuntimeError):
    """A call into the built library failed. str(err) is one line that says what to do about it."""


def _lookup_cuda_error_name(code: int, lib: ctypes.CDLL | None = None) -> str | None:
    """cudaGetErrorName(code) from the kernel library itself (cudart is linked statically by default) or a
    loadable libcudart; None if neither answers."""
    candidates: list[ctypes.CDLL] = [lib] if lib is not None else []
    candidates.extend(_cudart_libs())
    for cand in candidates:
        fn = getattr(cand, "cudaGetErrorName", None)
        if fn is None:
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_char_p
        try:
            name = fn(code)
        except OSError:
            continue
        if name:
            text = name.decode(errors="replace")
            if text != "cudaErrorUnknown" or code == 999:
                return str(text)
    return _CUDA_ERROR_FALLBACK.get(code)


@lru_cache(maxsize=1)
def _cudart_libs() -> tuple[ctypes.CDLL, ...]:
    names: list[str] = []
    found = ctypes.util.find_library("cudart")
    if found:
        names.append(found)
    # torch's CUDA wheels ship libcudart under nvidia/cuda_runtime/lib (or nvidia/cu13/lib).
    torch_dir = Path(torch.__file__).resolve().parent
    for pattern in (
        "../nvidia/cuda_runtime/lib/libcudart.so*",
        "../nvidia/cu*/lib/libcudart.so*",
        "lib/libcudart*.so*",
    ):
        names.extend(sorted(glob.glob(str(torch_dir / pattern))))
    libs = []
    for name in names:
        try:
            libs.append(ctypes.CDLL(name, mode=os.RTLD_LOCAL))
        except OSError:
            continue
    return tuple(libs)


def describe_return_code(
    code: int,
    symbol: str,
    handout: str,
    section: str,
    cuda_error_name: Callable[[int], str | None] | None = None,
) -> str:
    """One line explaining a nonzero return code of `symbol`.

    Negative codes are the library's own (the stub's *_ERR_*); positive ones are cudaError_t values from the launch.
    """
    if code in ERROR_NAMES:
        line = f"{symbol} returned {ERROR_NAMES[code]} ({code}): {ERROR_TEXT[code]}"
        if code == -2:
            line += f"; see {handout}, section '{section}'"
        return line
    if code > 0:
        name = cuda_error_name(code) if cuda_error_name is not None else _CUDA_ERROR_FALLBACK.get(code)
        what = f"{name} ({code})" if name else f"cudaError_t {code}"
        hint = ""
        if name == "cudaErrorNoKernelImageForDevice":
            hint = ": the library was not built for this GPU's architecture"
        elif name == "cudaErrorInvalidConfiguration":
            hint = ": check the grid and block sizes of your launch (block <= 1024 threads, grid >= 1 block)"
        return f"{symbol} returned the CUDA error {what} after the kernel launch{hint}"
    return f"{symbol} returned the unknown code {code}; see {handout}, section '{section}'"


def missing_symbol_message(symbol: str) -> str:
    return (
        f"symbol '{symbol}' not found in the built library: keep the extern \"C\" declaration and the exact "
        f"name and signature of {symbol} from the assignment's stub"
    )


class CudaRowKernel:
    """A row-wise kernel in a shared library: x (..., cols) -> y (..., out_cols(cols)), one row at a time.

    The library function receives (x, y, rows, out_cols, x_row_stride, dtype_code, stream); x's last dimension
    is contiguous, its rows are x_row_stride elements apart, and y is contiguous.
    """

    def __init__(self, lib_path: Path, symbol: str, out_cols: Callable[[int], int], handout: str, section: str):
        self.symbol = symbol
        self.out_cols = out_cols
        self.handout = handout
        self.section = section
        # Correctness runs poison the output with NaN so unwritten elements show. Timing turns it off: the
        # fill is a full extra write of the output and would be charged to the student's kernel.
        self.poison = True
        try:
            # RTLD_LOCAL: two builds (student and staff) export the same symbol name; keep them apart.
            self._lib = ctypes.CDLL(str(lib_path), mode=os.RTLD_LOCAL)
        except OSError as e:
            raise KernelCallError(f"could not load the built library {Path(lib_path).name}: {e}") from None
        try:
            fn = getattr(self._lib, symbol)
        except AttributeError:
            raise KernelCallError(missing_symbol_message(symbol)) from None
        fn.argtypes = [
            ctypes.c_void_p,  # x
            ctypes.c_void_p,  # y
            ctypes.c_int64,  # rows
            ctypes.c_int64,  # out_cols (h for GLU)
            ctypes.c_int64,  # x_row_stride, elements
            ctypes.c_int,  # dtype code
            ctypes.c_void_p,  # cudaStream_t
        ]
        fn.restype = ctypes.c_int
        self._fn = fn

    def error_message(self, code: int) -> str:
        return describe_return_code(
            code, self.symbol, self.handout, self.section, lambda c: _lookup_cuda_error_name(c, self._lib)
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise KernelCallError(f"{self.symbol} needs a CUDA tensor")
        if x.dtype not in DTYPE_CODES:
            raise KernelCallError(
                f"{self.symbol} supports float32, float16 and bfloat16 tensors, not "
                f"{str(x.dtype).replace('torch.', '')}"
            )
        if x.dim() == 0:
            raise KernelCallError(f"{self.symbol} needs a tensor with at least one dimension")
        if x.stride(-1) != 1:
            x = x.contiguous()
        *lead, cols = x.shape
        rows = math.prod(lead)
        out_cols = int(self.out_cols(cols))
        # Collapse the leading dims into rows without copying when the strides allow it (a padded view stays
        # a padded view and the kernel must honour its row stride); copy only when they cannot be collapsed.
        try:
            x2 = x.view(rows, cols)
        except RuntimeError:
            x2 = x.contiguous().view(rows, cols)
        # A row stride below cols means overlapping rows (an expand()ed or as_strided tensor): give the
        # kernel its own copy. With a single row the stride is meaningless, so pass cols.
        if rows > 1 and x2.stride(0) < cols:
            x2 = x2.contiguous()
        row_stride = x2.stride(0) if rows > 1 else cols
        # NaN poison: any output element the kernel fails to write stays NaN and fails the check.
        y = torch.empty((rows, out_cols), dtype=x.dtype, device=x.device)
        if self.poison:
            y.view(torch.uint8).fill_(
                255
            )  # all bits set: a NaN no arithmetic produces (grader/correctness/check.py tells them apart)
        with torch.cuda.device(x.device):
            stream = torch.cuda.current_stream(x.device).cuda_stream
            code = self._fn(
                ctypes.c_void_p(x2.data_ptr()),
                ctypes.c_void_p(y.data_ptr()),
                ctypes.c_int64(rows),
                ctypes.c_int64(out_cols),
                ctypes.c_int64(row_stride),
                ctypes.c_int(DTYPE_CODES[x.dtype]),
                ctypes.c_void_p(stream),
            )
        if code != 0:
            raise KernelCallError(self.error_message(code))
        return y.view(*lead, out_cols)
