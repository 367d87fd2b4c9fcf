"""Load a problem's trusted reference module (truth + baselines) by file path, in the parent only."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable

import torch

from .spec import Problem, SpecError

Fn = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Reference:
    truth: Fn
    baselines: dict[str, Fn]  # name -> callable; compiled ones are wrapped lazily by torch.compile


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
            raise SpecError(f"{problem.path}: key 'baselines.{bname}': {problem.reference.name} has no function '{target}'")
        baselines[bname] = torch.compile(fn) if "compile" in b else fn
    return Reference(truth=truth, baselines=baselines)
