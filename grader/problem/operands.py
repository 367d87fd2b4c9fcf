"""A case's inputs past the first (spec `inputs:`), for problems with more than one (GLU backward's x and dy).

The first input is grader/inputs.make_input's, unchanged, so every one-input problem keeps its inputs. Input k >= 1
has its own shape (spec Input.cols), the case's dtype, distribution and pad, and its own seed (salt "input<k>"):
independent of the first, and as secret. What travels to a worker is `extra_payload`: each one's padded buffer and
its column count, the same form as the first input's `base` and `cols`.

Timing makes its inputs in the worker, from seeds (`timing_seeds`): set k's first input has the salt "perf<k>" (as it
always had), input j >= 1 the salt "perf<k>.input<j>"; `timing_inputs` makes the same tensors in the parent, to check
the timed outputs against the truth."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from grader.child.wire import TimingInput
from grader.problem import inputs
from grader.problem.spec import Case, Problem


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


def input_cases(problem: Problem, case: Case) -> list[Case]:
    """The case as each input sees it: the first input's is the case; input j's has that input's shape."""
    return [case, *(dataclasses.replace(case, shape=inp.shape(case.shape)) for inp in problem.inputs[1:])]


def input_bytes(problem: Problem, case: Case) -> int:
    """Bytes of all the case's inputs (unpadded): what one call reads."""
    es = torch.tensor([], dtype=inputs.TORCH_DTYPES[case.dtype]).element_size()
    total = 0
    for c in input_cases(problem, case):
        n = 1
        for d in c.shape:
            n *= d
        total += n * es
    return total


def _timing_salt(k: int, j: int) -> str:
    return f"perf{k}" if j == 0 else f"perf{k}.input{j}"


def timing_seeds(problem: Problem, case: Case, secret: int, sets: int) -> list[TimingInput]:
    """Per input, in call order: its case (as a dict, for the worker) and one mixed seed per input set. The secret
    itself never travels: a worker gets the seeds, from which it cannot recover the secret or the correctness inputs."""
    return [
        {
            "case": dataclasses.asdict(c),
            "seeds": [inputs.mix_seed(case.seed, secret, _timing_salt(k, j)) for k in range(sets)],
        }
        for j, c in enumerate(input_cases(problem, case))
    ]


def timing_inputs(problem: Problem, case: Case, device: str | torch.device, secret: int, k: int) -> list[torch.Tensor]:
    """Set k's inputs, as the timing worker made them from timing_seeds (views: a padded case's rows are padded)."""
    return [
        inputs.make_input(c, device, secret, salt=_timing_salt(k, j)) for j, c in enumerate(input_cases(problem, case))
    ]
