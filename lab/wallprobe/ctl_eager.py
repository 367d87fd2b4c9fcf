"""Lab control: the eager baseline's own op, timed in an untrusted worker like a submission."""

import torch


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.glu(x, dim=-1)
