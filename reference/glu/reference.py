"""GLU reference: the truth (float64) and the baselines the grader times student kernels against.

The grader finds these by name from spec.yaml: `truth` is required; every baseline in the spec names a
function here. Each takes x of shape (..., 2h) and returns (..., h).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def truth(x: torch.Tensor) -> torch.Tensor:
    """The answer key: GLU computed in float64 from the same input values.

    Written out (rather than F.glu) so that the truth does not depend on the op under test, and with
    torch.sigmoid, which is exact at the extremes (sigmoid(-inf) = 0, sigmoid(inf) = 1).
    """
    x64 = x.to(torch.float64)
    a, b = x64.chunk(2, dim=-1)
    return a * torch.sigmoid(b)


def manual(x: torch.Tensor) -> torch.Tensor:
    """The lecture's 'manual' style: several elementwise torch ops, each a kernel and a trip through memory.

    Like lecture 6's manual_gelu, it is slow on purpose: chunk (free, a view), neg, exp, add, reciprocal and
    mul each launch a kernel that reads and writes the whole tensor.
    """
    a, b = x.chunk(2, dim=-1)
    return a * (1.0 / (1.0 + torch.exp(-b)))


def eager(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own fused GLU kernel."""
    return F.glu(x, dim=-1)


def mistakes(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Known wrong formulas, in float64 (optional; grader/correctness/patterns.py): a wrong output that equals one of these is
    named by it in the hint (hints.yaml's `formula` words). The operands themselves (a, b) the grader tries on its
    own, from the spec's out_cols."""
    x64 = x.to(torch.float64)
    a, b = x64.chunk(2, dim=-1)
    return {"gate_only": torch.sigmoid(b), "swapped": b * torch.sigmoid(a), "no_sigmoid": a * b}
