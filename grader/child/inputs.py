"""Input tensors from an already mixed seed: what workers get (timing makes its inputs in the worker, so that
they need not cross the pipe). The secret never reaches a worker: grader/problem/inputs.py mixes it in the parent.

`case` is anything with shape, dtype, dist and pad (grader.problem.spec.Case in the parent, a namespace in a worker).
"""

from __future__ import annotations

from typing import Any

import torch

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SPECIALS = (float("inf"), float("-inf"), float("nan"))


def make_input_seeded(case: Any, device: str | torch.device, seed: int) -> torch.Tensor:
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


def digest_weights(n: int, seed: int, device: Any) -> torch.Tensor:
    """The random weights of a timed output's checksum (grader/child/timing.py computes it right after each timed
    call; the parent recomputes it from its own truth): the same n float32 numbers on both sides for one seed."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(seed)
    return torch.randn(n, generator=gen, device=torch.device(device), dtype=torch.float32)


def digest(y: Any, weights: torch.Tensor) -> torch.Tensor:
    """sum(y * weights) over the flattened output, accumulated in float32 on y's device (a 0-d tensor); NaN for
    anything that is not a plain tensor with as many elements as there are weights."""
    if type(y) is not torch.Tensor or y.numel() != weights.numel() or y.device != weights.device:
        return torch.full((), float("nan"), device=weights.device)
    return torch.dot(y.reshape(-1).to(torch.float32), weights)
