"""The one build step of a CUDA part: `build_part(request, what)` builds the part's source for what will run it and
returns one record (PartBuild), whichever compiler that takes. A bad source never raises: its record says why.

Why: docs/architecture.md, "Modules: the why", grader/cuda/part.py.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.cuda import build, cudacpu
from grader.cuda.build import BuildFor, BuildRequest, PartBuild, State

__all__ = ["BuildFor", "BuildRequest", "PartBuild", "State", "build_part"]

_BUILDERS: dict[BuildFor, Callable[[BuildRequest], PartBuild]] = {
    BuildFor.LIBRARY: build.build_library,
    BuildFor.CPU_LAYER: cudacpu.build_cpu_layer,
    BuildFor.SANITIZER: cudacpu.build_sanitizer_harness,
}


def build_part(req: BuildRequest, what: BuildFor) -> PartBuild:
    """Build `req.src` for `what`. Never raises for a bad source."""
    return _BUILDERS[what](req)
