"""What a correctness or timing worker loads for one part: a Triton file, a built CUDA library or a CPU harness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.problem.spec import Implementation, Problem


@dataclass
class Target:
    """What to load in the child: a Triton file or a built CUDA library."""

    impl: Implementation
    path: str  # the .py file (triton) or the built .so (cuda)
    display: str  # the file name as the student knows it
    cpu_layer: bool = False  # a CUDA part built for the CPU (grader/cuda/cudacpu.py): `path` is the harness executable
    sanitizer: tuple[
        str, ...
    ] = ()  # the compute-sanitizer pass (grader/correctness/sanitizer.py): its command; `path`: the harness

    def payload(self, problem: Problem) -> dict[str, Any]:
        return {
            "impl": self.impl.name,
            "kind": self.impl.kind,
            "path": self.path,
            "lib": self.path,
            "entry": self.impl.entry,
            "display": self.display,
            "out_cols": problem.out_cols,
            "inputs": [[i.name, i.cols] for i in problem.inputs],
            "handout": problem.handout,
            "section": self.impl.handout_section,
            "cpu_layer": self.cpu_layer,
            "sanitizer": list(self.sanitizer),
        }
