"""Stage 2: make the input tensor for a case, reproducibly from (case seed, secret).

Inputs are never all zeros (zeros hide unwritten outputs and wrong indexing). Padded cases are views into a
wider buffer whose padding is random too, so a kernel that ignores the row stride reads wrong values, not
zeros that might happen to pass.
"""

from __future__ import annotations

import hashlib

import torch

from grader.child.inputs import SPECIALS as SPECIALS  # re-exported (the `x as x` form says so to mypy --strict)
from grader.child.inputs import TORCH_DTYPES as TORCH_DTYPES
from grader.child.inputs import digest_weights as digest_weights
from grader.child.inputs import make_input_seeded
from grader.problem.spec import Case


def mix_seed(case_seed: int, secret: int = 0, salt: str = "") -> int:
    """Public case seed + secret -> a 63-bit seed. Without the secret the inputs cannot be regenerated."""
    h = hashlib.sha256(f"{case_seed}:{secret}:{salt}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def make_input(case: Case, device: str | torch.device, secret: int = 0, salt: str = "") -> torch.Tensor:
    """x for `case`: shape case.shape, dtype case.dtype, last dim contiguous, row stride cols + pad."""
    return make_input_seeded(case, device, mix_seed(case.seed, secret, salt))


def describe(x: torch.Tensor) -> str:
    """Human summary of an input for diagnostics: shape, dtype, strides."""
    return f"shape {tuple(x.shape)} {str(x.dtype).replace('torch.', '')} strides {tuple(x.stride())}"
