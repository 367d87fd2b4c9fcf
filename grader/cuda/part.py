"""The one build step of a CUDA part: `build_part(request, what)` builds the part's source for what will run it and
returns one record (PartBuild), whichever compiler that takes:

- BuildFor.LIBRARY: nvcc, the shared library the torch binding loads on a GPU, cached by content
  (grader/cuda/build.py);
- BuildFor.CPU_LAYER: g++ or clang++, the CUDA-on-CPU layer's harness for a machine without a GPU, after the scan
  that the layer builds the program nvcc builds (grader/cuda/cudacpu.py);
- BuildFor.SANITIZER: nvcc, the harness compute-sanitizer runs with exact-size buffers (grader/cuda/cudacpu.py,
  run by grader/correctness/sanitizer.py).

Every compiler runs through the one runner of untrusted processes (grader/cuda/runner.py): as the grade's uid, in its
own process group killed whole at the timeout, under the write cap, with its output capped. A bad source never
raises: its record says why (state, text; `errors()` is what a report shows of a failed build).
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
