"""GeGLU reference (Gemma's MLP gate): gelu(a) * b, gelu the tanh approximation, with x = [a | b].

The grader finds these by name from spec.yaml: `truth` is required; every baseline in the spec names a function
here. Each takes x of shape (..., 2h) and returns (..., h). Gemma's MLP is down(gelu_tanh(gate(x)) * up(x))
(its config's hidden_activation "gelu_pytorch_tanh").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def truth(x: torch.Tensor) -> torch.Tensor:
    """float64, the formula written out (not F.gelu, the op under test). a = -inf gives -inf * 0 = NaN, as
    PyTorch's formula does."""
    a, b = x.to(torch.float64).chunk(2, dim=-1)
    return 0.5 * a * (1.0 + torch.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a * a * a))) * b


def manual(x: torch.Tensor) -> torch.Tensor:
    """Op by op, the lecture's manual_gelu times b."""
    a, b = x.chunk(2, dim=-1)
    return 0.5 * a * (1 + torch.tanh(0.79788456 * (a + 0.044715 * a * a * a))) * b


def pytorch(x: torch.Tensor) -> torch.Tensor:
    """What a PyTorch model writes (Gemma's MLP): F.gelu(a, approximate="tanh") * b, two kernels."""
    a, b = x.chunk(2, dim=-1)
    return F.gelu(a, approximate="tanh") * b
