"""Load a problem's trusted reference module (truth + baselines) by file path, in the parent only."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

from grader.problem.spec import Problem, SpecError

Fn = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Reference:
    truth: Fn
    baselines: dict[str, Fn]  # name -> the reference function (uncompiled: see load_reference)
    # Optional `mistakes(x) -> {name: float64 tensor}`: known wrong formulas, for the failure-pattern hints
    # (grader/correctness/patterns.py). None: the problem names none.
    mistakes: Callable[[torch.Tensor], dict[str, torch.Tensor]] | None = None


def load_reference(problem: Problem) -> Reference:
    name = f"_reference_{problem.name}"
    spec = importlib.util.spec_from_file_location(name, problem.reference)
    if spec is None or spec.loader is None:
        raise SpecError(f"{problem.path}: key 'reference': cannot import {problem.reference.name}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    truth = getattr(mod, "truth", None)
    if not callable(truth):
        raise SpecError(f"{problem.path}: key 'reference': {problem.reference.name} must define truth(x)")
    baselines: dict[str, Fn] = {}
    for bname, b in problem.baselines.items():
        target = b.get("fn") or b.get("compile")
        fn = getattr(mod, str(target), None)
        if not callable(fn):
            raise SpecError(
                f"{problem.path}: key 'baselines.{bname}': {problem.reference.name} has no function '{target}'"
            )
        # The parent only checks against baselines (eager's error sets the fp16/bf16 bound); it never times
        # them. Compiled baselines are compiled in the trusted timing worker, so here the plain function is
        # kept: building a torch.compile wrapper cost the parent ~3 s of start-up for nothing.
        baselines[bname] = fn
    mistakes = getattr(mod, "mistakes", None)
    return Reference(truth=truth, baselines=baselines, mistakes=mistakes if callable(mistakes) else None)
