"""Stage 2: make the input tensor for a case, reproducibly from (case seed, secret).

Inputs are never all zeros (zeros hide unwritten outputs and wrong indexing). Padded cases are views into a
wider buffer whose padding is random too, so a kernel that ignores the row stride reads wrong values, not
zeros that might happen to pass.
"""

from __future__ import annotations

import hashlib

import torch

from .spec import Case

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SPECIALS = (float("inf"), float("-inf"), float("nan"))


def mix_seed(case_seed: int, secret: int = 0, salt: str = "") -> int:
    """Public case seed + secret -> a 63-bit seed. Without the secret the inputs cannot be regenerated."""
    h = hashlib.sha256(f"{case_seed}:{secret}:{salt}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def make_input(case: Case, device: str | torch.device, secret: int = 0, salt: str = "") -> torch.Tensor:
    """x for `case`: shape case.shape, dtype case.dtype, last dim contiguous, row stride cols + pad."""
    return make_input_seeded(case, device, mix_seed(case.seed, secret, salt))


def make_input_seeded(case: Case, device: str | torch.device, seed: int) -> torch.Tensor:
    """The same, from an already mixed seed: what untrusted workers get, so they never see the secret."""
    device = torch.device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dtype = TORCH_DTYPES[case.dtype]
    *lead, cols = case.shape
    full = (*lead, cols + case.pad)
    # Draw in float32 and round once into the target dtype: same values for every kernel under test.
    if case.dist == "normal" or case.dist == "special":
        buf = torch.randn(full, generator=gen, device=device, dtype=torch.float32)
    elif case.dist == "uniform":
        buf = torch.rand(full, generator=gen, device=device, dtype=torch.float32).mul_(12.0).sub_(6.0)
    elif case.dist == "saturating":
        mag = torch.rand(full, generator=gen, device=device, dtype=torch.float32).mul_(40.0).add_(80.0)
        sign = torch.randint(0, 2, full, generator=gen, device=device).mul_(2).sub_(1)
        buf = mag * sign
    else:  # validated in spec.py; kept as an error for callers that build Cases by hand
        raise ValueError(f"unknown dist {case.dist!r}")
    if case.dist == "special" and buf.numel():
        # About 3% of entries become +inf, -inf or NaN, in both halves.
        flat = buf.view(-1)
        n = max(3, flat.numel() // 32)
        idx = torch.randint(0, flat.numel(), (n,), generator=gen, device=device)
        which = torch.randint(0, len(SPECIALS), (n,), generator=gen, device=device)
        flat[idx] = torch.tensor(SPECIALS, device=device)[which]
    buf = buf.to(dtype)
    if buf.numel():
        # Guarantee "never all zeros" even for a 1x2 case where rounding could in principle give 0.
        buf.view(-1)[0] = 1.0 if buf.view(-1)[0] == 0 else buf.view(-1)[0]
    return buf[..., :cols] if case.pad else buf


def describe(x: torch.Tensor) -> str:
    """Human summary of an input for diagnostics: shape, dtype, strides."""
    return f"shape {tuple(x.shape)} {str(x.dtype).replace('torch.', '')} strides {tuple(x.stride())}"
