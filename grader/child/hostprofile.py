"""A worker's profiler wrappers: nothing here calls student code.

`_HostProfile`: a CPU correctness call's profiler; `_stderr_muted`: the profiler's C++ chatter kept off fd 2.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


class _HostProfile:
    """torch.profiler.profile(activities=[CPU]) as the correctness calls use it (a `with` block, then `.events()`),
    made directly from torch.autograd.profiler.profile with the arguments torch.profiler passes it."""

    def __init__(self) -> None:
        from torch.autograd import profiler as autograd_profiler

        self._prof: Any = autograd_profiler.profile(use_cpu=True, use_device=None, use_kineto=True)

    def __enter__(self) -> _HostProfile:
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._prof.__exit__(*exc)

    def events(self) -> Any:
        return self._prof.function_events


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """The profiler's C++ side prints start/stop lines on fd 2: keep them out of the grader's output."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
