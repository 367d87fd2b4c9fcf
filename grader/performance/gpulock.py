"""Grades sharing one GPU (`batch --per-gpu N`): the timing stage has the GPU to itself, the other stages share it.

Why: docs/performance.md, "Modules: the why", grader/performance/gpulock.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV = "GRADER_GPU_LOCK"


@contextmanager
def phase(exclusive: bool, progress: Callable[[str], None] = lambda s: None) -> Iterator[float]:
    """Hold the GPU's lock (exclusive for timing, shared otherwise) for the block; yields the seconds waited."""
    path = os.environ.get(ENV)
    try:
        import fcntl
    except ImportError:  # Windows: no flock; a batch there runs one grade per GPU
        fcntl = None  # type: ignore[assignment]
    if not path or fcntl is None:
        yield 0.0
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        t0 = time.monotonic()
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(
                "waiting for the GPU: another grade on it is "
                + ("running" if exclusive else "timing")
                + " (batch --per-gpu)"
            )
            fcntl.flock(fd, mode)
        yield time.monotonic() - t0
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def held_alone(path: str) -> bool:
    """Whether some process holds the lock at PATH exclusively now (a shared hold cannot be had at once). The batch
    asks this of a GPU being calibrated: once the calibration holds it, grades may start, and wait for it there."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock, so no calibration to hold it
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
