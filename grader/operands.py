"""A case's inputs past the first (spec `inputs:`), for problems with more than one (GLU backward's x and dy).

The first input is grader/inputs.make_input's, unchanged, so every one-input problem keeps its inputs. Input k >= 1
has its own shape (spec Input.cols), the case's dtype, distribution and pad, and its own seed (salt "input<k>"):
independent of the first, and as secret. What travels to a worker is `extra_payload`: each one's padded buffer and
its column count, the same form as the first input's `base` and `cols`."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from . import inputs
from .spec import Case, Problem


def extra_inputs(problem: Problem, case: Case, device: str | torch.device, secret: int) -> list[torch.Tensor]:
    """Inputs 1.. of the case (views like the first: a padded case's rows are padded); [] for one input."""
    out = []
    for k, inp in enumerate(problem.inputs[1:], 1):
        c = dataclasses.replace(case, shape=inp.shape(case.shape))
        out.append(inputs.make_input(c, device, secret, salt=f"input{k}"))
    return out


def buffer(x: torch.Tensor) -> torch.Tensor:
    """The padded buffer behind a (possibly padded) input view, contiguous: what a worker gets."""
    base = x._base if x._base is not None else x
    return base.contiguous()


def extra_payload(extra: list[torch.Tensor]) -> dict[str, Any]:
    """{"extra": [{"base", "cols"}, ...]} for a request's payload; {} for one input (the wire stays as it was)."""
    if not extra:
        return {}
    return {"extra": [{"base": buffer(e).clone(), "cols": e.shape[-1]} for e in extra]}


def unchanged(reply: dict[str, Any], extra: list[torch.Tensor]) -> bool:
    """Whether the worker's copies of inputs 1.. after the calls ("extra_after") equal what was sent."""
    from .check import same_values

    after = reply.get("extra_after", [])
    if len(after) != len(extra) or not all(isinstance(a, torch.Tensor) for a in after):
        return not extra
    return all(same_values(a, buffer(e)) for a, e in zip(after, extra, strict=True))
