"""Scale's truth and its one baseline (tests/data/problems/scale/spec.yaml)."""

import torch


def truth(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64) * 2


def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2
