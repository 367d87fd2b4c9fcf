"""Grades sharing one GPU (`batch --per-gpu N`): the timing stage has the GPU to itself, the other stages share it.

A grade spends about half its time before the timing stage (the CLI's start, builds, the correctness workers'
start, the correctness and compute-sanitizer runs), where another grade's kernels on the same GPU change nothing it
measures. The timing stage is different: another grade's kernels would run inside its timed calls. So when
GRADER_GPU_LOCK names a lock file (the batch engine sets one per GPU), every stage that runs on the GPU takes a
lock on it: shared for the correctness stage (and the timing workers' start, which it overlaps), exclusive for the
timing stage. Two grades on one GPU then overlap everything except timing, and a timing never overlaps anything.

The lock is flock(2) on a file the grader's own uid owns (mode 0600): the untrusted identity of a grade cannot open
it. Without GRADER_GPU_LOCK (a single grade) or where flock does not exist (Windows) the phases are no-ops.
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
